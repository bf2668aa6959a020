"""`Stores.write` (connectors/stores.py) on a real redis-server and Qdrant Edge: a vector point
written again unchanged is skipped, a changed or deleted one is written, and a write that
failed is written again."""

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.redis.graph_store import GraphStore
from connectors.stores import Stores
from connectors.vectors.base import VectorKind, VectorPoint
from connectors.vectors.edge import EdgeVectorStore
from dataflow.core.commit import CommitBatch
from dataflow.core.contributions import EntityRecord

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
