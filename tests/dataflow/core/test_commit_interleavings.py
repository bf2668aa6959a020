"""The commit protocol under every message order the dataflow allows.

A small in-test pipeline drives the same pure steps as the dataflow (document,
chunk, entity/relation fold, render) and puts every message it sends on a FIFO
channel per (sender key, receiver key): that is all the ordering Bytewax
guarantees, across any number of workers. Commits are partitioned as in the
dataflow: the renders of each entity and relation key wait on the worker that
owns the key until it writes them (then it sends their acknowledgements on),
and each document's messages gather in its own `DocumentCommit`. Hypothesis
picks which channel delivers next, when a worker writes its renders and when a
document flushes, and the invariants must hold for every such schedule:

- a document completes only in a flush when every delta its change caused is
  in the stores already;
- each document version completes at most once, and each document's last
  version exactly once;
- between any two writes, a document stored as PROCESSED has nothing of a later
  version of it stored yet (the write of a later version's renders withdraws it);
- once everything is delivered, the stores equal the reference index, and no
  document keeps any commit state (it is bounded by the work in flight);
- a recovery snapshot of a document's state, taken at any point, goes on
  exactly as the state it was taken from.
"""

from __future__ import annotations

import pickle
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connectors.tokenizer import TiktokenTokenizer
from dataflow.core.chunking import Chunk, ChunkingOptions
from dataflow.core.commit import (
    CommitBatch,
    DocumentCommit,
    chunk_messages,
    count_deltas,
    document_messages,
    records_batch,
    release_acks,
    written_acks,
)
from dataflow.core.contributions import (
    ChunkLedger,
    EntityRecord,
    RelationPair,
    RelationRecord,
    Renderer,
    RenderOptions,
)
from dataflow.core.documents import (
    DocumentDelete,
    DocumentLimits,
    DocumentRecord,
    DocumentStatus,
    DocumentUpsert,
)
from dataflow.core.index import ReferenceIndex
from dataflow.core.messages import (
    Ack,
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
)
from dataflow.core.offline.extractor import extract_offline
from dataflow.core.steps import (
    ChunkAdded,
    ChunkExtracted,
    DocumentState,
    EntityDelta,
    update_chunk,
    update_document,
    update_fragments,
)
from dataflow.state.forms import snapshot_commit

TOKENIZER = TiktokenTokenizer()
CHUNKING = ChunkingOptions(chunk_token_size=30, chunk_overlap_tokens=4, split_by_character="\n\n")
LIMITS = DocumentLimits()
RENDERER = Renderer(lambda text: len(TOKENIZER.encode(text)), RenderOptions())

SENTENCES = [
    "Alice Moreau founded Northwind Labs in Lisbon.",
    "Northwind Labs partnered with Helios Corp on the Atlas Project.",
    "Bob Tanaka joined Helios Corp after the Geneva Summit.",
    "Alice Moreau met Bob Tanaka in Lisbon.",
    "Carla Diaz leads the Atlas Project at Northwind Labs.",
    "",
]
DOC_IDS = ["a.md", "b.md", "c.md"]
WORKERS = 2

contents = st.lists(st.sampled_from(SENTENCES), min_size=1, max_size=3).map("\n\n".join)
upserts = st.builds(DocumentUpsert, st.sampled_from(DOC_IDS), contents, st.sampled_from(DOC_IDS))
changes = st.lists(upserts | st.builds(DocumentDelete, st.sampled_from(DOC_IDS)), max_size=6)


def vector_of(text: str) -> tuple[float, ...]:
    return (float(len(text)), 1.0)


@dataclass
class Stores:
    """What the stores hold after the flushed batches, plus which deltas they reflect."""

    entities: dict[str, EntityRecord] = field(default_factory=dict)
    relations: dict[RelationPair, RelationRecord] = field(default_factory=dict)
    chunks: dict[str, Chunk] = field(default_factory=dict)
    documents: dict[str, DocumentRecord] = field(default_factory=dict)
    entity_vectors: set[str] = field(default_factory=set)
    relation_vectors: set[RelationPair] = field(default_factory=set)
    chunk_vectors: set[str] = field(default_factory=set)
    applied: set[int] = field(default_factory=set)  # delta ids in the stored renders

    def write(self, batch: CommitBatch, rendered: frozenset[int] = frozenset()) -> None:
        _update(self.entities, {r.key: r for r in batch.entity_upserts}, batch.entity_deletes)
        _update(self.relations, {r.pair: r for r in batch.relation_upserts}, batch.relation_deletes)
        _update(self.chunks, {c.chunk_id: c for c in batch.chunk_upserts}, batch.chunk_deletes)
        for doc_id in batch.withdrawn_documents:
            stored = self.documents.get(doc_id)
            if stored is not None and stored.status is DocumentStatus.PROCESSED:
                self.documents[doc_id] = replace(stored, status=DocumentStatus.PROCESSING)
        documents = {d.doc_id: d for d in batch.document_upserts}
        _update(self.documents, documents, batch.document_deletes)
        self.entity_vectors -= set(batch.entity_vector_deletes)
        self.entity_vectors |= {r.key for r, _ in batch.entity_vectors}
        self.relation_vectors -= set(batch.relation_vector_deletes)
        self.relation_vectors |= {r.pair for r, _ in batch.relation_vectors}
        self.chunk_vectors -= set(batch.chunk_vector_deletes)
        self.chunk_vectors |= {c.chunk_id for c, _, _ in batch.chunk_vectors}
        self.applied |= rendered


def _update(table: dict, upserts: dict, deletes) -> None:
    for key in deletes:
        table.pop(key, None)
    table.update(upserts)


@dataclass
class Pipeline:
    """The dataflow's keyed steps as plain dictionaries, fed from FIFO channels."""

    channels: dict[tuple[object, object], deque[tuple[object, object]]] = field(
        default_factory=dict
    )
    document_states: dict[str, DocumentState] = field(default_factory=dict)
    chunk_states: dict[str, ChunkLedger] = field(default_factory=dict)
    fragments: dict[object, dict] = field(default_factory=dict)
    folded: dict[object, frozenset[int]] = field(default_factory=dict)  # key -> delta ids
    acks: dict[object, Counter[tuple[Ticket, str]]] = field(default_factory=dict)
    # The renders each worker holds until it writes them, with the delta ids they reflect.
    unwritten: dict[int, list[tuple[EntityRendered | RelationRendered, frozenset[int]]]] = field(
        default_factory=dict
    )
    commits: dict[str, DocumentCommit] = field(default_factory=dict)  # by doc id, while kept
    deltas_of: dict[Ticket, set[int]] = field(default_factory=dict)
    tickets_of: dict[str, list[Ticket]] = field(default_factory=dict)  # in event order
    processed_at: dict[str, Ticket] = field(default_factory=dict)  # the version last completed
    last_ticket: dict[str, Ticket] = field(default_factory=dict)
    completions: list[Ticket] = field(default_factory=list)
    stores: Stores = field(default_factory=Stores)
    next_delta: int = 0

    def send(self, sender: object, receiver: object, message: object, meta: object = None) -> None:
        self.channels.setdefault((sender, receiver), deque()).append((message, meta))

    def ingest(self, events: list[SourceEvent]) -> None:
        """The document step, in order per doc id (its input is keyed by doc id)."""
        for event in events:
            doc_id = event.change.doc_id
            state, outcome = update_document(
                self.document_states.get(doc_id), event.change, TOKENIZER, CHUNKING, LIMITS
            )
            if state is None:
                self.document_states.pop(doc_id, None)
            else:
                self.document_states[doc_id] = state
            for message in document_messages(event, outcome):
                if isinstance(message, DocumentPending):
                    self.last_ticket[doc_id] = message.ticket
                    self.tickets_of.setdefault(doc_id, []).append(message.ticket)
                    self.deltas_of.setdefault(message.ticket, set())
                    self.send(("doc", doc_id), ("commit", doc_id), message)
                else:
                    self.send(("doc", doc_id), ("chunk", _chunk_id(message)), message)

    def ready(self) -> list[tuple[object, object]]:
        return sorted((k for k, queue in self.channels.items() if queue), key=repr)

    def deliver(self, channel: tuple[object, object]) -> None:
        message, meta = self.channels[channel].popleft()
        receiver = channel[1]
        if isinstance(receiver, tuple) and receiver[0] == "commit":
            assert isinstance(message, DocumentPending | ChunkSettled | Ack)
            self.commit(receiver[1], [message])
        elif isinstance(message, ChunkTask):
            self._chunk(receiver, message)
        else:
            assert isinstance(message, TaggedDelta) and isinstance(meta, int)
            self._fold(receiver, message, meta)

    def commit(self, doc_id: str, messages: list[DocumentCommitInput]) -> None:
        """The document commit step for one batch of one doc id; dropped when idle."""
        state = self.commits.setdefault(doc_id, DocumentCommit())
        for message in messages:
            state.add(message)
        if state.has_writes():
            batch = state.flush()
            self.stores.write(batch)
            for completed in batch.completed:
                missing = self.deltas_of[completed.ticket] - self.stores.applied
                assert not missing, f"{completed.ticket} completed before {missing} were stored"
                self.completions.append(completed.ticket)
                self.processed_at[doc_id] = completed.ticket
            self.check_reader_view()
        if state.idle():
            del self.commits[doc_id]

    def write(self, worker: int) -> None:
        """A worker's write step: its renders in one write, then their acknowledgements."""
        held = self.unwritten.pop(worker, [])
        if not held:
            return
        rendered = [item for item, _ in held]
        self.stores.write(records_batch(rendered), frozenset().union(*(ids for _, ids in held)))
        self.check_reader_view()
        for ack in written_acks(rendered):
            self.send(("write", worker), ("commit", ack.ticket.doc_id), ack)

    def check_reader_view(self) -> None:
        """What a reader may see between writes: a document stored as PROCESSED has the
        effect of the version that completed it and nothing of a later version of it (its
        records, written by other workers, may not have moved on without it)."""
        for doc_id, record in self.stores.documents.items():
            if record.status is not DocumentStatus.PROCESSED:
                continue
            tickets = self.tickets_of[doc_id]
            later = tickets[tickets.index(self.processed_at[doc_id]) + 1 :]
            moved = set().union(*(self.deltas_of[t] for t in later)) & self.stores.applied
            assert not moved, f"{doc_id} reads as PROCESSED with {moved} of a later version stored"

    def _chunk(self, receiver: object, task: ChunkTask) -> None:
        """Extraction then the chunk step (keyed by chunk id)."""
        change = task.change
        if isinstance(change, ChunkAdded):
            event = ChunkExtracted(change.chunk, extract_offline(change.chunk.text))
            outcome = ChunkOutcome(task.ticket, event, vector=vector_of(change.chunk.text))
        else:
            outcome = ChunkOutcome(task.ticket, change)
        chunk_id = outcome.chunk_id
        state, deltas = update_chunk(self.chunk_states.get(chunk_id), outcome.event)
        if state is None:
            self.chunk_states.pop(chunk_id, None)
        else:
            self.chunk_states[chunk_id] = state
        for message in chunk_messages(outcome, deltas, state):
            if isinstance(message, ChunkSettled):
                self.send(receiver, ("commit", message.ticket.doc_id), message)
                continue
            delta = message.delta
            kind = "entity" if isinstance(delta, EntityDelta) else "relation"
            self.next_delta += 1
            self.deltas_of[message.ticket].add(self.next_delta)
            self.send(receiver, (kind, delta.key), message, self.next_delta)

    def _fold(self, key: object, tagged: TaggedDelta, delta_id: int) -> None:
        """The entity or relation step for one batch of one delta, then the render step;
        the render waits on the key's worker for its write."""
        delta = tagged.delta
        acks = self.acks.setdefault(key, Counter())
        count_deltas(acks, [tagged])
        fragments = update_fragments(
            self.fragments.get(key), [(delta.contribution_id, delta.fragment)]
        )
        self.folded[key] = self.folded.get(key, frozenset()) | {delta_id}
        released = release_acks(acks)
        self.acks[key] = Counter()
        rendered: EntityRendered | RelationRendered
        if isinstance(delta, EntityDelta):
            record = RENDERER.entity(delta.key, fragments or {})
            vector = vector_of(record.embedding_text) if record else None
            rendered = EntityRendered(delta.key, record, vector, released)
        else:
            relation = RENDERER.relation(delta.key, fragments or {})
            vector = vector_of(relation.embedding_text) if relation else None
            rendered = RelationRendered(delta.key, relation, vector, released)
        if fragments is None:
            self.fragments.pop(key, None)
        else:
            self.fragments[key] = fragments
        worker = sum(map(ord, repr(key))) % WORKERS
        self.unwritten.setdefault(worker, []).append((rendered, self.folded[key]))


def _chunk_id(task: ChunkTask) -> str:
    change = task.change
    return change.chunk.chunk_id if isinstance(change, ChunkAdded) else change.chunk_id


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
@given(changes=changes, data=st.data())
def test_documents_complete_once_and_only_when_their_effects_are_stored(changes, data):
    events = [SourceEvent(change, f"test:{i}", float(i)) for i, change in enumerate(changes)]
    pipeline = Pipeline()
    pipeline.ingest(events)
    while (ready := pipeline.ready()) or pipeline.unwritten:
        step = data.draw(st.integers(0, 9), label="step") if ready else 0
        if step == 0 and pipeline.unwritten:  # a worker writes its renders
            pipeline.write(data.draw(st.sampled_from(sorted(pipeline.unwritten)), label="write"))
        elif step == 1 and pipeline.commits:  # a recovery snapshot of a document, by pickle
            doc_id = data.draw(st.sampled_from(sorted(pipeline.commits)), label="snapshot")
            state = snapshot_commit(pipeline.commits[doc_id])
            pipeline.commits[doc_id] = pickle.loads(pickle.dumps(state))
        else:
            pipeline.deliver(data.draw(st.sampled_from(ready), label="deliver"))
    assert not pipeline.commits, "documents with nothing in flight keep commit state"

    counts = Counter(pipeline.completions)
    assert all(n == 1 for n in counts.values()), counts
    for doc_id, ticket in pipeline.last_ticket.items():
        assert counts[ticket] == 1, f"the last version of {doc_id} did not complete"

    reference = ReferenceIndex(TOKENIZER, extract_offline, CHUNKING, LIMITS)
    reference.apply_all(changes)
    expected = reference.snapshot(RENDERER)
    stores = pipeline.stores
    assert stores.entities == expected.entities
    assert stores.relations == expected.relations
    assert stores.chunks == expected.chunks
    assert stores.documents == expected.documents
    assert stores.entity_vectors == set(expected.entities)
    assert stores.relation_vectors == set(expected.relations)
    assert stores.chunk_vectors == set(expected.chunks)


def deliver_all_but(pipeline: Pipeline, held: Callable[[tuple, object], bool]) -> None:
    """Deliver and write until nothing is left but messages `held(channel, message)`."""
    while True:
        ready = [c for c in pipeline.ready() if not held(c, pipeline.channels[c][0][0])]
        if ready:
            pipeline.deliver(ready[0])
        elif pipeline.unwritten:
            pipeline.write(min(pipeline.unwritten))
        else:
            return


def test_an_edit_withdraws_a_processed_document_before_its_records_change():
    """The edit's renders are written (on the workers that own the entities) before any of
    its messages reach the document's commit; the document, PROCESSED at its first version,
    must not read so while they change its records (check_reader_view runs at each write)."""
    first = DocumentUpsert("a.md", "\n\n".join(SENTENCES[:2]), "a.md")
    edit = DocumentUpsert("a.md", SENTENCES[2], "a.md")
    pipeline = Pipeline()
    pipeline.ingest([SourceEvent(first, "test:0", 0.0), SourceEvent(edit, "test:1", 1.0)])
    v1, v2 = pipeline.tickets_of["a.md"]
    deliver_all_but(pipeline, lambda channel, message: message.ticket == v2)
    assert pipeline.completions == [v1]
    assert pipeline.stores.documents["a.md"].status is DocumentStatus.PROCESSED
    deliver_all_but(pipeline, lambda channel, message: channel[1] == ("commit", "a.md"))
    assert "northwind labs" not in pipeline.stores.entities  # the edit's renders are written
    assert pipeline.stores.documents["a.md"].status is DocumentStatus.PROCESSING
    deliver_all_but(pipeline, lambda channel, message: False)
    assert pipeline.completions == [v1, v2] and not pipeline.commits
    assert pipeline.stores.documents["a.md"].status is DocumentStatus.PROCESSED
