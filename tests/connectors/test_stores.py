"""`Stores.write` (connectors/stores.py) on a real redis-server and Qdrant Edge: a vector point
written again unchanged is skipped, a changed or deleted one is written, and a write that
failed is written again."""

import itertools
import os
import signal
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from connectors.redis.embedded import EmbeddedRedis
from connectors.redis.graph_store import GraphStore
from connectors.redis.written_lists import LONG
from connectors.stores import Stores
from connectors.vectors.edge import EdgeVectorStore
from connectors.vectors.port import VectorKind, VectorPoint
from dataflow.core.commit import CommitBatch
from dataflow.core.contributions import EntityRecord
from tests.support.wait import wait_until

_workspaces = itertools.count()


class CountingEdgeStore(EdgeVectorStore):
    """The real Edge store, counting the points it is asked to write."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.upserted: list[str] = []
        self.fail_next = False

    def upsert(self, points) -> None:
        points = list(points)
        if self.fail_next:
            self.fail_next = False
            raise ConnectionError("the vector store is away")
        self.upserted += [p.key for p in points]
        super().upsert(points)


@pytest.fixture
def stores(redis_server, tmp_path: Path) -> Iterator[Stores]:
    graph = GraphStore.from_url(redis_server.url, workspace=f"stores{next(_workspaces)}")
    vectors = CountingEdgeStore(tmp_path / "vectors", graph.workspace)
    vectors.ensure_collections("test-space", 384)
    try:
        yield Stores(graph, vectors)
    finally:
        graph.clear()
        graph.close()
        vectors.close()


def entity(key: str, description: str, chunks: tuple[str, ...]) -> EntityRecord:
    return EntityRecord(key, key.title(), "person", description, chunks, ("a.md",), ("a.md",))


def vector(x: float) -> tuple[float, ...]:
    return (x, 1.0, *([0.0] * 382))


def stored_point(stores, key: str) -> VectorPoint:
    return stores.vectors.get(VectorKind.ENTITY, [key])[key]


def test_a_point_written_again_unchanged_is_skipped_and_a_changed_one_is_written(stores):
    ada = entity("ada", "Ada wrote the notes.", ("c1",))
    stores.write(CommitBatch(entity_upserts=(ada,), entity_vectors=((ada, vector(1.0)),)))
    assert stores.vectors.upserted == ["ada"]

    # a new chunk cites her: the record changes, her point (name, description) does not
    cited = entity("ada", "Ada wrote the notes.", ("c1", "c2"))
    stores.write(CommitBatch(entity_upserts=(cited,), entity_vectors=((cited, vector(1.0)),)))
    assert stores.vectors.upserted == ["ada"]
    assert stores.graph.get_entities(["ada"])["ada"].source_chunk_ids == ("c1", "c2")

    described = entity("ada", "Ada wrote the first program.", ("c1", "c2"))
    stores.write(
        CommitBatch(entity_upserts=(described,), entity_vectors=((described, vector(2.0)),))
    )
    assert stores.vectors.upserted == ["ada", "ada"]
    assert stored_point(stores, "ada").payload["name"] == "Ada"

    stores.write(CommitBatch(entity_deletes=("ada",), entity_vector_deletes=("ada",)))
    assert stores.vectors.get(VectorKind.ENTITY, ["ada"]) == {}
    stores.write(
        CommitBatch(entity_upserts=(described,), entity_vectors=((described, vector(2.0)),))
    )
    assert stores.vectors.upserted == ["ada", "ada", "ada"]  # deleted, so written again
    assert "ada" in stores.vectors.get(VectorKind.ENTITY, ["ada"])


def test_a_point_whose_write_failed_is_written_when_the_write_is_tried_again(stores):
    ada = entity("ada", "Ada wrote the notes.", ("c1",))
    batch = CommitBatch(entity_upserts=(ada,), entity_vectors=((ada, vector(1.0)),))
    stores.vectors.fail_next = True
    with pytest.raises(ConnectionError):
        stores.write(batch)

    stores.write(batch)  # as OutageWait retries it

    assert stores.vectors.upserted == ["ada"]
    assert "ada" in stores.vectors.get(VectorKind.ENTITY, ["ada"])


@pytest.mark.services
def test_a_revived_embedded_server_gets_every_record_whole_again(tmp_path: Path):
    """`Stores.revive` restarts a killed embedded redis-server and forgets which lists it
    wrote (connectors/redis/written_lists.py), so the next write of a record sends them all."""
    server = EmbeddedRedis(tmp_path / "redis").start()
    graph = GraphStore.from_url(server.url, "revived")
    vectors = EdgeVectorStore(tmp_path / "vectors", graph.workspace)
    vectors.ensure_collections("test-space", 384)
    docs = tuple(f"docs/{n:03}.md" for n in range(LONG))
    hub = replace(entity("ada", "Ada wrote the notes.", docs), file_paths=docs, doc_ids=docs)
    with Stores(graph, vectors, server) as stores:
        stores.write(CommitBatch(entity_upserts=(hub,)))
        graph.client.hset(graph.keys.entity("ada"), "doc_ids", '["tampered"]')
        stores.write(CommitBatch(entity_upserts=(hub,)))
        assert graph.get_entities(["ada"])["ada"].doc_ids == ("tampered",)  # left out

        assert server.pid is not None
        os.kill(server.pid, signal.SIGKILL)
        wait_until(lambda: not server.is_running(), 10, "redis-server to die")
        stores.revive()
        graph.client.hset(graph.keys.entity("ada"), "doc_ids", '["tampered"]')
        stores.write(CommitBatch(entity_upserts=(hub,)))
        assert graph.get_entities(["ada"])["ada"] == hub
