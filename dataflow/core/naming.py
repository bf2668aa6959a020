"""Identity of entities and relations.

One function decides when two surface names are the same entity, so every
step (extraction merge, contribution keys, store keys, queries) agrees.
"""

from __future__ import annotations

import re
import unicodedata

_QUOTES = "\"'`\u2018\u2019\u201a\u201b\u201c\u201d\u201e\u201f\u00ab\u00bb\u2039\u203a"
_WRAPPERS = _QUOTES + "()[]{}<>*_"
_SPACES = re.compile(r"\s+")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def clean_entity_name(name: str) -> str:
    """Return the display form of a name: NFKC, no invisible characters, no wrapping
    quotes, single spaces.

    Case is kept, so "OpenAI" still reads as "OpenAI". Zero-width characters, BOMs and
    bidi marks are removed and control characters become spaces, so "Zo\u200be" and
    "Zoe" are one entity and no key can hold `RELATION_ID_SEPARATOR`.
    """
    text = unicodedata.normalize("NFKC", name)
    if not text.isprintable():  # fast path: most names hold no invisible character
        text = "".join(c for c in text if unicodedata.category(c) != "Cf")
        text = _CONTROLS.sub(" ", text)
    text = _SPACES.sub(" ", text).strip()
    previous = None
    while previous != text:
        previous = text
        text = text.strip(_WRAPPERS).strip()
    return text


def entity_key(name: str) -> str:
    """Return the identity of an entity name.

    The key is the cleaned display name (see `clean_entity_name`) case-folded,
    so "Alan Turing", '"ALAN  TURING"' and "alan turing" are one entity.
    An empty key means the name had no content and must be dropped.
    """
    return clean_entity_name(name).casefold()


RELATION_ID_SEPARATOR = "\x1f"
"""Joins a relation's two entity keys in its string form; entity keys never contain it."""


def relation_key(source: str, target: str) -> tuple[str, str] | None:
    """Return the undirected key of a relation between two surface names.

    Returns None for a self-loop or an empty endpoint, which are dropped.
    """
    a, b = entity_key(source), entity_key(target)
    if not a or not b or a == b:
        return None
    return relation_pair(a, b)


def relation_pair(a: str, b: str) -> tuple[str, str]:
    """Return the undirected pair of two entity keys (already normalised): sorted.

    The one tuple form of a relation's identity: stores, routing and queries all use it.
    """
    if not a or not b:
        raise ValueError(f"a relation needs two different, non-empty entity keys; got {a!r}, {b!r}")
    if a == b:
        raise ValueError(
            f"a relation needs two different entity keys; {a!r} -> itself is a self-loop, "
            "drop it before storing"
        )
    return (a, b) if a < b else (b, a)


def relation_id(pair: tuple[str, str]) -> str:
    """Return the string form of a relation pair: its keys joined by U+001F.

    Used where a key must be one string (Bytewax routing, vector point keys). Point
    ids are derived from it, so the format is fixed: changing it orphans every point.
    """
    first, second = pair
    if not first < second:
        raise ValueError(f"relation pair {pair!r} is not sorted; make it with relation_pair")
    for value in pair:
        if RELATION_ID_SEPARATOR in value:
            raise ValueError(
                f"entity key {value!r} contains U+001F, the relation id separator; "
                "pass entity keys made by dataflow.core.naming.entity_key"
            )
    return f"{first}{RELATION_ID_SEPARATOR}{second}"


def relation_pair_of(text: str) -> tuple[str, str]:
    """Return the pair a `relation_id` string names (its inverse)."""
    first, separator, second = text.partition(RELATION_ID_SEPARATOR)
    if not (separator and first and first < second) or RELATION_ID_SEPARATOR in second:
        raise ValueError(f"{text!r} is not a relation id; make one with relation_id")
    return first, second
