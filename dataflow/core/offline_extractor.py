"""Entity and relation extraction with no network, no model and no LLM.

This is the embedded default (`kgstream run` works on a laptop with nothing
else installed) and the extractor the property tests drive, so it is pure,
deterministic and fast (a single regex tokenisation plus one pass over the
tokens; see bench/offline_extractor_speed.py). Its word lists live in
dataflow/core/offline_lexicon.py.

What it finds, in order:

1. Sentences: blank lines, markdown headings, bullets and short title-like
   lines end a segment; inside a segment ".", "!" and "?" end a sentence
   unless they follow an initial ("J."), a title ("Dr.", "St."), "e.g."/"i.e.",
   or a company/abbreviation form ("Inc.", "U.S.") not followed by a typical
   sentence starter. Decimals never split (no whitespace after the dot).
2. Entities: maximal runs of capitalised, ALLCAPS or CamelCase tokens, joined
   by lowercase connectors ("of", "de", "van", "the", "&"; "and"/"for"/"on"
   only when the whole span carries an organisation/place/event cue, so
   "Alice and Bob" stays two people) and plural possessives ("Members'
   Assembly"), plus small numbers ("Apollo 11"), years next to an event word
   ("Expo 2020", "the 2021 Kesh Valley Flood": the year is part of the name)
   and "I" after an event word or given name ("World War I"). Spans over 8
   words (title-case lines, comma-less lists), code identifiers (with "_") and
   ALLCAPS headlines are dropped. A sentence-initial word, and a single word in
   a title-case heading, is kept only with evidence (capitalised mid-sentence
   outside headings, a known word, an acronym, or a short form of a full name
   in the same text). A lone cue, role or generic word ("Members", "Treasurer",
   "Assembly", "Projects") is not a name. Titles ("Dr.", "CEO", "Prime
   Minister", "Councillor", "Head of") are cut off and mark the following name
   as a person; "X of Y" is cut in two after a person's name ("Lena Sorvik of
   Greyholt Institute"), a legal form ("Acme Ltd of Leeds") or a named event.
   Possessive "'s" is stripped; months, weekdays and single letters dropped.
3. Types, strongest cue first: suffix/head words ("Acme Corp", "University of
   X", "River Ardle", "Paris Summit"), a small gazetteer, a title before the
   name, a known given name, an ALLCAPS acronym (organization), context
   ("based in X" -> geo; for a 2-3 word name shaped like a person's with no
   cue word: "X, a <role>", "<role> X", "X is the <role>", "X said/joined",
   "led by X", a he/she after a sentence-initial X, or the bare surname
   recurring alone -> person); otherwise "category". Across mentions the
   strongest cue wins (ties: first seen). A derived type that is not in
   `entity_types` becomes "category" if configured, else the last configured
   type; configured spelling (e.g. "PERSON") is kept.
4. Relations: two entities in one sentence. Keywords are up to
   `max_relation_keywords` content words between them (else from the
   sentence, else "co-occurrence"); strength counts the sentences the pair
   shares; the description is the first such sentence.

A bare surname or given name ("Turing", "Alan") of exactly one full person
name in the text ("Alan Turing"), a bare company or programme name ("Acme")
next to its full form ("Acme Corp", "Acme Programme"), and an event named
without its year next to the one dated form, resolve to the full name; an
ambiguous one ("Curie" with Marie and Pierre Curie) stays as written.
Precision is preferred over recall throughout; entity descriptions are the
first sentence that mentions the entity. Names are per chunk: short forms in
other chunks are not merged here.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from itertools import pairwise

from dataflow.core.extraction import ExtractedEntity, ExtractedRelation, Extraction
from dataflow.core.naming import clean_entity_name, entity_key
from dataflow.core.offline_lexicon import (
    AGENT_VERBS,
    APPOSITION_FILLERS,
    CONDITIONAL_CONNECTORS,
    CONNECTORS,
    DEMONYMS,
    EVENT_HEADS,
    EVENT_SUFFIXES,
    EVENT_SUFFIXES_WITH_YEAR,
    FIRST_NAMES,
    FUNCTION_WORDS,
    GAZETTEER,
    GENERIC_WORDS,
    GEO_HEADS,
    GEO_NOUNS,
    GEO_PREPOSITIONS,
    GEO_SUFFIXES,
    KEYWORD_STOPWORDS,
    LEGAL_FORMS,
    LOCATIVE_VERBS,
    MAYBE_ABBREVIATIONS,
    MONTHS_AND_DAYS,
    NAME_ABBREVIATIONS,
    NO_BREAK_ABBREVIATIONS,
    NOT_GIVEN_NAMES,
    OCCUPATIONS,
    ORG_COMPATIBLE_ROLES,
    ORG_HEADS,
    ORG_SUFFIXES,
    PASSIVE_FOLLOWERS,
    PASSIVE_PRONE_VERBS,
    PERSON_PRONOUNS,
    PERSON_ROLES,
    PERSON_VERB_PAIRS,
    PERSON_VERBS,
    SITES,
    SPEECH_VERBS,
    STANDALONE_CUE_NAMES,
    THING_WORDS,
    TITLE_MODIFIERS,
    TITLE_WORDS,
    TITLE_WORDS_BEFORE_OF,
    words,
)

ORGANIZATION, PERSON, GEO, EVENT, CATEGORY = "organization", "person", "geo", "event", "category"


@dataclass(frozen=True)
class OfflineExtractorOptions:
    """How the offline extractor types and connects what it finds.

    entity_types: the types the caller accepts (LightRAG's prompt list);
        derived types outside it map to "category", else to the last entry.
    max_entities_per_sentence: only the first N distinct entities of a
        sentence form relations (N*(N-1)/2 pairs at most), so one long list
        sentence cannot blow up quadratically. All entities are still kept.
    min_name_chars: shorter names are dropped.
    description_max_chars: descriptions are trimmed at a word boundary to
        this many characters (plus an ellipsis).
    max_relation_keywords: keywords kept per relation.
    """

    entity_types: tuple[str, ...] = (ORGANIZATION, PERSON, GEO, EVENT, CATEGORY)
    max_entities_per_sentence: int = 8
    min_name_chars: int = 2
    description_max_chars: int = 300
    max_relation_keywords: int = 3

    def __post_init__(self) -> None:
        if not self.entity_types or any(not t.strip() for t in self.entity_types):
            raise ValueError(
                f"entity_types must be a non-empty tuple of non-blank names; "
                f"got {self.entity_types!r}"
            )
        for field_name, value, low in (
            ("max_entities_per_sentence", self.max_entities_per_sentence, 1),
            ("min_name_chars", self.min_name_chars, 1),
            ("description_max_chars", self.description_max_chars, 20),
            ("max_relation_keywords", self.max_relation_keywords, 1),
        ):
            if value < low:
                raise ValueError(f"{field_name} must be >= {low}; got {value!r}")


_OPENERS = "\"'“‘([{«"
_TERMINAL = re.compile(r"([.!?…]+)[\"'”’)\]»]*\s+")
_BULLET = re.compile(r"(?:[-*+•–—]|\(?\d{1,3}[.)]|\(?[a-z]\))\s+")
_RULE_LINE = re.compile(r"[\W_]+")
_TOKEN = re.compile(r"\w+(?:['’\-.&/]\w+)*|\S")
_CONTRACTIONS = ("'t", "’t", "'m", "’m", "'re", "’re", "'ve", "’ve", "'ll", "’ll", "'d", "’d")
_APOSTROPHES = "'’"

_ROMAN_NUMERALS = words("i ii iii iv v vi vii viii ix")
_MAX_NAME_WORDS = 8
_OTHER, _PROPER, _POSSESSIVE, _CONNECTOR, _DOT, _NUMBER = range(6)

_CUE_WORDS = (
    ORG_SUFFIXES
    | ORG_HEADS
    | GEO_SUFFIXES
    | GEO_HEADS
    | EVENT_SUFFIXES
    | EVENT_SUFFIXES_WITH_YEAR
    | EVENT_HEADS
    | THING_WORDS
)
_ROLE_WORDS = TITLE_WORDS | TITLE_MODIFIERS | TITLE_WORDS_BEFORE_OF | PERSON_ROLES
# Not a name on its own ("Members", "Treasurer", "Assembly", "Swedish").
_LONE_NON_NAMES = (
    _CUE_WORDS | _ROLE_WORDS | GENERIC_WORDS | DEMONYMS | {d + "s" for d in DEMONYMS}
) - STANDALONE_CUE_NAMES
_ROLE_OR_GENERIC = _ROLE_WORDS | GENERIC_WORDS
# Never a word of a person's name.
_NOT_IN_PERSON_NAMES = _CUE_WORDS | _ROLE_WORDS | GENERIC_WORDS | GAZETTEER | FUNCTION_WORDS
_THING_OR_GENERIC = _CUE_WORDS | GENERIC_WORDS
# Roles that, after a name ("X, a former engineer"), make it a person.
_ROLES_AFTER_NAME = PERSON_ROLES - ORG_COMPATIBLE_ROLES
# Tails that a bare first word may stand for ("Acme" for "Acme Corp").
_SHORTENABLE_TAILS = LEGAL_FORMS | THING_WORDS
_PRONOUN_FORMS = PERSON_PRONOUNS | {p.capitalize() for p in PERSON_PRONOUNS}
_GEO_APPOSITION_NOUNS = words("village town city capital hamlet island")

# A run is a list of (word, first token index, end token index); a dot after an
# initial or an abbreviation is merged into its word.
_Run = list[tuple[str, int, int]]


def split_sentences(text: str) -> tuple[str, ...]:
    """Return the sentences of `text`, whitespace-normalised, in order."""
    sentences: list[str] = []
    for segment in _split_segments(text):
        _split_segment(segment, sentences)
    return tuple(sentences)


def _split_segments(text: str) -> list[str]:
    """Join wrapped lines; break at blank lines, headings, bullets and title-like lines."""
    segments: list[str] = []
    current: list[str] = []
    title_like = False
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if not line or _RULE_LINE.fullmatch(line):
            if current:
                segments.append(" ".join(current))
                current = []
            continue
        bullet = _BULLET.match(line)
        if line[0] == "#" or bullet or (current and title_like and line[0].isupper()):
            if current:
                segments.append(" ".join(current))
                current = []
            line = line.lstrip("#").strip() if line[0] == "#" else line
            line = line[bullet.end() :] if bullet else line
            if not line:
                continue
        current.append(line)
        title_like = line[-1] not in ".!?:;,-" and line.count(" ") < 8
    if current:
        segments.append(" ".join(current))
    return segments


def _split_segment(segment: str, out: list[str]) -> None:
    start = 0
    for match in _TERMINAL.finditer(segment):
        if _is_boundary(segment, match.start(), match.group(1), match.end()):
            piece = segment[start : match.end()].strip()
            if piece:
                out.append(piece)
            start = match.end()
    rest = segment[start:].strip()
    if rest:
        out.append(rest)


def _is_boundary(segment: str, punct_at: int, punct: str, next_at: int) -> bool:
    head = segment[next_at] if next_at < len(segment) else ""
    if not (head.isupper() or head.isdigit() or (head and head in _OPENERS)):
        return False
    if punct != ".":
        return True
    previous = segment[segment.rfind(" ", 0, punct_at) + 1 : punct_at].lstrip(_OPENERS)
    low = previous.lower()
    if (len(previous) == 1 and previous.isupper()) or low in NO_BREAK_ABBREVIATIONS:
        return False
    if low in MAYBE_ABBREVIATIONS or ("." in previous and len(previous) <= 5):
        end = segment.find(" ", next_at)
        following = segment[next_at : end if end >= 0 else len(segment)]
        return following.strip(_OPENERS + ",;:").lower() in FUNCTION_WORDS
    return True


def _classify(token: str) -> int:
    head = token[0]
    if not head.isalnum() or "_" in token:  # punctuation, or a code identifier
        return _DOT if token == "." else _CONNECTOR if token == "&" else _OTHER
    if head.isdigit():
        if token.isdigit():
            return _NUMBER if len(token) <= 4 else _OTHER
        return _PROPER if token.isalnum() and not token.islower() else _OTHER
    low = token.lower()
    if low.endswith(_CONTRACTIONS):
        return _OTHER
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


def _is_year(word: str) -> bool:
    return len(word) == 4 and word.isdigit() and "1000" <= word <= "2199"


def _is_title_case(tokens: list[str]) -> bool:
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


def _find_runs(tokens: list[str], kinds: dict[str, int], mid_caps: set[str]) -> list[_Run]:
    """Return the maximal proper-noun runs of one sentence (one pass over the tokens)."""
    runs: list[_Run] = []
    run: _Run = []
    pending: _Run = []
    for index, token in enumerate(tokens):
        kind = kinds.get(token)
        if kind is None:
            kind = kinds[token] = _classify(token)
        if kind in (_PROPER, _POSSESSIVE):
            if index and tokens[index - 1][0].isalnum():
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
        elif token in _APOSTROPHES:
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
            if last in EVENT_SUFFIXES or last in FIRST_NAMES:  # World War I, Elizabeth I
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


def _structural_type(lows: list[str]) -> str | None:
    """Type from the span's own words: gazetteer, suffix or head word."""
    if " ".join(lows) in GAZETTEER:
        return GEO  # before suffixes: "West Bank" is a place
    words_ = [w for w in lows if not w.isdigit() and w not in _ROMAN_NUMERALS] or lows
    last, first = words_[-1].rstrip("."), words_[0]
    if last in EVENT_SUFFIXES_WITH_YEAR and len(words_) < len(lows) and any(map(_is_year, lows)):
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


def _is_person_like(words: list[str]) -> bool:
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
    return _THING_OR_GENERIC.isdisjoint(lows) and _structural_type(lows) is None


def _is_given_name_shaped(word: str) -> bool:
    """ "Imogen", "Jean-Luc": capitalised letters, not a known non-name modifier."""
    low = word.lower()
    if len(word) < 2 or low in NOT_GIVEN_NAMES or low.endswith(("ese", "ish")):
        return False
    return all(
        part[:1].isupper() and part[1:].islower() and part.isalpha() for part in word.split("-")
    )


def _is_person_shaped(words: list[str] | tuple[str, ...]) -> bool:
    """Whether a name could be a person's: 2-3 capitalised words, no cue, not a place."""
    if not 2 <= len(words) <= 3 or not _is_given_name_shaped(words[0]):
        return False
    for word in words[1:]:
        letters = word.replace("-", "").replace("'", "").replace("’", "")
        if not word[0].isupper() or not letters.isalpha() or (len(word) > 2 and word.isupper()):
            return False
    lows = [w.lower().rstrip(_APOSTROPHES) for w in words]
    if any(low in _NOT_IN_PERSON_NAMES for low in lows):
        return False
    return " ".join(lows) not in GAZETTEER


def _has_evidence(word: str, mid_caps: set[str]) -> bool:
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


@dataclass(frozen=True)
class _Mention:
    sentence: int
    start: int
    end: int
    name: str
    key: str
    words: tuple[str, ...]
    type: str
    confidence: int
    needs_evidence: bool
    person_shaped: bool  # 2-3 words that could be a person's name, typed "category"
    person_cue: bool  # one word in a person's context ("Hale trained as ...")


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


def _split_of(piece: _Run) -> list[tuple[_Run, bool]]:
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
        person = _is_person_shaped(left[titles:])
        right = piece[index + 1 :]
        if (
            person
            or (len(left) >= 2 and lows[-1].rstrip(".") in LEGAL_FORMS)
            or (
                len(left) >= 2
                and (lows[-1] in EVENT_SUFFIXES or lows[-1] in EVENT_SUFFIXES_WITH_YEAR)
                and _structural_type([w.lower() for w, _, _ in right]) == ORGANIZATION
            )
        ):
            return [(piece[:index], person), (right, False)]
    return [(piece, False)]


def _cut_titles(piece: _Run, person: bool) -> list[tuple[_Run, bool]]:
    """Cut a leading title off a name; the flag marks the name after it as a person."""
    flags = _title_flags([w.lower() for w, _, _ in piece])
    if True not in flags:
        if (
            len(piece) > 1
            and piece[0][0].lower() in OCCUPATIONS
            and _is_person_like([w for w, _, _ in piece[1:]])
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
    if not rest or _is_person_like(rest_words):
        return [(piece[:first], False), (rest, True)]
    return [(piece, person)]


def _split_run(run: _Run, at_sentence_start: bool, mid_caps: set[str]) -> list[tuple[_Run, bool]]:
    """Cut a run into name spans; the flag marks a span that is a person's name."""
    if (
        at_sentence_start
        and len(run) > 1
        and run[0][0].lower() not in _ROLE_WORDS
        and run[1][0].lower() in CONNECTORS
        and not _has_evidence(run[0][0], mid_caps)
    ):
        run = run[1:]
    lows = [w.lower() for w, _, _ in run]
    pieces: list[_Run] = [run]
    if CONDITIONAL_CONNECTORS.intersection(lows):
        # "Food and Drug Administration" is one name; "Alice and Bob", "NASA and
        # the ESA" and "University of X and Y Institute" are two.
        whole_has_cue = _structural_type(lows) is not None
        pieces = []
        piece: _Run = []
        for index, (item, low) in enumerate(zip(run, lows, strict=True)):
            if low in CONDITIONAL_CONNECTORS and piece:
                following = lows[index + 1] if index + 1 < len(lows) else ""
                if (
                    not whole_has_cue
                    or following in CONNECTORS
                    or (len(piece) == 1 and piece[0][0].isupper())
                    or _structural_type([w.lower() for w, _, _ in piece]) is not None
                ):
                    pieces.append(piece)
                    piece = []
                    continue
            piece.append(item)
        pieces.append(piece)
    spans: list[tuple[_Run, bool]] = []
    for piece in pieces:
        for part, person in _split_of(piece) if "of" in lows else [(piece, False)]:
            spans.extend(_cut_titles(part, person))
    return spans


def _trim_span(span: _Run) -> _Run:
    start, end = 0, len(span)
    while start < end and (
        span[start][0].lower() in CONNECTORS
        or (span[start][0].lower() in MONTHS_AND_DAYS and start + 1 < end)
    ):
        start += 1
    while end > start and span[end - 1][0].lower() in CONNECTORS:
        end -= 1
    return span[start:end]


def _is_generic_phrase(words: list[str]) -> bool:
    """A lone cue or role word ("Members", "Assembly"), or a phrase of such words with
    a role or generic word in it ("Head of Projects", "Board of Directors")."""
    lows = [w.lower().rstrip(_APOSTROPHES) for w in words if w.lower() not in CONNECTORS]
    if len(lows) == 1:
        return lows[0] in _LONE_NON_NAMES
    return all(low in _LONE_NON_NAMES for low in lows) and any(
        low in _ROLE_OR_GENERIC for low in lows
    )


def _role_follows(tokens: list[str], index: int) -> bool:
    """Whether a person's role comes within a few words ("a former ferry engineer",
    "the cooperative's General Manager"), before any punctuation or clause word."""
    for token in tokens[index : index + 6]:
        low = token.lower()
        if low in _ROLES_AFTER_NAME:
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


def _type_span(
    words: list[str], tokens: list[str], start: int, end: int, titled: bool, pronoun_ahead: bool
) -> tuple[str, int]:
    """Return (type, confidence): 3 own words or title, 2 lists, 1 context, 0 default."""
    lows = [w.lower() for w in words]
    structural = _structural_type(lows)
    if structural is not None:
        return structural, 3
    if end + 1 < len(tokens) and tokens[end] == "," and tokens[end + 1].lower() in LEGAL_FORMS:
        return ORGANIZATION, 3  # "Tesla, Inc."
    person_like = _is_person_like(words)
    if titled and person_like:
        return PERSON, 3
    prev = tokens[start - 1].lower() if start > 0 else ""
    prev2 = tokens[start - 2].lower() if start > 1 else ""
    after = tokens[end].lower() if end < len(tokens) else ""
    after2 = tokens[end + 1].lower() if end + 1 < len(tokens) else ""
    if person_like and 2 <= len(words) <= 3 and lows[0] in FIRST_NAMES:
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
        or (prev == "," and prev2 in _GEO_APPOSITION_NOUNS)  # "its only village, Skerrow"
    ):
        return GEO, 2
    if person_like and len(words) >= 2 and len(words[0]) == 2 and words[0][1] == ".":
        return PERSON, 2  # "C. S. Lewis"
    if _is_person_shaped(words):
        confidence = _person_context(tokens, start, end, pronoun_ahead)
        if confidence:
            return PERSON, confidence
    if person_like and len(words) >= 2 and after in SPEECH_VERBS:
        return PERSON, 1
    if prev in GEO_PREPOSITIONS and person_like and len(words) <= 3:
        return GEO, 1
    if prev in ("joined", "acquired", "founded", "co-founded", "cofounded"):
        return ORGANIZATION, 1
    if len(words) == 1 and lows[0] in FIRST_NAMES:
        return PERSON, 1
    return CATEGORY, 0


def _single_word_person_cue(tokens: list[str], start: int, end: int, pronoun_ahead: bool) -> bool:
    """Whether a bare word is used like a person's surname: "Hale trained as", "Reyland
    grew up", "Okoye said", not "Kafka topic" or "from Edge"."""
    if _person_context(tokens, start, end, pronoun_ahead):
        return True
    after = tokens[end] if end < len(tokens) else ""
    return after.endswith("ed") and after.islower()


def _last_pronoun(tokens: list[str]) -> int:
    """Index of the last he/she/his/her... in a sentence, or -1."""
    for index in range(len(tokens) - 1, -1, -1):
        if tokens[index] in _PRONOUN_FORMS:
            return index
    return -1


def _find_mentions(
    sentences: tuple[str, ...], min_chars: int
) -> tuple[list[_Mention], list[list[str]]]:
    kinds: dict[str, int] = {}
    mid_caps: set[str] = set()
    names: dict[str, tuple[str, str]] = {}
    tokenised: list[tuple[list[str], list[_Run], bool]] = []
    for sentence in sentences:
        tokens = _TOKEN.findall(sentence)
        heading = _is_title_case(tokens)
        # Capitals in a title-case heading are no evidence of a name.
        runs = _find_runs(tokens, kinds, set() if heading else mid_caps)
        if sum(len(run) for run in runs) >= 4:
            shouting = sum(1 for t in tokens if len(t) > 1 and t.isupper())
            if shouting >= 4 and shouting * 5 > len(tokens) * 3:
                runs = []  # an ALLCAPS headline: every word would look like a name
        tokenised.append((tokens, runs, heading))
    pronouns = [_last_pronoun(tokens) for tokens, _, _ in tokenised]
    mentions: list[_Mention] = []
    for number, (tokens, runs, heading) in enumerate(tokenised):
        first_word = next((i for i, t in enumerate(tokens) if t[0].isalnum()), -1)
        next_has_pronoun = number + 1 < len(pronouns) and pronouns[number + 1] >= 0
        for run in runs:
            initial = run[0][1] == first_word
            for piece, titled in _split_run(run, initial, mid_caps):
                span = _trim_span(piece)
                if not span:
                    continue
                if len(span) > _MAX_NAME_WORDS:
                    continue  # a title-case line or a list without commas, not a name
                words = [w for w, _, _ in span]
                if len(words[-1]) == 2 and words[-1][1] == ".":
                    words[-1] = words[-1][0]  # "Plan B." at a sentence end is "Plan B"
                start, end = span[0][1], span[-1][2]
                if start > 0 and _is_year(tokens[start - 1]):
                    lows = [w.lower() for w in words]
                    if lows[-1] in EVENT_SUFFIXES_WITH_YEAR or _structural_type(lows) == EVENT:
                        words.insert(0, tokens[start - 1])  # "the 2021 Kesh Valley Flood"
                        start -= 1
                if _is_generic_phrase(words):
                    continue
                joined = " ".join(words)
                named = names.get(joined)
                if named is None:
                    cleaned = clean_entity_name(joined)
                    named = names[joined] = (cleaned, entity_key(cleaned))
                name, key = named
                if len(name) < min_chars or not key or not any(c.isalpha() for c in name):
                    continue
                if len(words) == 1 and (
                    words[0].lower() in MONTHS_AND_DAYS or words[0].lower() in LEGAL_FORMS
                ):
                    continue
                pronoun_ahead = start == first_word and (
                    pronouns[number] >= end or next_has_pronoun
                )
                kind, confidence = _type_span(words, tokens, start, end, titled, pronoun_ahead)
                needs_evidence = (
                    (start == first_word or heading)
                    and len(words) == 1
                    and not titled
                    and confidence < 2
                    and not _has_evidence(words[0], mid_caps)
                )
                mentions.append(
                    _Mention(
                        number,
                        start,
                        end,
                        name,
                        key,
                        tuple(words),
                        kind,
                        confidence,
                        needs_evidence,
                        kind == CATEGORY and _is_person_shaped(words),
                        kind == CATEGORY
                        and len(words) == 1
                        and _single_word_person_cue(tokens, start, end, pronoun_ahead),
                    )
                )
    return mentions, [tokens for tokens, _, _ in tokenised]


def _resolve_aliases(mentions: list[_Mention]) -> tuple[dict[str, str], set[str]]:
    """Map a bare surname, given name, company name or undated event to the one full
    name it shortens; also return the person-shaped names that a recurring bare
    surname, used as a person's ("Hale trained as"), proves to be people."""
    best: dict[str, _Mention] = {}
    for mention in mentions:
        key = mention.key
        kept = best.get(key)
        if kept is None or mention.confidence > kept.confidence:
            best[key] = mention
    by_given: dict[str, set[str]] = {}
    by_surname: dict[str, set[str]] = {}
    by_company: dict[str, set[str]] = {}
    by_undated: dict[str, set[str]] = {}
    for key, mention in best.items():
        words = mention.words
        if len(words) < 2:
            continue
        if mention.type == PERSON or mention.person_shaped:
            by_surname.setdefault(words[-1].lower(), set()).add(key)
            if mention.type == PERSON:
                by_given.setdefault(words[0].lower(), set()).add(key)
        elif mention.type in (ORGANIZATION, CATEGORY) and all(
            w.lower() in _SHORTENABLE_TAILS for w in words[1:]
        ):
            by_company.setdefault(words[0].lower(), set()).add(key)
        elif mention.type == EVENT and _is_year(words[0]):
            by_undated.setdefault(entity_key(" ".join(words[1:])), set()).add(key)
    cued = {mention.key for mention in mentions if mention.person_cue}
    aliases: dict[str, str] = {}
    promoted: set[str] = set()
    for key, mention in best.items():
        if mention.type == EVENT and len(by_undated.get(key, ())) == 1:
            aliases[key] = next(iter(by_undated[key]))  # "Kesh Valley Flood" -> dated form
            continue
        if (
            len(mention.words) != 1
            or (mention.confidence >= 2 and mention.type != PERSON)
            or mention.words[0][-1] == "."
        ):
            continue  # "Brenner, who ..." is still Nadia Brenner; "Berlin" stays Berlin
        surnamed = by_surname.get(key)
        targets = surnamed or by_given.get(key) or by_company.get(key) or set()
        if len(targets) == 1:
            target = next(iter(targets))
            aliases[key] = target
            if surnamed and key in cued and best[target].type != PERSON:
                promoted.add(target)  # "Imogen Hale ... Hale trained as an engineer"
    return aliases, promoted


def _trim(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit].rstrip(" ,;:") + "…"


def _content_words(tokens: list[str], covered: set[int]) -> tuple[list[int], list[str]]:
    """Positions and words of a sentence's lowercase content words outside entity names."""
    positions: list[int] = []
    words: list[str] = []
    for index, word in enumerate(tokens):
        if (
            word.islower()
            and len(word) > 2
            and word.isalpha()
            and word not in KEYWORD_STOPWORDS
            and index not in covered
        ):
            positions.append(index)
            words.append(word)
    return positions, words


def _pick_keywords(content: tuple[list[int], list[str]], lo: int, hi: int, limit: int) -> list[str]:
    positions, words = content
    found: list[str] = []
    for k in range(bisect_left(positions, lo), len(positions)):
        if positions[k] >= hi:
            break
        if words[k] not in found:
            found.append(words[k])
            if len(found) == limit:
                break
    return found


# source name, target name, keywords, description, sentences shared
_RelationDraft = tuple[str, str, list[str], str, int]


def _relate_sentence(
    sentence: str,
    tokens: list[str],
    found: list[tuple[str, _Mention]],
    names: dict[str, str],
    options: OfflineExtractorOptions,
    relations: dict[tuple[str, str], _RelationDraft],
) -> None:
    """Add or strengthen one relation per pair of the sentence's first N distinct entities."""
    firsts: dict[str, _Mention] = {}
    for key, mention in found:
        if key not in firsts and len(firsts) < options.max_entities_per_sentence:
            firsts[key] = mention
    if len(firsts) < 2:
        return
    description = _trim(sentence, options.description_max_chars)
    content = _content_words(tokens, {i for _, m in found for i in range(m.start, m.end)})
    limit = options.max_relation_keywords
    whole_sentence: list[str] | None = None
    ordered = list(firsts.items())
    for i, (key_a, a) in enumerate(ordered):
        for key_b, b in ordered[i + 1 :]:
            pair = (key_a, key_b) if key_a < key_b else (key_b, key_a)  # = relation_key
            words = _pick_keywords(content, min(a.end, b.end), max(a.start, b.start), limit)
            kept = relations.get(pair)
            if kept is None:
                if not words:
                    if whole_sentence is None:
                        whole_sentence = _pick_keywords(content, 0, len(tokens), limit)
                    words = list(whole_sentence)
                relations[pair] = (names[key_a], names[key_b], words, description, 1)
                continue
            source, target, kept_words, first_description, count = kept
            for word in words:
                if word not in kept_words and len(kept_words) < limit:
                    kept_words.append(word)
            relations[pair] = (source, target, kept_words, first_description, count + 1)


def extract_offline(text: str, options: OfflineExtractorOptions | None = None) -> Extraction:
    """Extract entities and co-occurrence relations from one chunk of text."""
    options = options or OfflineExtractorOptions()
    sentences = split_sentences(text)
    mentions, sentence_tokens = _find_mentions(sentences, options.min_name_chars)
    aliases, promoted = _resolve_aliases(mentions)
    confident = {m.key for m in mentions if not m.needs_evidence}

    names: dict[str, str] = {}
    kinds: dict[str, tuple[str, int]] = {}
    first_sentence: dict[str, int] = {}
    per_sentence: dict[int, list[tuple[str, _Mention]]] = {}
    for mention in mentions:
        raw_key = mention.key
        if mention.needs_evidence and raw_key not in confident and raw_key not in aliases:
            continue
        key = aliases.get(raw_key, raw_key)
        first_sentence.setdefault(key, mention.sentence)
        if raw_key == key:
            names.setdefault(key, mention.name)
        kept = kinds.get(key)
        if kept is None or mention.confidence > kept[1]:
            kinds[key] = (mention.type, mention.confidence)
        per_sentence.setdefault(mention.sentence, []).append((key, mention))
    for key in promoted:
        if key in kinds and kinds[key][1] < 1:
            kinds[key] = (PERSON, 1)

    configured = {t.casefold(): t for t in options.entity_types}
    fallback = configured.get(CATEGORY, options.entity_types[-1])
    limit = options.description_max_chars
    entities = tuple(
        ExtractedEntity(
            name=names[key],
            type=configured.get(kinds[key][0], fallback),
            description=_trim(sentences[first_sentence[key]], limit),
        )
        for key in first_sentence
    )
    relations: dict[tuple[str, str], _RelationDraft] = {}
    for number, found in per_sentence.items():
        _relate_sentence(
            sentences[number], sentence_tokens[number], found, names, options, relations
        )
    return Extraction(
        entities=entities,
        relations=tuple(
            ExtractedRelation(
                source=source,
                target=target,
                keywords=tuple(words) or ("co-occurrence",),
                description=description,
                strength=float(count),
            )
            for source, target, words, description, count in relations.values()
        ),
    )
