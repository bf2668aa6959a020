"""The health service follows the stores: NOT_SERVING while Redis or the vector store cannot
be reached, SERVING again once it is back, each change logged once (real redis-server,
real qdrant-client against a closed port, the real gRPC wire)."""

from __future__ import annotations

import logging
import socket
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from connectors.redis.graph_store import GraphStore
from connectors.vectors.qdrant import QdrantClientVectorStore
from gateway.engine import QueryEngine
from gateway.health import HealthCheck
from gateway.server import RunningServer, ServerOptions, serve
from tests.gateway.corpus import Corpus
from tests.gateway.test_server import new_engine
from tests.support.llm_server import OpenAICompatibleServer
from tests.support.redis import RedisTestServer

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICES = ("", "kgstream.v1.KnowledgeGraph", "kgstream.v1.Ingest")


@pytest.fixture
def engine(corpus: Corpus, llm_server: OpenAICompatibleServer) -> QueryEngine:
    return new_engine(corpus, llm_server)


def gateway(engine: QueryEngine, corpus: Corpus, checks: dict[str, HealthCheck]) -> RunningServer:
    options = ServerOptions(address="127.0.0.1:0", health_interval_seconds=0.05)
    return serve(engine, corpus.stores.graph, options, health_checks=checks)


def statuses(address: str) -> set[int]:
    with grpc.insecure_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        return {
            health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status
            for service in SERVICES
        }


def wait_for(address: str, status: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while statuses(address) != {status}:
        assert time.monotonic() < deadline, f"health never became {status}"
        time.sleep(0.02)


def test_health_is_not_serving_while_redis_is_down_and_serving_once_it_is_back(
    engine: QueryEngine, corpus: Corpus, caplog: pytest.LogCaptureFixture
) -> None:
    redis_server = RedisTestServer().start()
    graph = GraphStore.from_url(redis_server.url)
    running = gateway(engine, corpus, {"Redis": graph.ping})
    try:
        assert statuses(running.address) == {SERVING}
        with caplog.at_level(logging.WARNING, logger="gateway.health"):
            port = redis_server.port
            redis_server.stop()
            wait_for(running.address, NOT_SERVING)
            redis_server.start(port)
            wait_for(running.address, SERVING)
        messages = [r.getMessage() for r in caplog.records if r.name == "gateway.health"]
        assert len(messages) == 2, messages
        assert messages[0].startswith("health NOT_SERVING: cannot reach Redis: ")
        assert messages[1] == "health SERVING again: Redis reachable"
    finally:
        running.stop()
        graph.close()
        redis_server.stop()


@pytest.mark.filterwarnings("ignore:Failed to obtain server version:UserWarning")
def test_health_is_not_serving_while_the_vector_store_cannot_be_reached(
    engine: QueryEngine, corpus: Corpus
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    vectors = QdrantClientVectorStore.from_url(f"http://127.0.0.1:{closed}", "ws", timeout=2)
    running = gateway(engine, corpus, {"Redis": corpus.stores.graph.ping, "vectors": vectors.ping})
    try:
        assert statuses(running.address) == {NOT_SERVING}  # from the first answer on
    finally:
        running.stop()
        vectors.close()
    served = gateway(engine, corpus, {"vectors": corpus.stores.vectors.ping})
    try:
        assert statuses(served.address) == {SERVING}
    finally:
        served.stop()
