"""Entity names a question may mention: the spans to look up by exact key before any
vector search.

Dense search over `name + description` ranks "Hey Adam" or "Tough" above "Adam Smith" for
the keyword "Adam Smith"; an exact look-up cannot. Every run of up to `MAX_NAME_WORDS`
words that neither starts nor ends with a stopword is a candidate; its entity key
(`dataflow.core.naming.entity_key`: case-folded, NFKC, single spaces) is looked up in the
graph store both as an entity key and as an alias (the short forms and speaker labels
the extractor resolved: "Adam", "AdamSmith"), one round trip for all of them. Matches
are ranked longest first, and a match inside a longer one ("Gap" in "Big Stone Gap") is
dropped: the longer name is the one the question means. `named_entities` then lists
the exact names first and the entities behind matched aliases after them.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from dataflow.core.naming import entity_key

MAX_NAME_WORDS = 6
MAX_CANDIDATES = 400  # bounds the look-up for a very long question

_WORD = re.compile(r"[^\W_](?:[\w'’.&-]*[^\W_])?|&")
_POSSESSIVE = re.compile(r"['’]s$", re.IGNORECASE)


@dataclass(frozen=True)
class NameSpan:
    """A candidate: its entity key and which words of the text it covers."""

    key: str
    start: int
    end: int  # exclusive

    @property
    def length(self) -> int:
        return self.end - self.start


def name_spans(text: str, stopwords: frozenset[str]) -> list[NameSpan]:
    """Candidate spans of `text`, longest first (then by position)."""
    words = [_POSSESSIVE.sub("", word) for word in _WORD.findall(text)]
    spans: list[NameSpan] = []
    for size in range(min(MAX_NAME_WORDS, len(words)), 0, -1):
        for start in range(len(words) - size + 1):
            first, last = words[start].casefold(), words[start + size - 1].casefold()
            if first in stopwords or last in stopwords or words[start] == "&":
                continue
            key = entity_key(" ".join(words[start : start + size]))
            if key:
                spans.append(NameSpan(key, start, start + size))
            if len(spans) >= MAX_CANDIDATES:
                return spans
    return spans


def matched_names(spans: Iterable[NameSpan], known: set[str]) -> list[str]:
    """Keys of the spans that name a known entity, longest first, without the matches that
    lie inside a longer match."""
    covered: list[NameSpan] = []
    keys: list[str] = []
    for span in spans:
        if span.key not in known:
            continue
        if any(other.start <= span.start and span.end <= other.end for other in covered):
            continue
        covered.append(span)
        if span.key not in keys:
            keys.append(span.key)
    return keys


def named_entities(
    matched: Sequence[str],
    entities: Collection[str],
    aliases: Mapping[str, Sequence[str]],
    degrees: Mapping[str, int],
) -> list[str]:
    """The entity keys that the `matched` span keys name: exact entity names first (in
    match order), then the entities carrying a matched alias. An alias carried by several
    entities ("Adam" for Adam Smith and Adam Jones) names all of them, the best connected
    first (most relations, by `degrees`; then by key), since it is the likelier referent."""
    exact = [key for key in matched if key in entities]
    by_alias = [
        entity
        for key in matched
        for entity in sorted(aliases.get(key, ()), key=lambda e: (-degrees.get(e, 0), e))
    ]
    return list(dict.fromkeys((*exact, *by_alias)))
