"""The health service follows the stores: NOT_SERVING while Redis or the vector store cannot
be reached, SERVING again once it is back, each change logged once (real redis-server, a
real Qdrant server killed and restarted, qdrant-client against a closed port, the real gRPC
wire)."""

from __future__ import annotations

import logging
import time
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from connectors.redis.graph_store import GraphStore
from connectors.vectors.qdrant import QdrantClientVectorStore
from gateway.engine import QueryEngine
from gateway.health import HealthCheck, ListingHealthServicer
from gateway.server import RunningServer, ServerOptions, serve
from kgstream_protos.v1 import query_pb2 as pb
from kgstream_protos.v1 import query_pb2_grpc
from tests.gateway.corpus import Corpus, build_corpus
from tests.gateway.test_server import QUESTION, new_engine, status_of
from tests.gateway.test_server_safety import listed_services
from tests.support.llm_server import OpenAICompatibleServer
from tests.support.ports import free_port
from tests.support.qdrant import QdrantTestServer
from tests.support.redis import RedisTestServer
from tests.support.wait import wait_until

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICES = ("", "kgstream.v1.KnowledgeGraph", "kgstream.v1.Ingest")


@pytest.fixture
def engine(corpus: Corpus, llm_server: OpenAICompatibleServer) -> QueryEngine:
    return new_engine(corpus, llm_server)


def gateway(engine: QueryEngine, corpus: Corpus, checks: dict[str, HealthCheck]) -> RunningServer:
    options = ServerOptions(address="127.0.0.1:0", health_interval_seconds=0.05)
    stores = corpus.stores
    return serve(engine, stores.graph, stores.control, options, health_checks=checks)


def statuses(address: str) -> set[int]:
    with grpc.insecure_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        return {
            health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status
            for service in SERVICES
        }


def wait_for(address: str, status: int) -> None:
    """Until every service reports `status`."""
    wait_until(
        lambda: statuses(address) == {status},
        30,
        f"every service's health to be {status}",
        interval=0.02,
    )


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


def test_health_is_not_serving_while_the_qdrant_server_is_killed_and_serving_once_it_restarts(
    engine: QueryEngine, corpus: Corpus, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = QdrantTestServer(tmp_path / "qdrant").start()
    vectors = QdrantClientVectorStore.from_url(server.url, "health", timeout=2)
    running = gateway(engine, corpus, {"vectors": vectors.ping})
    try:
        assert statuses(running.address) == {SERVING}
        with caplog.at_level(logging.WARNING, logger="gateway.health"):
            server.stop(kill=True)
            wait_for(running.address, NOT_SERVING)
            server.start()
            wait_for(running.address, SERVING)
        messages = [r.getMessage() for r in caplog.records if r.name == "gateway.health"]
        assert len(messages) == 2, messages
        assert messages[0].startswith("health NOT_SERVING: cannot reach vectors: ")
        assert messages[1] == "health SERVING again: vectors reachable"
    finally:
        running.stop()
        vectors.close()
        server.stop()


def test_health_is_not_serving_while_the_vector_store_cannot_be_reached(
    engine: QueryEngine, corpus: Corpus
) -> None:
    closed = free_port()  # a port nothing listens on
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


@pytest.mark.services
def test_while_redis_is_stopped_its_rpcs_are_unavailable_the_rest_answer_and_all_return_with_it(
    tmp_path: Path,
) -> None:
    """A real redis-server holding an indexed corpus, stopped and restarted in place."""
    redis_server = RedisTestServer(persistent=True).start()
    own = build_corpus(redis_server.url, tmp_path)
    engine = new_engine(own, None)
    checks: dict[str, HealthCheck] = {"Redis": own.stores.graph.ping}
    running = serve(
        engine,
        own.stores.graph,
        own.stores.control,
        ServerOptions("127.0.0.1:0", health_interval_seconds=0.05),
        health_checks=checks,
    )
    channel = grpc.insecure_channel(running.address)
    stub = query_pb2_grpc.KnowledgeGraphStub(channel)
    question = pb.QueryRequest(question=QUESTION)
    needs_redis = {
        "Retrieve": lambda: stub.Retrieve(question, timeout=15),
        "Query": lambda: stub.Query(question, timeout=15),
        "QueryStream": lambda: list(stub.QueryStream(question, timeout=15)),
        "GetEntity": lambda: stub.GetEntity(pb.GetEntityRequest(name="Carla Diaz"), timeout=15),
        "GetSubgraph": lambda: stub.GetSubgraph(
            pb.GetSubgraphRequest(seed="Carla Diaz"), timeout=15
        ),
        "GetDocument": lambda: stub.GetDocument(
            pb.GetDocumentRequest(doc_id="projects/atlas.md"), timeout=15
        ),
        "ListDocuments": lambda: stub.ListDocuments(pb.ListDocumentsRequest(), timeout=15),
    }
    try:
        before = {name: call() for name, call in needs_redis.items()}
        port = redis_server.port
        redis_server.stop(keep_data=True)
        wait_for(running.address, NOT_SERVING)
        for name, call in needs_redis.items():
            started = time.monotonic()
            code, details = status_of(call)
            assert code == grpc.StatusCode.UNAVAILABLE, (name, code, details)
            assert time.monotonic() - started < 10, name  # answered, not hung to the deadline
        # What does not need Redis keeps answering: health (NOT_SERVING), reflection, and
        # requests refused on their own fields.
        assert "kgstream.v1.KnowledgeGraph" in listed_services(channel)
        code, details = status_of(lambda: stub.GetEntity(pb.GetEntityRequest(name=" "), timeout=5))
        assert code == grpc.StatusCode.INVALID_ARGUMENT, details

        redis_server.start(port)
        wait_for(running.address, SERVING)
        after = {name: call() for name, call in needs_redis.items()}
        assert after["Retrieve"] == before["Retrieve"]
        assert after["GetEntity"] == before["GetEntity"]
        assert after["ListDocuments"] == before["ListDocuments"]
    finally:
        channel.close()
        running.stop()
        own.close()
        redis_server.stop()


def listed(address: str) -> dict[str, int]:
    """Health/List over the wire: each service's status, by name."""
    with grpc.insecure_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        response = health.List(health_pb2.HealthListRequest(), timeout=5)
        return {service: reply.status for service, reply in response.statuses.items()}


def test_health_list_gives_every_service_and_its_status_without_logging_an_error(
    engine: QueryEngine, corpus: Corpus, caplog: pytest.LogCaptureFixture
) -> None:
    closed = free_port()  # a vector store nothing listens on: NOT_SERVING
    vectors = QdrantClientVectorStore.from_url(f"http://127.0.0.1:{closed}", "ws", timeout=2)
    with caplog.at_level(logging.ERROR):
        serving = gateway(engine, corpus, {"Redis": corpus.stores.graph.ping})
        try:
            assert listed(serving.address) == dict.fromkeys(SERVICES, SERVING)
        finally:
            serving.stop()
        failing = gateway(engine, corpus, {"vectors": vectors.ping})
        try:
            assert listed(failing.address) == dict.fromkeys(SERVICES, NOT_SERVING)
            # Each service's List entry is what Check answers for it.
            assert statuses(failing.address) == {NOT_SERVING}
        finally:
            failing.stop()
            vectors.close()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


def test_health_list_agrees_with_check_through_a_graceful_shutdown() -> None:
    """After enter_graceful_shutdown every status is NOT_SERVING and later changes are
    ignored, in List as in Check."""
    servicer = ListingHealthServicer()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        address = f"127.0.0.1:{port}"
        for service in SERVICES[1:]:
            servicer.set(service, SERVING)
        assert listed(address) == dict.fromkeys(SERVICES, SERVING)
        servicer.enter_graceful_shutdown()
        servicer.set(SERVICES[1], SERVING)  # ignored from now on
        assert listed(address) == dict.fromkeys(SERVICES, NOT_SERVING)
        assert statuses(address) == {NOT_SERVING}
    finally:
        server.stop(None)
