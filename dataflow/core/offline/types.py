"""Entity types from cues, for the offline extractor (step 3 of extractor.py).

Strongest cue first: the name's own words (suffix or head word, gazetteer), a
title before the name, a known given name (the lexicon's, or a transcript
speaker's: "Zorbania" once "Zorbania Quillfeather:" has spoken), an ALLCAPS acronym, then context
around the name ("based in X", "X, a <role>", "X said", a he/she ahead).
Each rule returns a confidence so that, across mentions, the strongest cue
wins. The shape tests here (person-like, person-shaped) are also what the span
cutting and alias resolution consult, so they live with the typing rules.
"""

from __future__ import annotations

from itertools import pairwise

from dataflow.core.offline.lexicon import (
    AGENT_VERBS,
    APOSTROPHES,
    APPOSITION_FILLERS,
    EVENT_HEADS,
    EVENT_SUFFIXES,
    EVENT_SUFFIXES_WITH_YEAR,
    FIRST_NAMES,
    FUNCTION_WORDS,
    GAZETTEER,
    GEO_APPOSITION_NOUNS,
    GEO_HEADS,
    GEO_NOUNS,
    GEO_PREPOSITIONS,
    GEO_SUFFIXES,
    LEGAL_FORMS,
    LOCATIVE_VERBS,
    NOT_GIVEN_NAMES,
    NOT_IN_PERSON_NAMES,
    ORG_HEADS,
    ORG_SUFFIXES,
    PASSIVE_FOLLOWERS,
    PASSIVE_PRONE_VERBS,
    PERSON_ROLES,
    PERSON_VERB_PAIRS,
    PERSON_VERBS,
    ROLES_AFTER_NAME,
    ROMAN_NUMERALS,
    SITES,
    SPEECH_VERBS,
    THING_OR_GENERIC,
)

ORGANIZATION, PERSON, GEO, EVENT, CATEGORY = "organization", "person", "geo", "event", "category"


def is_year(word: str) -> bool:
    """Whether a token is a plausible year ("2021"), which may be part of an event's name."""
    return len(word) == 4 and word.isdigit() and "1000" <= word <= "2199"


def structural_type(lows: list[str]) -> str | None:
    """Type from the span's own words: gazetteer, suffix or head word."""
    if " ".join(lows) in GAZETTEER:
        return GEO  # before suffixes: "West Bank" is a place
    words_ = [w for w in lows if not w.isdigit() and w not in ROMAN_NUMERALS] or lows
    last, first = words_[-1].rstrip("."), words_[0]
    if last in EVENT_SUFFIXES_WITH_YEAR and len(words_) < len(lows) and any(map(is_year, lows)):
        return EVENT  # "2023 Members' Assembly"
    if last in ORG_SUFFIXES:
        return ORGANIZATION
    if last in GEO_SUFFIXES:
        return GEO
    if last in EVENT_SUFFIXES:
        return EVENT
    if len(words_) > 1:
        if first in ORG_HEADS:
            return ORGANIZATION
        if first in GEO_HEADS:
            return GEO
        if first in EVENT_HEADS:
            return EVENT
        for word, following in pairwise(words_):
            if following == "of" and word in ORG_HEADS:
                return ORGANIZATION  # "Maria Curie Institute of Oncology"
    return None


def is_person_like(words: list[str]) -> bool:
    """Loosely a name a person could have: no digits, no acronym, no cue word anywhere
    ("Saltglass Programme", "Tallis Island Microgrid" are not)."""
    if not 1 <= len(words) <= 4:
        return False
    for word in words:
        if not word[0].isupper() or any(c.isdigit() for c in word):
            return False
        if len(word) > 2 and word.isupper():
            return False
    lows = [w.lower() for w in words]
    return THING_OR_GENERIC.isdisjoint(lows) and structural_type(lows) is None


def _is_given_name_shaped(word: str) -> bool:
    """ "Imogen", "Jean-Luc": capitalised letters, not a known non-name modifier."""
    low = word.lower()
    if len(word) < 2 or low in NOT_GIVEN_NAMES or low.endswith(("ese", "ish")):
        return False
    return all(
        part[:1].isupper() and part[1:].islower() and part.isalpha() for part in word.split("-")
    )


def is_person_shaped(words: list[str] | tuple[str, ...]) -> bool:
    """Whether a name could be a person's: 2-3 capitalised words, no cue, not a place."""
    if not 2 <= len(words) <= 3 or not _is_given_name_shaped(words[0]):
        return False
    for word in words[1:]:
        letters = word.replace("-", "").replace("'", "").replace("’", "")
        if not word[0].isupper() or not letters.isalpha() or (len(word) > 2 and word.isupper()):
            return False
    lows = [w.lower().rstrip(APOSTROPHES) for w in words]
    if any(low in NOT_IN_PERSON_NAMES for low in lows):
        return False
    return " ".join(lows) not in GAZETTEER


def has_evidence(word: str, mid_caps: set[str]) -> bool:
    """Whether a sentence-initial capitalised word is a name, not just capitalised."""
    low = word.lower()
    return (
        word in mid_caps
        or not word[1:].islower()
        or low in FIRST_NAMES
        or low in GAZETTEER
        or low in ORG_HEADS
        or low in GEO_HEADS
        or low in EVENT_HEADS
    )


def _role_follows(tokens: list[str], index: int) -> bool:
    """Whether a person's role comes within a few words ("a former ferry engineer",
    "the cooperative's General Manager"), before any punctuation or clause word."""
    for token in tokens[index : index + 6]:
        low = token.lower()
        if low in ROLES_AFTER_NAME:
            return True
        if not low[0].isalnum() or (low in FUNCTION_WORDS and low not in APPOSITION_FILLERS):
            return False
    return False


def _person_context(tokens: list[str], start: int, end: int, pronoun_ahead: bool) -> int:
    """Confidence (2 strong, 1 weak, 0 none) that the context makes a name a person's."""
    prev = tokens[start - 1].lower() if start > 0 else ""
    prev2 = tokens[start - 2].lower() if start > 1 else ""
    after = tokens[end].lower() if end < len(tokens) else ""
    after2 = tokens[end + 1].lower() if end + 1 < len(tokens) else ""
    if prev == "," and prev2 in PERSON_ROLES:
        return 2  # "its director, Imogen Hale"
    if after in (",", "is", "was", "as") and _role_follows(tokens, end + 1):
        return 2  # "Maren Okafor, a former ferry engineer"; "X is Head of Projects"
    if (after, after2) in PERSON_VERB_PAIRS:
        return 1
    if after in PERSON_VERBS and not (after in PASSIVE_PRONE_VERBS and after2 in PASSIVE_FOLLOWERS):
        return 1
    if prev == "by" and prev2 in AGENT_VERBS:
        return 1  # "led by Jonah Pell"
    return 1 if pronoun_ahead else 0


def type_span(
    words: list[str],
    tokens: list[str],
    start: int,
    end: int,
    titled: bool,
    pronoun_ahead: bool,
    given: frozenset[str] = frozenset(),
) -> tuple[str, int]:
    """Return (type, confidence): 3 own words or title, 2 lists, 1 context, 0 default.

    `given` adds given names known from the text itself (a transcript's speakers)."""
    lows = [w.lower() for w in words]
    structural = structural_type(lows)
    if structural is not None:
        return structural, 3
    if end + 1 < len(tokens) and tokens[end] == "," and tokens[end + 1].lower() in LEGAL_FORMS:
        return ORGANIZATION, 3  # "Tesla, Inc."
    person_like = is_person_like(words)
    if titled and person_like:
        return PERSON, 3
    prev = tokens[start - 1].lower() if start > 0 else ""
    prev2 = tokens[start - 2].lower() if start > 1 else ""
    after = tokens[end].lower() if end < len(tokens) else ""
    after2 = tokens[end + 1].lower() if end + 1 < len(tokens) else ""
    if person_like and 2 <= len(words) <= 3 and (lows[0] in FIRST_NAMES or lows[0] in given):
        return PERSON, 2
    if len(words) == 1 and 2 <= len(words[0]) <= 6 and words[0].isalpha() and words[0].isupper():
        return ORGANIZATION, 2
    if person_like and (prev in PERSON_ROLES or (after == "," and after2 in ("who", "whose"))):
        return PERSON, 2
    if prev in ("in", "at", "near") and (
        prev2 in LOCATIVE_VERBS or prev2 in EVENT_SUFFIXES or prev2 in SITES or prev2 in LEGAL_FORMS
    ):
        return GEO, 2
    if person_like and (
        (prev == "of" and prev2 in GEO_NOUNS)  # "residents of Skerrow"
        or (prev == "," and prev2 in GEO_APPOSITION_NOUNS)  # "its only village, Skerrow"
    ):
        return GEO, 2
    if person_like and len(words) >= 2 and len(words[0]) == 2 and words[0][1] == ".":
        return PERSON, 2  # "C. S. Lewis"
    if is_person_shaped(words):
        confidence = _person_context(tokens, start, end, pronoun_ahead)
        if confidence:
            return PERSON, confidence
    if person_like and len(words) >= 2 and after in SPEECH_VERBS:
        return PERSON, 1
    if prev in GEO_PREPOSITIONS and person_like and len(words) <= 3:
        return GEO, 1
    if prev in ("joined", "acquired", "founded", "co-founded", "cofounded"):
        return ORGANIZATION, 1
    if len(words) == 1 and (lows[0] in FIRST_NAMES or lows[0] in given):
        return PERSON, 1
    return CATEGORY, 0


def single_word_person_cue(tokens: list[str], start: int, end: int, pronoun_ahead: bool) -> bool:
    """Whether a bare word is used like a person's surname: "Hale trained as", "Reyland
    grew up", "Okoye said", not "Kafka topic" or "from Edge"."""
    if _person_context(tokens, start, end, pronoun_ahead):
        return True
    after = tokens[end] if end < len(tokens) else ""
    return after.endswith("ed") and after.islower()
