"""Lexical (BM25-style) sparse vectors: one tokenizer for what is indexed and what is asked.

Dense embeddings miss exact names, numbers and rare words that BM25 finds; kgstream
therefore stores a sparse vector beside each dense one (chunks, entities, relations) and
fuses the two searches.

What a point stores is BM25's term-frequency part, `tf * (k1 + 1) / (tf + k1 * (1 - b +
b * length / AVERAGE_LENGTH))`, with a fixed average length (as Qdrant's own BM25 does):
the true corpus average would change every stored vector on every write. A query weighs
each distinct term by its IDF, `ln(1 + (N - df + 0.5) / (df + 0.5))`, from document
frequencies counted in the live collection when the query runs, so the dot product is
the BM25 score and an edit or a delete never needs other points re-weighted.
(Qdrant's own `idf` modifier is not used: its posting lists keep deleted and replaced
points until a segment is optimized, so its IDF drifts from the live index; see
qdrant/qdrant#6735.)

Tokens: NFKC, case-folded runs of letters and digits (possessive 's dropped), minus a
small English stopword list; runs of CJK characters (no spaces between words) become
overlapping character bigrams. A term's dimension is its CRC-32, stable everywhere.
"""

from __future__ import annotations

import math
import re
import unicodedata
import zlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

K1 = 1.2
B = 0.75
AVERAGE_LENGTH = 256.0
"""Tokens in a typical indexed text; Qdrant's BM25 default (fastembed uses the same)."""

_STOPWORD_TEXT = """
    a an the of to in on at for from by with and or but if then than that this these those
    is are was were be been being do does did has have had it its as into about over after
    before during between which who whom whose what when where why how not no yes any all
    both each either neither other such own same so too very can will would should could
    may might must shall he she they them his her their him i you we us our your me my
    mine ours s
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
"""English function words: they match everywhere and say nothing about relevance."""

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W_]+(?:['’][^\W_]+)*")
_CJK_RUN = re.compile(rf"[{_CJK}]+")
_POSSESSIVE = re.compile(r"['’]s$")


@dataclass(frozen=True)
class SparseVector:
    """Dimensions (ascending) and their weights; empty for a text with no content terms."""

    indices: tuple[int, ...] = ()
    values: tuple[float, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.indices)


def lexical_terms(text: str) -> list[str]:
    """The searchable terms of `text`, in order, repeats kept (their count is the tf)."""
    terms: list[str] = []
    for token in _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold()):
        if _CJK_RUN.fullmatch(token):
            terms.extend(token[i : i + 2] for i in range(max(1, len(token) - 1)))
            continue
        token = _POSSESSIVE.sub("", token).replace("’", "'")
        if token and token not in STOPWORDS:
            terms.append(token)
    return terms


def term_dimension(term: str) -> int:
    return zlib.crc32(term.encode("utf-8"))


def document_vector(text: str) -> SparseVector:
    """The stored side: BM25 tf saturation with length normalisation per term."""
    return terms_vector(lexical_terms(text))


def terms_vector(terms: list[str]) -> SparseVector:
    """`document_vector` of the text whose `lexical_terms` are `terms` (a store that also
    indexes the terms tokenises each text once)."""
    if not terms:
        return SparseVector()
    norm = K1 * (1.0 - B + B * len(terms) / AVERAGE_LENGTH)
    weights: dict[int, float] = {}
    for term, tf in Counter(terms).items():
        dimension = term_dimension(term)
        weights[dimension] = weights.get(dimension, 0.0) + tf * (K1 + 1.0) / (tf + norm)
    return _sparse(weights)


def query_terms(text: str) -> list[str]:
    """The distinct terms of a query, in order of first appearance."""
    return list(dict.fromkeys(lexical_terms(text)))


def inverse_document_frequency(documents: int, containing: int) -> float:
    """BM25's IDF (always positive): `documents` in the collection, `containing` the term."""
    return math.log(1.0 + (documents - containing + 0.5) / (containing + 0.5))


def query_vector(frequencies: Mapping[str, int], documents: int) -> SparseVector:
    """The query side: each term weighted by its IDF; terms no document holds are left out
    (they cannot match), so a query of unknown words is empty."""
    weights: dict[int, float] = {}
    for term, containing in frequencies.items():
        if containing > 0:
            dimension = term_dimension(term)
            idf = inverse_document_frequency(documents, containing)
            weights[dimension] = max(weights.get(dimension, 0.0), idf)
    return _sparse(weights)


def _sparse(weights: dict[int, float]) -> SparseVector:
    indices = tuple(sorted(weights))
    return SparseVector(indices, tuple(weights[i] for i in indices))
