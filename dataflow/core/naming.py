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


def clean_entity_name(name: str) -> str:
    """Return the display form of a name: NFKC, no wrapping quotes, single spaces.

    Case is kept, so "OpenAI" still reads as "OpenAI".
    """
    text = unicodedata.normalize("NFKC", name)
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


def relation_key(source: str, target: str) -> tuple[str, str] | None:
    """Return the undirected key of a relation: its two entity keys, sorted.

    Returns None for a self-loop or an empty endpoint, which are dropped.
    """
    a, b = entity_key(source), entity_key(target)
    if not a or not b or a == b:
        return None
    return (a, b) if a < b else (b, a)
