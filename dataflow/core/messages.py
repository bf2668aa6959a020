"""The items that flow into and between the dataflow's steps.

A source hands the dataflow `SourceEvent`s. A document version in flight is
identified by a `Ticket`. Every message its change causes carries the ticket,
and the steps downstream acknowledge what they applied once it is written, so
the document's commit knows exactly when its whole effect is in the stores (and
only then marks it PROCESSED; see dataflow/core/commit.py).
All items are frozen and picklable: Bytewax snapshots them for recovery. Plain
data without Bytewax, so sources (connectors/) and the core share them.
"""

from __future__ import annotations

from dataclasses import dataclass

from dataflow.core.chunking import Chunk
from dataflow.core.contributions import (
    EntityDraft,
    EntityRecord,
    RelationDraft,
    RelationPair,
    RelationRecord,
)
from dataflow.core.documents import DocumentChange, DocumentRecord
from dataflow.core.steps import (
    ChunkAdded,
    ChunkExtracted,
    ChunkRemoved,
    ContributionDelta,
    DocumentRetry,
)

Vector = tuple[float, ...]


@dataclass(frozen=True)
class SourceEvent:
    """One document change as a source received it.

    `origin` names the position it came from (``kafka:<topic>/<partition>@<offset>``
    or ``folder:<relative path>``, ``retry:<stream id>`` for a retry request), for logs and
    dead letters; `event_time` is when the change happened (Unix seconds), for freshness
    figures.
    """

    change: DocumentChange | DocumentRetry
    origin: str
    event_time: float


@dataclass(frozen=True)
class Ticket:
    """One document version in flight: its doc id and the event that made it."""

    doc_id: str
    token: str


@dataclass(frozen=True)
class DocumentPending:
    """The document step's verdict on one change, for the commit step.

    `record` is what the document's status becomes once every chunk in
    `awaiting` has settled (None: the document is deleted). `chunks` are its
    current chunk records and `removed_chunk_ids` the ones to delete.
    """

    ticket: Ticket
    record: DocumentRecord | None
    chunks: tuple[Chunk, ...]
    removed_chunk_ids: tuple[str, ...]
    awaiting: tuple[str, ...]
    event_time: float


@dataclass(frozen=True)
class ChunkTask:
    """A chunk that changed: to extract (added) or to retract (removed)."""

    ticket: Ticket
    change: ChunkAdded | ChunkRemoved


@dataclass(frozen=True)
class ChunkOutcome:
    """A chunk task after extraction: what the chunk step applies.

    `failure` is set when extraction failed; the chunk then contributes nothing.
    """

    ticket: Ticket
    event: ChunkExtracted | ChunkRemoved
    vector: Vector | None = None
    failure: str = ""

    @property
    def chunk_id(self) -> str:
        if isinstance(self.event, ChunkRemoved):
            return self.event.chunk_id
        return self.event.chunk.chunk_id


@dataclass(frozen=True)
class TaggedDelta:
    ticket: Ticket
    chunk_id: str
    delta: ContributionDelta


@dataclass(frozen=True)
class Ack:
    """`count` deltas of chunk `chunk_id` (for `ticket`) have been applied."""

    ticket: Ticket
    chunk_id: str
    count: int


@dataclass(frozen=True)
class ChunkMentions:
    """The entity keys and relation pairs a chunk contributes (sorted): its vector point
    carries them, so "the entities these chunks mention" is a read of a few chunk points,
    where the entities' own points would have to list every chunk that cites them."""

    entities: tuple[str, ...] = ()
    relations: tuple[RelationPair, ...] = ()


NO_MENTIONS = ChunkMentions()


@dataclass(frozen=True)
class ChunkSettled:
    """The chunk step applied a chunk task and sent `deltas` deltas downstream; `mentions`
    is what the chunk contributes now."""

    ticket: Ticket
    chunk_id: str
    deltas: int
    vector: Vector | None = None
    chunk: Chunk | None = None
    failure: str = ""
    mentions: ChunkMentions = NO_MENTIONS


@dataclass(frozen=True)
class EntityDrafted:
    """An entity's draft after the entity step applied some deltas (None: nothing is left).

    `acks` says which deltas are folded in; the render step passes them on.
    """

    key: str
    draft: EntityDraft | None
    acks: tuple[Ack, ...]


@dataclass(frozen=True)
class RelationDrafted:
    """A relation's draft after the relation step applied some deltas (None: nothing is left)."""

    pair: RelationPair
    draft: RelationDraft | None
    acks: tuple[Ack, ...]


Drafted = EntityDrafted | RelationDrafted


@dataclass(frozen=True)
class EntityRendered:
    key: str
    record: EntityRecord | None
    vector: Vector | None
    acks: tuple[Ack, ...]


@dataclass(frozen=True)
class RelationRendered:
    pair: RelationPair
    record: RelationRecord | None
    vector: Vector | None
    acks: tuple[Ack, ...]


DocumentCommitInput = DocumentPending | ChunkSettled | Ack
"""What gathers at the worker that owns a document (dataflow/core/commit.py)."""
