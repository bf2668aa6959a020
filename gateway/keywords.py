"""Splitting a question into low-level (entities, details) and high-level (themes) keywords.

`local` mode searches entity vectors with the low-level keywords, `global` mode relation
vectors with the high-level ones (LightRAG's dual-level retrieval). Two extractors:

- `LLMKeywordExtractor` asks the chat model for LightRAG's JSON object, through the
  client's response cache, so asking the same question twice costs one call.
- `OfflineKeywordExtractor` needs no model: low-level keywords are the names the offline
  entity extractor finds in the question, quoted terms and capitalised spans (joined
  over "of"/"the"/"de" and a one-word "X and Y", so "Chief of Protocol" and "Kiss and
  Tell" stay whole; a number next to a name stays with it: "Apollo 11", "2014 FIFA
  World Cup"); high-level keywords are the runs of content words between stopwords
  that are not those names. A question-initial capital proves nothing ("Which",
  "Name"), and a question typed in lower case has no capitals at all: then its
  multi-word content phrases ("annie morton") stand in for names, so the entity
  (local) and relation (global) searches both get keywords without an LLM. It is the
  default when no LLM is configured, and the fallback when the LLM answers something
  unparseable.

Neither ever returns two empty lists for a non-empty question: the question itself
becomes the low-level keyword (LightRAG forces the same for short questions).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from itertools import pairwise
from typing import Any, Protocol

from connectors.llm.client import ChatClient
from dataflow.core.offline.extractor import extract_offline
from dataflow.core.prompts import ChatMessage
from gateway.prompts import KEYWORDS_SYSTEM, KEYWORDS_USER
from gateway.types import Keywords


class KeywordExtractor(Protocol):
    """Turns a question into `Keywords`; never both lists empty for a non-empty question."""

    def extract(self, question: str) -> Keywords: ...


_STOPWORD_TEXT = """
    a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each
    either few for from further had has have having he her here hers herself him himself
    his how i if in into is it its itself just me more most my myself neither no nor not
    now of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom
    whose why will with would you your yours yourself yourselves
    tell explain describe list give show know please let lets let's many much there's
    what's who's where's how's does did done get got make made say said
    name named identify find compare among whether either whose which
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
"""Words that carry no search meaning in a question (English)."""

_WORD = re.compile(r"[\w][\w'’.-]*[\w]|[\w]")
_POSSESSIVE = re.compile(r"['’]s$", re.IGNORECASE)
_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”|(?:^|(?<=\s))'([^']+)'(?=[\s.,;:!?)]|$)")
# A dot ends a clause unless it ends an initial or a short title ("J.", "St.", "Dr.").
_CLAUSE_BREAK = re.compile(r"[,;:!?()\[\]{}\"“”]|(?<!\b[A-Z])(?<!\b[A-Z][a-z])\.(?:\s|$)")


def _dedupe(values: Iterable[str]) -> tuple[str, ...]:
    """Stripped, non-empty values, first spelling of each (case-insensitively) kept, in order."""
    seen: set[str] = set()
    kept: list[str] = []
    for value in values:
        text = " ".join(value.split()).strip(" ,;:!?'\"")
        if text.endswith(".") and "." not in text[:-1]:
            text = text[:-1]
        key = text.casefold().rstrip(".")
        if text and key not in seen:
            seen.add(key)
            kept.append(text)
    return tuple(kept)


def split_words(clause: str) -> list[str]:
    """The clause's words, possessive 's dropped ("Tanaka's" -> "Tanaka")."""
    return [_POSSESSIVE.sub("", word) for word in _WORD.findall(clause)]


def _is_capitalised(word: str) -> bool:
    return word[:1].isupper() or (any(c.isupper() for c in word) and any(c.isdigit() for c in word))


# Lowercase words a name may run on over ("Chief of Protocol", "Lord of the Rings").
_NAME_CONNECTORS = frozenset(
    [
        "of",
        "the",
        "de",
        "del",
        "della",
        "di",
        "du",
        "da",
        "van",
        "von",
        "der",
        "den",
        "la",
        "le",
        "y",
    ]
)
# Short words inside titles of works ("These Boots Are Made for Walkin'").
_TITLE_FILLERS = frozenset(["for", "on", "a", "an"])


def _name_spans(words: list[str]) -> list[list[str]]:
    """Capitalised runs of one clause, joined over connectors and a one-word "X and Y",
    with numbers next to a capitalised word kept ("Apollo 11", "2014 FIFA World Cup")."""
    spans: list[list[str]] = []
    run: list[str] = []
    pending: list[str] = []
    for index, word in enumerate([*words, ""]):
        following = words[index + 1] if index + 1 < len(words) else ""
        if word and (
            _is_capitalised(word)
            or (word.isdigit() and (run or _is_capitalised(following)) and not pending)
        ):
            run.extend(pending)
            run.append(word)
            pending = []
            continue
        if word and run and len(pending) < 2:
            low = word.casefold()
            joins = _is_capitalised(following) and (
                low in _NAME_CONNECTORS
                or (  # "Kiss and Tell", not "Scott Derrickson and Ed Wood"
                    low == "and"
                    and not pending
                    and len(run) == 1
                    and not _is_capitalised(words[index + 2] if index + 2 < len(words) else "")
                )
                or (len(run) >= 2 and low in _TITLE_FILLERS)  # "Lessons on Physics"
            )
            if joins or (low in _NAME_CONNECTORS and following.casefold() in _NAME_CONNECTORS):
                pending.append(word)
                continue
        while run and run[0].casefold() in STOPWORDS:
            run.pop(0)  # "Which", "The"
        if run:
            spans.append(run)
        run, pending = [], []
    return spans


def capitalised_spans(question: str) -> list[str]:
    """Maximal runs of capitalised words in each clause, stopwords trimmed from both ends,
    joined over name connectors ("Chief of Protocol", "Kiss and Tell"), numbers kept.

    "Who leads the Atlas Project?" gives ["Atlas Project"]: "Who" is a stopword. A lone
    question-initial word ("Name", "Describe") is no span: its capital proves nothing.
    A leading year is kept, and the name without it follows: other passages may not
    date it ("2014 FIFA World Cup", then "FIFA World Cup").
    """
    spans: list[str] = []
    initial = True
    for clause in _CLAUSE_BREAK.split(question):
        words = split_words(clause)
        for span in _name_spans(words):
            if not (initial and len(span) == 1 and words and span[0] == words[0]):
                spans.append(" ".join(span))
                if len(span) > 1 and len(span[0]) == 4 and span[0].isdigit():
                    spans.append(" ".join(span[1:]))  # "FIFA World Cup" beside its 2014 edition
        initial = initial and not words
    return spans


def content_phrases(question: str, breakers: frozenset[str] = frozenset()) -> list[str]:
    """Runs of consecutive non-stopwords inside each clause; runs over 3 words become bigrams.

    Words in `breakers` (casefolded) end a run like stopwords do: the offline extractor
    passes the words of the low-level keywords, so themes are not entity names again.
    """
    phrases: list[str] = []
    stop = STOPWORDS | breakers
    for clause in _CLAUSE_BREAK.split(question):
        run: list[str] = []
        for word in [*split_words(clause), ""]:
            if word and word.casefold() not in stop and not word.isdigit():
                run.append(word)
                continue
            if len(run) > 3:
                phrases.extend(" ".join(pair) for pair in pairwise(run))
            elif run:
                phrases.append(" ".join(run))
            run = []
    return phrases


class OfflineKeywordExtractor:
    """Keywords without a model: entity-like spans (low level), content phrases (high level)."""

    def extract(self, question: str) -> Keywords:
        question = question.strip()
        if not question:
            return Keywords(high_level=(), low_level=())
        quoted = [next(g for g in match.groups() if g) for match in _QUOTED.finditer(question)]
        spans = capitalised_spans(question)
        span_words = [split_words(span.casefold()) for span in spans]
        names = [
            entity.name
            for entity in extract_offline(question).entities
            if not (entity.type == "category" and _inside_any(entity.name, span_words))
        ]  # "Kiss" and "Tell" are fragments of the span "Kiss and Tell"
        low = _dedupe([*quoted, *names, *spans])
        low_words = frozenset(w.casefold() for value in low for w in split_words(value))
        phrases = _dedupe(content_phrases(question))
        if not low:
            # No capitals to go by (a lower-case question): multi-word content phrases
            # are the likeliest names ("annie morton"), else every content phrase.
            low = tuple(p for p in phrases if " " in p) or phrases
            low_words = frozenset(w.casefold() for value in low for w in split_words(value))
        high = _dedupe(content_phrases(question, low_words)) or phrases
        if not low and not high:
            low = (question,)
        return Keywords(high_level=high, low_level=low)


def _inside_any(name: str, spans: list[list[str]]) -> bool:
    """Whether `name`'s words are a proper part of one of `spans` (casefolded words)."""
    words = split_words(name.casefold())
    width = len(words)
    return any(
        len(span) > width
        and any(span[i : i + width] == words for i in range(len(span) - width + 1))
        for span in spans
    )


def keyword_messages(question: str) -> tuple[ChatMessage, ...]:
    """The keyword-extraction prompt for `question` (a pure function: the cache key)."""
    return (
        ChatMessage("system", KEYWORDS_SYSTEM),
        ChatMessage("user", KEYWORDS_USER.format(question=question)),
    )


class UnparseableKeywords(ValueError):
    """The model's reply held no JSON object with keyword lists."""


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json)?", re.IGNORECASE)


def _keyword_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return value.split(",")
    if isinstance(value, list):
        return [str(item) for item in value if isinstance(item, str | int | float)]
    return []


def parse_keywords(reply: str) -> Keywords:
    """Read {"high_level_keywords": [...], "low_level_keywords": [...]} out of a reply.

    Tolerates what chat models wrap around JSON: <think> blocks, markdown fences, prose
    before or after, single-quoted keys, trailing commas, and a comma-separated string in
    place of a list. Raises `UnparseableKeywords` when no such object is found.
    """
    text = _FENCE.sub("", _THINK.sub("", reply))
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise UnparseableKeywords(f"no JSON object in the keyword reply {reply[:200]!r}")
    body = text[start : end + 1]
    data: Any = None
    for candidate in (body, re.sub(r",\s*([}\]])", r"\1", body.replace("'", '"'))):
        try:
            data = json.loads(candidate)
            break
        except ValueError:
            continue
    if not isinstance(data, dict) or not (
        "high_level_keywords" in data or "low_level_keywords" in data
    ):
        raise UnparseableKeywords(
            f"keyword reply is not an object with high_level_keywords/low_level_keywords: "
            f"{reply[:200]!r}"
        )
    return Keywords(
        high_level=_dedupe(_keyword_list(data.get("high_level_keywords"))),
        low_level=_dedupe(_keyword_list(data.get("low_level_keywords"))),
    )


class LLMKeywordExtractor:
    """Asks the chat model for keywords (LightRAG's keywords_extraction), cached by the client.

    A reply that cannot be parsed falls back to `fallback` (the offline extractor by
    default): a bad keyword reply should not fail a query that retrieval can still serve.
    Transport failures (`connectors.llm.client.LLMError`) propagate.
    """

    def __init__(self, client: ChatClient, fallback: KeywordExtractor | None = None) -> None:
        self.client = client
        self.fallback: KeywordExtractor = fallback or OfflineKeywordExtractor()

    def extract(self, question: str) -> Keywords:
        question = question.strip()
        if not question:
            return Keywords(high_level=(), low_level=())
        reply = self.client.complete(keyword_messages(question), kind="keywords")
        try:
            keywords = parse_keywords(reply)
        except UnparseableKeywords:
            return self.fallback.extract(question)
        if not keywords.high_level and not keywords.low_level:
            return Keywords(high_level=(), low_level=(question,))
        return keywords
