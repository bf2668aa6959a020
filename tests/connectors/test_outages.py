"""`OutageWait` and `store_outages` against real stores: a real redis-server stopped and
started again, the embedded one killed, a real Qdrant server killed and restarted on its
storage, qdrant-client against a closed port."""

import os
import signal
import threading

import pytest
import redis
from qdrant_client.http.exceptions import UnexpectedResponse
from redis.cluster import RedisCluster

from connectors.errors import OutageWait, StoppedDuringOutage, StoreUnavailable, store_outages
from connectors.redis.graph_store import GraphStore
from connectors.retry import Backoff
from connectors.stores import StoreLocations, open_stores
from connectors.vectors.port import VectorKind, VectorPoint
from connectors.vectors.qdrant import QdrantClientVectorStore
from dataflow.core.commit import GraphBatch
from tests.connectors.redis.test_graph_store import entity
from tests.support.ports import free_port
from tests.support.qdrant import QdrantTestServer
from tests.support.redis import RedisTestCluster, RedisTestServer
from tests.support.wait import wait_until

FAST = Backoff(0.01, 0.05)


@pytest.mark.services
def test_a_call_waits_while_redis_is_down_and_returns_once_it_is_back():
    server = RedisTestServer().start()
    graph = GraphStore.from_url(server.url, "outage")
    reports: list[str | None] = []
    wait = OutageWait(FAST, on_outage=reports.append)
    try:
        port = server.port
        server.stop()
        result: list[int] = []
        caller = threading.Thread(target=lambda: result.append(wait.call(graph.version)))
        caller.start()
        wait_until(lambda: wait.outage is not None, 10, "the outage to be seen")
        assert "Redis" in wait.outage and caller.is_alive()
        server.start(port)
        caller.join(timeout=30)
        assert result == [0]
        assert wait.outage is None
        assert len(reports) == 2 and "Redis" in reports[0] and reports[1] is None
    finally:
        graph.close()
        server.stop()


@pytest.mark.services
def test_another_thread_s_call_getting_through_does_not_end_a_waiting_call_s_outage():
    """The extraction pool embeds while the dataflow's write waits for Redis: the embedding's
    call succeeding must not say the outage is over (a stop would then not stop at once)."""
    server = RedisTestServer().start()
    graph = GraphStore.from_url(server.url, "outage")
    reports: list[str | None] = []
    wait = OutageWait(FAST, on_outage=reports.append)
    try:
        port = server.port
        server.stop()
        caller = threading.Thread(target=lambda: wait.call(graph.version))
        caller.start()
        wait_until(lambda: wait.outage is not None and reports, 10, "the outage to be seen")
        assert wait.call(lambda: "embedded") == "embedded"  # another store, reachable
        assert wait.outage is not None and "Redis" in wait.outage and caller.is_alive()
        assert len(reports) == 1 and reports[0] is not None
        server.start(port)
        caller.join(timeout=30)
        assert wait.outage is None and reports[1:] == [None]
    finally:
        graph.close()
        server.stop()


def test_a_stop_ends_the_wait_with_the_reason():
    closed = free_port()  # a port nothing listens on
    graph = GraphStore.from_url(f"redis://127.0.0.1:{closed}/0", "outage")
    told: list[str] = []
    wait = OutageWait(FAST, when_stopped=told.append)
    threading.Timer(0.2, wait.stop.set).start()
    with pytest.raises(StoppedDuringOutage, match="Redis"):
        wait.call(graph.version)
    assert len(told) == 1 and "unreachable" in told[0]


def test_errors_that_waiting_cannot_fix_pass_through_at_once(redis_server):
    client = redis.Redis.from_url(redis_server.url)
    client.set("outage:a-string", "x")
    calls: list[int] = []

    def wrong_type() -> object:
        calls.append(1)
        return client.lpush("outage:a-string", "y")

    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        OutageWait(FAST).call(wrong_type)
    assert calls == [1]
    client.close()


def chunk_point(key: str) -> VectorPoint:
    return VectorPoint(VectorKind.CHUNK, key, [1.0, float(len(key)), 0.0, 0.0], {"doc_id": "d"})


@pytest.mark.services
def test_a_write_waits_while_the_qdrant_server_is_killed_and_lands_once_it_restarts(tmp_path):
    """SIGKILL, as a crash: the server's write-ahead log brings back what it had confirmed,
    and the write that waited meanwhile is applied once."""
    server = QdrantTestServer(tmp_path / "qdrant").start()
    vectors = QdrantClientVectorStore.from_url(server.url, "outage", timeout=5)
    try:
        vectors.ensure_collections("space", 4)
        vectors.upsert([chunk_point("before-1"), chunk_point("before-22")])
        server.stop(kill=True)
        with pytest.raises(StoreUnavailable, match=r"vector store \(Qdrant\)"), store_outages():
            vectors.count(VectorKind.CHUNK)

        reports: list[str | None] = []
        wait = OutageWait(FAST, on_outage=reports.append)
        counted: list[int] = []

        def write_then_count() -> int:
            vectors.upsert([chunk_point("during-333")])
            return vectors.count(VectorKind.CHUNK)

        caller = threading.Thread(target=lambda: counted.append(wait.call(write_then_count)))
        caller.start()
        wait_until(lambda: wait.outage is not None, 10, "the outage to be seen")
        assert "Qdrant" in wait.outage and caller.is_alive()
        server.start()
        caller.join(timeout=60)
        assert counted == [3]
        assert wait.outage is None
        assert len(reports) == 2 and "Qdrant" in str(reports[0]) and reports[1] is None
        found = vectors.get(VectorKind.CHUNK, ["before-1", "before-22", "during-333"])
        assert sorted(found) == ["before-1", "before-22", "during-333"]
    finally:
        vectors.close()
        server.stop()


def test_qdrant_without_an_answer_or_with_5xx_is_an_outage_and_4xx_is_not():
    closed = free_port()
    vectors = QdrantClientVectorStore.from_url(f"http://127.0.0.1:{closed}", "ws", timeout=2)
    try:
        with pytest.raises(StoreUnavailable, match="vector store"), store_outages():
            vectors.ping()
    finally:
        vectors.close()
    for status, is_outage in ((503, True), (429, True), (400, False), (404, False)):
        error = UnexpectedResponse(status, "reason", b"{}", {})  # type: ignore[arg-type]
        expected = StoreUnavailable if is_outage else UnexpectedResponse
        with pytest.raises(expected), store_outages():
            raise error


@pytest.mark.services
def test_a_killed_embedded_redis_is_restarted_with_what_it_had(tmp_path):
    stores = open_stores(StoreLocations(tmp_path / "data"), "space", 4)
    try:
        client = stores.graph.client
        client.set("kept", "yes")
        client.save()  # on disk before the kill (the append-only file syncs every second)
        embedded = stores.embedded_redis
        assert embedded is not None and embedded.pid is not None
        os.kill(embedded.pid, signal.SIGKILL)
        wait_until(lambda: not embedded.is_running(), 10, "redis-server to die")

        wait = OutageWait(FAST, revive=stores.revive)
        assert wait.call(lambda: stores.graph.client.get("kept")) == "yes"
        assert embedded.is_running()
    finally:
        stores.close()


@pytest.mark.services
def test_a_batch_waits_while_a_redis_cluster_node_is_down_and_is_written_once_it_is_back():
    """A cluster with a primary gone answers CLUSTERDOWN on its other nodes too (once they
    call it failed) and refuses connections on its own: both are outages, waited out."""
    cluster = RedisTestCluster(node_timeout_ms=500, persistent=True).start()
    graph = GraphStore.from_url(cluster.url, "outage")
    try:
        graph.apply(GraphBatch(entity_upserts=(entity("a"), entity("b"), entity("c"))))
        assert isinstance(graph.client, RedisCluster)
        holder = graph.client.get_node_from_key(graph.keys.version).port
        down = next(node for node in cluster.nodes if node.port != holder)
        port = down.port
        down.stop(keep_data=True)
        cluster.wait_for_state("fail", [node for node in cluster.nodes if node is not down])
        with pytest.raises(StoreUnavailable, match="The cluster is down"), store_outages():
            graph.version()  # a live node: CLUSTERDOWN

        wait = OutageWait(FAST)
        versions: list[int] = []
        batch = GraphBatch(entity_upserts=(entity("d"),), entity_deletes=("a",))
        caller = threading.Thread(
            target=lambda: versions.append(wait.call(lambda: graph.apply(batch)))
        )
        caller.start()
        wait_until(lambda: wait.outage is not None, 10, "the outage to be seen")
        down.start(port)
        caller.join(timeout=60)
        assert versions == [2]
        cluster.wait_for_state("ok", cluster.nodes)  # each node calls it back on its own
        assert set(graph.get_entities(["a", "b", "c", "d"])) == {"b", "c", "d"}
    finally:
        graph.close()
        cluster.stop()
