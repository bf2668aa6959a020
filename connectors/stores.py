"""The stores as one unit: the graph records, the control plane beside them and the vector
store, embedded or remote.

`open_stores` gives the embedded default when no URLs are set: a real
redis-server started on a private socket under the data directory, and Qdrant
Edge in-process under the same directory. Both are the same store classes the
production servers use, only pointed at local instances.
"""

from __future__ import annotations

import hashlib
import json
import logging
from array import array
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import redis

from connectors.errors import StoreUnavailable, store_outages
from connectors.redis.embedded import EmbeddedRedis
from connectors.redis.graph_store import GraphStore
from connectors.redis.index_control import RedisIndexControl
from connectors.redis.ports import GraphRecords, IndexControl
from connectors.redis.projection_control import ProjectionMode
from connectors.vectors.edge import EdgeVectorStore
from connectors.vectors.port import VectorKind, VectorPoint, VectorStore
from connectors.vectors.qdrant import QdrantClientVectorStore
from connectors.vectors.qdrant_cluster import QdrantClusterOptions
from connectors.writes import store_write
from dataflow.core.commit import CommitBatch

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoreLocations:
    data_dir: Path
    workspace: str = "default"
    redis_url: str | None = None  # redis://, rediss://, unix://, or redis+cluster://
    graph_projection: ProjectionMode = ProjectionMode.AUTO  # connectors/redis/projection.py
    qdrant_url: str | None = None
    qdrant_cluster: QdrantClusterOptions = field(default_factory=QdrantClusterOptions)


class WrittenPoints:
    """A digest of each vector point this process has written, by kind and key, so that a
    point written again unchanged is skipped.

    A hub entity or a relation is rendered again whenever a chunk citing it changes, and
    its point (name and description, their vector) mostly stays the same: writing those
    points again would be a tenth of a hub edit's time on a large index
    (docs/decisions/0014-points-that-cite-nothing.md).
    A digest is remembered only once its point is written and forgotten when the point is
    deleted, so a failed write is written again; a new process starts with none, and writes
    each point once more."""

    def __init__(self) -> None:
        self._digests: dict[tuple[VectorKind, str], bytes] = {}

    def changed(self, points: Iterable[VectorPoint]) -> list[tuple[VectorPoint, bytes]]:
        """The points whose last written form differs (or that were never written), each
        with its digest for `remember`."""
        last = self._digests
        digested = ((point, _digest(point)) for point in points)
        return [(p, digest) for p, digest in digested if last.get((p.kind, p.key)) != digest]

    def remember(self, written: Iterable[tuple[VectorPoint, bytes]]) -> None:
        for point, digest in written:
            self._digests[(point.kind, point.key)] = digest

    def forget(self, kind: VectorKind, keys: Iterable[str]) -> None:
        for key in keys:
            self._digests.pop((kind, key), None)


def _digest(point: VectorPoint) -> bytes:
    digest = hashlib.blake2b(array("d", point.vector).tobytes(), digest_size=16)
    digest.update(json.dumps(point.payload, sort_keys=True).encode())
    digest.update(point.lexical_text.encode())
    return digest.digest()


class Stores:
    """The graph records and the vector store, written together in `write`, and the control
    plane on the graph store's Redis client."""

    def __init__(
        self, graph: GraphStore, vectors: VectorStore, embedded_redis: EmbeddedRedis | None = None
    ) -> None:
        self.graph: GraphRecords = graph
        self.control: IndexControl = RedisIndexControl(graph.client, graph.workspace)
        self.vectors = vectors
        self._embedded_redis = embedded_redis
        self._written = WrittenPoints()

    @property
    def embedded_redis(self) -> EmbeddedRedis | None:
        """The redis-server these stores started and own (the embedded default), which
        `revive` restarts and `close` stops; None for a server of the user's."""
        return self._embedded_redis

    def write(self, batch: CommitBatch) -> int:
        """Vectors first, then the graph (whose version bump makes the batch visible).
        A point this process wrote last with the same vector, payload and text is not
        written again (`WrittenPoints`)."""
        write = store_write(batch)
        deletes: dict[VectorKind, list[str]] = defaultdict(list)
        for kind, key in write.vector_deletes:
            deletes[kind].append(key)
        for kind, keys in deletes.items():
            self._written.forget(kind, keys)
            self.vectors.delete(kind, keys)
        changed = self._written.changed(write.vector_upserts)
        if changed:
            self.vectors.upsert([point for point, _ in changed])
            self._written.remember(changed)
        return self.graph.apply(write.graph)

    def revive(self) -> None:
        """Restart the embedded redis-server if it has died (killed, out of memory): it
        reloads its append-only file, so nothing committed is lost. Servers of our own
        (`redis_url`, `qdrant_url`) are waited for instead (`OutageWait`)."""
        if self._embedded_redis is not None and not self._embedded_redis.is_running():
            self._embedded_redis.start()
            self.graph.forget_written()  # records are written whole again (`WrittenLists`)

    def close(self) -> None:
        self.vectors.close()
        if self._embedded_redis is not None:
            self._embedded_redis.stop()

    def __enter__(self) -> Stores:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def open_graph_store(locations: StoreLocations) -> tuple[GraphStore, EmbeddedRedis | None]:
    """The graph store; for the embedded default, attach to a running kgstream's redis
    (so `kgstream status` works beside `kgstream run`) or start one, returned to stop.
    Raises `GraphFormatError` when the workspace holds records of another layout, and
    `GraphModuleMissing` or `ProjectionFailed` when `graph_projection` is on and the
    projection cannot be written (connectors/redis/projection_control.py)."""
    graph, embedded = _open_graph_store(locations)
    try:
        with store_outages(locations.workspace):
            graph.check_format()
            decision = graph.open_projection(locations.graph_projection)
            if not decision.written and locations.graph_projection is ProjectionMode.AUTO:
                level = logging.WARNING if decision.behind else logging.INFO
                _log.log(level, "graph projection not written: %s", decision.reason)
    except StoreUnavailable:
        pass  # a server that is away: the first write checks (`GraphStore.apply`)
    except BaseException:
        if embedded is not None:
            embedded.stop()
        raise
    return graph, embedded


def _open_graph_store(locations: StoreLocations) -> tuple[GraphStore, EmbeddedRedis | None]:
    if locations.redis_url:
        return GraphStore.from_url(locations.redis_url, locations.workspace), None
    embedded = EmbeddedRedis(locations.data_dir / "redis")
    if embedded.socket_path.exists():
        graph = GraphStore.from_url(embedded.url, locations.workspace)
        try:
            graph.version()
            return graph, None
        except redis.ConnectionError:
            pass  # a stale socket from a crashed run: start our own below
    embedded.start()
    return GraphStore.from_url(embedded.url, locations.workspace), embedded


def open_vector_store(locations: StoreLocations) -> VectorStore:
    """The vector store, not yet bound to an embedding space (see `ensure_collections`)."""
    if locations.qdrant_url:
        return QdrantClientVectorStore.from_url(
            locations.qdrant_url, locations.workspace, cluster=locations.qdrant_cluster
        )
    return EdgeVectorStore(locations.data_dir / "vectors", locations.workspace)


def open_stores(locations: StoreLocations, space: str, dimension: int) -> Stores:
    """Open (and for the embedded default, start) the stores for one embedding space."""
    graph, embedded = open_graph_store(locations)
    vectors = open_vector_store(locations)
    try:
        vectors.ensure_collections(space, dimension)
    except BaseException:
        vectors.close()
        if embedded is not None:
            embedded.stop()
        raise
    return Stores(graph, vectors, embedded)
