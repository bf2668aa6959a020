"""The document and chunk steps: `op.stateful_flat_map`s whose snapshot is their state packed
as bytes (`packed_flat_map`), over the pure steps of dataflow/core/steps.py."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

import bytewax.operators as op
from bytewax.dataflow import operator
from bytewax.operators import KeyedStream, StatefulLogic
from typing_extensions import override

from dataflow.components import Components
from dataflow.core.commit import chunk_messages, document_messages
from dataflow.core.contributions import ChunkLedger
from dataflow.core.messages import (
    ChunkOutcome,
    ChunkSettled,
    ChunkTask,
    DocumentPending,
    SourceEvent,
    TaggedDelta,
)
from dataflow.core.steps import (
    DocumentRetry,
    DocumentState,
    retry_document,
    update_chunk,
    update_document,
)

V = TypeVar("V")
W = TypeVar("W")
S = TypeVar("S")


@operator
def packed_flat_map(
    step_id: str,
    up: KeyedStream[V],
    mapper: Callable[[S | None, V], tuple[S | None, Iterable[W]]],
    pack: Callable[[S], bytes],
    unpack: Callable[[bytes], S],
) -> KeyedStream[W]:
    """`op.stateful_flat_map` whose snapshot is the state packed as bytes (`pack`, read back
    by `unpack`: dataflow/state/forms.py) instead of a deep copy that Bytewax pickles as an
    object."""

    def builder(resume: bytes | None) -> PackedFlatMapLogic[V, W, S]:
        return PackedFlatMapLogic(mapper, pack, unpack(resume) if resume is not None else None)

    return op.stateful("stateful", up, builder)


class PackedFlatMapLogic(StatefulLogic[V, W, bytes], Generic[V, W, S]):
    def __init__(
        self,
        mapper: Callable[[S | None, V], tuple[S | None, Iterable[W]]],
        pack: Callable[[S], bytes],
        state: S | None,
    ) -> None:
        self.mapper, self.pack = mapper, pack
        self.state = state

    @override
    def on_item(self, value: V) -> tuple[Iterable[W], bool]:
        state, emitted = self.mapper(self.state, value)
        if state is None:
            return emitted, StatefulLogic.DISCARD
        self.state = state
        return emitted, StatefulLogic.RETAIN

    @override
    def snapshot(self) -> bytes:
        if self.state is None:
            raise RuntimeError("a discarded key was snapshotted")
        return self.pack(self.state)


DocumentStep = Callable[
    [DocumentState | None, SourceEvent],
    tuple[DocumentState | None, list[DocumentPending | ChunkTask]],
]


def document_step(components: Components) -> DocumentStep:
    """The document step: a change (or a retry request) diffed against the document's state,
    as the commit step's pending version and a task per changed chunk."""

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


def chunk_step(
    state: ChunkLedger | None, outcome: ChunkOutcome
) -> tuple[ChunkLedger | None, list[TaggedDelta | ChunkSettled]]:
    """The chunk step: an extracted or removed chunk as the deltas of its contributions."""
    new_state, deltas = update_chunk(state, outcome.event)
    return new_state, chunk_messages(outcome, deltas, new_state)
