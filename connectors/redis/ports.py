"""The graph store's two ports: the records (`GraphRecords`) and the control plane
(`IndexControl`), with the data they give (the batch `GraphRecords.apply` takes is the core's
`dataflow.core.commit.GraphBatch`, which a commit batch extends).

The records are the index itself: entities, relations, chunks and document statuses,
written a batch at a time together with the index version that makes each batch visible,
and read by the gateway, the status commands and the export. The control plane is what the
indexer and the commands tell each other beside the records: Kafka lag, why the source
holds, dead letters, retry requests, and the dictionary recovery snapshots are packed with.
It is never part of an answer, and the index version never counts its writes.

Both live in Redis (`connectors.redis.graph_store.GraphStore` and
`connectors.redis.index_control.RedisIndexControl`, over one client, for one server or a
Redis Cluster); callers depend on the port they use.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from dataflow.core.chunking import Chunk
from dataflow.core.commit import GraphBatch
from dataflow.core.contributions import EntityRecord, RelationPair, RelationRecord
from dataflow.core.documents import DocumentRecord, DocumentStatus


class GraphFormatError(RuntimeError):
    """The workspace holds records in a layout this kgstream does not read (another
    kgstream version's): they are refused, never read with guesses, and the message names
    the commands that rebuild the index."""


@dataclass(frozen=True)
class StoredDocument:
    """A document's status record plus the times the store keeps for it."""

    record: DocumentRecord
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class TrackedDocument:
    """One document change a gateway published under a track id (LightRAG's `track_id`):
    its doc id, the content hash Ingest returned ("" for a delete or for content that is
    not text), and when it was published (seconds since the epoch)."""

    doc_id: str
    content_hash: str
    published_at: float


class GraphRecords(Protocol):
    """The records of one workspace and the index version that makes each batch visible.

    Reads take a batch of keys and cost one round trip each (see the implementation for
    the exceptions on a cluster); missing keys are left out of the result."""

    @property
    def workspace(self) -> str: ...

    def ping(self) -> None:
        """Raise when the store cannot be reached (the gateway's health check)."""
        ...

    # -- writes ------------------------------------------------------------------------

    def apply(self, batch: GraphBatch, now: float | None = None) -> int:
        """Apply `batch` whole and advance the index version; returns the new version.
        `now` (seconds since the epoch) becomes the documents' `updated_at`."""
        ...

    def forget_written(self) -> None:
        """Write every record whole from now on: for a server that may have lost its last
        writes."""
        ...

    # -- the index version -------------------------------------------------------------

    def version(self) -> int:
        """How many batches have been applied to this workspace."""
        ...

    # -- reads -------------------------------------------------------------------------

    def get_entities(self, keys: Iterable[str]) -> dict[str, EntityRecord]: ...

    def get_entities_and_degrees(
        self, keys: Iterable[str], degrees_only: Iterable[str] = ()
    ) -> tuple[dict[str, EntityRecord], dict[str, int]]:
        """The entities of `keys` with the degrees of `keys` and of `degrees_only`."""
        ...

    def chunk_ids_of_few(self, keys: Iterable[str], at_most: int) -> dict[str, tuple[str, ...]]:
        """The source chunk ids of those entities that cite at most `at_most` chunks."""
        ...

    def get_relations(self, pairs: Iterable[RelationPair]) -> dict[RelationPair, RelationRecord]:
        """Relations by pair, in either order; keyed by the sorted pair."""
        ...

    def get_relations_with_endpoints(
        self, pairs: Iterable[RelationPair]
    ) -> tuple[dict[RelationPair, RelationRecord], dict[str, EntityRecord]]:
        """Relations by pair plus the entities at their ends (every relation returned has
        both)."""
        ...

    def get_relations_and_end_degrees(
        self, pairs: Iterable[RelationPair]
    ) -> tuple[dict[RelationPair, RelationRecord], dict[str, int]]:
        """Relations by pair plus the degree of every end."""
        ...

    def lookup_names(
        self, keys: Iterable[str]
    ) -> tuple[dict[str, EntityRecord], dict[str, list[str]]]:
        """Each key as an entity key and as an alias (with the sorted keys carrying it)."""
        ...

    def node_degrees(self, keys: Iterable[str]) -> dict[str, int]:
        """Number of relations touching each key (0 for unknown keys)."""
        ...

    def edges_of(self, keys: Iterable[str]) -> dict[str, list[RelationPair]]:
        """The sorted pairs of every relation touching each key, in pair order."""
        ...

    def get_neighbours(self, keys: Iterable[str]) -> dict[str, list[tuple[str, int]]]:
        """Each key's neighbours with the neighbour's degree, in neighbour-key order."""
        ...

    def get_chunks(self, chunk_ids: Iterable[str]) -> dict[str, Chunk]: ...

    def get_documents(self, doc_ids: Iterable[str]) -> dict[str, StoredDocument]: ...

    def documents_by_status(
        self, status: DocumentStatus, offset: int = 0, limit: int = 100
    ) -> tuple[list[str], int]:
        """A page of doc ids with `status` (in id order) and how many there are."""
        ...

    def status_counts(self) -> dict[DocumentStatus, int]: ...

    # -- export ------------------------------------------------------------------------

    def record_counts(self) -> dict[str, int]:
        """How many entities, relations and chunks the workspace holds."""
        ...

    def iter_entities(self) -> Iterator[EntityRecord]: ...

    def iter_relations(self) -> Iterator[RelationRecord]: ...

    def iter_aliases(self) -> Iterator[tuple[str, tuple[str, ...]]]:
        """Every alias with the sorted keys of the entities carrying it."""
        ...

    def iter_chunks(self) -> Iterator[Chunk]: ...

    def iter_documents(self) -> Iterator[StoredDocument]: ...


class IndexControl(Protocol):
    """What the indexer and the commands tell each other beside the records (for `kgstream
    status`, `kgstream retry-failed` and the indexer's restarts)."""

    @property
    def workspace(self) -> str: ...

    # -- the indexer's state, for `kgstream status` -------------------------------------

    def set_consumer_lag(self, lag: dict[int, int]) -> None:
        """Record the indexer's Kafka lag per partition."""
        ...

    def consumer_lag(self) -> dict[int, int]: ...

    def set_source_hold(self, reason: str | None) -> None:
        """Record why the indexer's source holds, or that it does not (None)."""
        ...

    def source_hold(self) -> str | None: ...

    def record_dead_letter(self, origin: str, reason: str, at: float) -> None:
        """Remember a message the indexer could not decode (once per origin and reason)."""
        ...

    def dead_letters(self, limit: int = 10) -> tuple[int, list[tuple[str, str, float]]]:
        """How many dead letters are kept, and the newest `limit` as (origin, reason, time)."""
        ...

    # -- tracks (the document changes one request of LightRAG's API published) --------

    def remember_track(
        self, track_id: str, documents: Sequence[TrackedDocument], keep_seconds: float
    ) -> None:
        """Keep what `track_id` published for `keep_seconds`, for every gateway to read."""
        ...

    def tracked_documents(self, track_id: str) -> list[TrackedDocument] | None:
        """What `track_id` published, or None when it is unknown (or no longer kept)."""
        ...

    # -- retry requests (`kgstream retry-failed` to the indexer) -----------------------

    def request_retry(self, at: float) -> str:
        """Ask the indexer to retry every document whose extraction failed; returns the
        request's id."""
        ...

    def retry_requests_after(self, last_id: str, count: int) -> list[str]:
        """The ids of up to `count` retry requests after `last_id` ("0": from the start)."""
        ...

    def last_retry_request_id(self) -> str:
        """The newest retry request's id ("0" when there is none)."""
        ...

    # -- the recovery snapshots' dictionary --------------------------------------------

    def snapshot_dictionary(self) -> bytes | None:
        """The dictionary the indexer packs its small recovery snapshots with, if any."""
        ...

    def keep_snapshot_dictionary(self, dictionary: bytes) -> bytes:
        """Keep `dictionary` unless one is kept already; returns the one kept."""
        ...
