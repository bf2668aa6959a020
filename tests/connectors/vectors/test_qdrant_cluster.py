"""A Qdrant cluster's collection layout (shard number, replication factor, write
consistency) from the settings to the collections on a real three-peer Qdrant cluster
(tests/support/qdrant.py), read back from the cluster's own collection info."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from connectors.stores import open_vector_store
from connectors.vectors.port import VectorFilter, VectorKind, VectorPoint
from connectors.vectors.qdrant import QdrantClientVectorStore
from connectors.vectors.qdrant_cluster import QdrantClusterOptions
from kgstream.assembly import store_locations
from kgstream.settings import SettingsError, load_settings
from tests.connectors.vectors.test_vector_store import DIM, OPTIONS, SPACE
from tests.support.qdrant import QdrantTestCluster, drop_workspace


@pytest.fixture
def workspace(qdrant_cluster: QdrantTestCluster) -> Iterator[str]:
    name = f"layout-{uuid.uuid4().hex[:12]}"
    yield name
    drop_workspace(qdrant_cluster.url, name)


def layouts(store: QdrantClientVectorStore) -> dict[str, tuple[int | None, ...]]:
    """Each collection's (shard_number, replication_factor, write_consistency_factor), as
    the cluster reports it."""
    found = {}
    for record in store.collections():
        params = store.client.get_collection(record.name).config.params
        found[record.name] = (
            params.shard_number,
            params.replication_factor,
            params.write_consistency_factor,
        )
    return found


def replicas_by_peer(cluster: QdrantTestCluster, name: str) -> list[int]:
    """How many shard replicas of collection `name` each peer holds."""
    counts = []
    for peer in cluster.peers:
        answer = httpx.get(f"{peer.url}/collections/{name}/cluster", timeout=10)
        counts.append(len(answer.raise_for_status().json()["result"]["local_shards"]))
    return counts


def test_the_cluster_layout_reaches_every_collection_and_the_collections_work(
    qdrant_cluster: QdrantTestCluster, workspace: str
) -> None:
    cluster = QdrantClusterOptions(shard_number=6, replication_factor=3, write_consistency_factor=2)
    store = QdrantClientVectorStore.from_url(
        qdrant_cluster.url, workspace, OPTIONS, cluster=cluster
    )
    try:
        store.ensure_collections(SPACE, DIM)

        found = layouts(store)
        assert len(found) == len(VectorKind)
        assert set(found.values()) == {(6, 3, 2)}, found
        for name in found:  # six shards, three replicas each: every peer holds all six
            assert replicas_by_peer(qdrant_cluster, name) == [6, 6, 6], name
        points = [
            VectorPoint(
                VectorKind.CHUNK,
                f"c{i}",
                [1.0, i / 10] + [0.0] * (DIM - 2),
                {"doc_id": f"d{i % 2}", "file_path": "a.md"},
            )
            for i in range(10)
        ]
        store.upsert(points)
        assert store.count(VectorKind.CHUNK) == 10
        hits = store.search(VectorKind.CHUNK, points[0].vector, 3, VectorFilter(doc_ids=("d1",)))
        assert [hit.key for hit in hits] == ["c1", "c3", "c5"]
        assert store.get(VectorKind.CHUNK, ["c7"])["c7"].payload == points[7].payload
    finally:
        store.close()


def test_without_settings_qdrant_chooses_the_layout(
    qdrant_cluster: QdrantTestCluster, workspace: str
) -> None:
    store = QdrantClientVectorStore.from_url(qdrant_cluster.url, workspace, OPTIONS)
    try:
        store.ensure_collections(SPACE, DIM)
        # Qdrant's defaults: one shard per peer at creation, one replica, one confirmation.
        assert set(layouts(store).values()) == {(3, 1, 1)}
    finally:
        store.close()


def test_the_settings_carry_the_layout_to_the_server_store() -> None:
    settings = load_settings(
        {
            "KGSTREAM_QDRANT_URL": "http://127.0.0.1:9",
            "KGSTREAM_QDRANT_SHARD_NUMBER": "4",
            "KGSTREAM_QDRANT_REPLICATION_FACTOR": "2",
            "KGSTREAM_QDRANT_WRITE_CONSISTENCY_FACTOR": "2",
        }
    )
    store = open_vector_store(store_locations(settings))  # no request is made yet
    try:
        assert isinstance(store, QdrantClientVectorStore)
        assert store.cluster == QdrantClusterOptions(4, 2, 2)
    finally:
        store.close()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"KGSTREAM_QDRANT_SHARD_NUMBER": "0"}, "qdrant_shard_number must be >= 1; got 0"),
        (
            {
                "KGSTREAM_QDRANT_REPLICATION_FACTOR": "2",
                "KGSTREAM_QDRANT_WRITE_CONSISTENCY_FACTOR": "3",
            },
            r"write_consistency_factor \(3\) must not exceed qdrant_replication_factor \(2\)",
        ),
        (
            {"KGSTREAM_QDRANT_WRITE_CONSISTENCY_FACTOR": "2"},
            r"must not exceed qdrant_replication_factor \(1\)",
        ),
    ],
)
def test_a_layout_no_write_could_meet_is_refused_by_name(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        load_settings({"KGSTREAM_QDRANT_URL": "http://127.0.0.1:9", **env})


def test_the_layout_needs_a_qdrant_server() -> None:
    with pytest.raises(SettingsError, match="set qdrant_url too"):
        load_settings({"KGSTREAM_QDRANT_SHARD_NUMBER": "2"})
