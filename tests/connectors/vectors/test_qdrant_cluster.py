"""A Qdrant cluster's collection layout (shard number, replication factor, write
consistency) from the settings to qdrant-client's create_collection.

No Qdrant server can run here (none is installable from any registry), so the calls are
made on qdrant-client's local mode, which takes the server's parameters and ignores them;
a recording subclass of the real client shows what a server would receive. The
congruence test (test_congruence.py) runs its local store with the same layout."""

from __future__ import annotations

from typing import Any

import pytest
from qdrant_client import QdrantClient

from connectors.stores import open_vector_store
from connectors.vectors.port import VectorKind, VectorPoint
from connectors.vectors.qdrant import QdrantClientVectorStore
from connectors.vectors.qdrant_cluster import QdrantClusterOptions
from kgstream.assembly import store_locations
from kgstream.settings import SettingsError, load_settings
from tests.connectors.vectors.test_vector_store import DIM, OPTIONS, SPACE, WORKSPACE

LAYOUT = ("shard_number", "replication_factor", "write_consistency_factor")


class RecordingClient(QdrantClient):
    """qdrant-client in local mode, remembering what each create_collection was given."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.created: dict[str, dict[str, Any]] = {}

    def create_collection(self, collection_name: str, **kwargs: Any) -> bool:
        self.created[collection_name] = {name: kwargs.get(name) for name in LAYOUT}
        return super().create_collection(collection_name, **kwargs)


@pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")
def test_the_cluster_layout_reaches_every_collection_creation() -> None:
    client = RecordingClient()
    cluster = QdrantClusterOptions(shard_number=6, replication_factor=3, write_consistency_factor=2)
    store = QdrantClientVectorStore(client, WORKSPACE, OPTIONS, cluster=cluster)
    try:
        store.ensure_collections(SPACE, DIM)

        assert len(client.created) == len(VectorKind)
        expected = {"shard_number": 6, "replication_factor": 3, "write_consistency_factor": 2}
        assert all(layout == expected for layout in client.created.values()), client.created
        point = VectorPoint(VectorKind.CHUNK, "c1", [1.0] + [0.0] * (DIM - 1), {"doc_id": "d"})
        store.upsert([point])  # local mode took the parameters: the collection works
        assert [hit.key for hit in store.search(VectorKind.CHUNK, point.vector, 5)] == ["c1"]
    finally:
        store.close()


@pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")
def test_without_settings_qdrant_chooses_the_layout() -> None:
    client = RecordingClient()
    store = QdrantClientVectorStore(client, WORKSPACE, OPTIONS)
    try:
        store.ensure_collections(SPACE, DIM)
        assert all(layout == dict.fromkeys(LAYOUT) for layout in client.created.values())
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
