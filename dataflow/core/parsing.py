"""Turn a model's extraction reply into an `Extraction`, whatever shape it came in.

Model output is untrusted text: `parse_extraction` accepts any str and never
raises. What it cannot read it drops and counts in `DropCounts`, so a bad reply
shows up as numbers on the document status instead of crashing the flow.
No format below has an alias field, so the entities parsed here carry no
aliases (only the offline extractor resolves short forms to full names).

Accepted shapes (detected automatically):

* Delimited, the format `prompts.py` asks for (LightRAG's current one)::

      entity<|#|>name<|#|>type<|#|>description
      relation<|#|>source<|#|>target<|#|>keywords<|#|>description[<|#|>strength]
      <|COMPLETE|>

* LightRAG's older format, where a relationship's description comes BEFORE
  its keywords::

      ("entity"<|>"NAME"<|>"TYPE"<|>"DESC")##
      ("relationship"<|>"SRC"<|>"TGT"<|>"DESC"<|>"KEYWORDS"<|>STRENGTH)##<|COMPLETE|>

* JSON: ``{"entities": [...], "relations": [...]}`` (or ``"relationships"``),
  bare or in a code fence, with LightRAG's alternative key names.

Rules, in the order they apply:

* Records are lines; ``##`` before a record and the completion marker also
  separate records, and records after the marker are kept. A truncated
  trailing marker (``<|COMPL``) is ignored. Lines without any field
  delimiter (prose, code fences) are noise: skipped, not counted.
* Field delimiter: ``<|#|>``, plus unambiguous corruptions of it (``<|#|``,
  ``|#|>``, ``|#|``, ``<|##|>``, ``<|#>``, ``<#|>``) and LightRAG's old
  ``<|>``. The *dialect*, which fixes a relation's field order, is decided
  once per reply: any ``#`` delimiter means the current format (a stray
  ``<|>`` is then a corrupted ``<|#|>``); only ``<|>`` means the old format.
  The record word (``relation`` / ``relationship``) does not change the order.
* A record wrapped in ``( ... )`` is unwrapped; a trailing ``)`` without a
  matching ``(`` is dropped. Fields lose surrounding whitespace and quotes;
  trailing empty fields (a trailing delimiter) are ignored.
* Entity: exactly name, type, description; relation: source, target,
  keywords, description and an optional strength (old format: source,
  target, description, keywords, optional strength). Any other field count,
  or an empty name, type or description, drops the record as malformed.
  ``content_keywords`` records are ignored without counting; any other
  record word counts as unknown.
* Names are cleaned with `naming.clean_entity_name`. Types are lower-cased
  with inner whitespace runs turned into ``_`` ("Market Trend" ->
  "market_trend", matching LightRAG's own type spellings); only the first
  comma-separated type is kept; a type containing ``<``, ``>`` or ``|`` is
  delimiter debris and drops the record. Types are not checked against the
  configured list (the parser does not know it). Descriptions get their
  whitespace runs collapsed.
* Keywords split on commas (ASCII or full-width), stripped, empties removed,
  deduplicated case-insensitively keeping the first spelling.
* Strength: a finite, non-negative number (or numeric string); anything else
  becomes 1.0 and is not a drop.
* A relation whose ends have the same `entity_key` is a self-loop: dropped
  and counted. Duplicates within one reply merge by
  `extraction.merge_extractions` (longer description wins).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

from dataflow.core.extraction import (
    DropCounts,
    ExtractedEntity,
    ExtractedRelation,
    Extraction,
    merge_extractions,
)
from dataflow.core.naming import clean_entity_name, entity_key

_COMPLETION = "<|COMPLETE|>"

# Current-format delimiter and its unambiguous corruptions; all contain "#" next to a pipe.
_HASH_DELIMITER = r"<?\|#++\|>?|<\|#++>|<#++\|>"
_HASH_DELIMITER_RE = re.compile(_HASH_DELIMITER)
_ANY_DELIMITER_RE = re.compile(rf"{_HASH_DELIMITER}|<\|++>")
_OLD_DELIMITER_RE = re.compile(r"<\|++>")
_COMPLETION_RE = re.compile(r"<\|\s*+complete\s*+\|?>?|\|\s*+complete\s*+\|>", re.IGNORECASE)
# "##" as a record separator: only before a record, a marker, or the end (not "C##").
_RECORD_HASHES_RE = re.compile(
    r"(?<!#)#{2,}+[ \t]*+"
    r"(?=$|[\r\n]|\s*(?:\(|<\||[\"']?(?:entity|relation|relationship|content_keywords)\b))",
    re.IGNORECASE,
)
_FENCE_LINE_RE = re.compile(r"^`{3,}")
_BULLET_RE = re.compile(r"^(?:[-*•]|\d{1,3}[.)])\s+")
_WHITESPACE_RE = re.compile(r"\s+")
_KEYWORD_SPLIT_RE = re.compile(r"[,，]")
_JSON_FENCE_RE = re.compile(r"```[^\n`]*\n?(.*?)(?:```|\Z)", re.DOTALL)

_ENTITY_WORDS = frozenset({"entity"})
_RELATION_WORDS = frozenset({"relation", "relationship"})
_IGNORED_WORDS = frozenset({"content_keywords"})
_KIND_WRAPPERS = " \t()[]*`\"'“”‘’"
_PAIRED_QUOTES = {'"': '"', "'": "'", "“": "”", "‘": "’", "`": "`"}
_TYPE_DEBRIS = frozenset("<>|")
_JSON_ATTEMPTS = 20
_JSON_KEYS = frozenset({"entities", "relations", "relationships"})

_NAME_KEYS = ("name", "entity_name", "entity")
_TYPE_KEYS = ("type", "entity_type")
_DESCRIPTION_KEYS = ("description", "entity_description", "relationship_description")
_SOURCE_KEYS = ("source", "src_id", "source_entity", "src")
_TARGET_KEYS = ("target", "tgt_id", "target_entity", "tgt")
_KEYWORD_KEYS = ("keywords", "relationship_keywords")
_STRENGTH_KEYS = ("strength", "weight", "relationship_strength")


@dataclass
class _Collector:
    """Accumulates one reply's records; local to one `parse_extraction` call."""

    entities: list[ExtractedEntity] = field(default_factory=list)
    relations: list[ExtractedRelation] = field(default_factory=list)
    malformed_entities: int = 0
    malformed_relations: int = 0
    unknown_records: int = 0
    self_loops: int = 0

    def add_entity(self, name: str, entity_type: str, description: str) -> None:
        clean_name = clean_entity_name(name)
        clean_type = _normalise_type(entity_type)
        clean_description = _normalise_text(description)
        if not clean_name or not clean_type or not clean_description:
            self.malformed_entities += 1
            return
        self.entities.append(ExtractedEntity(clean_name, clean_type, clean_description))

    def add_relation(
        self,
        source: str,
        target: str,
        keywords: tuple[str, ...],
        description: str,
        strength: float,
    ) -> None:
        clean_source = clean_entity_name(source)
        clean_target = clean_entity_name(target)
        clean_description = _normalise_text(description)
        if not clean_source or not clean_target or not clean_description:
            self.malformed_relations += 1
            return
        if entity_key(clean_source) == entity_key(clean_target):
            self.self_loops += 1
            return
        self.relations.append(
            ExtractedRelation(clean_source, clean_target, keywords, clean_description, strength)
        )

    def to_extraction(self) -> Extraction:
        collected = Extraction(
            entities=tuple(self.entities),
            relations=tuple(self.relations),
            dropped=DropCounts(
                malformed_entities=self.malformed_entities,
                malformed_relations=self.malformed_relations,
                unknown_records=self.unknown_records,
                self_loops=self.self_loops,
            ),
        )
        # Merging with nothing deduplicates within the reply by the shared rule.
        return merge_extractions(collected, Extraction())


def parse_extraction(text: str) -> Extraction:
    """Parse one model reply (delimited, old LightRAG, or JSON). Never raises."""
    collector = _Collector()
    payload = _find_json_payload(text)
    if payload is not None:
        _collect_json(payload, collector)
    else:
        _collect_delimited(text, collector)
    return collector.to_extraction()


def extraction_reply_problem(text: str) -> str | None:
    """Why `text` is not an extraction reply at all (None when it is one).

    A reply is one when it holds a record (even a malformed one: the model followed the
    format and `parse_extraction` counts what it drops), a completion marker, or an
    entities/relations JSON object. Anything else (prose, an apology, an empty or cut
    reply) is garbage: the extractor retries it and finally fails the chunk, instead of
    indexing it as "no entities here".
    """
    if _COMPLETION_RE.search(text) or _find_json_payload(text) is not None:
        return None
    extraction = parse_extraction(text)
    if extraction.entities or extraction.relations or extraction.dropped.total:
        return None
    shown = _WHITESPACE_RE.sub(" ", text).strip()
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return f"the reply is not in the extraction format (no record, no completion marker): {shown!r}"


# --- delimited formats -------------------------------------------------------


def _collect_delimited(text: str, collector: _Collector) -> None:
    old_format = _HASH_DELIMITER_RE.search(text) is None and (
        _OLD_DELIMITER_RE.search(text) is not None
    )
    body = _strip_truncated_marker(text)
    body = _COMPLETION_RE.sub("\n", body)
    body = _RECORD_HASHES_RE.sub("\n", body)
    for line in body.splitlines():
        _collect_record(line, collector, old_format=old_format)


def _strip_truncated_marker(text: str) -> str:
    """Drop a completion marker cut short at the very end (``...<|COMPL``)."""
    stripped = text.rstrip()
    marker = _COMPLETION.upper()
    for size in range(len(marker) - 1, 1, -1):
        if stripped[-size:].upper() == marker[:size]:
            return stripped[:-size]
    return stripped


def _collect_record(line: str, collector: _Collector, *, old_format: bool) -> None:
    record = line.strip()
    if not record or _FENCE_LINE_RE.match(record):
        return
    record = _unwrap_parentheses(_BULLET_RE.sub("", record, count=1))
    fields = _ANY_DELIMITER_RE.split(record)
    if len(fields) < 2 or not any(value.strip() for value in fields):
        return  # prose, or delimiters with nothing between them: noise, not a record
    while not fields[-1].strip():
        fields.pop()
    kind = fields[0].strip(_KIND_WRAPPERS).lower()
    values = fields[1:]
    if kind in _ENTITY_WORDS:
        if len(values) != 3:
            collector.malformed_entities += 1
            return
        collector.add_entity(values[0], values[1], values[2])
    elif kind in _RELATION_WORDS:
        if len(values) not in (4, 5):
            collector.malformed_relations += 1
            return
        source, target = values[0], values[1]
        if old_format:
            description, keywords = values[2], values[3]
        else:
            keywords, description = values[2], values[3]
        strength = _parse_strength(values[4]) if len(values) == 5 else 1.0
        collector.add_relation(source, target, _split_keywords(keywords), description, strength)
    elif kind not in _IGNORED_WORDS:
        collector.unknown_records += 1


def _unwrap_parentheses(record: str) -> str:
    """Remove LightRAG's ``( ... )`` record wrapper, or an unmatched trailing ``)``."""
    if record.startswith("("):
        record = record[1:]
        return record[:-1] if record.endswith(")") else record
    if record.endswith(")") and record.count(")") > record.count("("):
        return record[:-1]
    return record


def _unquote(value: str) -> str:
    """Strip whitespace and one pair of wrapping quotes (or a lone unmatched one)."""
    text = value.strip()
    if len(text) >= 2 and _PAIRED_QUOTES.get(text[0]) == text[-1]:
        return text[1:-1].strip()
    if text.count('"') % 2 == 1:
        if text.startswith('"'):
            return text[1:].strip()
        if text.endswith('"'):
            return text[:-1].strip()
    return text


# --- JSON --------------------------------------------------------------------


def _find_json_payload(text: str) -> dict[str, object] | None:
    """Return the first JSON object with entity/relation arrays, fenced or bare."""
    candidates = [match.group(1) for match in _JSON_FENCE_RE.finditer(text)]
    candidates.append(text)
    decoder = json.JSONDecoder()
    attempts = 0
    for candidate in candidates:
        start = candidate.find("{")
        while start >= 0 and attempts < _JSON_ATTEMPTS:
            attempts += 1
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except (ValueError, RecursionError):
                value = None
            if isinstance(value, dict) and _JSON_KEYS & {str(k).lower() for k in value}:
                return {str(k).lower(): v for k, v in value.items()}
            start = candidate.find("{", start + 1)
    return None


def _collect_json(payload: dict[str, object], collector: _Collector) -> None:
    for item in _as_list(payload.get("entities")):
        if not isinstance(item, dict):
            collector.malformed_entities += 1
            continue
        fields = {str(k).lower(): v for k, v in item.items()}
        collector.add_entity(
            _json_text(_first(fields, _NAME_KEYS)),
            _json_text(_first(fields, _TYPE_KEYS)),
            _json_text(_first(fields, _DESCRIPTION_KEYS)),
        )
    relations = [*_as_list(payload.get("relations")), *_as_list(payload.get("relationships"))]
    for item in relations:
        if not isinstance(item, dict):
            collector.malformed_relations += 1
            continue
        fields = {str(k).lower(): v for k, v in item.items()}
        collector.add_relation(
            _json_text(_first(fields, _SOURCE_KEYS)),
            _json_text(_first(fields, _TARGET_KEYS)),
            _split_keywords(_first(fields, _KEYWORD_KEYS)),
            _json_text(_first(fields, _DESCRIPTION_KEYS)),
            _parse_strength(_first(fields, _STRENGTH_KEYS)),
        )


def _as_list(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


def _first(fields: dict[str, object], keys: tuple[str, ...]) -> object:
    """The value of the first alias present and not null."""
    for key in keys:
        if fields.get(key) is not None:
            return fields[key]
    return None


def _json_text(value: object) -> str:
    """A JSON scalar as text; numbers count (a name may be "1984"), other values do not."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value) if isinstance(value, float) else str(value)
    return ""


# --- shared field rules ------------------------------------------------------


def _normalise_text(value: str) -> str:
    return _WHITESPACE_RE.sub(" ", _unquote(value)).strip()


def _normalise_type(value: str) -> str:
    first = next((part for part in _KEYWORD_SPLIT_RE.split(value) if part.strip()), "")
    cleaned = _unquote(first).strip(_KIND_WRAPPERS).lower()
    if _TYPE_DEBRIS & set(cleaned):
        return ""
    return _WHITESPACE_RE.sub("_", cleaned)


def _split_keywords(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        raw = _KEYWORD_SPLIT_RE.split(value)
    elif isinstance(value, list):
        raw = [
            part
            for item in value
            if (text := _json_text(item))
            for part in _KEYWORD_SPLIT_RE.split(text)
        ]
    else:
        return ()
    seen: set[str] = set()
    keywords: list[str] = []
    for part in raw:
        keyword = _normalise_text(part)
        folded = keyword.casefold()
        if keyword and folded not in seen:
            seen.add(folded)
            keywords.append(keyword)
    return tuple(keywords)


def _parse_strength(value: object) -> float:
    """A finite, non-negative number, or 1.0 when the model gave anything else."""
    if isinstance(value, bool):
        return 1.0
    if isinstance(value, str):
        value = _unquote(value)
    if not isinstance(value, int | float | str):
        return 1.0
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return 1.0
    return number if math.isfinite(number) and number >= 0 else 1.0
