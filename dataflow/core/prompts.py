"""The entity/relation extraction prompt (LightRAG's record format, our wording).

Messages are built from explicit options so that the exact text sent to the
model is a pure function of (chunk text, options). Its fingerprint, together
with the model name, is the extraction cache key: change any wording here and
bump `PROMPT_VERSION` (a golden test enforces it), so cached extractions made
with the old prompt are never reused.

The delimited format, one record per line, ending with the completion marker::

    entity<|#|>name<|#|>type<|#|>description
    relation<|#|>source<|#|>target<|#|>keyword, keyword<|#|>description<|#|>0.8
    <|COMPLETE|>

`dataflow.core.parsing.parse_extraction` reads it (and the JSON form, and
LightRAG's older `("entity"<|>...)##` form).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

PROMPT_VERSION: str = "kgstream-extract-1"
TUPLE_DELIMITER = "<|#|>"
COMPLETION_DELIMITER = "<|COMPLETE|>"
DEFAULT_ENTITY_TYPES: tuple[str, ...] = ("organization", "person", "geo", "event", "category")

RecordFormat = Literal["delimited", "json"]
_RECORD_FORMATS: tuple[str, ...] = ("delimited", "json")
_ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class ChatMessage:
    """One chat turn, as sent to an OpenAI-compatible chat endpoint."""

    role: str
    content: str

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise ValueError(
                f"ChatMessage.role must be one of {_ROLES}; got {self.role!r}. "
                "Use 'system' for instructions, 'user' for requests, 'assistant' for replies."
            )


@dataclass(frozen=True)
class _Example:
    """One few-shot example as data, so both record formats render the same facts."""

    text: str
    entities: tuple[tuple[str, str, str], ...]
    relations: tuple[tuple[str, str, tuple[str, ...], str, float], ...]


_EXAMPLES: tuple[_Example, ...] = (
    _Example(
        text=(
            "In 2019 the Harbor Trust bought the disused Kestrel Mill in Dunmore and hired "
            "the architect Lena Ruiz to turn it into a public library."
        ),
        entities=(
            (
                "Harbor Trust",
                "organization",
                "The Harbor Trust is an organization that bought the Kestrel Mill in 2019.",
            ),
            (
                "Kestrel Mill",
                "geo",
                "The Kestrel Mill is a disused mill in Dunmore being turned into a library.",
            ),
            ("Dunmore", "geo", "Dunmore is the town where the Kestrel Mill stands."),
            (
                "Lena Ruiz",
                "person",
                "Lena Ruiz is an architect hired to convert the Kestrel Mill into a library.",
            ),
        ),
        relations=(
            (
                "Harbor Trust",
                "Kestrel Mill",
                ("acquisition", "ownership"),
                "The Harbor Trust bought the Kestrel Mill in 2019.",
                0.9,
            ),
            (
                "Harbor Trust",
                "Lena Ruiz",
                ("commission", "renovation"),
                "The Harbor Trust hired Lena Ruiz to redesign the mill as a library.",
                0.8,
            ),
            (
                "Kestrel Mill",
                "Dunmore",
                ("location",),
                "The Kestrel Mill is located in Dunmore.",
                0.7,
            ),
        ),
    ),
    _Example(
        text=(
            "The Ridgeline Marathon was postponed after a storm flooded its course; the "
            "Ridgeline Running Club moved the race to April."
        ),
        entities=(
            (
                "Ridgeline Marathon",
                "event",
                "The Ridgeline Marathon is a race that was postponed to April after a storm "
                "flooded its course.",
            ),
            (
                "Ridgeline Running Club",
                "organization",
                "The Ridgeline Running Club organizes the Ridgeline Marathon and rescheduled it.",
            ),
        ),
        relations=(
            (
                "Ridgeline Running Club",
                "Ridgeline Marathon",
                ("organization", "rescheduling"),
                "The Ridgeline Running Club moved the Ridgeline Marathon to April.",
                0.9,
            ),
        ),
    ),
)


def _render_records_delimited(example: _Example) -> str:
    d = TUPLE_DELIMITER
    lines = [
        f"entity{d}{name}{d}{kind}{d}{description}" for name, kind, description in example.entities
    ]
    lines += [
        f"relation{d}{source}{d}{target}{d}{', '.join(keywords)}{d}{description}{d}{strength}"
        for source, target, keywords, description, strength in example.relations
    ]
    lines.append(COMPLETION_DELIMITER)
    return "\n".join(lines)


def _render_records_json(example: _Example) -> str:
    payload = {
        "entities": [
            {"name": name, "type": kind, "description": description}
            for name, kind, description in example.entities
        ],
        "relations": [
            {
                "source": source,
                "target": target,
                "keywords": list(keywords),
                "description": description,
                "strength": strength,
            }
            for source, target, keywords, description, strength in example.relations
        ],
    }
    return json.dumps(payload, ensure_ascii=False, indent=2)


def _render_example(example: _Example, record_format: RecordFormat) -> str:
    if record_format == "json":
        records = _render_records_json(example)
    else:
        records = _render_records_delimited(example)
    return f"<Input Text>\n{_fence(example.text)}\n\n<Output>\n{records}"


def default_examples(record_format: RecordFormat = "delimited") -> tuple[str, ...]:
    """Return the built-in few-shot examples, written in `record_format`."""
    _check_record_format(record_format)
    return tuple(_render_example(example, record_format) for example in _EXAMPLES)


@dataclass(frozen=True)
class ExtractionPromptOptions:
    """What the extraction prompt asks for.

    `examples=None` means the built-in examples written in `record_format`
    (so switching to JSON never shows the model delimited examples); pass
    `()` for no examples, or your own strings already in the record format.
    """

    entity_types: tuple[str, ...] = DEFAULT_ENTITY_TYPES
    language: str = "English"
    examples: tuple[str, ...] | None = None
    record_format: RecordFormat = "delimited"

    def __post_init__(self) -> None:
        if not self.entity_types or any(not t.strip() for t in self.entity_types):
            raise ValueError(
                "ExtractionPromptOptions.entity_types must be a non-empty tuple of non-blank "
                f"names; got {self.entity_types!r}. The default is {DEFAULT_ENTITY_TYPES!r}."
            )
        if not self.language.strip():
            raise ValueError(
                "ExtractionPromptOptions.language must name a language such as 'English'; "
                f"got {self.language!r}."
            )
        _check_record_format(self.record_format)

    @property
    def few_shot_examples(self) -> tuple[str, ...]:
        """The examples the prompt will show (built-in ones when `examples` is None)."""
        if self.examples is None:
            return default_examples(self.record_format)
        return self.examples


def _check_record_format(record_format: str) -> None:
    if record_format not in _RECORD_FORMATS:
        raise ValueError(f"record_format must be one of {_RECORD_FORMATS}; got {record_format!r}.")


def _fence(text: str) -> str:
    """Wrap text in a code fence longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def _format_rules(options: ExtractionPromptOptions) -> str:
    d = TUPLE_DELIMITER
    if options.record_format == "json":
        return (
            "Output format:\n"
            "* Reply with one JSON object and nothing else:\n"
            '  {"entities": [{"name": ..., "type": ..., "description": ...}], '
            '"relations": [{"source": ..., "target": ..., "keywords": [...], '
            '"description": ..., "strength": ...}]}\n'
            "* `keywords` is a list of short strings; `strength` is a number from 0 to 1.\n"
            "* List all entities first, then all relations, most significant relations first."
        )
    return (
        "Output format:\n"
        "* One record per line, fields separated by the delimiter "
        f"`{d}`. Nothing else: no numbering, no quotes around fields, no commentary.\n"
        f"* Entity line (4 fields): `entity{d}name{d}type{d}description`\n"
        f"* Relation line (6 fields): "
        f"`relation{d}source{d}target{d}keywords{d}description{d}strength`\n"
        "* `keywords` are separated by commas, never by the delimiter; `strength` is a "
        "number from 0 to 1.\n"
        f"* `{d}` only separates fields: never put it, or anything resembling it, inside "
        "a field.\n"
        "* List all entities first, then all relations, most significant relations first.\n"
        f"* When every record is written, output `{COMPLETION_DELIMITER}` on its own line."
    )


def _system_prompt(options: ExtractionPromptOptions) -> str:
    types = ", ".join(t.strip() for t in options.entity_types)
    sections = [
        "---Role---\n"
        "You build a knowledge graph: you extract the entities in a text and the "
        "relations between them.",
        "---Instructions---\n"
        "1. Entities. Find each clearly identifiable entity in the text and give:\n"
        "   * name: how the text names it; use title case when case does not matter, and "
        "the same name every time the entity appears.\n"
        f"   * type: one of [{types}]. If none fits, use `other`; do not invent types.\n"
        "   * description: what the text says about the entity, in the third person, "
        "based only on the text.\n"
        "2. Relations. Find direct, clearly stated relations between the entities you "
        "listed. Split a relation among three or more entities into pairs. Relations are "
        "undirected: do not list the same pair twice. For each give:\n"
        "   * source and target: entity names exactly as in step 1.\n"
        "   * keywords: one or more high-level words for the nature of the relation.\n"
        "   * description: why the two entities are related, based only on the text.\n"
        "   * strength: how strongly the text supports the relation, from 0 to 1.\n"
        f"3. Language. Write names, keywords and descriptions in {options.language}; keep "
        "proper nouns in their original language when no accepted translation exists.\n"
        "4. Never refer to the text itself (`this article`, `the author`) or use pronouns "
        "in place of names.",
        _format_rules(options),
    ]
    examples = options.few_shot_examples
    if examples:
        sections.append("---Examples---\n" + "\n\n".join(examples))
    sections.append(f"---Entity Types---\n[{types}]")
    return "\n\n".join(sections) + "\n"


def _user_prompt(chunk_text: str, options: ExtractionPromptOptions) -> str:
    if options.record_format == "json":
        ending = "Reply with the JSON object only."
    else:
        ending = (
            "Output only the records, one per line, then "
            f"`{COMPLETION_DELIMITER}` as the last line."
        )
    return (
        "---Task---\n"
        "Extract the entities and relations from the text below, following the system "
        "instructions exactly.\n\n"
        f"---Text---\n{_fence(chunk_text)}\n\n"
        f"---Reminder---\n{ending} Write in {options.language}.\n"
    )


def _continue_prompt(options: ExtractionPromptOptions) -> str:
    if options.record_format == "json":
        ending = "Reply with one JSON object in the same shape, and nothing else."
    else:
        ending = (
            "Use the same record format, one record per line, then "
            f"`{COMPLETION_DELIMITER}` as the last line."
        )
    return (
        "---Task---\n"
        "Some entities and relations in the text were missed or badly formatted in your "
        "last answer. List only those: entities or relations you missed, and corrected "
        "versions of records that were truncated or malformed. Do not repeat records that "
        f"were already complete and correct.\n\n---Reminder---\n{ending} Write in "
        f"{options.language}.\n"
    )


def build_extraction_messages(
    chunk_text: str, options: ExtractionPromptOptions
) -> tuple[ChatMessage, ...]:
    """Return the (system, user) messages that ask for one chunk's extraction."""
    return (
        ChatMessage("system", _system_prompt(options)),
        ChatMessage("user", _user_prompt(chunk_text, options)),
    )


def build_continue_messages(
    history: Sequence[ChatMessage], previous_reply: str, options: ExtractionPromptOptions
) -> tuple[ChatMessage, ...]:
    """Return a gleaning turn: the history, the model's reply, then "list what you missed"."""
    return (
        *history,
        ChatMessage("assistant", previous_reply),
        ChatMessage("user", _continue_prompt(options)),
    )


def prompt_fingerprint(messages: Sequence[ChatMessage]) -> str:
    """Return the sha256 hex of the messages' canonical JSON.

    ASCII-escaped JSON, so any str (even a lone surrogate) hashes without error;
    the caller adds the model name to make the cache key.
    """
    canonical = json.dumps(
        [{"role": m.role, "content": m.content} for m in messages],
        ensure_ascii=True,
        separators=(",", ":"),
        sort_keys=True,
    )
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


SUMMARY_PROMPT_VERSION = "kgstream-summary-1"


def build_summary_messages(
    kind: str, name: str, descriptions: Sequence[str], max_tokens: int, language: str = "English"
) -> tuple[ChatMessage, ...]:
    """Ask for one description merging an entity's or relation's fragments.

    The descriptions arrive in the renderer's deterministic order, so the same
    fragment set always makes the same prompt (and hits the response cache).
    """
    listing = "\n".join(f"- {text}" for text in descriptions)
    system = (
        "You merge descriptions of one knowledge-graph "
        f"{'entity' if kind == 'entity' else 'relationship'} into a single, comprehensive, "
        "third-person description. Keep every distinct fact, resolve contradictions by stating "
        "both, invent nothing, and write in "
        f"{language}. Answer with the description only, under {max_tokens} tokens."
    )
    user = f"{kind.capitalize()}: {name}\n\nDescriptions:\n{listing}"
    return (ChatMessage("system", system), ChatMessage("user", user))
