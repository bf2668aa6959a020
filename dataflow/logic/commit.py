"""The steps that write: render (records and vectors of a batch's drafts), write records
(each worker writes the keys it owns, then acknowledges them), the document commit step (a
document's chunks and status, completed with its last acknowledgement: dataflow/core/commit.py)
and the stores sink."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import cast

from bytewax.operators import StatefulBatchLogic
from bytewax.outputs import DynamicSink, StatelessSinkPartition
from typing_extensions import override

from dataflow.components import Components
from dataflow.core.commit import (
    CommitBatch,
    DocumentCommit,
    merge_batches,
    records_batch,
    written_acks,
)
from dataflow.core.contributions import EntityRecord, RelationRecord
from dataflow.core.messages import (
    Ack,
    DocumentCommitInput,
    Drafted,
    EntityDrafted,
    EntityRendered,
    RelationRendered,
)
from dataflow.state.forms import snapshot_commit

Rendered = EntityRendered | RelationRendered


def render_step(
    components: Components,
) -> Callable[[list[Drafted]], list[Rendered]]:
    """The render step: a batch's drafts as records (summaries called concurrently) with
    their vectors."""

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


def write_records_step(components: Components) -> Callable[[list[Rendered]], list[Ack]]:
    """Writes the renders this worker has (the keys it owns), then passes on their
    acknowledgements: a document learns its deltas are applied only once they are stored."""
    clock = components.clock

    def step(rendered: list[Rendered]) -> list[Ack]:
        began = clock.thread_time()
        batch, acks = records_batch(rendered), written_acks(rendered)
        worker = components.workers.current()
        components.commit_cpu(worker, clock.thread_time() - began)
        components.write(batch, worker)
        return acks

    return step


class CommitLogic(StatefulBatchLogic[DocumentCommitInput, CommitBatch, DocumentCommit]):
    """One document (keyed by doc id): writes its chunks and status, and completes it when
    its last acknowledgement arrives; the state goes once nothing of it is in flight."""

    def __init__(self, resume: DocumentCommit | None, components: Components) -> None:
        self.commit = resume or DocumentCommit()
        self.components = components

    @override
    def on_batch(self, values: list[DocumentCommitInput]) -> tuple[Iterable[CommitBatch], bool]:
        clock = self.components.clock
        began = clock.thread_time()
        for value in values:
            self.commit.add(value)
        out = [self.commit.flush()] if self.commit.has_writes() else []
        self.components.commit_cpu(self.components.workers.current(), clock.thread_time() - began)
        return out, self.commit.idle()

    @override
    def snapshot(self) -> DocumentCommit:
        return snapshot_commit(self.commit)


class StoreSink(DynamicSink[CommitBatch]):
    """The documents' writes of each worker, merged into one write per activation."""

    def __init__(self, components: Components) -> None:
        self._components = components

    @override
    def build(self, step_id: str, worker_index: int, worker_count: int) -> _StorePartition:
        self._components.workers.enter(worker_index)
        return _StorePartition(self._components, worker_index)


class _StorePartition(StatelessSinkPartition[CommitBatch]):
    def __init__(self, components: Components, worker: int) -> None:
        self._components = components
        self._worker = worker

    @override
    def write_batch(self, items: list[CommitBatch]) -> None:
        if items:
            self._components.write(merge_batches(items), self._worker)
