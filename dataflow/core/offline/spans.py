"""Cutting proper-noun runs into name spans, for the offline extractor (step 2).

A run from runs.py may hold several names or none: "Alice and Bob" is
two people, "Lena Sorvik of Greyholt Institute" a person and an organisation,
"Dr. Jane Smith" a title and a person, "Head of Projects" no name at all. The
rules here decide where names start and end; each span carries a flag saying
whether its cut (a title before it, "X of Y" after a person's name) proves it
is a person's name.
"""

from __future__ import annotations

from dataflow.core.offline.lexicon import (
    APOSTROPHES,
    CONDITIONAL_CONNECTORS,
    CONNECTORS,
    EVENT_SUFFIXES,
    EVENT_SUFFIXES_WITH_YEAR,
    GREETING_PAIRS,
    IMPERATIVES_BEFORE_NAMES,
    LEGAL_FORMS,
    LONE_NON_NAMES,
    MONTHS_AND_DAYS,
    OCCUPATIONS,
    ROLE_OR_GENERIC,
    ROLE_WORDS,
    TITLE_MODIFIERS,
    TITLE_WORDS,
    TITLE_WORDS_BEFORE_OF,
)
from dataflow.core.offline.runs import Run
from dataflow.core.offline.types import (
    ORGANIZATION,
    has_evidence,
    is_person_like,
    is_person_shaped,
    structural_type,
)


def _title_flags(lows: list[str]) -> list[bool]:
    """Which words are titles: "Dr", "Councillor", "Head" before "of", and modifiers before
    a title ("Chief Financial Officer"), but not "Technology" in "Institute of Technology"."""
    flags = [False] * len(lows)
    for index in range(len(lows) - 1, -1, -1):
        low = lows[index].rstrip(".")
        following = lows[index + 1] if index + 1 < len(lows) else ""
        flags[index] = (
            low in TITLE_WORDS
            or (low in TITLE_WORDS_BEFORE_OF and following == "of")
            or (low in TITLE_MODIFIERS and index + 1 < len(lows) and flags[index + 1])
        )
    return flags


def _split_of(piece: Run) -> list[tuple[Run, bool]]:
    """Cut "X of Y" where X is a person's name ("Lena Sorvik of Greyholt Institute"),
    ends in a legal form ("Corvane Ltd of Hollin Quay") or is a named event
    ("Members' Assembly of Acme Cooperative"); the flag marks a person's name."""
    for index in range(1, len(piece) - 1):
        if piece[index][0] != "of":
            continue
        left = [w for w, _, _ in piece[:index]]
        lows = [w.lower() for w in left]
        flags = _title_flags(lows)
        titles = 0
        while titles < len(left) and flags[titles]:
            titles += 1
        person = is_person_shaped(left[titles:])
        right = piece[index + 1 :]
        if (
            person
            or (len(left) >= 2 and lows[-1].rstrip(".") in LEGAL_FORMS)
            or (
                len(left) >= 2
                and (lows[-1] in EVENT_SUFFIXES or lows[-1] in EVENT_SUFFIXES_WITH_YEAR)
                and structural_type([w.lower() for w, _, _ in right]) == ORGANIZATION
            )
        ):
            return [(piece[:index], person), (right, False)]
    return [(piece, False)]


def _cut_titles(piece: Run, person: bool) -> list[tuple[Run, bool]]:
    """Cut a leading title off a name; the flag marks the name after it as a person."""
    flags = _title_flags([w.lower() for w, _, _ in piece])
    if True not in flags:
        if (
            len(piece) > 1
            and piece[0][0].lower() in OCCUPATIONS
            and is_person_like([w for w, _, _ in piece[1:]])
        ):
            return [(piece[1:], True)]  # "Novelist Ruth Caddick", "Pilot Marcus Reyes"
        return [(piece, person)]
    first = flags.index(True)
    after = first
    while after < len(piece) and flags[after]:
        after += 1
    rest = piece[after:]
    rest_words = [w for w, _, _ in rest]
    if rest and rest_words[0].lower() in CONNECTORS:
        return [(piece[:first], False), (rest, False)]
    if not rest or is_person_like(rest_words):
        return [(piece[:first], False), (rest, True)]
    return [(piece, person)]


def split_run(run: Run, at_sentence_start: bool, mid_caps: set[str]) -> list[tuple[Run, bool]]:
    """Cut a run into name spans; the flag marks a span that is a person's name."""
    if (
        at_sentence_start
        and len(run) > 1
        and run[0][0].lower() not in ROLE_WORDS
        and run[1][0].lower() in CONNECTORS
        and not has_evidence(run[0][0], mid_caps)
    ):
        run = run[1:]
    if (
        at_sentence_start
        and len(run) > 1
        and run[0][0].lower() in IMPERATIVES_BEFORE_NAMES
        and not has_evidence(run[0][0], mid_caps)
    ):
        run = run[1:]  # "Tell Sarah", "Ask Adam Smith": an imperative before a name
    lows = [w.lower() for w, _, _ in run]
    pieces: list[Run] = [run]
    if CONDITIONAL_CONNECTORS.intersection(lows):
        # "Food and Drug Administration" is one name; "Alice and Bob", "NASA and
        # the ESA" and "University of X and Y Institute" are two.
        whole_has_cue = structural_type(lows) is not None
        pieces = []
        piece: Run = []
        for index, (item, low) in enumerate(zip(run, lows, strict=True)):
            if low in CONDITIONAL_CONNECTORS and piece:
                following = lows[index + 1] if index + 1 < len(lows) else ""
                if (
                    not whole_has_cue
                    or following in CONNECTORS
                    or (len(piece) == 1 and piece[0][0].isupper())
                    or structural_type([w.lower() for w, _, _ in piece]) is not None
                ):
                    pieces.append(piece)
                    piece = []
                    continue
            piece.append(item)
        pieces.append(piece)
    spans: list[tuple[Run, bool]] = []
    for piece in pieces:
        for part, person in _split_of(piece) if "of" in lows else [(piece, False)]:
            spans.extend(_cut_titles(part, person))
    return spans


def trim_span(span: Run) -> Run:
    """Drop connectors at both ends, leading months or weekdays ("Monday Acme Corp") and a
    leading two-word greeting ("Good Morning Adam")."""
    start, end = 0, len(span)
    if end > 2 and (span[0][0].lower(), span[1][0].lower()) in GREETING_PAIRS:
        start = 2
    while start < end and (
        span[start][0].lower() in CONNECTORS
        or (span[start][0].lower() in MONTHS_AND_DAYS and start + 1 < end)
    ):
        start += 1
    while end > start and span[end - 1][0].lower() in CONNECTORS:
        end -= 1
    return span[start:end]


def is_generic_phrase(words: list[str]) -> bool:
    """A lone cue or role word ("Members", "Assembly"), or a phrase of such words with
    a role or generic word in it ("Head of Projects", "Board of Directors")."""
    lows = [w.lower().rstrip(APOSTROPHES) for w in words if w.lower() not in CONNECTORS]
    if len(lows) == 1:
        return lows[0] in LONE_NON_NAMES
    return all(low in LONE_NON_NAMES for low in lows) and any(
        low in ROLE_OR_GENERIC for low in lows
    )
