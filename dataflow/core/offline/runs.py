"""Tokens and proper-noun runs for the offline extractor (start of step 2).

A run is a maximal stretch of capitalised, ALLCAPS or CamelCase tokens in one
sentence, joined by lowercase connectors ("of", "de", "the", "&"), plural
possessives ("Members' Assembly"), initials and abbreviations ("J.", "Dr."),
small numbers ("Apollo 11") and "I" after an event word or given name ("World
War I"). Runs are only candidates: spans.py cuts them into names. This
is the extractor's one pass over every token, so it is written for speed:
token kinds are classified once per distinct token and cached by the caller.
"""

from __future__ import annotations

import re

from dataflow.core.offline.lexicon import (
    APOSTROPHES,
    CONNECTORS,
    EVENT_HEADS,
    EVENT_SUFFIXES,
    EVENT_SUFFIXES_WITH_YEAR,
    FIRST_NAMES,
    FIRST_PERSON_VERBS,
    FUNCTION_WORDS,
    INTERJECTIONS,
    NAME_ABBREVIATIONS,
)

TOKEN = re.compile(r"\w+(?:['’\-.&/]\w+)*|\S")
_CONTRACTIONS = ("'t", "’t", "'m", "’m", "'re", "’re", "'ve", "’ve", "'ll", "’ll", "'d", "’d")
_OTHER, _PROPER, _POSSESSIVE, _CONNECTOR, _DOT, _NUMBER = range(6)

# A run is a list of (word, first token index, end token index); a dot after an
# initial or an abbreviation is merged into its word.
Run = list[tuple[str, int, int]]


def _classify(token: str) -> int:
    head = token[0]
    if not head.isalnum() or "_" in token:  # punctuation, or a code identifier
        return _DOT if token == "." else _CONNECTOR if token == "&" else _OTHER
    if head.isdigit():
        if token.isdigit():
            return _NUMBER if len(token) <= 4 else _OTHER
        return _PROPER if token.isalnum() and not token.islower() else _OTHER
    low = token.lower()
    if low.endswith(_CONTRACTIONS) or low in INTERJECTIONS:
        return _OTHER  # "Hey Adam" is Adam; "LOL" is no acronym
    possessive = low.endswith(("'s", "’s"))
    base = low[:-2] if possessive else low
    if head.isupper():
        if base in CONNECTORS and not token.isupper():
            return _CONNECTOR
        if base in FUNCTION_WORDS and (len(token) == 1 or not token.isupper()):
            return _OTHER
        return _POSSESSIVE if possessive else _PROPER
    if low in CONNECTORS:
        return _CONNECTOR
    if token.isalpha() and not token.islower():
        return _PROPER  # CamelCase such as iPhone, eBay
    return _OTHER


def is_title_case(tokens: list[str]) -> bool:
    """Whether a sentence is a title-case heading, where capitals prove nothing."""
    capitalised = 0
    for token in tokens:
        if not token[0].isalpha():
            continue
        if token[0].isupper():
            capitalised += 1
        elif token not in FUNCTION_WORDS and token not in CONNECTORS:
            return False
    return capitalised >= 3


def find_runs(tokens: list[str], kinds: dict[str, int], mid_caps: set[str]) -> list[Run]:
    """Return the maximal proper-noun runs of one sentence (one pass over the tokens)."""
    runs: list[Run] = []
    run: Run = []
    pending: Run = []
    for index, token in enumerate(tokens):
        kind = kinds.get(token)
        if kind is None:
            kind = kinds[token] = _classify(token)
        if kind in (_PROPER, _POSSESSIVE):
            if (
                index
                and tokens[index - 1][0].isalnum()
                and tokens[index - 1].lower() not in INTERJECTIONS
            ):  # capitalised mid-sentence, not just after "Hey"
                mid_caps.add(token if kind == _PROPER else token[:-2])
            if pending:
                if len(pending) == 1 and len(run) > 1 and pending[0][0].lower() == "the":
                    runs.append(run)  # "World War II the Battle"; "Alexander the Great" joins
                    run = []
                else:
                    run.extend(pending)
                pending = []
            if kind == _PROPER:
                run.append((token, index, index + 1))
                continue
            run.append((token[:-2], index, index + 1))
        elif kind == _CONNECTOR:
            if run and len(pending) < 2:  # "of the", "de la"; never a long chain
                pending.append((token, index, index + 1))
                continue
        elif kind == _DOT:
            if run and not pending:
                word = run[-1][0]
                if (len(word) == 1 and word.isupper()) or ("." in word and word[-1] != "."):
                    run[-1] = (word + ".", run[-1][1], index + 1)
                    continue
                if word.lower() in NAME_ABBREVIATIONS:
                    run[-1] = (word, run[-1][1], index + 1)
                    continue
        elif token in APOSTROPHES:
            if (
                run
                and not pending
                and run[-1][0][-1] in "sS"
                and index + 1 < len(tokens)
                and _classify(tokens[index + 1]) == _PROPER
            ):
                run[-1] = (run[-1][0] + token, run[-1][1], index + 1)  # "Members' Assembly"
                continue
        elif token == "I" and run and not pending:
            last = run[-1][0].lower()
            following = tokens[index + 1] if index + 1 < len(tokens) else ""
            if last in EVENT_SUFFIXES or (
                last in FIRST_NAMES and following not in FIRST_PERSON_VERBS
            ):  # World War I, Elizabeth I; not "tell Sarah I said hi"
                run.append((token, index, index + 1))
                continue
        elif kind == _NUMBER and run and not pending:
            last = run[-1][0].lower()
            if (
                len(token) <= 3
                or last in EVENT_SUFFIXES
                or last in EVENT_HEADS
                or last in EVENT_SUFFIXES_WITH_YEAR
            ):
                run.append((token, index, index + 1))
                continue
        if run:
            runs.append(run)
        run, pending = [], []
    if run:
        runs.append(run)
    return runs
