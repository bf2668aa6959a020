"""An extractive answer for when no LLM is configured: the retrieved sentences that best
match the question, each with its source's reference marker.

Without a chat model the gateway can still point at the sentences most likely to answer
the question instead of only saying that no model is configured. The scoring is
deliberately simple and explainable: a sentence scores the sum of the weights of the
question's content words it contains, a word weighing more the fewer retrieved sentences
contain it (inverse sentence frequency), so "Tidewater" counts for more than "lab" when
every sentence mentions a lab. Ties go to the higher-ranked chunk, then to the earlier
sentence, so the same retrieval always gives the same text.

Pure: no I/O, no clock; the engine calls `extractive_answer` on its no-LLM path.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from dataflow.core.offline.sentences import split_sentences
from gateway.keywords import STOPWORDS, split_words
from gateway.types import NO_LLM_ANSWER, QueryParams, Retrieval

MAX_SENTENCES = 3
MAX_WORDS = 80
"""An extractive answer quotes at most this many sentences and (about) this many words:
enough to answer a factual question, short enough not to pass for the context itself."""

TITLE_WORDS = 6
"""Text without closing punctuation and under this many words is a heading, not a sentence."""
_ENDS_SENTENCE = re.compile(r"[.!?…:;][\"'”’)\]»]*$")

EXTRACTIVE_NOTE = (
    "(No LLM is configured, so this is an extractive answer: the retrieved sentences that "
    "best match the question. Set OPENAI_BASE_URL (and OPENAI_API_KEY, KGSTREAM_LLM_MODEL) "
    "to get generated answers.)"
)
"""The last line of every extractive answer: what it is and how to get a real one."""


@dataclass(frozen=True)
class Sentence:
    """One sentence of a retrieved chunk: where it came from and the terms it holds."""

    text: str
    chunk_rank: int  # the chunk's position in the retrieval (0: best ranked)
    position: int  # the sentence's position inside its chunk
    reference_id: int | None  # its chunk's source in `Retrieval.references`, if listed
    terms: frozenset[str]


@dataclass(frozen=True)
class ScoredSentence:
    sentence: Sentence
    score: float


def content_terms(text: str) -> frozenset[str]:
    """The casefolded non-stopwords of `text`, a trailing plural "s" dropped.

    The plural rule is crude ("batteries" -> "batterie") but applied to both the question
    and the sentences, so "leads" matches "lead" and "labs" matches "lab".
    """
    terms: set[str] = set()
    for word in split_words(text):
        term = word.casefold()
        if term in STOPWORDS:
            continue
        if len(term) > 3 and term.endswith("s") and not term.endswith("ss"):
            term = term[:-1]
        terms.add(term)
    return frozenset(terms)


def is_title_like(text: str) -> bool:
    """A heading or label ("Tidewater Battery Lab"): short, with no closing punctuation.

    Headings repeat the names a question asks about, so they would outscore the sentences
    that say something about them; they are never quoted.
    """
    return len(text.split()) < TITLE_WORDS and not _ENDS_SENTENCE.search(text)


def sentences_of(retrieval: Retrieval) -> list[Sentence]:
    """The retrieved chunks' sentences in rank order, each distinct sentence once (chunks
    may overlap, and the same sentence can be indexed under two documents); headings and
    labels left out."""
    reference_of = {
        chunk_id: reference.reference_id
        for reference in retrieval.references
        for chunk_id in reference.chunk_ids
    }
    seen: set[str] = set()
    sentences: list[Sentence] = []
    for rank, chunk in enumerate(retrieval.chunks):
        for position, text in enumerate(split_sentences(chunk.text)):
            key = " ".join(text.casefold().split())
            if key in seen or is_title_like(text):
                continue
            seen.add(key)
            sentences.append(
                Sentence(
                    text, rank, position, reference_of.get(chunk.chunk_id), content_terms(text)
                )
            )
    return sentences


def term_weights(sentences: Sequence[Sentence]) -> dict[str, float]:
    """Inverse sentence frequency: log(1 + n / df) for every term of the sentences."""
    frequency: dict[str, int] = {}
    for sentence in sentences:
        for term in sentence.terms:
            frequency[term] = frequency.get(term, 0) + 1
    total = len(sentences)
    return {term: math.log(1 + total / df) for term, df in frequency.items()}


def rank_sentences(question: str, sentences: Sequence[Sentence]) -> list[ScoredSentence]:
    """Sentences sharing a content word with the question, best first; ties by chunk rank,
    then by position in the chunk."""
    wanted = content_terms(question)
    weights = term_weights(sentences)
    scored = [
        ScoredSentence(sentence, sum(weights[term] for term in sentence.terms & wanted))
        for sentence in sentences
    ]
    matching = [item for item in scored if item.score > 0]
    return sorted(
        matching,
        key=lambda item: (-item.score, item.sentence.chunk_rank, item.sentence.position),
    )


def pick_sentences(
    ranked: Iterable[ScoredSentence],
    max_sentences: int = MAX_SENTENCES,
    max_words: int = MAX_WORDS,
) -> list[Sentence]:
    """The best sentences that fit `max_sentences` and `max_words`; the best one is always
    kept (cut to `max_words` if it is longer on its own)."""
    picked: list[Sentence] = []
    words = 0
    for item in ranked:
        if len(picked) == max_sentences:
            break
        length = len(item.sentence.text.split())
        if not picked and length > max_words:
            cut = " ".join(item.sentence.text.split()[:max_words]) + " …"
            return [replace(item.sentence, text=cut)]
        if words + length > max_words:
            continue
        picked.append(item.sentence)
        words += length
    return picked


def quoted_line(sentence: Sentence) -> str:
    """The sentence with its reference marker, LightRAG style ("... Kenya. [1]")."""
    if sentence.reference_id is None:
        return sentence.text
    return f"{sentence.text} [{sentence.reference_id}]"


def extractive_answer(params: QueryParams, retrieval: Retrieval) -> str:
    """The answer without an LLM: the best-matching sentences, one a line, then the note.

    The words matched are the question's and the request's own keywords, if any.

    When no retrieved sentence shares a content word with the question (nothing was
    retrieved, or the question has only stopwords, or is in another script than the
    documents) there is nothing to quote, and the answer is `NO_LLM_ANSWER`.
    """
    asked = " ".join((params.question, *params.high_level_keywords, *params.low_level_keywords))
    picked = pick_sentences(rank_sentences(asked, sentences_of(retrieval)))
    if not picked:
        return NO_LLM_ANSWER
    return "\n".join([*(quoted_line(sentence) for sentence in picked), "", EXTRACTIVE_NOTE])
