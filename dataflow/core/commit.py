"""The commit protocol: when a document's whole effect is in the stores.

A document change gets a `Ticket`; the document step announces what the
version will change (`DocumentPending`), the chunk step says how many deltas
each changed chunk sent (`ChunkSettled`), and the entity and relation steps
acknowledge the deltas they applied (`Ack`s, passed on by the render step).
`CommitBuffer` gathers all of it: renders, chunk records and vectors are
written as they arrive (latest wins per key), and a document's status changes
to PROCESSED (or FAILED, or the record goes on deletion) only in the batch
where its last acknowledgement arrives. So a PROCESSED status always means
"its whole effect is in the stores", which is what tests and read-your-writes
wait on.

Everything here is plain data without I/O or a clock: the Bytewax steps
(dataflow/flow.py) call these functions and only decide when to flush, and
connectors/writes.py turns a `CommitBatch` into store writes.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from dataflow.core.chunking import Chunk
from dataflow.core.contributions import EntityRecord, RelationPair, RelationRecord
from dataflow.core.documents import DocumentDelete, DocumentRecord, DocumentStatus
from dataflow.core.messages import (
    Ack,
    ChunkOutcome,
    ChunkSettled,
    ChunkTask,
    CommitInput,
    DocumentPending,
    EntityRendered,
    RelationRendered,
    SourceEvent,
    TaggedDelta,
    Ticket,
    Vector,
)
from dataflow.core.steps import (
    ChunkAdded,
    ChunkExtracted,
    ChunkRemoved,
    ContributionDelta,
    DocumentOutcome,
)

# -- the steps' side of the protocol ------------------------------------------


def document_messages(
    event: SourceEvent, outcome: DocumentOutcome
) -> list[DocumentPending | ChunkTask]:
    """What the document step sends for one change: nothing if it changes nothing,
    else a `DocumentPending` for the commit step and one `ChunkTask` per changed chunk."""
    unchanged = outcome.record is None and not isinstance(event.change, DocumentDelete)
    if unchanged:
        return []
    ticket = Ticket(event.change.doc_id, f"{event.origin}@{event.event_time!r}")
    awaiting = tuple(
        change.chunk.chunk_id if isinstance(change, ChunkAdded) else change.chunk_id
        for change in outcome.changes
    )
    removed = tuple(c.chunk_id for c in outcome.changes if isinstance(c, ChunkRemoved))
    pending = DocumentPending(
        ticket=ticket,
        record=outcome.record,
        chunks=outcome.chunks,
        removed_chunk_ids=removed,
        awaiting=awaiting,
        event_time=event.event_time,
    )
    tasks = [ChunkTask(ticket, change) for change in outcome.changes]
    return [pending, *tasks]


def chunk_messages(
    outcome: ChunkOutcome, deltas: Iterable[ContributionDelta]
) -> list[TaggedDelta | ChunkSettled]:
    """What the chunk step sends: its deltas tagged with the ticket, then how many there were."""
    chunk = outcome.event.chunk if isinstance(outcome.event, ChunkExtracted) else None
    tagged: list[TaggedDelta | ChunkSettled] = [
        TaggedDelta(outcome.ticket, outcome.chunk_id, delta) for delta in deltas
    ]
    settled = ChunkSettled(
        outcome.ticket, outcome.chunk_id, len(tagged), outcome.vector, chunk, outcome.failure
    )
    return [*tagged, settled]


AckCounts = Counter[tuple[Ticket, str]]
"""Deltas applied but not yet acknowledged, by (ticket, chunk id): an entity or relation
step's share of the protocol."""


def count_deltas(acks: AckCounts, values: Iterable[TaggedDelta]) -> None:
    for tagged in values:
        acks[(tagged.ticket, tagged.chunk_id)] += 1


def release_acks(acks: AckCounts) -> tuple[Ack, ...]:
    """The acknowledgements to send with a render; the caller starts a new count."""
    return tuple(Ack(ticket, chunk_id, n) for (ticket, chunk_id), n in acks.items())


# -- the commit step ----------------------------------------------------------

RETIRED_TICKETS_KEPT = 10_000

_PINNED = 1 << 40
"""`CommitBuffer.in_flight` of a document whose count is unknown (a legacy snapshot)."""


def retired_digest(ticket: Ticket) -> bytes:
    """What `CommitBuffer.retired` keeps of a ticket: a digest, not the doc id and origin,
    so the snapshots of the commit step do not name documents long deleted (`kgstream
    compact` leaves them no trace)."""
    return hashlib.blake2b(
        f"{ticket.doc_id}\0{ticket.token}".encode("utf-8", "surrogatepass"), digest_size=16
    ).digest()


@dataclass(frozen=True)
class CompletedDocument:
    ticket: Ticket
    record: DocumentRecord | None
    event_time: float


@dataclass(frozen=True)
class CommitBatch:
    """One flush of the commit step, in core types: what the stores must now hold.

    The stores write it atomically, vectors first, then the graph (whose version
    bump makes the batch visible); `completed` are the documents it finishes.
    """

    entity_upserts: tuple[EntityRecord, ...] = ()
    entity_deletes: tuple[str, ...] = ()
    relation_upserts: tuple[RelationRecord, ...] = ()
    relation_deletes: tuple[RelationPair, ...] = ()
    chunk_upserts: tuple[Chunk, ...] = ()
    chunk_deletes: tuple[str, ...] = ()
    document_upserts: tuple[DocumentRecord, ...] = ()
    document_deletes: tuple[str, ...] = ()
    entity_vectors: tuple[tuple[EntityRecord, Vector], ...] = ()
    entity_vector_deletes: tuple[str, ...] = ()
    relation_vectors: tuple[tuple[RelationRecord, Vector], ...] = ()
    relation_vector_deletes: tuple[RelationPair, ...] = ()
    chunk_vectors: tuple[tuple[Chunk, Vector], ...] = ()
    chunk_vector_deletes: tuple[str, ...] = ()
    completed: tuple[CompletedDocument, ...] = ()

    def is_empty(self) -> bool:
        """True when nothing is written (the batch may still complete documents)."""
        writes = (
            self.entity_upserts,
            self.entity_deletes,
            self.relation_upserts,
            self.relation_deletes,
            self.chunk_upserts,
            self.chunk_deletes,
            self.document_upserts,
            self.document_deletes,
            self.entity_vectors,
            self.entity_vector_deletes,
            self.relation_vectors,
            self.relation_vector_deletes,
            self.chunk_vectors,
            self.chunk_vector_deletes,
        )
        return not any(writes)


@dataclass
class _Progress:
    """How far one document version has come."""

    pending: DocumentPending
    settled: dict[str, ChunkSettled] = field(default_factory=dict)


@dataclass
class CommitBuffer:
    """The commit step's state. What it keeps between flushes is bounded by the work in
    flight, not by the corpus: a document's entries (its progress, its current chunk set,
    its count of settles still to come) go once nothing of it is in flight, so the
    snapshot Bytewax takes every epoch stays small however many documents are indexed.
    """

    progress: dict[str, _Progress] = field(default_factory=dict)
    # The (chunk id, file path)s of the newest started version, while settles of the
    # document are still to come (`in_flight`): which settle may write its chunk's vector.
    current_chunks: dict[str, frozenset[tuple[str, str]]] = field(default_factory=dict)
    # Per document: settles still to come for every version started so far (below zero
    # while settles have overtaken their version's DocumentPending).
    in_flight: Counter[str] = field(default_factory=Counter)
    acks: Counter[tuple[Ticket, str]] = field(default_factory=Counter)
    early_settles: dict[Ticket, list[ChunkSettled]] = field(default_factory=dict)
    retired: dict[bytes, None] = field(default_factory=dict)  # `retired_digest`s
    entities: dict[str, EntityRendered] = field(default_factory=dict)
    relations: dict[RelationPair, RelationRendered] = field(default_factory=dict)
    chunks: dict[str, Chunk | None] = field(default_factory=dict)
    chunk_vectors: dict[str, tuple[Chunk, Vector] | None] = field(default_factory=dict)
    documents: dict[str, DocumentRecord | None] = field(default_factory=dict)
    completed: list[CompletedDocument] = field(default_factory=list)
    # Documents whose current version has chunks whose extraction failed: chunk id -> reason.
    # An edit keeps an unchanged chunk without extracting it again, so a failed chunk the
    # edit kept still fails the new version (until `kgstream retry-failed` re-extracts it).
    failed_chunks: dict[str, dict[str, str]] = field(default_factory=dict)

    def __setstate__(self, state: dict[str, object]) -> None:
        # Recovery snapshots taken before `failed_chunks` existed resume with none; before
        # `in_flight` existed, every document's chunk set was kept: those stay pinned, as
        # their settles still to come are not known.
        legacy = "in_flight" not in state
        self.__dict__.update({"failed_chunks": {}, "in_flight": Counter(), **state})
        if legacy:
            self.in_flight.update({doc_id: _PINNED for doc_id in self.current_chunks})

    def snapshot(self) -> CommitBuffer:
        """A copy for Bytewax's recovery snapshot: containers copied, their values shared
        (chunks, records, tickets, vectors and chunk sets are immutable)."""
        return CommitBuffer(
            progress={k: _Progress(p.pending, dict(p.settled)) for k, p in self.progress.items()},
            current_chunks=dict(self.current_chunks),
            in_flight=Counter(self.in_flight),
            acks=Counter(self.acks),
            early_settles={k: list(v) for k, v in self.early_settles.items()},
            retired=dict(self.retired),
            entities=dict(self.entities),
            relations=dict(self.relations),
            chunks=dict(self.chunks),
            chunk_vectors=dict(self.chunk_vectors),
            documents=dict(self.documents),
            completed=list(self.completed),
            failed_chunks={k: dict(v) for k, v in self.failed_chunks.items()},
        )

    def add(self, item: CommitInput) -> None:
        if isinstance(item, DocumentPending):
            self._start(item)
            self._forget_if_idle(item.ticket.doc_id)
        elif isinstance(item, ChunkSettled):
            self.in_flight[item.ticket.doc_id] -= 1
            self._settle(item)
            self._forget_if_idle(item.ticket.doc_id)
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
        self.in_flight[doc_id] += len(pending.awaiting)
        for settled in self.early_settles.pop(pending.ticket, []):
            self._settle(settled)
        self._check(doc_id)

    def _forget_if_idle(self, doc_id: str) -> None:
        """Drop what the buffer keeps of a document once no settle of it is to come: a
        later settle can then only belong to a version not started yet, which brings its
        own chunk set."""
        if self.in_flight[doc_id] == 0 and doc_id not in self.progress:
            del self.in_flight[doc_id]
            self.current_chunks.pop(doc_id, None)

    def _retire(self, ticket: Ticket) -> None:
        self.retired[retired_digest(ticket)] = None
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
        if retired_digest(settled.ticket) in self.retired:
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
            if retired_digest(ack.ticket) in self.retired:
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
        record = self._with_failures(pending, progress)
        self.documents[doc_id] = record
        self.completed.append(CompletedDocument(pending.ticket, record, pending.event_time))
        del self.progress[doc_id]
        self._retire(pending.ticket)
        self._forget_if_idle(doc_id)

    def _with_failures(
        self, pending: DocumentPending, progress: _Progress
    ) -> DocumentRecord | None:
        """The version's record, FAILED when a chunk of it failed extraction: in this
        version, or in an earlier one that this version kept the chunk from."""
        record = pending.record
        doc_id = pending.ticket.doc_id
        earlier = self.failed_chunks.pop(doc_id, {})
        if record is None:
            return None
        kept = set(record.chunk_ids) - set(pending.awaiting)
        failed = {chunk_id: reason for chunk_id, reason in earlier.items() if chunk_id in kept}
        failed.update({s.chunk_id: s.failure for s in progress.settled.values() if s.failure})
        if not failed:
            return record
        self.failed_chunks[doc_id] = failed
        in_order = tuple(chunk_id for chunk_id in record.chunk_ids if chunk_id in failed)
        return replace(
            record,
            status=DocumentStatus.FAILED,
            reason=f"extraction failed for {len(in_order)} chunk(s): {failed[in_order[0]]}",
            failed_chunk_ids=in_order,
        )

    def has_writes(self) -> bool:
        return bool(
            self.entities or self.relations or self.chunks or self.chunk_vectors or self.documents
        )

    def flush(self) -> CommitBatch:
        """Everything buffered as one batch; the buffer keeps only documents in progress."""
        entities, relations = self.entities.values(), self.relations.values()
        batch = CommitBatch(
            entity_upserts=tuple(r.record for r in entities if r.record is not None),
            entity_deletes=tuple(k for k, r in self.entities.items() if r.record is None),
            relation_upserts=tuple(r.record for r in relations if r.record is not None),
            relation_deletes=tuple(p for p, r in self.relations.items() if r.record is None),
            chunk_upserts=tuple(c for c in self.chunks.values() if c is not None),
            chunk_deletes=tuple(k for k, c in self.chunks.items() if c is None),
            document_upserts=tuple(d for d in self.documents.values() if d is not None),
            document_deletes=tuple(k for k, d in self.documents.items() if d is None),
            entity_vectors=tuple(
                (r.record, r.vector)
                for r in entities
                if r.record is not None and r.vector is not None
            ),
            entity_vector_deletes=tuple(
                r.key for r in entities if r.record is None or r.vector is None
            ),
            relation_vectors=tuple(
                (r.record, r.vector)
                for r in relations
                if r.record is not None and r.vector is not None
            ),
            relation_vector_deletes=tuple(
                r.pair for r in relations if r.record is None or r.vector is None
            ),
            chunk_vectors=tuple(v for v in self.chunk_vectors.values() if v is not None),
            chunk_vector_deletes=tuple(k for k, v in self.chunk_vectors.items() if v is None),
            completed=tuple(self.completed),
        )
        self.entities, self.relations, self.chunks = {}, {}, {}
        self.chunk_vectors, self.documents, self.completed = {}, {}, []
        return batch
