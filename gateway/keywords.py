"""Splitting a question into low-level (entities, details) and high-level (themes) keywords.

`local` mode searches entity vectors with the low-level keywords, `global` mode relation
vectors with the high-level ones (LightRAG's dual-level retrieval). Two extractors:

- `LLMKeywordExtractor` asks the chat model for LightRAG's JSON object, through the
  client's response cache, so asking the same question twice costs one call.
- `OfflineKeywordExtractor` needs no model: low-level keywords are the names the offline
  entity extractor finds in the question, quoted terms and capitalised spans; high-level
  keywords are the runs of content words between stopwords. It is the default when no
  LLM is configured, and the fallback when the LLM answers something unparseable.

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
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
"""Words that carry no search meaning in a question (English)."""

_WORD = re.compile(r"[\w][\w'’.-]*[\w]|[\w]")
_POSSESSIVE = re.compile(r"['’]s$", re.IGNORECASE)
_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”|(?:^|(?<=\s))'([^']+)'(?=[\s.,;:!?)]|$)")
_CLAUSE_BREAK = re.compile(r"[,;:!?()\[\]{}\"“”]|\.(?:\s|$)")


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


def capitalised_spans(question: str) -> list[str]:
    """Maximal runs of capitalised words in each clause, stopwords trimmed from both ends.

    "Who leads the Atlas Project?" gives ["Atlas Project"]: "Who" is a stopword.
    """
    spans: list[str] = []
    for clause in _CLAUSE_BREAK.split(question):
        run: list[str] = []
        for word in [*split_words(clause), ""]:
            if word and _is_capitalised(word):
                run.append(word)
                continue
            while run and run[0].casefold() in STOPWORDS:
                run.pop(0)
            while run and run[-1].casefold() in STOPWORDS:
                run.pop()
            if run:
                spans.append(" ".join(run))
            run = []
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
        names = [entity.name for entity in extract_offline(question).entities]
        low = _dedupe([*quoted, *names, *capitalised_spans(question)])
        low_words = frozenset(w.casefold() for value in low for w in split_words(value))
        high = _dedupe(content_phrases(question, low_words))
        if not high:
            high = _dedupe(content_phrases(question))
        if not low and not high:
            low = (question,)
        return Keywords(high_level=high, low_level=low)


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
