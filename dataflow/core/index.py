"""The whole indexing pipeline in one process, without Bytewax.

`ReferenceIndex` drives the same step functions as the dataflow, in order, on
plain dictionaries. It is the executable definition of "the index of these
documents": property tests compare incremental runs against fresh builds with
it, and the dataflow's tests compare the stores against its snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from dataflow.core.chunking import Chunk, ChunkingOptions, Tokenizer
from dataflow.core.contributions import (
    ChunkLedger,
    EntityFragment,
    EntityRecord,
    RelationFragment,
    RelationPair,
    RelationRecord,
    Renderer,
)
from dataflow.core.documents import DocumentChange, DocumentLimits, DocumentRecord
from dataflow.core.extraction import Extraction
from dataflow.core.steps import (
    ChunkAdded,
    ChunkExtracted,
    ChunkRemoved,
    ContributionDelta,
    DocumentState,
    EntityDelta,
    update_chunk,
    update_document,
    update_fragments,
)

Extract = Callable[[str], Extraction]
K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class IndexSnapshot:
    """The logical content of an index: what the stores must hold.

    `aliases` is the name index beside the entities: alias key -> the keys of the
    entities carrying it, sorted. It is derived from the entities (`alias_index`),
    and spelled out so that a store's own index is compared with it, not assumed.
    """

    entities: dict[str, EntityRecord]
    relations: dict[RelationPair, RelationRecord]
    chunks: dict[str, Chunk]
    documents: dict[str, DocumentRecord]
    aliases: dict[str, tuple[str, ...]]


def alias_index(entities: Iterable[EntityRecord]) -> dict[str, tuple[str, ...]]:
    """Alias key -> the keys of the entities that carry it, both sorted."""
    index: dict[str, list[str]] = {}
    for entity in entities:
        for alias in entity.aliases:
            index.setdefault(alias, []).append(entity.key)
    return {alias: tuple(sorted(keys)) for alias, keys in sorted(index.items())}


class ReferenceIndex:
    """An in-memory index maintained incrementally by the pure steps."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        extract: Extract,
        chunking: ChunkingOptions = ChunkingOptions(),
        limits: DocumentLimits = DocumentLimits(),
    ) -> None:
        self._tokenizer = tokenizer
        self._extract = extract
        self._chunking = chunking
        self._limits = limits
        self.document_states: dict[str, DocumentState] = {}
        self.documents: dict[str, DocumentRecord] = {}
        self.chunks: dict[str, Chunk] = {}
        self.chunk_states: dict[str, ChunkLedger] = {}
        self.entity_states: dict[str, dict[str, EntityFragment]] = {}
        self.relation_states: dict[RelationPair, dict[str, RelationFragment]] = {}
        self.extraction_calls = 0

    def apply_all(self, changes: Iterable[DocumentChange]) -> None:
        for change in changes:
            self.apply(change)

    def apply(self, change: DocumentChange) -> None:
        doc_id = change.doc_id
        state, outcome = update_document(
            self.document_states.get(doc_id),
            change,
            self._tokenizer,
            self._chunking,
            self._limits,
        )
        _store(self.document_states, doc_id, state)
        if outcome.record is not None:
            self.documents[doc_id] = outcome.record
        elif state is None:
            self.documents.pop(doc_id, None)
        for chunk in outcome.chunks:
            self.chunks[chunk.chunk_id] = chunk
        for chunk_change in outcome.changes:
            if isinstance(chunk_change, ChunkRemoved):
                self.chunks.pop(chunk_change.chunk_id, None)
                self._update_chunk(chunk_change.chunk_id, chunk_change)
            else:
                self._update_chunk(chunk_change.chunk.chunk_id, self._extracted(chunk_change))

    def _extracted(self, added: ChunkAdded) -> ChunkExtracted:
        self.extraction_calls += 1
        return ChunkExtracted(added.chunk, self._extract(added.chunk.text))

    def _update_chunk(self, chunk_id: str, event: ChunkExtracted | ChunkRemoved) -> None:
        state, deltas = update_chunk(self.chunk_states.get(chunk_id), event)
        _store(self.chunk_states, chunk_id, state)
        self._route(deltas)

    def _route(self, deltas: Iterable[ContributionDelta]) -> None:
        for delta in deltas:
            if isinstance(delta, EntityDelta):
                entity_state = update_fragments(
                    self.entity_states.get(delta.key), [(delta.contribution_id, delta.fragment)]
                )
                _store(self.entity_states, delta.key, entity_state)
            else:
                relation_state = update_fragments(
                    self.relation_states.get(delta.key), [(delta.contribution_id, delta.fragment)]
                )
                _store(self.relation_states, delta.key, relation_state)

    def snapshot(self, renderer: Renderer) -> IndexSnapshot:
        entities = {
            key: record
            for key, state in sorted(self.entity_states.items())
            if (record := renderer.entity(key, state)) is not None
        }
        relations = {
            pair: relation
            for pair, state in sorted(self.relation_states.items())
            if (relation := renderer.relation(pair, state)) is not None
        }
        return IndexSnapshot(
            entities=entities,
            relations=relations,
            chunks=dict(sorted(self.chunks.items())),
            documents=dict(sorted(self.documents.items())),
            aliases=alias_index(entities.values()),
        )


def _store(table: dict[K, V], key: K, value: V | None) -> None:
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value
