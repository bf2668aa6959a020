"""The Bytewax dataflow: wiring only. Each step calls the pure functions of dataflow/core.

    events ─ key doc_id ─ document ─┬─ DocumentPending ──────────────────────────────┐
                                     └─ ChunkTask ─ extract (batch: LLM + embed)       │
                                           ─ key chunk_id ─ chunk ─┬─ ChunkSettled ────┤
                                                                   └─ TaggedDelta      │
                       ┌───────────────────────────────────────────────┘               │
                       ├─ key entity ─ entity ─┐                                       │
                       └─ key pair ─ relation ─┴─ render (batch: summaries + embed) ───┤
                                                                                        │
                                           key "commit" ─ commit ─ stores sink ◄───────┘

Keyed steps hold exactly the state ARCHITECTURE.md names; Bytewax routes a key to
one worker, so merges never race. LLM and embedding calls run concurrently inside
the two batch steps (Bytewax has no async operators).
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeGuard, cast

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.inputs import Source
from bytewax.operators import StatefulBatchLogic
from bytewax.outputs import DynamicSink, StatelessSinkPartition

from dataflow.commit import CommitBatch, CommitBuffer
from dataflow.components import Components
from dataflow.core.contributions import (
    ChunkContributions,
    EntityContribution,
    EntityFragment,
    EntityRecord,
    RelationFragment,
    RelationPair,
    RelationRecord,
)
from dataflow.core.documents import DocumentDelete
from dataflow.core.naming import relation_id
from dataflow.core.steps import (
    ChunkAdded,
    ChunkExtracted,
    ChunkRemoved,
    DocumentState,
    update_chunk,
    update_document,
    update_fragments,
)
from dataflow.events import SourceEvent
from dataflow.messages import (
    Ack,
    ChunkOutcome,
    ChunkSettled,
    ChunkTask,
    CommitInput,
    DocumentPending,
    EntityRendered,
    EntityState,
    RelationRendered,
    RelationState,
    TaggedDelta,
    Ticket,
)


def build_flow(
    source: Source[SourceEvent], components: Components, flow_id: str = "kgstream"
) -> Dataflow:
    flow = Dataflow(flow_id)
    events = op.input("events", flow, source)
    by_doc = op.key_on("key_doc", events, lambda event: event.change.doc_id)
    documents = op.key_rm(
        "unkey_doc",
        op.stateful_flat_map("document", by_doc, _document_step(components)),
    )
    split = op.branch("split_document", documents, _is_pending)
    outcomes = op.flat_map_batch("extract", split.falses, _extract_step(components))
    by_chunk = op.key_on("key_chunk", outcomes, lambda outcome: outcome.chunk_id)
    chunk_items = op.key_rm("unkey_chunk", op.stateful_flat_map("chunk", by_chunk, _chunk_step))
    chunk_split = op.branch("split_chunk", chunk_items, _is_settled)
    deltas: Any = op.branch("split_delta", chunk_split.falses, _is_entity_delta)
    by_entity = op.key_on("key_entity", deltas.trues, _route_key)
    by_relation = op.key_on("key_relation", deltas.falses, _route_key)
    delay = timedelta(seconds=components.coalesce_seconds)
    entities = op.key_rm(
        "unkey_entity",
        op.stateful_batch("entity", by_entity, lambda resume: _EntityLogic(resume, delay)),
    )
    relations = op.key_rm(
        "unkey_relation",
        op.stateful_batch("relation", by_relation, lambda resume: _RelationLogic(resume, delay)),
    )
    states = op.merge("states", entities, relations)
    rendered = op.flat_map_batch("render", states, _render_step(components))
    to_commit = op.merge("to_commit", split.trues, chunk_split.trues, rendered)
    keyed = op.key_on("key_commit", to_commit, lambda _: "commit")
    batches = op.key_rm(
        "unkey_commit",
        op.stateful_batch("commit", keyed, _CommitLogic),
    )
    op.output("stores", batches, StoreSink(components))
    return flow


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


def _document_step(components: Components) -> Any:
    def step(
        state: DocumentState | None, event: SourceEvent
    ) -> tuple[DocumentState | None, list[DocumentPending | ChunkTask]]:
        if components.observer is not None:
            components.observer.event_received(event)
        new_state, outcome = update_document(
            state, event.change, components.tokenizer, components.chunking, components.limits
        )
        unchanged = outcome.record is None and not isinstance(event.change, DocumentDelete)
        if unchanged:
            return new_state, []
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
        return new_state, [pending, *tasks]

    return step


# -- extraction (batch) -------------------------------------------------------


def _extract_step(components: Components) -> Any:
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
    chunk = outcome.event.chunk if isinstance(outcome.event, ChunkExtracted) else None
    tagged: list[TaggedDelta | ChunkSettled] = [
        TaggedDelta(outcome.ticket, outcome.chunk_id, delta) for delta in deltas
    ]
    settled = ChunkSettled(
        outcome.ticket, outcome.chunk_id, len(deltas), outcome.vector, chunk, outcome.failure
    )
    return new_state, [*tagged, settled]


# -- entity and relation steps ------------------------------------------------


@dataclass
class _FragmentsLogicState:
    key: Any = None
    fragments: dict[str, Any] | None = None
    acks: Counter[Any] = field(default_factory=Counter)
    due: datetime | None = None  # when the coalesced render is released


class _FragmentsLogic(StatefulBatchLogic[TaggedDelta, Any, _FragmentsLogicState]):
    """Folds a key's deltas and emits its state (with acknowledgements) for rendering.

    Without delay, once per batch. With a delay (an LLM summarises descriptions),
    changes are held for `delay` after the first one, so a burst of edits to one
    entity costs one render and one summary call, not one per edit.
    """

    def __init__(self, resume: _FragmentsLogicState | None, delay: timedelta) -> None:
        self.state = resume or _FragmentsLogicState()
        self.delay = delay

    def on_batch(self, values: list[TaggedDelta]) -> tuple[Iterable[Any], bool]:
        updates = []
        for tagged in values:
            contribution = tagged.delta.contribution
            fragment = None if tagged.delta.retracted else contribution.fragment
            updates.append((contribution.contribution_id, fragment))
            self.state.acks[(tagged.ticket, tagged.chunk_id)] += 1
        self.state.key = values[0].delta.contribution.key
        self.state.fragments = update_fragments(self.state.fragments, updates)
        if not self.delay:
            return self._release()
        if self.state.due is None:
            self.state.due = datetime.now(UTC) + self.delay
        return [], StatefulBatchLogic.RETAIN

    def on_notify(self) -> tuple[Iterable[Any], bool]:
        return self._release()

    def on_eof(self) -> tuple[Iterable[Any], bool]:
        if self.state.due is None:
            return [], StatefulBatchLogic.RETAIN
        return self._release()

    def notify_at(self) -> datetime | None:
        return self.state.due

    def _release(self) -> tuple[Iterable[Any], bool]:
        acks = tuple(Ack(t, c, n) for (t, c), n in self.state.acks.items())
        emitted = self.emit(self.state.key, self.state.fragments, acks)
        self.state.acks, self.state.due = Counter(), None
        return [emitted], self.state.fragments is None

    def emit(self, key: Any, fragments: Any, acks: tuple[Ack, ...]) -> Any:
        raise NotImplementedError

    def snapshot(self) -> _FragmentsLogicState:
        return copy.deepcopy(self.state)


class _EntityLogic(_FragmentsLogic):
    def emit(
        self, key: str, fragments: dict[str, EntityFragment] | None, acks: tuple[Ack, ...]
    ) -> EntityState:
        return EntityState(key, fragments, acks)


class _RelationLogic(_FragmentsLogic):
    def emit(
        self,
        key: RelationPair,
        fragments: dict[str, RelationFragment] | None,
        acks: tuple[Ack, ...],
    ) -> RelationState:
        return RelationState(key, fragments, acks)


# -- render (batch) -----------------------------------------------------------


def _render_step(components: Components) -> Any:
    def step(states: list[EntityState | RelationState]) -> list[EntityRendered | RelationRendered]:
        records = components.render_many(states)
        texts = [r.embedding_text for r in records if r is not None]
        vectors = iter(components.embed(texts))
        out: list[EntityRendered | RelationRendered] = []
        for state, record in zip(states, records, strict=True):
            vector = next(vectors) if record is not None else None
            if isinstance(state, EntityState):
                entity = cast(EntityRecord | None, record)
                out.append(EntityRendered(state.key, entity, vector, state.acks))
            else:
                relation = cast(RelationRecord | None, record)
                out.append(RelationRendered(state.pair, relation, vector, state.acks))
        return out

    return step


# -- commit step and sink -----------------------------------------------------


class _CommitLogic(StatefulBatchLogic[CommitInput, CommitBatch, CommitBuffer]):
    """One key ("commit"): releases a batch per activation, so batches grow with load."""

    def __init__(self, resume: CommitBuffer | None) -> None:
        self.buffer = resume or CommitBuffer()

    def on_batch(self, values: list[CommitInput]) -> tuple[Iterable[CommitBatch], bool]:
        for value in values:
            self.buffer.add(value)
        if not self.buffer.has_writes():
            return [], StatefulBatchLogic.RETAIN
        return [self.buffer.flush()], StatefulBatchLogic.RETAIN

    def snapshot(self) -> CommitBuffer:
        return copy.deepcopy(self.buffer)


class StoreSink(DynamicSink[CommitBatch]):
    def __init__(self, components: Components) -> None:
        self._components = components

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _StorePartition:
        return _StorePartition(self._components)


class _StorePartition(StatelessSinkPartition[CommitBatch]):
    def __init__(self, components: Components) -> None:
        self._components = components

    def write_batch(self, items: list[CommitBatch]) -> None:
        for batch in items:
            self._components.write(batch)
