"""The Bytewax dataflow: wiring only. Each step calls the pure functions of dataflow/core.

Read dataflow/core/index.py first: it drives the same step functions in one
process and is the definition of "the index of these documents". This module
only routes them through Bytewax, with the commit protocol of
dataflow/core/commit.py on top so the stores know when a document is whole.

    events ─ key doc_id ─ document ─┬─ DocumentPending ──────────────────────────────┐
                                     └─ ChunkTask ─ key lane ─ extract (on the pool's  │
                                           threads: LLM + embed; passed on in order)   │
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
owns their documents, which writes the documents' chunks and statuses. Extraction runs
on the extraction pool's threads (dataflow/extraction_pool.py), never on the dataflow's;
renders call the LLM concurrently inside their batch step.
"""

from __future__ import annotations

import pickle
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, Protocol, TypeGuard, TypeVar, cast

import bytewax.operators as op
from bytewax.dataflow import Dataflow, Stream, operator
from bytewax.inputs import FixedPartitionedSource, Source
from bytewax.operators import KeyedStream, StatefulBatchLogic, StatefulLogic
from bytewax.outputs import DynamicSink, StatelessSinkPartition

from dataflow.components import Components, IndexObserver
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
    ChunkLedger,
    Draft,
    EntityDraft,
    EntityFragment,
    EntityRecord,
    FragmentRows,
    RelationDraft,
    RelationFragment,
    RelationPair,
    RelationRecord,
    entity_draft,
    relation_draft,
)
from dataflow.core.fragment_log import LOG_OVER, FragmentLog, HeldBase, restore_log
from dataflow.core.messages import (
    Ack,
    ChunkOutcome,
    ChunkSettled,
    ChunkTask,
    DocumentCommitInput,
    DocumentPending,
    Drafted,
    EntityDrafted,
    EntityRendered,
    RelationDrafted,
    RelationRendered,
    SourceEvent,
    TaggedDelta,
    Ticket,
)
from dataflow.core.naming import relation_id
from dataflow.core.snapshots import is_packed, pack, unpack
from dataflow.core.steps import (
    ChunkAdded,
    ChunkExtracted,
    ChunkRemoved,
    ContributionDelta,
    DocumentRetry,
    DocumentState,
    EntityDelta,
    RelationDelta,
    fold_fragments,
    retry_document,
    update_chunk,
    update_document,
)
from dataflow.core.tally import EntityTally, FragmentTally, RelationTally
from dataflow.extraction_pool import Extracted, ExtractionPool, GatedSource

K = TypeVar("K")
V = TypeVar("V")
W = TypeVar("W")
S = TypeVar("S", bound="Packs")
F = TypeVar("F", EntityFragment, RelationFragment)
D = TypeVar("D", EntityDraft, RelationDraft)
Out = TypeVar("Out", EntityDrafted, RelationDrafted)
Rendered = EntityRendered | RelationRendered


def build_flow(
    source: Source[SourceEvent],
    components: Components,
    flow_id: str = "kgstream",
    retries: Source[SourceEvent] | None = None,
    lanes: int = 1,
) -> Dataflow:
    """The indexing dataflow over `source`; `retries` is a second input of retry requests
    (`DocumentRetry` events from `kgstream retry-failed`), merged before the document step.
    `lanes`: how many keys the extract step spreads documents over (the workers of the
    whole cluster, so that each can hold some)."""
    flow = Dataflow(flow_id)
    events: Stream[SourceEvent] = op.input("events", flow, _gated(source, components))
    if retries is not None:
        retried = op.input("retries", flow, _gated(retries, components))
        events = op.merge("events_and_retries", events, retried)
    by_doc: KeyedStream[SourceEvent] = op.key_on("key_doc", events, _doc_id)
    documents: Stream[DocumentPending | ChunkTask] = op.key_rm(
        "unkey_doc",
        packed_flat_map("document", by_doc, _document_step(components), DocumentState.unpacked),
    )
    split = op.branch("split_document", documents, _is_pending)
    pending: Stream[DocumentPending] = split.trues
    tasks = cast(Stream[ChunkTask], split.falses)  # branch types its falses as the input
    by_lane: KeyedStream[ChunkTask] = op.key_on(
        "key_extract", tasks, lambda task: extract_lane(task.ticket.doc_id, lanes)
    )
    pool, per_round = components.extraction, components.chunks_per_round
    observer = components.observer
    outcomes: Stream[ChunkOutcome] = op.key_rm(
        "unkey_extract",
        op.stateful_batch(
            "extract",
            by_lane,
            lambda resume: _ExtractLogic(resume, pool, per_round, lanes, observer),
        ),
    )
    by_chunk: KeyedStream[ChunkOutcome] = op.key_on("key_chunk", outcomes, _chunk_id)
    chunk_items: Stream[TaggedDelta | ChunkSettled] = op.key_rm(
        "unkey_chunk", packed_flat_map("chunk", by_chunk, _chunk_step, ChunkLedger.unpacked)
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
    summary_due = components.renderer.summary_due
    over = (components.tally_over_fragments, components.log_over_fragments)
    entities: Stream[EntityDrafted] = _holding_bases(
        "entity",
        op.stateful_batch(
            "entity",
            by_entity,
            lambda resume: _EntityLogic(resume, delay, summary_due, *over),
        ),
    )
    relations: Stream[RelationDrafted] = _holding_bases(
        "relation",
        op.stateful_batch(
            "relation",
            by_relation,
            lambda resume: _RelationLogic(resume, delay, summary_due, *over),
        ),
    )
    drafted: Stream[Drafted] = op.merge("states", entities, relations)
    rendered: Stream[Rendered] = op.flat_map_batch("render", drafted, _render_step(components))
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


def _holding_bases(step: str, drafted: KeyedStream[Out | HeldBase]) -> Stream[Out]:
    """The drafts of the `step` ("entity" or "relation") step; the bases its big keys hand
    on go to a step of their own (`_BaseHolder`), keyed alike so that a key and its base
    share a worker in any cluster shape (dataflow/core/fragment_log.py)."""
    split = op.branch(f"split_{step}_base", drafted, _is_held_base)
    op.stateful_batch(f"{step}_base", cast(KeyedStream[HeldBase], split.trues), _BaseHolder)
    return op.key_rm(f"unkey_{step}", cast(KeyedStream[Out], split.falses))


def _is_held_base(item: tuple[str, object]) -> bool:
    return isinstance(item[1], HeldBase)


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
    return isinstance(item.delta, EntityDelta)


def _route_key(item: TaggedDelta) -> str:
    delta = item.delta
    if isinstance(delta, EntityDelta):
        return delta.key
    return relation_id(delta.key)  # Bytewax keys must be str


# -- document and chunk steps: states that pack themselves ---------------------


class Packs(Protocol):
    def packed(self) -> bytes: ...


@operator
def packed_flat_map(
    step_id: str,
    up: KeyedStream[V],
    mapper: Callable[[S | None, V], tuple[S | None, Iterable[W]]],
    unpacked: Callable[[bytes], S],
) -> KeyedStream[W]:
    """`op.stateful_flat_map` whose snapshot is the state's own packed bytes (`packed()`,
    read back by `unpacked`) instead of a deep copy that Bytewax pickles: a pickled object
    names the function that restores it in every row, 50 bytes of a 200-byte document or
    ledger snapshot (docs/design.md, "The restore function's name in every row")."""

    def builder(resume: bytes | None) -> _PackedFlatMapLogic[V, W, S]:
        return _PackedFlatMapLogic(mapper, unpacked(resume) if resume is not None else None)

    return op.stateful("stateful", up, builder)


class _PackedFlatMapLogic(StatefulLogic[V, W, bytes], Generic[V, W, S]):
    def __init__(
        self, mapper: Callable[[S | None, V], tuple[S | None, Iterable[W]]], state: S | None
    ) -> None:
        self.mapper = mapper
        self.state = state

    def on_item(self, value: V) -> tuple[Iterable[W], bool]:
        state, emitted = self.mapper(self.state, value)
        if state is None:
            return emitted, StatefulLogic.DISCARD
        self.state = state
        return emitted, StatefulLogic.RETAIN

    def snapshot(self) -> bytes:
        assert self.state is not None  # a discarded key is not snapshotted
        return self.state.packed()


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


# -- extraction (on the extraction pool's threads) ---------------------------------

# How long a document whose chunks are all done may wait for others still in extraction,
# so that the renders and commits of a busy stream go in batches (a hub entity is rendered
# once per batch), while a lone edit goes at once.
HOLD_SECONDS = 1.0
_FIRST_POLL = timedelta(milliseconds=2)  # after new work: extracting a chunk offline is ms
_POLL = timedelta(milliseconds=20)  # at most this long between looks at running work

ExtractState = dict[str, list[ChunkTask]]
"""An extract lane's snapshot: each document's chunk tasks not yet passed on, in order."""


class _ExtractLogic(StatefulBatchLogic[ChunkTask, ChunkOutcome, ExtractState]):
    """One lane of documents (`extract_lane`): hands their added chunks to the extraction
    pool (dataflow/extraction_pool.py) and passes each document's tasks on in order as they
    are done, so the dataflow's thread never waits for an LLM.

    What goes on when (`_done_now`): a document whose tasks are all done goes at once when
    nothing else of the lane is running, else with the next batch: once `per_round` chunks
    are done, or once it has waited `HOLD_SECONDS`; finished documents go in a step of their
    own. A large document goes one piece of `per_round` extracted chunks (0: whole) a step,
    each committed and shown as progress; others overtake it. Retractions cost no
    extraction and keep their place.
    Snapshots hold the tasks not passed on; a resumed lane hands them to the pool again. At
    the end of the input (a one-shot run, or a stop) it waits for everything and passes it
    on, since Bytewax calls nothing after that.
    """

    def __init__(
        self,
        resume: ExtractState | None,
        pool: ExtractionPool,
        per_round: int,
        lanes: int,
        observer: IndexObserver | None = None,
    ) -> None:
        self.pending: ExtractState = resume or {}
        self.pool, self.per_round, self.lanes, self.observer = pool, per_round, lanes, observer
        self.running: dict[int, Future[Extracted]] = {}  # by id() of a pending task
        # Added chunks not handed to the pool yet (after a resume: every one pending).
        self.unsubmitted = [task for tasks in self.pending.values() for task in tasks]
        self.held_since: float | None = None  # when the oldest finished document began to wait
        self.poll = _FIRST_POLL
        self.lane = extract_lane(next(iter(self.pending)), lanes) if self.pending else ""

    def on_batch(self, values: list[ChunkTask]) -> tuple[Iterable[ChunkOutcome], bool]:
        for task in values:
            self.pending.setdefault(task.ticket.doc_id, []).append(task)
        self.unsubmitted += values
        self.lane = self.lane or extract_lane(values[0].ticket.doc_id, self.lanes)
        return self._step()

    def on_notify(self) -> tuple[Iterable[ChunkOutcome], bool]:
        return self._step()

    def on_eof(self) -> tuple[Iterable[ChunkOutcome], bool]:
        self._submit()
        for future in self.running.values():
            future.exception()  # waits; a failure is raised by _passed_on
        done = [task for tasks in self.pending.values() for task in tasks]
        self.pending = {}
        self.pool.report_backlog(self.lane, 0)
        return self._passed_on(done), StatefulBatchLogic.DISCARD

    def notify_at(self) -> datetime | None:
        return datetime.now(UTC) + self.poll if self.pending else None

    def snapshot(self) -> ExtractState:
        return {doc_id: list(tasks) for doc_id, tasks in self.pending.items()}  # immutable tasks

    def _step(self) -> tuple[Iterable[ChunkOutcome], bool]:
        submitted = self._submit()
        done = self._done_now()
        self.poll = _FIRST_POLL if submitted or done else min(self.poll * 2, _POLL)
        self.pool.report_backlog(self.lane, len(self.pending))
        return self._passed_on(done), not self.pending

    def _submit(self) -> bool:
        """Hand the pool the added chunks it does not have yet."""
        submitted, self.unsubmitted = self.unsubmitted, []
        for task in submitted:
            change = task.change
            if isinstance(change, ChunkAdded):
                self.running[id(task)] = self.pool.submit(task.ticket.doc_id, change.chunk)
        return bool(submitted)

    def _is_done(self, task: ChunkTask) -> bool:
        return isinstance(task.change, ChunkRemoved) or self.running[id(task)].done()

    def _done_now(self) -> list[ChunkTask]:
        """The tasks to pass on now, taken out of `pending`: the finished documents when they
        may go, else of each document with more done one piece of `per_round` extracted
        chunks (one a step: each step's output is rendered and committed before the worker
        looks again, so a large document must not pass on thousands of chunks at once)."""
        finished: list[str] = []
        pieces: dict[str, list[ChunkTask]] = {}
        busy = False
        extracted = 0  # chunks done and passed on, or waiting in finished documents
        for doc_id, tasks in self.pending.items():
            ready, additions = 0, 0
            for task in tasks:
                added = isinstance(task.change, ChunkAdded)
                if added and self.per_round and additions == self.per_round:
                    break  # a piece's worth: the rest waits for a later step
                if not self._is_done(task):
                    break
                additions += added
                ready += 1
            whole_piece = bool(self.per_round) and additions == self.per_round
            if ready == len(tasks):
                finished.append(doc_id)
                extracted += additions
                continue
            busy = True
            if whole_piece:
                pieces[doc_id] = tasks[:ready]
                extracted += additions
        now = time.monotonic()
        if finished and self.held_since is None:
            self.held_since = now
        go = not busy or (self.per_round and extracted >= self.per_round)
        go = go or (self.held_since is not None and now - self.held_since >= HOLD_SECONDS)
        if not (finished and go):
            for doc_id, tasks in pieces.items():
                del self.pending[doc_id][: len(tasks)]
            return [task for tasks in pieces.values() for task in tasks]
        # Finished documents go in a step of their own, before any piece: what a step passes
        # on is rendered and committed together, and a piece's render may take seconds.
        self.held_since = None
        return [task for doc_id in finished for task in self.pending.pop(doc_id)]

    def _passed_on(self, done: list[ChunkTask]) -> list[ChunkOutcome]:
        outcomes: list[ChunkOutcome] = []
        extracted = 0
        for task in done:
            change = task.change
            if isinstance(change, ChunkRemoved):
                outcomes.append(ChunkOutcome(task.ticket, change))
                continue
            result = self.running.pop(id(task)).result()
            extracted += 1
            if isinstance(result.extraction, str):
                removed = ChunkRemoved(change.chunk.chunk_id)
                outcomes.append(ChunkOutcome(task.ticket, removed, failure=result.extraction))
            else:
                event = ChunkExtracted(change.chunk, result.extraction)
                outcomes.append(ChunkOutcome(task.ticket, event, vector=result.vector))
        if self.observer is not None and extracted:
            self.observer.chunks_extracted(extracted)
        return outcomes


def extract_lane(doc_id: str, lanes: int) -> str:
    """The extract step's key for a document: one of `lanes`, by a stable hash."""
    return f"lane-{zlib.crc32(doc_id.encode()) % lanes}"


def _gated(source: Source[SourceEvent], components: Components) -> Source[SourceEvent]:
    if isinstance(source, FixedPartitionedSource):
        return GatedSource(source, components.extraction)
    return source


# -- chunk step ---------------------------------------------------------------


def _chunk_step(
    state: ChunkLedger | None, outcome: ChunkOutcome
) -> tuple[ChunkLedger | None, list[TaggedDelta | ChunkSettled]]:
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
    # Running totals of `fragments` for a key with many (`_FragmentsLogic`). Never in a
    # snapshot: built again from the fragments when a resumed key is next touched.
    tally: FragmentTally[F] | None = field(default=None, compare=False, repr=False)
    # A big key's fragments as its snapshots hold them: packed whole when last packed, and
    # the changes since (dataflow/core/fragment_log.py). Kept by `_FragmentsLogic`.
    log: FragmentLog[F] | None = field(default=None, compare=False, repr=False)
    # A key resumed from a snapshot that names its base in the holder step, until the base
    # is claimed (`_FragmentsLogic._resolve`): (base id, its size in bytes, pieces); `fragments`
    # is None meanwhile, and the deltas that come wait in `waiting`.
    unresolved: tuple[bytes, int, tuple[bytes, ...]] | None = None
    waiting: list[TaggedDelta] = field(default_factory=list)

    def pack(self) -> bytes:
        """The state as its step's snapshot (`_FragmentsLogic.snapshot`).

        A key without a log: one packed blob (dataflow/core/snapshots.py) of plain values,
        the fragments as rows without their kind, which the step knows (most of the 74,000
        relations at 16,000 documents hold one or two fragments, where an object's pickled
        class and restore function were a sixth of the bytes). A key with a log: the plain
        values pickled with its base and pieces, which are packed already (a pickle, so never
        taken for a Zstandard frame); or, once its base is in the holder step, the base's id and
        size in its place, and the deltas waiting for a resumed key's base."""
        acks = tuple(self.acks.items())
        held: _HeldFragmentsState | None = None
        if self.unresolved is not None:
            base_id, base_size, pieces = self.unresolved
            waiting = tuple(self.waiting)
            held = (self.key, base_id, base_size, pieces, waiting, acks, self.due, self.released)
        elif self.log is not None and self.fragments:
            inline, named, logged_pieces = self.log.packed()
            if inline is not None:
                logged = (self.key, inline, logged_pieces, acks, self.due, self.released)
                return pickle.dumps(logged, protocol=pickle.HIGHEST_PROTOCOL)
            assert named is not None  # a log holds its base or names it
            size = self.log.base_size
            held = (self.key, named, size, logged_pieces, (), acks, self.due, self.released)
        if held is not None:
            return pickle.dumps(held, protocol=pickle.HIGHEST_PROTOCOL)
        rows = FragmentRows.of(self.fragments).rows if self.fragments else None
        return pack((self.key, rows, acks, self.due, self.released))

    @staticmethod
    def unpack(blob: bytes, kind: type[F]) -> _FragmentsLogicState[Any, F]:
        """The state `pack` made `blob` of, its fragments of `kind`."""
        if not is_packed(blob):
            state = pickle.loads(blob)
            if len(state) == _HELD_FIELDS:
                key, base_id, size, pieces, waiting, acks, due, released = cast(
                    _HeldFragmentsState, state
                )
                return _FragmentsLogicState(
                    key,
                    None,
                    Counter(dict(acks)),
                    due,
                    released,
                    unresolved=(base_id, size, pieces),
                    waiting=list(waiting),
                )
            key, base, pieces, acks, due, released = cast(_LoggedFragmentsState, state)
            log = FragmentLog[F](base, len(base), list(pieces))
            logged = restore_log(kind, base, pieces)
            return _FragmentsLogicState(key, logged, Counter(dict(acks)), due, released, log=log)
        key, rows, acks, due, released = cast(_PackedFragmentsState, unpack(blob))
        fragments = FragmentRows(kind, rows).restore() if rows is not None else None
        return _FragmentsLogicState(key, fragments, Counter(dict(acks)), due, released)


_PackedFragmentsState = tuple[
    Any,  # the key: an entity key or a relation pair
    dict[str, tuple[object, ...]] | None,  # the fragments' rows
    tuple[tuple[tuple[Ticket, str], int], ...],
    datetime | None,
    datetime | None,
]


_LoggedFragmentsState = tuple[
    Any,  # the key
    bytes,  # the log's base: the fragments' rows, packed
    tuple[bytes, ...],  # its pieces: the changes since, packed
    tuple[tuple[tuple[Ticket, str], int], ...],
    datetime | None,
    datetime | None,
]


_HeldFragmentsState = tuple[
    Any,  # the key
    bytes,  # the id of its base, which the holder step keeps
    int,  # the base's size in bytes
    tuple[bytes, ...],  # the pieces: the changes since the base, packed
    tuple[TaggedDelta, ...],  # the deltas of a resumed key waiting for its base
    tuple[tuple[tuple[Ticket, str], int], ...],
    datetime | None,
    datetime | None,
]


_HELD_FIELDS = 8  # a `_HeldFragmentsState`'s; a `_LoggedFragmentsState` has 6


def _never(draft: Draft | None) -> bool:
    return False


class _FragmentsLogic(
    StatefulBatchLogic[TaggedDelta, Out | HeldBase, bytes], Generic[K, F, D, Out]
):
    """Folds a key's deltas and emits its draft (with acknowledgements) for rendering.

    The draft is made from the fragments, or, for a key with at least `tally_over` of them,
    from running totals kept beside them (`FragmentTally`), which cost what a fold changes
    rather than the key's size. They are made when a key reaches `tally_over` fragments, and
    dropped when it falls under half of that.

    Without delay, once per batch. With a delay (an LLM summarises descriptions), a key
    whose render is due a summary call (`summary_due`) is rendered at most once per `delay`:
    at once when its last render is at least `delay` old (a lone edit waits for nothing),
    else held until `delay` after that render, so a burst of edits to one entity costs two
    summary calls at most (its first edit's and the rest's), not one per edit. A key whose
    render calls no LLM is released at once.
    """

    kind: type[F]
    """The kind of fragment the step folds: its snapshots' rows are of this kind."""

    def __init__(
        self,
        resume: bytes | None,
        delay: timedelta,
        summary_due: Callable[[Draft | None], bool] | None = None,
        tally_over: int = 64,
        log_over: int = LOG_OVER,
    ) -> None:
        self.state: _FragmentsLogicState[K, F] = (
            _FragmentsLogicState.unpack(resume, self.kind)
            if resume is not None
            else _FragmentsLogicState()
        )
        self.delay = delay
        self.summary_due: Callable[[Draft | None], bool] = summary_due or _never
        self.tally_over = tally_over
        self.log_over = log_over
        self._waiting_since: float | None = None  # since when a resumed key waits for its base

    def on_batch(self, values: list[TaggedDelta]) -> tuple[Iterable[Out | HeldBase], bool]:
        if self.state.unresolved is not None and not self._resolve():
            self.state.waiting.extend(values)
            return [], StatefulBatchLogic.RETAIN
        return self._fold([*self._take_waiting(), *values])

    def on_notify(self) -> tuple[Iterable[Out | HeldBase], bool]:
        if self.state.unresolved is not None and not self._resolve():
            return [], StatefulBatchLogic.RETAIN
        emitted: list[Out | HeldBase] = []
        if waiting := self._take_waiting():
            folded, complete = self._fold(waiting)
            if complete or self.state.due is None:  # released by the fold, or gone
                return folded, complete
            emitted += folded
        if self.state.due is None or self.state.due > datetime.now(UTC):
            return emitted, StatefulBatchLogic.RETAIN
        return self._release(emitted)

    def on_eof(self) -> tuple[Iterable[Out | HeldBase], bool]:
        if self.state.unresolved is not None and not self._resolve():
            return [], StatefulBatchLogic.RETAIN  # its snapshot names its base, as before
        emitted: list[Out | HeldBase] = []
        if waiting := self._take_waiting():
            folded, complete = self._fold(waiting)
            if complete:
                return folded, complete
            emitted += folded
        # A stopped index's snapshot holds its base, packed whole now, and no pieces: they
        # would be more bytes, and the holder's base more again. A resumed key hands it on.
        log, fragments = self.state.log, self.state.fragments
        if log is not None and log.base_id is not None:
            emitted.append(HeldBase(log.base_id, None))
        self.state.log = FragmentLog.of(fragments) if log is not None and fragments else None
        if self.state.due is None:
            return emitted, StatefulBatchLogic.RETAIN
        return self._release(emitted)

    def notify_at(self) -> datetime | None:
        due = self.state.due
        if self.state.unresolved is not None and (self.state.waiting or due is not None):
            retry = datetime.now(UTC) + _BASE_RETRY
            return retry if due is None else min(due, retry)
        return due

    def _fold(self, values: list[TaggedDelta]) -> tuple[list[Out | HeldBase], bool]:
        updates = [self.update(tagged.delta) for tagged in values]
        count_deltas(self.state.acks, values)
        self.state.key = updates[0][0]
        fragments = self.state.fragments if self.state.fragments is not None else {}
        folded = ((contribution_id, fragment) for _, contribution_id, fragment in updates)
        fold_fragments(fragments, folded, self.state.tally)
        if self.state.log is not None:
            self.state.log.note(
                (contribution_id, fragment) for _, contribution_id, fragment in updates
            )
        self.state.fragments = fragments or None
        self._keep_tally()
        handed: list[Out | HeldBase] = list(self._keep_log())
        if not self.delay or not self.summary_due(self._draft()):
            return self._release(handed)
        if self.state.due is None:
            now, last = datetime.now(UTC), self.state.released
            if last is None or now - last >= self.delay:
                return self._release(handed)
            self.state.due = last + self.delay
        return handed, StatefulBatchLogic.RETAIN

    def _take_waiting(self) -> list[TaggedDelta]:
        waiting, self.state.waiting = self.state.waiting, []
        return waiting

    def _resolve(self) -> bool:
        """Restore a resumed key's fragments from its base, if the holder step has left it
        (`_HELD_BASES`): both steps run the key on this worker, and Bytewax builds each
        step's resumed keys before it runs them, but not one step's before the other's."""
        assert self.state.unresolved is not None
        base_id, base_size, pieces = self.state.unresolved
        base = _HELD_BASES.pop(base_id, None)
        if base is None:
            now = time.monotonic()
            self._waiting_since = self._waiting_since or now
            if now - self._waiting_since > BASE_WAIT_SECONDS:
                raise RuntimeError(
                    f"{type(self).__name__}: the snapshot of {self.state.key!r} names a base "
                    f"the recovery database does not hold after {BASE_WAIT_SECONDS} s: the "
                    "recovery database is damaged (rebuild the index with `kgstream replay`)"
                )
            return False
        fragments = restore_log(self.kind, base, pieces)
        self.state.fragments = fragments or None
        self.state.log = FragmentLog(None, base_size, list(pieces), base_id=base_id)
        self.state.unresolved, self._waiting_since = None, None
        return True

    def _release(
        self, before: list[Out | HeldBase] | None = None
    ) -> tuple[list[Out | HeldBase], bool]:
        """The key's draft, after `before` (what the step emits ahead of it)."""
        key = self.state.key
        if key is None:
            raise RuntimeError(f"{type(self).__name__} released before any delta arrived")
        draft, tally = self._draft(), self.state.tally
        if draft is not None and tally is not None:  # a hub's: what its lists changed
            draft = replace(draft, list_changes=tally.list_changes())
        emitted = self.emit(key, draft, release_acks(self.state.acks))
        self.state.acks, self.state.due = Counter(), None
        if self.delay:  # read only to hold a render (on_batch); no clock on the hot path
            self.state.released = datetime.now(UTC)
        released = before if before is not None else []
        released.append(emitted)
        return released, self.state.fragments is None

    def _keep_tally(self) -> None:
        """Make or drop the key's running totals as its size crosses `tally_over` or half
        of it (`fold_fragments` keeps them up to date in between)."""
        state = self.state
        size = len(state.fragments) if state.fragments else 0
        if state.tally is not None and (not size or size * 2 < self.tally_over):
            state.tally = None
        elif state.tally is None and size and size >= self.tally_over:
            state.tally = self.new_tally(state.fragments or {})

    def _draft(self) -> D | None:
        state = self.state
        if state.key is None or not state.fragments:
            return None
        if state.tally is not None:
            return self.tally_draft(state.key, state.tally)
        return self.draft(state.key, state.fragments)

    def update(self, delta: ContributionDelta) -> tuple[K, str, F | None]:
        """(key, contribution id, fragment or None for a retraction) of one delta."""
        raise NotImplementedError

    def new_tally(self, fragments: dict[str, F]) -> FragmentTally[F]:
        raise NotImplementedError

    def draft(self, key: K, fragments: dict[str, F]) -> D | None:
        raise NotImplementedError

    def tally_draft(self, key: K, tally: FragmentTally[F]) -> D | None:
        raise NotImplementedError

    def emit(self, key: K, draft: D | None, acks: tuple[Ack, ...]) -> Out:
        raise NotImplementedError

    def snapshot(self) -> bytes:
        # Packed now, so the folds after it (in place, `fold_fragments`) cannot reach it.
        return self.state.pack()

    def _keep_log(self) -> Iterable[HeldBase]:
        """Make or drop the key's snapshot log as its size crosses `log_over` or half of it,
        pack it whole again when its pieces are due (dataflow/core/fragment_log.py), and
        hand a new base to the holder step, or tell it the key holds none any more; the
        folds note their changes in between."""
        state, log = self.state, self.state.log
        size = len(state.fragments) if state.fragments else 0
        if log is not None and size * 2 < self.log_over:
            state.log = None
            if log.base_id is not None:
                yield HeldBase(log.base_id, None)
            return
        if log is None and size >= self.log_over and state.fragments:
            state.log = log = FragmentLog.of(state.fragments)
        if log is not None and state.fragments:
            if log.rebase_due():
                log.rebase(state.fragments)
            if handed := log.hand_off():
                yield handed


_HELD_BASES: dict[bytes, bytes] = {}
"""The bases `_BaseHolder` keys resumed with in this process, by id, until the entity or
relation key whose snapshot names one claims it (`_FragmentsLogic._resolve`)."""

BASE_WAIT_SECONDS = 120.0
"""How long a resumed key waits for its base before the run stops as damaged."""

_BASE_RETRY = timedelta(milliseconds=5)


class _BaseHolder(StatefulBatchLogic[HeldBase, None, tuple[bytes, bytes]]):
    """The "entity_base" and "relation_base" steps: a big key's base, the last its step
    handed on (dataflow/core/fragment_log.py), snapshotted only when a new one comes. A
    resumed one leaves its base in `_HELD_BASES` for the key to claim."""

    def __init__(self, resume: tuple[bytes, bytes] | None) -> None:
        self.held = resume
        if resume is not None:
            base_id, base = resume
            _HELD_BASES[base_id] = base

    def on_batch(self, values: list[HeldBase]) -> tuple[Iterable[None], bool]:
        if self.held is not None:
            _HELD_BASES.pop(self.held[0], None)  # unclaimed: replaced before its key came
        last = values[-1]
        self.held = (last.base_id, last.base) if last.base is not None else None
        return [], self.held is None

    def snapshot(self) -> tuple[bytes, bytes]:
        if self.held is None:
            raise RuntimeError("_BaseHolder snapshotted after it was discarded")
        return self.held


class _EntityLogic(_FragmentsLogic[str, EntityFragment, EntityDraft, EntityDrafted]):
    kind = EntityFragment

    def update(self, delta: ContributionDelta) -> tuple[str, str, EntityFragment | None]:
        if not isinstance(delta, EntityDelta):
            raise TypeError(f"step 'entity' got a relation delta for {delta.key!r}")
        return delta.key, delta.contribution_id, delta.fragment

    def new_tally(self, fragments: dict[str, EntityFragment]) -> EntityTally:
        return EntityTally(fragments.values())

    def draft(self, key: str, fragments: dict[str, EntityFragment]) -> EntityDraft | None:
        return entity_draft(key, fragments)

    def tally_draft(self, key: str, tally: FragmentTally[EntityFragment]) -> EntityDraft | None:
        return cast(EntityTally, tally).draft(key)

    def emit(self, key: str, draft: EntityDraft | None, acks: tuple[Ack, ...]) -> EntityDrafted:
        return EntityDrafted(key, draft, acks)


class _RelationLogic(
    _FragmentsLogic[RelationPair, RelationFragment, RelationDraft, RelationDrafted]
):
    kind = RelationFragment

    def update(self, delta: ContributionDelta) -> tuple[RelationPair, str, RelationFragment | None]:
        if not isinstance(delta, RelationDelta):
            raise TypeError(f"step 'relation' got an entity delta for {delta.key!r}")
        return delta.key, delta.contribution_id, delta.fragment

    def new_tally(self, fragments: dict[str, RelationFragment]) -> RelationTally:
        return RelationTally(fragments.values())

    def draft(
        self, key: RelationPair, fragments: dict[str, RelationFragment]
    ) -> RelationDraft | None:
        return relation_draft(key, fragments)

    def tally_draft(
        self, key: RelationPair, tally: FragmentTally[RelationFragment]
    ) -> RelationDraft | None:
        return cast(RelationTally, tally).draft(key)

    def emit(
        self, key: RelationPair, draft: RelationDraft | None, acks: tuple[Ack, ...]
    ) -> RelationDrafted:
        return RelationDrafted(key, draft, acks)


# -- render (batch) -----------------------------------------------------------


def _render_step(
    components: Components,
) -> Callable[[list[Drafted]], list[Rendered]]:
    def step(drafted: list[Drafted]) -> list[Rendered]:
        records = components.render_many(drafted)
        texts = [r.embedding_text for r in records if r is not None]
        vectors = iter(components.embed(texts))
        out: list[Rendered] = []
        for item, record in zip(drafted, records, strict=True):
            vector = next(vectors) if record is not None else None
            if isinstance(item, EntityDrafted):
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
