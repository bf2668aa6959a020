"""The commit step: gather everything bound for the stores and release it in batches.

Renders, chunk records and vectors are written as they arrive (latest wins per
key). A document's status changes to PROCESSED (or FAILED, or the record goes
on deletion) only in the batch where its last acknowledgement arrives: every
chunk it changed has settled, and every delta those chunks sent has been
applied and rendered. So a PROCESSED status always means "its whole effect is
in the stores", which is what tests and read-your-writes wait on.

`CommitBuffer` is plain Python without I/O or a clock, so it is tested directly;
the Bytewax logic around it (dataflow/flow.py) only decides when to flush.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from connectors.redis.graph_store import GraphBatch
from connectors.vectors.base import VectorKind, VectorPoint
from dataflow.core.chunking import Chunk
from dataflow.core.contributions import EntityRecord, RelationPair, RelationRecord
from dataflow.core.documents import DocumentRecord, DocumentStatus
from dataflow.core.naming import relation_id
from dataflow.messages import (
    Ack,
    ChunkSettled,
    CommitInput,
    DocumentPending,
    EntityRendered,
    RelationRendered,
    Ticket,
    Vector,
)

RETIRED_TICKETS_KEPT = 10_000


@dataclass(frozen=True)
class CompletedDocument:
    ticket: Ticket
    record: DocumentRecord | None
    event_time: float


@dataclass(frozen=True)
class CommitBatch:
    """One atomic write: vectors first, then the graph batch (which bumps the version)."""

    graph: GraphBatch
    vector_upserts: tuple[VectorPoint, ...]
    vector_deletes: tuple[tuple[VectorKind, str], ...]
    completed: tuple[CompletedDocument, ...]

    def is_empty(self) -> bool:
        return self.graph.is_empty() and not (self.vector_upserts or self.vector_deletes)


@dataclass
class _Progress:
    """How far one document version has come."""

    pending: DocumentPending
    settled: dict[str, ChunkSettled] = field(default_factory=dict)

    def failures(self) -> list[str]:
        return [s.failure for s in self.settled.values() if s.failure]


@dataclass
class CommitBuffer:
    progress: dict[str, _Progress] = field(default_factory=dict)
    current_chunks: dict[str, frozenset[tuple[str, str]]] = field(default_factory=dict)
    acks: Counter[tuple[Ticket, str]] = field(default_factory=Counter)
    early_settles: dict[Ticket, list[ChunkSettled]] = field(default_factory=dict)
    retired: dict[Ticket, None] = field(default_factory=dict)
    entities: dict[str, EntityRendered] = field(default_factory=dict)
    relations: dict[RelationPair, RelationRendered] = field(default_factory=dict)
    chunks: dict[str, Chunk | None] = field(default_factory=dict)
    chunk_vectors: dict[str, tuple[Chunk, Vector] | None] = field(default_factory=dict)
    documents: dict[str, DocumentRecord | None] = field(default_factory=dict)
    completed: list[CompletedDocument] = field(default_factory=list)

    def add(self, item: CommitInput) -> None:
        if isinstance(item, DocumentPending):
            self._start(item)
        elif isinstance(item, ChunkSettled):
            self._settle(item)
        elif isinstance(item, EntityRendered):
            self.entities[item.key] = item
            self._acknowledge(item.acks)
        else:
            self.relations[item.pair] = item
            self._acknowledge(item.acks)

    def _start(self, pending: DocumentPending) -> None:
        doc_id = pending.ticket.doc_id
        previous = self.progress.get(doc_id)
        if previous is not None:
            self._retire(previous.pending.ticket)
        for chunk in pending.chunks:
            self.chunks[chunk.chunk_id] = chunk
        if pending.record is None:
            self.current_chunks.pop(doc_id, None)
        else:
            self.current_chunks[doc_id] = frozenset(
                (c.chunk_id, c.file_path) for c in pending.chunks
            )
        for chunk_id in pending.removed_chunk_ids:
            self.chunks[chunk_id] = None
            self.chunk_vectors[chunk_id] = None
        if pending.record is not None and pending.awaiting:
            self.documents[doc_id] = replace(pending.record, status=DocumentStatus.PROCESSING)
        self.progress[doc_id] = _Progress(pending)
        for settled in self.early_settles.pop(pending.ticket, []):
            self._settle(settled)
        self._check(doc_id)

    def _retire(self, ticket: Ticket) -> None:
        self.retired[ticket] = None
        self.early_settles.pop(ticket, None)
        for key in [k for k in self.acks if k[0] == ticket]:
            del self.acks[key]
        while len(self.retired) > RETIRED_TICKETS_KEPT:
            del self.retired[next(iter(self.retired))]

    def _settle(self, settled: ChunkSettled) -> None:
        # A chunk's vector depends only on its id (doc id + text), so any settle may
        # write it while the chunk is current (same id and path): with several workers
        # a newer version's DocumentPending can overtake the settle of a kept chunk.
        current = self.current_chunks.get(settled.ticket.doc_id, frozenset())
        chunk = settled.chunk
        if (
            settled.vector is not None
            and chunk is not None
            and (chunk.chunk_id, chunk.file_path) in current
        ):
            self.chunk_vectors[chunk.chunk_id] = (chunk, settled.vector)
        if settled.ticket in self.retired:
            return
        progress = self.progress.get(settled.ticket.doc_id)
        if progress is None or progress.pending.ticket != settled.ticket:
            self.early_settles.setdefault(settled.ticket, []).append(settled)
            return
        progress.settled[settled.chunk_id] = settled
        self._check(settled.ticket.doc_id)

    def _acknowledge(self, acks: tuple[Ack, ...]) -> None:
        touched = set()
        for ack in acks:
            if ack.ticket in self.retired:
                continue
            self.acks[(ack.ticket, ack.chunk_id)] += ack.count
            touched.add(ack.ticket.doc_id)
        for doc_id in touched:
            self._check(doc_id)

    def _check(self, doc_id: str) -> None:
        progress = self.progress.get(doc_id)
        if progress is None:
            return
        pending = progress.pending
        for chunk_id in pending.awaiting:
            settled = progress.settled.get(chunk_id)
            if settled is None or self.acks[(pending.ticket, chunk_id)] < settled.deltas:
                return
        record = pending.record
        failures = progress.failures()
        if record is not None and failures:
            record = replace(
                record,
                status=DocumentStatus.FAILED,
                reason=f"extraction failed for {len(failures)} chunk(s): {failures[0]}",
            )
        self.documents[doc_id] = record
        self.completed.append(CompletedDocument(pending.ticket, record, pending.event_time))
        del self.progress[doc_id]
        self._retire(pending.ticket)

    def has_writes(self) -> bool:
        return bool(
            self.entities or self.relations or self.chunks or self.chunk_vectors or self.documents
        )

    def flush(self) -> CommitBatch:
        """Everything buffered as one batch; the buffer keeps only documents in progress."""
        entity_upserts = [r.record for r in self.entities.values() if r.record is not None]
        relation_upserts = [r.record for r in self.relations.values() if r.record is not None]
        graph = GraphBatch(
            entity_upserts=tuple(entity_upserts),
            entity_deletes=tuple(k for k, r in self.entities.items() if r.record is None),
            relation_upserts=tuple(relation_upserts),
            relation_deletes=tuple(p for p, r in self.relations.items() if r.record is None),
            chunk_upserts=tuple(c for c in self.chunks.values() if c is not None),
            chunk_deletes=tuple(k for k, c in self.chunks.items() if c is None),
            document_upserts=tuple(d for d in self.documents.values() if d is not None),
            document_deletes=tuple(k for k, d in self.documents.items() if d is None),
        )
        upserts: list[VectorPoint] = []
        deletes: list[tuple[VectorKind, str]] = []
        for entity in self.entities.values():
            if entity.record is None or entity.vector is None:
                deletes.append((VectorKind.ENTITY, entity.key))
            else:
                upserts.append(entity_point(entity.record, entity.vector))
        for relation in self.relations.values():
            key = relation_id(relation.pair)
            if relation.record is None or relation.vector is None:
                deletes.append((VectorKind.RELATION, key))
            else:
                upserts.append(relation_point(relation.record, relation.vector))
        for chunk_id, chunk_vector in self.chunk_vectors.items():
            if chunk_vector is None:
                deletes.append((VectorKind.CHUNK, chunk_id))
            else:
                upserts.append(chunk_point(*chunk_vector))
        batch = CommitBatch(graph, tuple(upserts), tuple(deletes), tuple(self.completed))
        self.entities, self.relations, self.chunks = {}, {}, {}
        self.chunk_vectors, self.documents, self.completed = {}, {}, []
        return batch


def entity_point(record: EntityRecord, vector: Vector) -> VectorPoint:
    payload = {
        "entity": record.key,
        "name": record.name,
        "file_paths": list(record.file_paths),
        "doc_ids": list(record.doc_ids),
    }
    return VectorPoint(VectorKind.ENTITY, record.key, vector, payload)


def relation_point(record: RelationRecord, vector: Vector) -> VectorPoint:
    payload = {
        "source": record.source,
        "target": record.target,
        "file_paths": list(record.file_paths),
        "doc_ids": list(record.doc_ids),
    }
    return VectorPoint(VectorKind.RELATION, relation_id(record.pair), vector, payload)


def chunk_point(chunk: Chunk, vector: Vector) -> VectorPoint:
    payload = {"chunk_id": chunk.chunk_id, "doc_id": chunk.doc_id, "file_path": chunk.file_path}
    return VectorPoint(VectorKind.CHUNK, chunk.chunk_id, vector, payload)
