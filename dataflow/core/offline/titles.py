"""A passage's title line as an entity, for the offline extractor.

Encyclopaedia passages (the Wikipedia paragraphs of multi-hop QA sets) put
their title on the first line: "Shirley Temple", "Kiss and Tell (1945 film)".
The title names what the whole passage is about, so it is an entity even when
the paragraph never repeats it in full, and it is the implicit subject of the
passage's sentences: relating it to their entities is what makes a two-hop
question ("the woman who starred in Kiss and Tell") answerable.

The name drops a trailing disambiguator, "(1945 film)" or ", Angus", because
other passages and questions say "Kiss and Tell", not "Kiss and Tell (1945
film)", and entity identity is the name (dataflow/core/naming.py); the
disambiguator only types the entity ("film" is a work, so "category"; "band"
an organisation; "footballer" a person). Two films of one name therefore merge,
as they would in a LightRAG graph keyed by name.

A first line is a title only when it is short, has no sentence punctuation at
its end (an abbreviation's dot aside: "Boston United F.C."), is followed by a
longer line, and that line repeats it or shares a capitalised word or a number
with it (case-sensitively), so "Meeting notes" over "The meeting ..." is no
entity. A person-shaped title over a biography's life dates ("(born 1950)",
"(1904 – 1977)") is a person, and the biography's fuller form of the name in
its first sentence ("Delmer Lawrence Daves" under "Delmer Daves") is the title.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from dataflow.core.naming import clean_entity_name, entity_key
from dataflow.core.offline.lexicon import (
    DISAMBIGUATOR_EVENT,
    DISAMBIGUATOR_GEO,
    DISAMBIGUATOR_ORGANIZATION,
    DISAMBIGUATOR_PERSON,
    FUNCTION_WORDS,
)
from dataflow.core.offline.mentions import Mention
from dataflow.core.offline.runs import TOKEN
from dataflow.core.offline.types import (
    CATEGORY,
    EVENT,
    GEO,
    ORGANIZATION,
    PERSON,
    is_person_shaped,
    type_span,
)

_MAX_TITLE_WORDS = 12
_MAX_TITLE_CHARS = 120
_DISAMBIGUATOR = re.compile(r"\s*\(([^()]*)\)\s*$")
# "Boston United F.C.", "Feel Good Inc.": a title may end in an abbreviation's dot.
_ABBREVIATED_END = re.compile(r"(?:\b[A-Z]\.|\b(?:Inc|Ltd|Co|Corp|Jr|Sr|St|Bros)\.)$")
# A biography's opening "(born 3 May 1950)" or "(April 23, 1928 – February 10, 2014)".
_LIFE_DATES = re.compile(r"\((?:[^()]*;\s*)?(?:born\b|[^()]*\b1\d{3}\s*[–-][^()]*\d{4}\))")


@dataclass(frozen=True)
class PassageTitle:
    """A passage's title: its name, that name's tokens, the type its disambiguator
    gives (None: type it like any name), and where the passage body starts."""

    name: str
    tokens: tuple[str, ...]
    type: str | None
    body_start: int


def _disambiguator_type(words: list[str]) -> str | None:
    lows = [w.lower() for w in words]
    for vocabulary, kind in (
        (DISAMBIGUATOR_PERSON, PERSON),
        (DISAMBIGUATOR_ORGANIZATION, ORGANIZATION),
        (DISAMBIGUATOR_GEO, GEO),
        (DISAMBIGUATOR_EVENT, EVENT),
    ):
        if any(low in vocabulary for low in lows):
            return kind
    return None


def find_title(text: str) -> PassageTitle | None:
    """The title on a passage's first line, or None when the first line is not one."""
    stripped = text.lstrip()
    if not stripped:
        return None
    offset = len(text) - len(stripped)
    newline = stripped.find("\n")
    if newline < 0:
        return None
    line = stripped[:newline].strip()
    rest = stripped[newline + 1 :].lstrip()
    following = rest.split("\n", 1)[0].strip()
    if (
        not line
        or not (line[0].isupper() or line[0].isdigit())
        or (line[-1] in ".!?:;," and not _ABBREVIATED_END.search(line))
        or len(line) > _MAX_TITLE_CHARS
        or len(line.split()) > _MAX_TITLE_WORDS
        or len(following) <= len(line)
    ):
        return None
    name, disambiguator = line, ""
    match = _DISAMBIGUATOR.search(line)
    if match and match.start() > 0:
        name, disambiguator = line[: match.start()], match.group(1)
    elif line.count(", ") == 1:
        head, tail = line.split(", ")
        if head.lower() not in FUNCTION_WORDS and all(w[:1].isupper() for w in tail.split()):
            name, disambiguator = head, tail  # "Hatton Castle, Angus"; not "He, She and It"
    name = name.strip()
    if name.lower() in FUNCTION_WORDS:
        return None
    tokens = TOKEN.findall(name)
    body_tokens = set(TOKEN.findall(following))
    if name not in following and not any(
        (t[0].isupper() or t[0].isdigit()) and t.lower() not in FUNCTION_WORDS and t in body_tokens
        for t in tokens
    ):
        return None
    kind = _disambiguator_type(disambiguator.split())
    if kind is None and is_person_shaped(tokens) and _LIFE_DATES.search(following[:200]):
        kind = PERSON  # "Delmer Daves" over "Delmer Lawrence Daves (July 24, 1904 – ...)"
    return PassageTitle(name=name, tokens=tuple(tokens), type=kind, body_start=offset + newline + 1)


def _title_mention(title: PassageTitle, sentence: int, start: int, tokens: list[str]) -> Mention:
    words = list(title.tokens)
    end = start + len(words)
    if title.type is not None:
        kind, confidence = title.type, 3
    else:
        kind, confidence = type_span(words, tokens, start, end, False, False)
    name = clean_entity_name(title.name)
    return Mention(
        sentence,
        start,
        end,
        name,
        entity_key(name),
        tuple(words),
        kind,
        confidence,
        False,
        kind == CATEGORY and is_person_shaped(words),
        False,
    )


def place_title(
    title: PassageTitle, mentions: list[Mention], sentence_tokens: list[list[str]]
) -> tuple[list[Mention], Mention]:
    """Add the title to a passage's mentions: first, as the passage's implicit subject
    (sentence 0, no tokens, typed from the title alone), then wherever the passage
    spells it out, replacing the fragments found there ("Kiss", "Tell"). Return the
    new mention list and the implicit subject mention."""
    subject = replace(_title_mention(title, 0, 0, list(title.tokens)), end=0)
    width = len(title.tokens)
    spelled: dict[int, list[Mention]] = {}
    if width:
        head = title.tokens[0]
        for number, tokens in enumerate(sentence_tokens):
            for start in range(len(tokens) - width + 1):
                if tokens[start] == head and tuple(tokens[start : start + width]) == title.tokens:
                    spelled.setdefault(number, []).append(
                        _title_mention(title, number, start, tokens)
                    )
    if width >= 2 and sentence_tokens:
        for mention in mentions:
            if (
                mention.sentence == 0
                and len(mention.words) > width
                and mention.words[0] == title.tokens[0]
                and mention.words[-1] == title.tokens[-1]
                and is_person_shaped(mention.words)
            ):  # "Delmer Lawrence Daves" is the passage's "Delmer Daves"
                full = _title_mention(title, 0, mention.start, sentence_tokens[0])
                spelled.setdefault(0, []).append(replace(full, end=mention.end))
                break
    placed: list[Mention] = [subject]
    added: set[int] = set()
    for mention in mentions:
        occurrences = spelled.get(mention.sentence)
        if occurrences is not None:
            if mention.sentence not in added:
                added.add(mention.sentence)
                placed.extend(occurrences)
            if any(
                mention.start < o.end
                and o.start < mention.end
                and not (
                    mention.start <= o.start
                    and o.end <= mention.end
                    and mention.end - mention.start > o.end - o.start
                    and mention.key != o.key
                )
                for o in occurrences
            ):
                continue  # a fragment of the title ("Tell"), or the title itself again
        placed.append(mention)
    for number, occurrences in spelled.items():
        if number not in added:
            placed.extend(occurrences)
    return placed, subject
