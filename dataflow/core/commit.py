"""The commit protocol: when a document's whole effect is in the stores.

A document change gets a `Ticket`; the document step announces what the
version will change (`DocumentPending`), the chunk step says how many deltas
each changed chunk sent (`ChunkSettled`), and the entity and relation steps
release acknowledgements of the deltas they folded with their renders.

Commits are partitioned, with no key that every write passes through:

- each worker writes the renders of the entity and relation keys it owns
  (`records_batch`), and only then sends their acknowledgements (`Ack`) on;
- a document's messages (its pending versions, its chunks' settles and those
  acknowledgements) gather at the worker that owns its doc id, where
  `DocumentCommit` writes its chunk records, chunk vectors and status, and
  turns it PROCESSED (or FAILED, or deletes its record) only in the batch
  where its last acknowledgement arrives, that is, once every render it caused
  is in the stores. So a PROCESSED status always means "its whole effect is in
  the stores", which is what tests and read-your-writes wait on.

Everything here is plain data without I/O or a clock: the Bytewax steps
(dataflow/logic/) call these functions and only decide when to flush, and
connectors/writes.py turns a `CommitBatch` into store writes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Protocol, TypeVar

from dataflow.core.chunking import Chunk
from dataflow.core.contributions import (
    ChunkLedger,
    EntityRecord,
    RelationPair,
    RelationRecord,
)
from dataflow.core.documents import DocumentDelete, DocumentRecord, DocumentStatus, FailureKind
from dataflow.core.messages import (
    NO_MENTIONS,
    Ack,
    ChunkMentions,
    ChunkOutcome,
    ChunkSettled,
    ChunkTask,
    DocumentCommitInput,
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
    outcome: ChunkOutcome,
    deltas: Iterable[ContributionDelta],
    ledger: ChunkLedger | None = None,
) -> list[TaggedDelta | ChunkSettled]:
    """What the chunk step sends: its deltas tagged with the ticket, then how many there
    were, with what the chunk now contributes (`ledger`, the step's new state)."""
    chunk = outcome.event.chunk if isinstance(outcome.event, ChunkExtracted) else None
    tagged: list[TaggedDelta | ChunkSettled] = [
        TaggedDelta(outcome.ticket, outcome.chunk_id, delta) for delta in deltas
    ]
    settled = ChunkSettled(
        outcome.ticket,
        outcome.chunk_id,
        len(tagged),
        outcome.vector,
        chunk,
        outcome.failure,
        mentions_of(ledger),
    )
    return [*tagged, settled]


def mentions_of(ledger: ChunkLedger | None) -> ChunkMentions:
    if ledger is None:
        return NO_MENTIONS
    return ChunkMentions(
        entities=tuple(sorted(ledger.entity_keys())),
        relations=tuple(sorted(set(ledger.relations))),
    )


AckCounts = Counter[tuple[Ticket, str]]
"""Deltas applied but not yet acknowledged, by (ticket, chunk id): an entity or relation
step's share of the protocol."""


def count_deltas(acks: AckCounts, values: Iterable[TaggedDelta]) -> None:
    for tagged in values:
        acks[(tagged.ticket, tagged.chunk_id)] += 1


def release_acks(acks: AckCounts) -> tuple[Ack, ...]:
    """The acknowledgements to send with a render; the caller starts a new count."""
    return tuple(Ack(ticket, chunk_id, n) for (ticket, chunk_id), n in acks.items())


# -- what a commit writes -------------------------------------------------------


@dataclass(frozen=True)
class CompletedDocument:
    ticket: Ticket
    record: DocumentRecord | None
    event_time: float


ChunkVector = tuple[Chunk, Vector, ChunkMentions]
"""A chunk's vector point: the chunk, its vector, and what it contributes."""


@dataclass(frozen=True)
class GraphBatch:
    """The graph records one write changes: what the graph store applies whole, with one
    step of the index version.

    A key may appear in the upserts or the deletes of its kind, not both.
    """

    entity_upserts: tuple[EntityRecord, ...] = ()
    entity_deletes: tuple[str, ...] = ()
    relation_upserts: tuple[RelationRecord, ...] = ()
    relation_deletes: tuple[RelationPair, ...] = ()
    chunk_upserts: tuple[Chunk, ...] = ()
    chunk_deletes: tuple[str, ...] = ()
    document_upserts: tuple[DocumentRecord, ...] = ()
    document_deletes: tuple[str, ...] = ()
    # Documents whose records this write changes while another worker owns their status:
    # any of them stored as PROCESSED reads as PROCESSING from this write on (first, on a
    # cluster), until its own commit completes it again. Only the status moves.
    withdrawn_documents: tuple[str, ...] = ()


@dataclass(frozen=True)
class CommitBatch(GraphBatch):
    """One write, in core types: what the stores must now hold. Its graph records are the
    `GraphBatch` it extends; the vector writes and the documents it completes are its own.

    The stores write it atomically, vectors first, then the graph (whose version
    bump makes the batch visible); `completed` are the documents it finishes.
    """

    entity_vectors: tuple[tuple[EntityRecord, Vector], ...] = ()
    entity_vector_deletes: tuple[str, ...] = ()
    relation_vectors: tuple[tuple[RelationRecord, Vector], ...] = ()
    relation_vector_deletes: tuple[RelationPair, ...] = ()
    chunk_vectors: tuple[ChunkVector, ...] = ()
    chunk_vector_deletes: tuple[str, ...] = ()
    completed: tuple[CompletedDocument, ...] = ()

    def is_empty(self) -> bool:
        """True when nothing is written (the batch may still complete documents)."""
        return not any(
            getattr(self, f.name)
            for f in fields(self)
            if f.name not in ("completed", "withdrawn_documents")
        )

    def size(self) -> Counter[str]:
        """Records written, upserts and deletes, by kind (entity, relation, chunk, document)."""
        return Counter(
            entity=len(self.entity_upserts) + len(self.entity_deletes),
            relation=len(self.relation_upserts) + len(self.relation_deletes),
            chunk=len(self.chunk_upserts) + len(self.chunk_deletes),
            document=len(self.document_upserts) + len(self.document_deletes),
        )


def merge_batches(batches: Sequence[CommitBatch]) -> CommitBatch:
    """Batches of different keys as one write (one transaction, one version)."""
    if len(batches) == 1:
        return batches[0]
    merged = {
        f.name: tuple(x for b in batches for x in getattr(b, f.name)) for f in fields(CommitBatch)
    }
    return CommitBatch(**merged)


def records_batch(rendered: Iterable[EntityRendered | RelationRendered]) -> CommitBatch:
    """The renders a worker has, as one write: the last render of each key wins.

    The documents whose deltas the renders fold are withdrawn from PROCESSED in the same
    write: their status is written by the workers that own them, after this write is
    acknowledged, so without it a document PROCESSED at its previous version would read
    as PROCESSED while the records of that version change (an entity only it cited gone).
    """
    entities: dict[str, EntityRendered] = {}
    relations: dict[RelationPair, RelationRendered] = {}
    withdrawn: dict[str, None] = {}
    for item in rendered:
        withdrawn.update(dict.fromkeys(ack.ticket.doc_id for ack in item.acks))
        if isinstance(item, EntityRendered):
            entities[item.key] = _after(entities.get(item.key), item)
        else:
            relations[item.pair] = _after(relations.get(item.pair), item)
    entity_upserts, entity_vectors, entity_deletes, entity_vector_deletes = _writes(entities)
    relation_upserts, relation_vectors, relation_deletes, relation_vector_deletes = _writes(
        relations
    )
    return CommitBatch(
        entity_upserts=entity_upserts,
        entity_deletes=entity_deletes,
        relation_upserts=relation_upserts,
        relation_deletes=relation_deletes,
        entity_vectors=entity_vectors,
        entity_vector_deletes=entity_vector_deletes,
        relation_vectors=relation_vectors,
        relation_vector_deletes=relation_vector_deletes,
        withdrawn_documents=tuple(withdrawn),
    )


Rendered = TypeVar("Rendered", EntityRendered, RelationRendered)


def _after(earlier: Rendered | None, later: Rendered) -> Rendered:
    """`later`, which replaces `earlier` in a write, with the list changes of both when
    `later`'s follow `earlier`'s (`ListChanges`): the store then still writes only those."""
    if earlier is None or earlier.record is None or later.record is None:
        return later
    first, then = earlier.record.list_changes, later.record.list_changes
    if first is None or then is None or then.since != first.stamp:
        return later
    return replace(later, record=replace(later.record, list_changes=first.then(then)))


K = TypeVar("K", str, RelationPair)
R = TypeVar("R", EntityRecord, RelationRecord, covariant=True)


class _Render(Protocol[R]):
    @property
    def record(self) -> R | None: ...

    @property
    def vector(self) -> Vector | None: ...


def _writes(
    renders: Mapping[K, _Render[R]],
) -> tuple[tuple[R, ...], tuple[tuple[R, Vector], ...], tuple[K, ...], tuple[K, ...]]:
    """Records to upsert, their vectors, keys to delete, and keys whose vector goes."""
    upserts: list[R] = []
    vectors: list[tuple[R, Vector]] = []
    deletes: list[K] = []
    vector_deletes: list[K] = []
    for key, render in renders.items():
        record, vector = render.record, render.vector
        if record is None:
            deletes.append(key)
        else:
            upserts.append(record)
        if record is not None and vector is not None:
            vectors.append((record, vector))
        else:
            vector_deletes.append(key)
    return tuple(upserts), tuple(vectors), tuple(deletes), tuple(vector_deletes)


def written_acks(rendered: Iterable[EntityRendered | RelationRendered]) -> list[Ack]:
    """The acknowledgements to send once `records_batch(rendered)` is written: one per
    (ticket, chunk), for the worker that owns the ticket's document."""
    counts: Counter[tuple[Ticket, str]] = Counter()
    for item in rendered:
        for ack in item.acks:
            counts[(ack.ticket, ack.chunk_id)] += ack.count
    return [Ack(ticket, chunk_id, n) for (ticket, chunk_id), n in counts.items()]


# -- a document's commit --------------------------------------------------------


@dataclass
class VersionMessages:
    """What has arrived of one document version (a ticket)."""

    pending: DocumentPending | None = None  # None while only early settles or acks came
    settled: dict[str, ChunkSettled] = field(default_factory=dict)
    acks: Counter[str] = field(default_factory=Counter)  # deltas written, by chunk id

    def drained(self) -> bool:
        """Every message of this version has arrived: its pending, a settle for each
        chunk it awaits, and the acknowledgement of every delta those settles counted."""
        if self.pending is None:
            return False
        for chunk_id in self.pending.awaiting:
            settled = self.settled.get(chunk_id)
            if settled is None or self.acks[chunk_id] < settled.deltas:
                return False
        return True


@dataclass
class DocumentCommit:
    """The commit state of one document, kept by the worker that owns its doc id.

    It lives only while something of the document is in flight (`idle` says when
    Bytewax may drop it), or while its current version has chunks whose
    extraction failed: bounded by the work in flight, not by the corpus, and
    Bytewax snapshots it only in the epochs that touch the document.
    """

    # Versions whose messages are still to come, by ticket token, in arrival order; each
    # is dropped once drained (so a late settle or ack of a superseded version is matched,
    # never mistaken for a new one).
    versions: dict[str, VersionMessages] = field(default_factory=dict)
    current: Ticket | None = None  # the newest version started (its pending arrived)
    current_done: bool = True  # whether `current` completed
    # The (chunk id, file path)s of the newest version: which settle may write its vector.
    current_chunks: frozenset[tuple[str, str]] = frozenset()
    # Chunks whose extraction failed, in the last completed version or in versions superseded
    # since: chunk id -> reason. An edit keeps an unchanged chunk without extracting it
    # again, so a failed chunk the edit kept still fails the new version (until `kgstream
    # retry-failed` re-extracts it), even when the edit came before the failure did.
    failed_chunks: dict[str, str] = field(default_factory=dict)
    # What the next flush writes.
    chunks: dict[str, Chunk | None] = field(default_factory=dict)
    chunk_vectors: dict[str, ChunkVector | None] = field(default_factory=dict)
    document: tuple[str, DocumentRecord | None] | None = None  # (doc id, record or deleted)
    completed: list[CompletedDocument] = field(default_factory=list)

    def add(self, item: DocumentCommitInput) -> None:
        if isinstance(item, DocumentPending):
            self._start(item)
        elif isinstance(item, ChunkSettled):
            self._version(item.ticket).settled[item.chunk_id] = item
            self._write_vector(item)
            if self.current == item.ticket and not self.current_done:
                self._show_progress(self.versions[item.ticket.token])
        else:
            self._version(item.ticket).acks[item.chunk_id] += item.count
        self._check()

    def idle(self) -> bool:
        """Nothing of the document is in flight, failed or unwritten: the state can go."""
        return not (self.versions or self.failed_chunks or self.has_writes() or self.completed)

    def has_writes(self) -> bool:
        return bool(self.chunks or self.chunk_vectors or self.document is not None)

    def flush(self) -> CommitBatch:
        """What is to write as one batch; the state keeps only what is in flight."""
        doc_id, record = self.document if self.document is not None else ("", None)
        batch = CommitBatch(
            chunk_upserts=tuple(c for c in self.chunks.values() if c is not None),
            chunk_deletes=tuple(k for k, c in self.chunks.items() if c is None),
            document_upserts=(record,) if record is not None else (),
            document_deletes=(doc_id,) if self.document is not None and record is None else (),
            chunk_vectors=tuple(v for v in self.chunk_vectors.values() if v is not None),
            chunk_vector_deletes=tuple(k for k, v in self.chunk_vectors.items() if v is None),
            completed=tuple(self.completed),
        )
        self.chunks, self.chunk_vectors, self.document, self.completed = {}, {}, None, []
        return batch

    def _version(self, ticket: Ticket) -> VersionMessages:
        return self.versions.setdefault(ticket.token, VersionMessages())

    def _start(self, pending: DocumentPending) -> None:
        """A new version: its chunk records are written at once, its status turns
        PROCESSING, and the settles that overtook it may now write their vectors."""
        ticket = pending.ticket
        version = self._version(ticket)
        version.pending = pending
        self.current, self.current_done = ticket, False
        for chunk in pending.chunks:
            self.chunks[chunk.chunk_id] = chunk
        for chunk_id in pending.removed_chunk_ids:
            self.chunks[chunk_id] = None
            self.chunk_vectors[chunk_id] = None
        self.current_chunks = (
            frozenset((c.chunk_id, c.file_path) for c in pending.chunks)
            if pending.record is not None
            else frozenset()
        )
        self._show_progress(version)
        for settled in version.settled.values():
            self._write_vector(settled)

    def _show_progress(self, version: VersionMessages) -> None:
        """The record of a version in flight: PROCESSING, with how many of its changed
        chunks have settled (written with the next flush, so a reader follows a large
        document's progress)."""
        pending = version.pending
        if pending is None or pending.record is None or not pending.awaiting:
            return
        processing = replace(
            pending.record,
            status=DocumentStatus.PROCESSING,
            chunks_settled=len(version.settled),  # a version's settles are of its awaited chunks
            chunks_changed=len(pending.awaiting),
        )
        self.document = (pending.ticket.doc_id, processing)

    def _write_vector(self, settled: ChunkSettled) -> None:
        # A chunk's vector depends only on its id (doc id + text), so any settle may write
        # it while the chunk is current (same id and path): a newer version's pending can
        # overtake the settle of a chunk it kept.
        chunk = settled.chunk
        if (
            settled.vector is not None
            and chunk is not None
            and (chunk.chunk_id, chunk.file_path) in self.current_chunks
        ):
            self.chunk_vectors[chunk.chunk_id] = (chunk, settled.vector, settled.mentions)

    def _check(self) -> None:
        """Forget every drained version but an uncompleted current one; complete the current
        version once it is the only one left, that is, once every message of every version
        has arrived. Waiting for the superseded versions too keeps a withdrawal (see
        `records_batch`) from ever landing after the completion it would undo: the write
        that withdraws is acknowledged before its version drains."""
        current = None if self.current_done else self.current
        for token in [t for t, v in self.versions.items() if v.drained()]:
            if current is None or token != current.token:
                superseded = self.versions.pop(token)
                # A later version may keep a chunk this one failed to extract without
                # extracting it again: it fails that version too (`_with_failures`).
                self.failed_chunks.update(
                    {chunk_id: s.failure for chunk_id, s in superseded.settled.items() if s.failure}
                )
        if current is not None and list(self.versions) == [current.token]:
            version = self.versions[current.token]
            if version.drained():
                self._complete(version)
                del self.versions[current.token]

    def _complete(self, version: VersionMessages) -> None:
        pending = version.pending
        if pending is None:
            raise RuntimeError("DocumentCommit completed a version whose pending never came")
        record = self._with_failures(pending, version)
        self.document = (pending.ticket.doc_id, record)
        self.completed.append(CompletedDocument(pending.ticket, record, pending.event_time))
        self.current_done = True

    def _with_failures(
        self, pending: DocumentPending, version: VersionMessages
    ) -> DocumentRecord | None:
        """The version's record, FAILED when a chunk of it failed extraction: in this
        version, or in an earlier one (completed or superseded) that this version kept the
        chunk from."""
        record = pending.record
        earlier, self.failed_chunks = self.failed_chunks, {}
        if record is None:
            return None
        kept = set(record.chunk_ids) - set(pending.awaiting)
        failed = {chunk_id: reason for chunk_id, reason in earlier.items() if chunk_id in kept}
        failed.update({s.chunk_id: s.failure for s in version.settled.values() if s.failure})
        if not failed:
            return record
        self.failed_chunks = failed
        in_order = tuple(chunk_id for chunk_id in record.chunk_ids if chunk_id in failed)
        return replace(
            record,
            status=DocumentStatus.FAILED,
            reason=f"extraction failed for {len(in_order)} chunk(s): {failed[in_order[0]]}",
            failure_kind=FailureKind.EXTRACTION,
            failed_chunk_ids=in_order,
        )
