"""What both systems are given: the corpus, the questions, the edits and the deletes."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from bench.corpus import build_world, generate_corpus, revise_document
from bench.retrieval_eval import Question
from bench.vs_lightrag.questions import SENTENCE_BREAK, build_questions

MIN_SENTENCE_WORDS = 6


@dataclass(frozen=True)
class Workload:
    corpus: Mapping[str, str]  # doc id (the corpus-relative path) -> text, as first indexed
    questions: tuple[Question, ...]
    edits: tuple[tuple[str, str], ...]  # (doc id, new text), applied in order
    deletes: tuple[str, ...]

    def final_corpus(self) -> dict[str, str]:
        final = dict(self.corpus)
        final.update(self.edits)
        for doc_id in self.deletes:
            del final[doc_id]
        return final

    def gone_sentences(self) -> tuple[str, ...]:
        """Sentences of the deleted documents and of the edited documents' old versions that
        no live document holds: after the last change, no record may quote one."""
        live = {s for text in self.final_corpus().values() for s in sentences(text)}
        changed = [self.corpus[doc_id] for doc_id in (*self.deletes, *dict(self.edits))]
        return tuple(sorted({s for text in changed for s in sentences(text)} - live))


def sentences(text: str) -> list[str]:
    """The sentences and lines of `text` of at least MIN_SENTENCE_WORDS words, spaces
    collapsed (a stored description that quotes one holds it verbatim)."""
    parts = (" ".join(part.split()) for part in SENTENCE_BREAK.split(text))
    return [part for part in parts if len(part.split()) >= MIN_SENTENCE_WORDS]


def build_workload(documents: int, questions: int, edits: int, deletes: int, seed: int) -> Workload:
    """The seeded corpus, questions about it, `edits` documents to revise (the last paragraph
    rewritten, `bench.corpus.revise_document`) and `deletes` other documents to delete."""
    corpus = generate_corpus(documents, seed)
    if edits + deletes > len(corpus):
        raise SystemExit(f"--edits + --deletes ({edits + deletes}) exceed --docs ({len(corpus)})")
    asked = build_questions(build_world(seed), corpus, questions, seed)
    chosen = random.Random(f"kgstream-vs-lightrag-changes-{seed}").sample(
        sorted(corpus), edits + deletes
    )
    revised = tuple(
        (doc_id, revise_document(corpus[doc_id], seed=number, world_seed=seed))
        for number, doc_id in enumerate(chosen[:edits])
    )
    return Workload(corpus, tuple(asked), revised, tuple(chosen[edits:]))
