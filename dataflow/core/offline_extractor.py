"""Entity and relation extraction with no network, no model and no LLM.

This is the embedded default (`kgstream run` works on a laptop with nothing
else installed) and the extractor the property tests drive, so it is pure,
deterministic and fast (a single regex tokenisation plus one pass over the
tokens; see bench/offline_extractor_speed.py).

What it finds, in order:

1. Sentences: blank lines, markdown headings, bullets and short title-like
   lines end a segment; inside a segment ".", "!" and "?" end a sentence
   unless they follow an initial ("J."), a title ("Dr.", "St."), "e.g."/"i.e.",
   or a company/abbreviation form ("Inc.", "U.S.") not followed by a typical
   sentence starter. Decimals never split (no whitespace after the dot).
2. Entities: maximal runs of capitalised, ALLCAPS or CamelCase tokens, joined
   by lowercase connectors ("of", "de", "van", "the", "&"; "and"/"for"/"on"
   only when the whole span carries an organisation/place/event cue, so
   "Alice and Bob" stays two people), plus small numbers ("Apollo 11"), years
   after an event word ("Expo 2020") and "I" after an event word or given
   name ("World War I"). Spans over 8 words (title-case lines, comma-less
   lists), code identifiers (with "_") and ALLCAPS headlines are dropped. A
   sentence-initial word is kept only with evidence (capitalised elsewhere
   mid-sentence, a known word, an acronym, or a short form of a full name in
   the same text). Titles ("Dr.", "CEO",
   "Prime Minister") are cut off and mark the following name as a person.
   Possessive "'s" is stripped; months, weekdays and single letters dropped.
3. Types, strongest cue first: suffix/head words ("Acme Corp", "University of
   X", "Hudson River", "Paris Summit"), a small gazetteer, a title before the
   name, a known given name, an ALLCAPS acronym (organization), context
   ("based in X" -> geo, ", who" -> person); otherwise "category". Across
   mentions the strongest cue wins (ties: first seen). A derived type that is
   not in `entity_types` becomes "category" if configured, else the last
   configured type; configured spelling (e.g. "PERSON") is kept.
4. Relations: two entities in one sentence. Keywords are up to
   `max_relation_keywords` content words between them (else from the
   sentence, else "co-occurrence"); strength counts the sentences the pair
   shares; the description is the first such sentence.

A bare surname or given name ("Turing", "Alan") of exactly one full person
name in the text ("Alan Turing"), and a bare company name ("Acme") next to
its legal form ("Acme Corp"), resolve to the full name; an ambiguous one
("Curie" with Marie and Pierre Curie) stays as written. Precision is
preferred over recall throughout; entity descriptions are the first sentence
that mentions the entity.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from itertools import pairwise

from dataflow.core.extraction import ExtractedEntity, ExtractedRelation, Extraction
from dataflow.core.naming import clean_entity_name, entity_key

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


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_FUNCTION_WORDS = _words(
    """a an the this that these those it its they them their theirs there here he she his
    her hers him we our ours us you your yours i me my who whom whose which what when where
    why how if then than so but or nor and yet for of in on at by to from with without within
    into onto over under about above below after before during since until while as because
    although though whether also not no yes all any each every some many much more most
    other others such both either neither is are was were be been being am do does did done
    has have had having can could should would shall must might however meanwhile moreover
    furthermore therefore thus hence instead indeed still today yesterday tomorrow tonight
    now later earlier recently currently finally first second third last next according
    despite following including unlike like among between through across against along
    around behind beyond near per via upon toward towards whereas unless once only even just
    perhaps maybe overall additionally similarly nevertheless nonetheless otherwise
    eventually initially subsequently previously ultimately notably specifically generally
    typically usually often sometimes always never already soon again together please
    thanks thank dear hello hi ok okay none nothing something everything anything someone
    everyone anyone nobody everybody several few own same see note figure fig table section
    chapter appendix page step example summary introduction conclusion abstract overview
    background contents let lets oh well while whilst amid amidst throughout inside outside
    where's there's here's what's that's"""
)
_KEYWORD_STOPWORDS = _FUNCTION_WORDS | _words(
    """may will said says say told tell tells added new use used using uses get got make
    made makes way ways thing things lot lots one two three four five also very really
    just said way yes non based"""
)
_CONNECTORS = _words("of de van von der den da del della di du la le the and & y dos das ter")
_CONDITIONAL_CONNECTORS = _words("and for on")  # joined only when the span has a cue
_NO_BREAK_ABBREVIATIONS = _words(
    """mr mrs ms mx dr prof st mt ft gen sen rep gov lt col capt sgt maj cmdr adm rev hon
    pres supt e.g i.e eg ie cf vs v approx ca fig figs no nos vol vols pp ch sec art est
    jan feb mar apr jun jul aug sep sept oct nov dec"""
)
_MAYBE_ABBREVIATIONS = _words("inc corp co ltd llc plc jr sr bros etc al esq dept univ assn")
_NAME_ABBREVIATIONS = _words(
    "mr mrs ms mx dr prof st mt ft jr sr gen sen rep gov lt col capt sgt rev"
)
_TITLE_WORDS = _words(
    """mr mrs ms mx miss dr prof professor sir dame lord lady president vice prime minister
    chancellor secretary chief executive officer financial operating technology technical
    ceo cfo cto coo chairman chairwoman chair founder cofounder co-founder director senator
    sen rep representative congressman congresswoman governor gov mayor judge justice king
    queen prince princess pope general gen colonel col captain capt lieutenant lt sergeant
    sgt admiral commander rev reverend bishop cardinal rabbi imam sheikh coach ambassador
    deputy managing senior"""
)
_PERSON_ROLES = _TITLE_WORDS | _words(
    """spokesman spokeswoman spokesperson author writer scientist researcher economist
    analyst engineer journalist reporter editor actor actress singer artist player manager
    leader head inventor physicist mathematician chemist biologist historian philosopher
    poet novelist composer architect lawyer attorney detective colleague wife husband son
    daughter father mother brother sister friend"""
)
_SPEECH_VERBS = _words("said says told added wrote explained argued noted recalled")
_LOCATIVE_VERBS = _words(
    """based located headquartered born lives lived live living held situated arrived
    stationed hosted died grew raised moved settled opened landed"""
)
_SITES = _words(
    """office offices headquarters lab laboratory plant factory campus branch store stores
    facility site mine port embassy"""
)
_GEO_PREPOSITIONS = _words("near across throughout outside")
_LEGAL_FORMS = _words("inc corp corporation co company ltd limited llc plc gmbh ag sa group")
_MONTHS_AND_DAYS = _words(
    """january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday"""
)
_ORG_SUFFIXES = _LEGAL_FORMS | _words(
    """incorporated companies llp nv bv srl spa pty lp university college school academy
    institute institution foundation agency bank council committee commission ministry
    department dept labs lab laboratory laboratories association party team club society
    union federation organization organisation authority bureau board services systems
    technologies holdings partners ventures capital media news press publishing airlines
    airways motors electric industries enterprises solutions software networks
    pharmaceuticals pharma therapeutics bancorp fund trust court parliament congress senate
    assembly army navy police church hospital clinic museum library centre center reserve
    times journal post magazine nations studios records entertainment foods brands energy government
    administration directorate coalition alliance consortium network broadcasting fc"""
)
_ORG_HEADS = _words(
    """university bank ministry department institute college school board agency bureau
    commission committee council federation organization organisation society church
    museum academy government office house"""
)
_GEO_SUFFIXES = _words(
    """city county river mountain mountains lake island islands street avenue ave road
    boulevard drive lane way square park state states province republic kingdom valley bay
    ocean sea gulf coast peninsula desert forest canyon falls strait channel district region
    territory village town heights hills beach harbor harbour airport bridge parish borough
    prefecture oblast canton empire"""
)
_GEO_HEADS = _words(
    "lake mount mt st san santa cape gulf isle isles republic kingdom city county province port"
    " fort"
)
_EVENT_SUFFIXES = _words(
    """war wars summit conference olympics election elections festival crisis revolution
    treaty accord accords agreement expo fair cup championship championships tournament
    marathon forum convention symposium workshop battle massacre pandemic epidemic outbreak
    earthquake storm protests riots uprising invasion siege awards prize ceremony week day series
    bowl open prix derby parade carnival"""
)
_EVENT_HEADS = _words("battle war siege treaty hurricane typhoon cyclone operation expo")
_GAZETTEER = _words(
    """afghanistan albania algeria argentina armenia australia austria azerbaijan bangladesh
    belarus belgium bolivia brazil bulgaria cambodia cameroon canada chile china colombia
    croatia cuba cyprus czechia denmark ecuador egypt england estonia ethiopia finland france
    germany ghana greece hungary iceland india indonesia iran iraq ireland israel italy
    jamaica japan jordan kazakhstan kenya korea kuwait laos latvia lebanon libya lithuania
    luxembourg malaysia mali mexico moldova mongolia morocco mozambique myanmar nepal
    netherlands nigeria norway pakistan panama peru philippines poland portugal qatar romania
    russia rwanda scotland senegal serbia singapore slovakia slovenia somalia spain sudan
    sweden switzerland syria taiwan tanzania thailand tunisia turkey uganda ukraine uruguay
    uzbekistan venezuela vietnam wales yemen zambia zimbabwe britain america usa us u.s. uk
    u.k. london paris berlin madrid rome tokyo beijing shanghai moscow delhi mumbai bangalore
    karachi lagos cairo nairobi istanbul dubai riyadh tehran baghdad jerusalem athens vienna
    prague warsaw budapest amsterdam brussels geneva zurich stockholm oslo copenhagen
    helsinki dublin edinburgh lisbon barcelona milan munich frankfurt hamburg toronto
    montreal vancouver ottawa chicago houston boston seattle atlanta miami dallas denver
    detroit philadelphia lima bogota santiago sydney melbourne auckland seoul bangkok jakarta
    manila hanoi kyiv kiev taipei osaka washington africa asia europe antarctica oceania
    arctic california texas florida illinois ohio michigan massachusetts pennsylvania
    virginia oregon arizona nevada colorado alaska hawaii"""
) | frozenset(
    """new zealand|south africa|south korea|north korea|saudi arabia|united states|united
    kingdom|united arab emirates|sri lanka|costa rica|czech republic|hong kong|puerto
    rico|great britain|new delhi|abu dhabi|tel aviv|new york|los angeles|san francisco|las
    vegas|silicon valley|mexico city|sao paulo|são paulo|rio de janeiro|buenos aires|north
    america|south america|latin america|middle east|new jersey|north carolina|south
    carolina|washington d.c.""".replace("\n    ", " ").split("|")
)
_FIRST_NAMES = _words(
    """james john robert michael william david richard joseph thomas charles christopher
    daniel matthew anthony mark donald steven paul andrew joshua kenneth kevin brian george
    timothy ronald edward jason jeffrey ryan jacob gary nicholas eric jonathan stephen larry
    justin scott brandon benjamin samuel gregory alexander frank patrick raymond jack dennis
    jerry tyler aaron jose adam nathan henry douglas zachary peter kyle walter ethan jeremy
    harold keith christian roger noah gerald carl terry sean austin arthur lawrence jesse
    dylan bryan joe billy bruce albert gabriel logan alan juan wayne roy ralph eugene
    vincent russell louis philip johnny mary patricia jennifer linda elizabeth barbara susan
    jessica sarah karen nancy lisa betty margaret sandra ashley kimberly emily donna michelle
    dorothy carol amanda melissa deborah stephanie rebecca sharon laura cynthia kathleen amy
    shirley angela helen anna brenda pamela nicole emma samantha katherine christine rachel
    catherine carolyn janet ruth maria heather diane julie joyce victoria olivia kelly
    christina lauren joan evelyn judith megan andrea hannah martha jacqueline frances gloria
    ann teresa kathryn sara janice jean alice madison doris abigail julia judy grace denise
    marilyn danielle theresa sophia marie diana natalie isabella charlotte rose ada pierre
    hans klaus emmanuel vladimir xi wei mohammed muhammad ahmed ali fatima hiroshi yuki raj
    priya satya sundar elon jeff bill tim sam sergey steve jensen marc jane bob tom ben
    greta angela olaf boris keir rishi narendra recep jacinda justin kamala hillary barack
    ivan igor dmitri sofia lucia carlos luis miguel ana giulia marco luca francesco harry ron"""
)
_OPENERS = "\"'“‘([{«"
_TERMINAL = re.compile(r"([.!?…]+)[\"'”’)\]»]*\s+")
_BULLET = re.compile(r"(?:[-*+•–—]|\(?\d{1,3}[.)]|\(?[a-z]\))\s+")
_RULE_LINE = re.compile(r"[\W_]+")
_TOKEN = re.compile(r"\w+(?:['’\-.&/]\w+)*|\S")
_CONTRACTIONS = ("'t", "’t", "'m", "’m", "'re", "’re", "'ve", "’ve", "'ll", "’ll", "'d", "’d")

_ROMAN_NUMERALS = _words("i ii iii iv v vi vii viii ix")
_MAX_NAME_WORDS = 8
_OTHER, _PROPER, _POSSESSIVE, _CONNECTOR, _DOT, _NUMBER = range(6)

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
    if (len(previous) == 1 and previous.isupper()) or low in _NO_BREAK_ABBREVIATIONS:
        return False
    if low in _MAYBE_ABBREVIATIONS or ("." in previous and len(previous) <= 5):
        end = segment.find(" ", next_at)
        following = segment[next_at : end if end >= 0 else len(segment)]
        return following.strip(_OPENERS + ",;:").lower() in _FUNCTION_WORDS
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
        if base in _CONNECTORS and not token.isupper():
            return _CONNECTOR
        if base in _FUNCTION_WORDS and (len(token) == 1 or not token.isupper()):
            return _OTHER
        return _POSSESSIVE if possessive else _PROPER
    if low in _CONNECTORS:
        return _CONNECTOR
    if token.isalpha() and not token.islower():
        return _PROPER  # CamelCase such as iPhone, eBay
    return _OTHER


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
                if word.lower() in _NAME_ABBREVIATIONS:
                    run[-1] = (word, run[-1][1], index + 1)
                    continue
        elif token == "I" and run and not pending:
            last = run[-1][0].lower()
            if last in _EVENT_SUFFIXES or last in _FIRST_NAMES:  # World War I, Elizabeth I
                run.append((token, index, index + 1))
                continue
        elif kind == _NUMBER and run and not pending:
            last = run[-1][0].lower()
            if len(token) <= 3 or last in _EVENT_SUFFIXES or last in _EVENT_HEADS:
                run.append((token, index, index + 1))
                continue
        if run:
            runs.append(run)
        run, pending = [], []
    if run:
        runs.append(run)
    return runs


def _structural_type(lows: list[str]) -> str | None:
    """Type from the span's own words: suffix, head word or gazetteer."""
    words = [w for w in lows if not w.isdigit() and w not in _ROMAN_NUMERALS] or lows
    last, first = words[-1].rstrip("."), words[0]
    if last in _ORG_SUFFIXES:
        return ORGANIZATION
    if last in _GEO_SUFFIXES:
        return GEO
    if last in _EVENT_SUFFIXES:
        return EVENT
    if len(words) > 1:
        if first in _ORG_HEADS:
            return ORGANIZATION
        if first in _GEO_HEADS:
            return GEO
        if first in _EVENT_HEADS:
            return EVENT
        for word, following in pairwise(words):
            if following == "of" and word in _ORG_HEADS:
                return ORGANIZATION  # "Maria Curie Institute of Oncology"
    return GEO if " ".join(lows) in _GAZETTEER else None


def _is_person_like(words: list[str]) -> bool:
    if not 1 <= len(words) <= 4:
        return False
    for word in words:
        if not word[0].isupper() or any(c.isdigit() for c in word):
            return False
        if len(word) > 2 and word.isupper():
            return False
    return _structural_type([w.lower() for w in words]) is None


def _has_evidence(word: str, mid_caps: set[str]) -> bool:
    """Whether a sentence-initial capitalised word is a name, not just capitalised."""
    low = word.lower()
    return (
        word in mid_caps
        or not word[1:].islower()
        or low in _FIRST_NAMES
        or low in _GAZETTEER
        or low in _ORG_HEADS
        or low in _GEO_HEADS
        or low in _EVENT_HEADS
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


def _split_run(run: _Run, at_sentence_start: bool, mid_caps: set[str]) -> list[tuple[_Run, bool]]:
    """Cut a run into name spans; the flag marks a span that follows a title (a person)."""
    if (
        at_sentence_start
        and len(run) > 1
        and run[0][0].lower() not in _TITLE_WORDS
        and run[1][0].lower() in _CONNECTORS
        and not _has_evidence(run[0][0], mid_caps)
    ):
        run = run[1:]
    lows = [w.lower() for w, _, _ in run]
    pieces: list[_Run] = [run]
    if _CONDITIONAL_CONNECTORS.intersection(lows):
        # "Food and Drug Administration" is one name; "Alice and Bob", "NASA and
        # the ESA" and "University of X and Y Institute" are two.
        whole_has_cue = _structural_type(lows) is not None
        pieces = []
        piece: _Run = []
        for index, (item, low) in enumerate(zip(run, lows, strict=True)):
            if low in _CONDITIONAL_CONNECTORS and piece:
                following = lows[index + 1] if index + 1 < len(lows) else ""
                if (
                    not whole_has_cue
                    or following in _CONNECTORS
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
        titles = [i for i, (w, _, _) in enumerate(piece) if w.lower().rstrip(".") in _TITLE_WORDS]
        if not titles:
            spans.append((piece, False))
            continue
        first = titles[0]
        after = first
        while after < len(piece) and piece[after][0].lower().rstrip(".") in _TITLE_WORDS:
            after += 1
        rest = piece[after:]
        rest_words = [w for w, _, _ in rest]
        if rest and rest_words[0].lower() in _CONNECTORS:
            spans.extend(((piece[:first], False), (rest, False)))
        elif not rest or _is_person_like(rest_words):
            spans.extend(((piece[:first], False), (rest, True)))
        else:
            spans.append((piece, False))
    return spans


def _trim_span(span: _Run) -> _Run:
    start, end = 0, len(span)
    while start < end and (
        span[start][0].lower() in _CONNECTORS
        or (span[start][0].lower() in _MONTHS_AND_DAYS and start + 1 < end)
    ):
        start += 1
    while end > start and span[end - 1][0].lower() in _CONNECTORS:
        end -= 1
    return span[start:end]


def _type_span(
    words: list[str], tokens: list[str], start: int, end: int, titled: bool
) -> tuple[str, int]:
    """Return (type, confidence): 3 own words or title, 2 lists, 1 context, 0 default."""
    lows = [w.lower() for w in words]
    structural = _structural_type(lows)
    if structural is not None:
        return structural, 3
    if end + 1 < len(tokens) and tokens[end] == "," and tokens[end + 1].lower() in _LEGAL_FORMS:
        return ORGANIZATION, 3  # "Tesla, Inc."
    person_like = _is_person_like(words)
    if titled and person_like:
        return PERSON, 3
    prev = tokens[start - 1].lower() if start > 0 else ""
    prev2 = tokens[start - 2].lower() if start > 1 else ""
    after = tokens[end].lower() if end < len(tokens) else ""
    after2 = tokens[end + 1].lower() if end + 1 < len(tokens) else ""
    if person_like and 2 <= len(words) <= 3 and lows[0] in _FIRST_NAMES:
        return PERSON, 2
    if len(words) == 1 and 2 <= len(words[0]) <= 6 and words[0].isalpha() and words[0].isupper():
        return ORGANIZATION, 2
    if person_like and (prev in _PERSON_ROLES or (after == "," and after2 in ("who", "whose"))):
        return PERSON, 2
    if prev in ("in", "at", "near") and (
        prev2 in _LOCATIVE_VERBS or prev2 in _EVENT_SUFFIXES or prev2 in _SITES
    ):
        return GEO, 2
    if prev == "of" and prev2 in ("city", "town", "village", "capital", "region", "state"):
        return GEO, 2
    if person_like and len(words) >= 2 and len(words[0]) == 2 and words[0][1] == ".":
        return PERSON, 2  # "C. S. Lewis"
    if person_like and len(words) >= 2 and after in _SPEECH_VERBS:
        return PERSON, 1
    if prev in _GEO_PREPOSITIONS and person_like and len(words) <= 3:
        return GEO, 1
    if prev in ("joined", "acquired", "founded", "co-founded", "cofounded"):
        return ORGANIZATION, 1
    if len(words) == 1 and lows[0] in _FIRST_NAMES:
        return PERSON, 1
    return CATEGORY, 0


def _find_mentions(
    sentences: tuple[str, ...], min_chars: int
) -> tuple[list[_Mention], list[list[str]]]:
    kinds: dict[str, int] = {}
    mid_caps: set[str] = set()
    names: dict[str, tuple[str, str]] = {}
    tokenised: list[tuple[list[str], list[_Run]]] = []
    for sentence in sentences:
        tokens = _TOKEN.findall(sentence)
        runs = _find_runs(tokens, kinds, mid_caps)
        if sum(len(run) for run in runs) >= 4:
            shouting = sum(1 for t in tokens if len(t) > 1 and t.isupper())
            if shouting >= 4 and shouting * 5 > len(tokens) * 3:
                runs = []  # an ALLCAPS headline: every word would look like a name
        tokenised.append((tokens, runs))
    mentions: list[_Mention] = []
    for number, (tokens, runs) in enumerate(tokenised):
        first_word = next((i for i, t in enumerate(tokens) if t[0].isalnum()), -1)
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
                joined = " ".join(words)
                named = names.get(joined)
                if named is None:
                    cleaned = clean_entity_name(joined)
                    named = names[joined] = (cleaned, entity_key(cleaned))
                name, key = named
                if len(name) < min_chars or not key or not any(c.isalpha() for c in name):
                    continue
                if len(words) == 1 and (
                    words[0].lower() in _MONTHS_AND_DAYS or words[0].lower() in _LEGAL_FORMS
                ):
                    continue
                start, end = span[0][1], span[-1][2]
                kind, confidence = _type_span(words, tokens, start, end, titled)
                needs_evidence = (
                    start == first_word
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
                    )
                )
    return mentions, [tokens for tokens, _ in tokenised]


def _resolve_aliases(mentions: list[_Mention]) -> dict[str, str]:
    """Map a bare surname, given name or company name to the one full name it shortens."""
    best: dict[str, _Mention] = {}
    for mention in mentions:
        key = mention.key
        kept = best.get(key)
        if kept is None or mention.confidence > kept.confidence:
            best[key] = mention
    by_given: dict[str, set[str]] = {}
    by_surname: dict[str, set[str]] = {}
    by_company: dict[str, set[str]] = {}
    for key, mention in best.items():
        words = mention.words
        if len(words) < 2:
            continue
        if mention.type == PERSON:
            by_surname.setdefault(words[-1].lower(), set()).add(key)
            by_given.setdefault(words[0].lower(), set()).add(key)
        elif mention.type == ORGANIZATION and all(w.lower() in _LEGAL_FORMS for w in words[1:]):
            by_company.setdefault(words[0].lower(), set()).add(key)
    aliases: dict[str, str] = {}
    for key, mention in best.items():
        if len(mention.words) != 1 or mention.confidence >= 2 or mention.words[0][-1] == ".":
            continue
        targets = by_surname.get(key) or by_given.get(key) or by_company.get(key) or set()
        if len(targets) == 1:
            aliases[key] = next(iter(targets))
    return aliases


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
            and word not in _KEYWORD_STOPWORDS
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
    aliases = _resolve_aliases(mentions)
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
