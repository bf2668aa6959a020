"""The Bytewax dataflow: wiring only. Each step is a logic class of dataflow/logic/ over the
pure functions of dataflow/core; each stream's type is the shape of its items.

Read dataflow/core/index.py first: it drives the same step functions in one process and is
the definition of "the index of these documents". This module only routes them through
Bytewax, with the commit protocol of dataflow/core/commit.py on top so the stores know when
a document is whole.

    events ─ key doc_id ─ document ─┬─ DocumentPending ──────────────────────────────┐
                                     └─ ChunkTask ─ key lane ─ extract (on the pool's  │
                                           threads: LLM + embed; passed on in order)   │
                                           ─ key chunk_id ─ chunk ─┬─ ChunkSettled ────┤
                                                                   └─ TaggedDelta      │
                       ┌───────────────────────────────────────────────┘               │
                       ├─ key entity ─ entity ─┐  (big keys' bases: entity_base)       │
                       └─ key pair ─ relation ─┴─ render (batch: summaries + embed)    │
                                  (relation_base)  ─ write records (batch) ─ Ack ──────┤
                                                                                        │
                                      key doc_id ─ document commit ─ stores sink ◄─────┘

Keyed steps hold exactly the state dataflow/core/steps.py names; Bytewax routes a key to one
worker, so merges never race. Writes are partitioned the same way: each worker writes the
entities and relations it owns, then acknowledges them to the worker that owns their
documents, which writes the documents' chunks and statuses. Extraction runs on the
extraction pool's threads (dataflow/extraction_pool.py), never on the dataflow's; renders
call the LLM concurrently inside their batch step. What each step snapshots, and how, is
dataflow/state's: the codec and the clock come from `components`, and the channel through
which resumed big keys get their bases is made per build.
"""

from __future__ import annotations

from functools import partial
from typing import TypeGuard, TypeVar, cast

import bytewax.operators as op
from bytewax.dataflow import Dataflow, Stream
from bytewax.inputs import FixedPartitionedSource, Source
from bytewax.operators import KeyedStream

from dataflow.components import Components
from dataflow.core.commit import CommitBatch
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
)
from dataflow.core.naming import relation_id
from dataflow.core.steps import EntityDelta
from dataflow.extraction_pool import GatedSource
from dataflow.logic.commit import CommitLogic, StoreSink, render_step, write_records_step
from dataflow.logic.extract import ExtractLogic, extract_lane
from dataflow.logic.fragments import BaseHolder, EntityLogic, RelationLogic
from dataflow.logic.keyed import chunk_step, document_step, packed_flat_map
from dataflow.state.forms import pack_document, pack_ledger, unpack_document, unpack_ledger
from dataflow.state.fragment_log import HeldBase
from dataflow.state.held_bases import HeldBases

Out = TypeVar("Out", EntityDrafted, RelationDrafted)


def build_flow(
    source: Source[SourceEvent],
    components: Components,
    flow_id: str = "kgstream",
    retries: Source[SourceEvent] | None = None,
    lanes: int = 1,
    bases: HeldBases | None = None,
) -> Dataflow:
    """The indexing dataflow over `source`; `retries` is a second input of retry requests
    (`DocumentRetry` events from `kgstream retry-failed`), merged before the document step.
    `lanes`: how many keys the extract step spreads documents over (the workers of the
    whole cluster, so that each can hold some). `bases`: the channel through which resumed
    big keys get their bases (a new one when not given)."""
    flow = Dataflow(flow_id)
    codec, clock = components.codec, components.clock
    bases = bases if bases is not None else HeldBases()
    events: Stream[SourceEvent] = op.input("events", flow, _gated(source, components))
    if retries is not None:
        retried = op.input("retries", flow, _gated(retries, components))
        events = op.merge("events_and_retries", events, retried)
    by_doc: KeyedStream[SourceEvent] = op.key_on("key_doc", events, _doc_id)
    documents: Stream[DocumentPending | ChunkTask] = op.key_rm(
        "unkey_doc",
        packed_flat_map(
            "document",
            by_doc,
            document_step(components),
            partial(pack_document, codec),
            partial(unpack_document, codec),
        ),
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
            lambda resume: ExtractLogic(resume, pool, per_round, lanes, observer, clock),
        ),
    )
    by_chunk: KeyedStream[ChunkOutcome] = op.key_on("key_chunk", outcomes, _chunk_id)
    chunk_items: Stream[TaggedDelta | ChunkSettled] = op.key_rm(
        "unkey_chunk",
        packed_flat_map(
            "chunk",
            by_chunk,
            chunk_step,
            partial(pack_ledger, codec),
            partial(unpack_ledger, codec),
        ),
    )
    chunk_split = op.branch("split_chunk", chunk_items, _is_settled)
    settled: Stream[ChunkSettled] = chunk_split.trues
    deltas = cast(Stream[TaggedDelta], chunk_split.falses)  # as above
    delta_split = op.branch("split_delta", deltas, _is_entity_delta)
    by_entity: KeyedStream[TaggedDelta] = op.key_on("key_entity", delta_split.trues, _route_key)
    by_relation: KeyedStream[TaggedDelta] = op.key_on(
        "key_relation", delta_split.falses, _route_key
    )
    entities: Stream[EntityDrafted] = _holding_bases(
        "entity",
        op.stateful_batch("entity", by_entity, EntityLogic.builder(components, bases)),
        bases,
    )
    relations: Stream[RelationDrafted] = _holding_bases(
        "relation",
        op.stateful_batch("relation", by_relation, RelationLogic.builder(components, bases)),
        bases,
    )
    drafted: Stream[Drafted] = op.merge("states", entities, relations)
    rendered: Stream[EntityRendered | RelationRendered] = op.flat_map_batch(
        "render", drafted, render_step(components)
    )
    written: Stream[Ack] = op.flat_map_batch(
        "write_records", rendered, write_records_step(components)
    )
    to_commit: Stream[DocumentCommitInput] = op.merge("to_commit", pending, settled, written)
    keyed: KeyedStream[DocumentCommitInput] = op.key_on("key_commit", to_commit, _ticket_doc_id)
    batches: Stream[CommitBatch] = op.key_rm(
        "unkey_commit",
        op.stateful_batch("document_commit", keyed, lambda resume: CommitLogic(resume, components)),
    )
    op.output("stores", batches, StoreSink(components))
    return flow


def _holding_bases(
    step: str, drafted: KeyedStream[Out | HeldBase], bases: HeldBases
) -> Stream[Out]:
    """The drafts of the `step` ("entity" or "relation") step; the bases its big keys hand
    on go to a step of their own (`BaseHolder`), keyed alike so that a key and its base
    share a worker in any cluster shape (dataflow/state/fragment_log.py)."""
    split = op.branch(f"split_{step}_base", drafted, _is_held_base)
    held = cast(KeyedStream[HeldBase], split.trues)
    op.stateful_batch(f"{step}_base", held, lambda resume: BaseHolder(resume, bases))
    return op.key_rm(f"unkey_{step}", cast(KeyedStream[Out], split.falses))


def _gated(source: Source[SourceEvent], components: Components) -> Source[SourceEvent]:
    if isinstance(source, FixedPartitionedSource):
        return GatedSource(source, components.extraction, components.clock.now)
    return source


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
