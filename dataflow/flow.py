"""The Bytewax dataflow: wiring only. Each step calls the pure functions of dataflow/core.

Read dataflow/core/index.py first: it drives the same step functions in one
process and is the definition of "the index of these documents". This module
only routes them through Bytewax, with the commit protocol of
dataflow/core/commit.py on top so the stores know when a document is whole.

    events ─ key doc_id ─ document ─┬─ DocumentPending ──────────────────────────────┐
                                     └─ ChunkTask ─ release chunks (a few per round) ─ │
                                           ─ extract (batch: LLM + embed)              │
                                           ─ key chunk_id ─ chunk ─┬─ ChunkSettled ────┤
                                                                   └─ TaggedDelta      │
                       ┌───────────────────────────────────────────────┘               │
                       ├─ key entity ─ entity ─┐                                       │
                       └─ key pair ─ relation ─┴─ render (batch: summaries + embed)    │
                                                   ─ write records (batch) ─ Ack ──────┤
                                                                                        │
                                      key doc_id ─ document commit ─ stores sink ◄─────┘

Keyed steps hold exactly the state ARCHITECTURE.md names; Bytewax routes a key to
one worker, so merges never race. Writes are partitioned the same way: each worker
writes the entities and relations it owns, then acknowledges them to the worker that
owns their documents, which writes the documents' chunks and statuses. LLM and
embedding calls run concurrently inside the two batch steps (Bytewax has no async
operators).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Generic, TypeGuard, TypeVar, cast

import bytewax.operators as op
from bytewax.dataflow import Dataflow, Stream
from bytewax.inputs import Source
from bytewax.operators import KeyedStream, StatefulBatchLogic
from bytewax.outputs import DynamicSink, StatelessSinkPartition

from dataflow.components import Components
from dataflow.core.commit import (
    AckCounts,
    CommitBatch,
    DocumentCommit,
    chunk_messages,
    count_deltas,
    document_messages,
    merge_batches,
    records_batch,
    release_acks,
    written_acks,
)
from dataflow.core.contributions import (
    ChunkContributions,
    EntityContribution,
    EntityFragment,
    EntityRecord,
    FragmentRows,
    RelationContribution,
    RelationFragment,
    RelationPair,
    RelationRecord,
)
from dataflow.core.messages import (
    Ack,
    ChunkOutcome,
    ChunkSettled,
    ChunkTask,
    DocumentCommitInput,
    DocumentPending,
    EntityFragmentsChanged,
    EntityRendered,
    FragmentsChanged,
    RelationFragmentsChanged,
    RelationRendered,
    SourceEvent,
    TaggedDelta,
)
from dataflow.core.naming import relation_id
from dataflow.core.steps import (
    ChunkAdded,
    ChunkExtracted,
    ChunkRemoved,
    ContributionDelta,
    DocumentRetry,
    DocumentState,
    retry_document,
    update_chunk,
    update_document,
    update_fragments,
)

K = TypeVar("K")
F = TypeVar("F", EntityFragment, RelationFragment)
Out = TypeVar("Out", EntityFragmentsChanged, RelationFragmentsChanged)
Rendered = EntityRendered | RelationRendered


def build_flow(
    source: Source[SourceEvent],
    components: Components,
    flow_id: str = "kgstream",
    retries: Source[SourceEvent] | None = None,
) -> Dataflow:
    """The indexing dataflow over `source`; `retries` is a second input of retry requests
    (`DocumentRetry` events from `kgstream retry-failed`), merged before the document step."""
    flow = Dataflow(flow_id)
    events: Stream[SourceEvent] = op.input("events", flow, source)
    if retries is not None:
        events = op.merge("events_and_retries", events, op.input("retries", flow, retries))
    by_doc: KeyedStream[SourceEvent] = op.key_on("key_doc", events, _doc_id)
    documents: Stream[DocumentPending | ChunkTask] = op.key_rm(
        "unkey_doc",
        op.stateful_flat_map("document", by_doc, _document_step(components)),
    )
    split = op.branch("split_document", documents, _is_pending)
    pending: Stream[DocumentPending] = split.trues
    tasks = cast(Stream[ChunkTask], split.falses)  # branch types its falses as the input
    by_task_doc: KeyedStream[ChunkTask] = op.key_on("key_task_doc", tasks, _ticket_doc_id)
    per_round = components.chunks_per_round
    released: Stream[ChunkTask] = op.key_rm(
        "unkey_task_doc",
        op.stateful_batch(
            "release_chunks", by_task_doc, lambda resume: _ReleaseLogic(resume, per_round)
        ),
    )
    outcomes: Stream[ChunkOutcome] = op.flat_map_batch(
        "extract", released, _extract_step(components)
    )
    by_chunk: KeyedStream[ChunkOutcome] = op.key_on("key_chunk", outcomes, _chunk_id)
    chunk_items: Stream[TaggedDelta | ChunkSettled] = op.key_rm(
        "unkey_chunk", op.stateful_flat_map("chunk", by_chunk, _chunk_step)
    )
    chunk_split = op.branch("split_chunk", chunk_items, _is_settled)
    settled: Stream[ChunkSettled] = chunk_split.trues
    deltas = cast(Stream[TaggedDelta], chunk_split.falses)  # as above
    delta_split = op.branch("split_delta", deltas, _is_entity_delta)
    by_entity: KeyedStream[TaggedDelta] = op.key_on("key_entity", delta_split.trues, _route_key)
    by_relation: KeyedStream[TaggedDelta] = op.key_on(
        "key_relation", delta_split.falses, _route_key
    )
    delay = timedelta(seconds=components.coalesce_seconds)
    renderer = components.renderer
    entities: Stream[EntityFragmentsChanged] = op.key_rm(
        "unkey_entity",
        op.stateful_batch(
            "entity",
            by_entity,
            lambda resume: _EntityLogic(resume, delay, renderer.entity_summary_due),
        ),
    )
    relations: Stream[RelationFragmentsChanged] = op.key_rm(
        "unkey_relation",
        op.stateful_batch(
            "relation",
            by_relation,
            lambda resume: _RelationLogic(resume, delay, renderer.relation_summary_due),
        ),
    )
    changed: Stream[FragmentsChanged] = op.merge("states", entities, relations)
    rendered: Stream[Rendered] = op.flat_map_batch("render", changed, _render_step(components))
    written: Stream[Ack] = op.flat_map_batch(
        "write_records", rendered, _write_records_step(components)
    )
    to_commit: Stream[DocumentCommitInput] = op.merge("to_commit", pending, settled, written)
    keyed: KeyedStream[DocumentCommitInput] = op.key_on("key_commit", to_commit, _ticket_doc_id)
    batches: Stream[CommitBatch] = op.key_rm(
        "unkey_commit",
        op.stateful_batch(
            "document_commit", keyed, lambda resume: _CommitLogic(resume, components)
        ),
    )
    op.output("stores", batches, StoreSink(components))
    return flow


def _doc_id(event: SourceEvent) -> str:
    return event.change.doc_id


def _chunk_id(outcome: ChunkOutcome) -> str:
    return outcome.chunk_id


def _ticket_doc_id(item: DocumentCommitInput | ChunkTask) -> str:
    return item.ticket.doc_id


def _is_pending(item: DocumentPending | ChunkTask) -> TypeGuard[DocumentPending]:
    return isinstance(item, DocumentPending)


def _is_settled(item: TaggedDelta | ChunkSettled) -> TypeGuard[ChunkSettled]:
    return isinstance(item, ChunkSettled)


def _is_entity_delta(item: TaggedDelta) -> bool:
    return isinstance(item.delta.contribution, EntityContribution)


def _route_key(item: TaggedDelta) -> str:
    contribution = item.delta.contribution
    if isinstance(contribution, EntityContribution):
        return contribution.key
    return relation_id(contribution.key)  # Bytewax keys must be str


# -- document step ------------------------------------------------------------

DocumentStep = Callable[
    [DocumentState | None, SourceEvent],
    tuple[DocumentState | None, list[DocumentPending | ChunkTask]],
]


def _document_step(components: Components) -> DocumentStep:
    def step(
        state: DocumentState | None, event: SourceEvent
    ) -> tuple[DocumentState | None, list[DocumentPending | ChunkTask]]:
        if components.observer is not None:
            components.observer.event_received(event)
        change = event.change
        if isinstance(change, DocumentRetry):
            new_state, outcome = retry_document(state, change)
        else:
            new_state, outcome = update_document(
                state, change, components.tokenizer, components.chunking, components.limits
            )
        return new_state, document_messages(event, outcome)

    return step


# -- releasing chunks to extraction -------------------------------------------


class _ReleaseLogic(StatefulBatchLogic[ChunkTask, ChunkTask, list[ChunkTask]]):
    """One document's chunk tasks on their way to extraction (keyed by doc id): at most
    `per_round` chunks to extract per round of the dataflow (0: no bound), in order.

    Bytewax runs a worker's steps in rounds, and the extract step takes everything queued
    for it, so without a bound a large document's thousands of chunks are one extraction,
    with nothing of it committed or shown until all are done. Released a piece per round
    (the rest asks to be called again at once), its chunks go through extraction,
    rendering and the commit in pieces, and its record shows how many have settled.
    Retractions cost no extraction: they do not count, but keep their place in the order.
    At the end of the input (a one-shot run, or a stop) whatever is left goes at once.

    What this does not do (docs/design.md, "Large documents"): let documents that arrive
    later overtake. Bytewax polls a source only once the previous epoch is done, and a
    notification emits at the step's oldest open epoch, so while rounds outlast the
    epoch interval the source waits for the large document's last piece.
    """

    def __init__(self, resume: list[ChunkTask] | None, per_round: int) -> None:
        self.queue: list[ChunkTask] = resume or []
        self.per_round = per_round

    def on_batch(self, values: list[ChunkTask]) -> tuple[Iterable[ChunkTask], bool]:
        self.queue.extend(values)
        return self._release()

    def on_notify(self) -> tuple[Iterable[ChunkTask], bool]:
        return self._release()

    def on_eof(self) -> tuple[Iterable[ChunkTask], bool]:
        # Bytewax calls nothing after the end of the input (a one-shot run, a stop): the
        # rest goes now, so the run still ends with every document complete.
        released, self.queue = self.queue, []
        return released, StatefulBatchLogic.DISCARD

    def notify_at(self) -> datetime | None:
        return datetime.now(UTC) if self.queue else None

    def snapshot(self) -> list[ChunkTask]:
        return list(self.queue)  # the tasks are immutable

    def _release(self) -> tuple[Iterable[ChunkTask], bool]:
        cut, extractions = len(self.queue), 0
        if self.per_round:
            for index, task in enumerate(self.queue):
                if isinstance(task.change, ChunkAdded):
                    if extractions == self.per_round:
                        cut = index
                        break
                    extractions += 1
        released, self.queue = self.queue[:cut], self.queue[cut:]
        return released, not self.queue


# -- extraction (batch) -------------------------------------------------------


def _extract_step(components: Components) -> Callable[[list[ChunkTask]], list[ChunkOutcome]]:
    def step(tasks: list[ChunkTask]) -> list[ChunkOutcome]:
        added = [t.change.chunk for t in tasks if isinstance(t.change, ChunkAdded)]
        texts = [chunk.text for chunk in added]
        extractions = iter(components.extract_many(texts))
        if components.observer is not None and texts:
            components.observer.chunks_extracted(len(texts))
        vectors = iter(components.embed(texts))
        outcomes = []
        for task in tasks:  # in order: removals pass through, additions take the next results
            change = task.change
            if isinstance(change, ChunkRemoved):
                outcomes.append(ChunkOutcome(task.ticket, change))
                continue
            extraction, vector = next(extractions), next(vectors)
            if isinstance(extraction, str):
                removed = ChunkRemoved(change.chunk.chunk_id)
                outcomes.append(ChunkOutcome(task.ticket, removed, failure=extraction))
            else:
                event = ChunkExtracted(change.chunk, extraction)
                outcomes.append(ChunkOutcome(task.ticket, event, vector=vector))
        return outcomes

    return step


# -- chunk step ---------------------------------------------------------------


def _chunk_step(
    state: ChunkContributions | None, outcome: ChunkOutcome
) -> tuple[ChunkContributions | None, list[TaggedDelta | ChunkSettled]]:
    new_state, deltas = update_chunk(state, outcome.event)
    return new_state, chunk_messages(outcome, deltas, new_state)


# -- entity and relation steps ------------------------------------------------


@dataclass
class _FragmentsLogicState(Generic[K, F]):
    key: K | None = None
    fragments: dict[str, F] | None = None
    acks: AckCounts = field(default_factory=Counter)
    due: datetime | None = None  # when the coalesced render is released
    released: datetime | None = None  # when the key's last render was released

    def __getstate__(self) -> dict[str, object]:
        """Pickled with the fragments as rows (`FragmentRows`): a hub is snapshotted whole in
        every epoch it is touched."""
        state = dict(self.__dict__)
        if self.fragments is not None:
            state["fragments"] = FragmentRows.of(self.fragments)
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        fragments = state.get("fragments")
        if isinstance(fragments, FragmentRows):  # snapshots before rows hold the fragments
            state = {**state, "fragments": fragments.restore()}
        self.__dict__.update(state)


def _never(fragments: object) -> bool:
    return False


class _FragmentsLogic(
    StatefulBatchLogic[TaggedDelta, Out, _FragmentsLogicState[K, F]], Generic[K, F, Out]
):
    """Folds a key's deltas and emits its fragments (with acknowledgements) for rendering.

    Without delay, once per batch. With a delay (an LLM summarises descriptions), a key
    whose render is due a summary call (`summary_due`) is rendered at most once per `delay`:
    at once when its last render is at least `delay` old (a lone edit waits for nothing),
    else held until `delay` after that render, so a burst of edits to one entity costs two
    summary calls at most (its first edit's and the rest's), not one per edit. A key whose
    render calls no LLM is released at once.
    """

    def __init__(
        self,
        resume: _FragmentsLogicState[K, F] | None,
        delay: timedelta,
        summary_due: Callable[[dict[str, F] | None], bool] | None = None,
    ) -> None:
        self.state: _FragmentsLogicState[K, F] = resume or _FragmentsLogicState()
        self.delay = delay
        self.summary_due: Callable[[dict[str, F] | None], bool] = summary_due or _never

    def on_batch(self, values: list[TaggedDelta]) -> tuple[Iterable[Out], bool]:
        updates = [self.update(tagged.delta) for tagged in values]
        count_deltas(self.state.acks, values)
        self.state.key = updates[0][0]
        folded = ((contribution_id, fragment) for _, contribution_id, fragment in updates)
        self.state.fragments = update_fragments(self.state.fragments, folded)
        if not self.delay or not self.summary_due(self.state.fragments):
            return self._release()
        if self.state.due is None:
            now, last = datetime.now(UTC), self.state.released
            if last is None or now - last >= self.delay:
                return self._release()
            self.state.due = last + self.delay
        return [], StatefulBatchLogic.RETAIN

    def on_notify(self) -> tuple[Iterable[Out], bool]:
        return self._release()

    def on_eof(self) -> tuple[Iterable[Out], bool]:
        if self.state.due is None:
            return [], StatefulBatchLogic.RETAIN
        return self._release()

    def notify_at(self) -> datetime | None:
        return self.state.due

    def _release(self) -> tuple[Iterable[Out], bool]:
        key = self.state.key
        if key is None:
            raise RuntimeError(f"{type(self).__name__} released before any delta arrived")
        emitted = self.emit(key, self.state.fragments, release_acks(self.state.acks))
        self.state.acks, self.state.due = Counter(), None
        if self.delay:  # read only to hold a render (on_batch); no clock on the hot path
            self.state.released = datetime.now(UTC)
        return [emitted], self.state.fragments is None

    def update(self, delta: ContributionDelta) -> tuple[K, str, F | None]:
        """(key, contribution id, fragment or None for a retraction) of one delta."""
        raise NotImplementedError

    def emit(self, key: K, fragments: dict[str, F] | None, acks: tuple[Ack, ...]) -> Out:
        raise NotImplementedError

    def snapshot(self) -> _FragmentsLogicState[K, F]:
        # Shares the fragments: a fold replaces the dict (update_fragments) and never
        # changes it, and fragments and keys are immutable. Only the counts are mutated.
        state = self.state
        return _FragmentsLogicState(
            state.key, state.fragments, Counter(state.acks), state.due, state.released
        )


class _EntityLogic(_FragmentsLogic[str, EntityFragment, EntityFragmentsChanged]):
    def update(self, delta: ContributionDelta) -> tuple[str, str, EntityFragment | None]:
        contribution = delta.contribution
        if not isinstance(contribution, EntityContribution):
            raise TypeError(f"step 'entity' got a relation delta for {contribution.key!r}")
        fragment = None if delta.retracted else contribution.fragment
        return contribution.key, contribution.contribution_id, fragment

    def emit(
        self, key: str, fragments: dict[str, EntityFragment] | None, acks: tuple[Ack, ...]
    ) -> EntityFragmentsChanged:
        return EntityFragmentsChanged(key, fragments, acks)


class _RelationLogic(_FragmentsLogic[RelationPair, RelationFragment, RelationFragmentsChanged]):
    def update(self, delta: ContributionDelta) -> tuple[RelationPair, str, RelationFragment | None]:
        contribution = delta.contribution
        if not isinstance(contribution, RelationContribution):
            raise TypeError(f"step 'relation' got an entity delta for {contribution.key!r}")
        fragment = None if delta.retracted else contribution.fragment
        return contribution.key, contribution.contribution_id, fragment

    def emit(
        self,
        key: RelationPair,
        fragments: dict[str, RelationFragment] | None,
        acks: tuple[Ack, ...],
    ) -> RelationFragmentsChanged:
        return RelationFragmentsChanged(key, fragments, acks)


# -- render (batch) -----------------------------------------------------------


def _render_step(
    components: Components,
) -> Callable[[list[FragmentsChanged]], list[Rendered]]:
    def step(changed: list[FragmentsChanged]) -> list[Rendered]:
        records = components.render_many(changed)
        texts = [r.embedding_text for r in records if r is not None]
        vectors = iter(components.embed(texts))
        out: list[Rendered] = []
        for item, record in zip(changed, records, strict=True):
            vector = next(vectors) if record is not None else None
            if isinstance(item, EntityFragmentsChanged):
                entity = cast(EntityRecord | None, record)
                out.append(EntityRendered(item.key, entity, vector, item.acks))
            else:
                relation = cast(RelationRecord | None, record)
                out.append(RelationRendered(item.pair, relation, vector, item.acks))
        return out

    return step


# -- writes and the document commit -------------------------------------------

# The Bytewax worker each thread runs, by thread id (set by the sink's build). Not a
# threading.local: Bytewax's Rust threads drop their Python thread state, and with it
# thread-local data, each time they release the GIL.
_WORKERS: dict[int, int] = {}


def worker_index() -> int:
    """The index of the Bytewax worker calling, for per-worker metrics. Bytewax runs each
    worker on a thread of its own and builds the sink partition there first."""
    return _WORKERS.get(threading.get_ident(), 0)


def _write_records_step(components: Components) -> Callable[[list[Rendered]], list[Ack]]:
    """Writes the renders this worker has (the keys it owns), then passes on their
    acknowledgements: a document learns its deltas are applied only once they are stored."""

    def step(rendered: list[Rendered]) -> list[Ack]:
        began = time.thread_time()
        batch, acks = records_batch(rendered), written_acks(rendered)
        components.commit_cpu(worker_index(), time.thread_time() - began)
        components.write(batch, worker_index())
        return acks

    return step


class _CommitLogic(StatefulBatchLogic[DocumentCommitInput, CommitBatch, DocumentCommit]):
    """One document (keyed by doc id): writes its chunks and status, and completes it when
    its last acknowledgement arrives; the state goes once nothing of it is in flight."""

    def __init__(self, resume: DocumentCommit | None, components: Components) -> None:
        self.commit = resume or DocumentCommit()
        self.components = components

    def on_batch(self, values: list[DocumentCommitInput]) -> tuple[Iterable[CommitBatch], bool]:
        began = time.thread_time()
        for value in values:
            self.commit.add(value)
        out = [self.commit.flush()] if self.commit.has_writes() else []
        self.components.commit_cpu(worker_index(), time.thread_time() - began)
        return out, self.commit.idle()

    def snapshot(self) -> DocumentCommit:
        return self.commit.snapshot()


class StoreSink(DynamicSink[CommitBatch]):
    """The documents' writes of each worker, merged into one write per activation."""

    def __init__(self, components: Components) -> None:
        self._components = components

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _StorePartition:
        _WORKERS[threading.get_ident()] = worker_index
        return _StorePartition(self._components, worker_index)


class _StorePartition(StatelessSinkPartition[CommitBatch]):
    def __init__(self, components: Components, worker: int) -> None:
        self._components = components
        self._worker = worker

    def write_batch(self, items: list[CommitBatch]) -> None:
        if items:
            self._components.write(merge_batches(items), self._worker)
