"""Gateway safety over the real wire: auth, health, reflection, deadlines, read-your-writes,
cancellation, message limits and a store that is down."""

from __future__ import annotations

import threading
import time
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pb2
from google.protobuf.message_factory import GetMessageClass
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from connectors.embeddings.remote import OpenAIEmbedder, OpenAIEmbeddingOptions
from connectors.llm.client import ChatClient, LLMOptions
from connectors.redis.graph_store import GraphStore
from connectors.stores import Stores
from dataflow.core.documents import DocumentUpsert
from gateway.engine import EngineOptions, QueryEngine
from gateway.keywords import LLMKeywordExtractor, OfflineKeywordExtractor
from gateway.reflection import V1_SERVICE, V1ALPHA_SERVICE
from gateway.server import ServerOptions
from gateway.types import CallAbandoned, DeadlinePassed
from kgstream_protos.v1 import ingest_pb2, query_pb2_grpc
from kgstream_protos.v1 import query_pb2 as pb
from tests.dataflow.harness import TOKENIZER
from tests.gateway.corpus import Corpus
from tests.gateway.test_server import QUESTION, new_engine, running_gateway, status_of
from tests.support.llm_server import OpenAICompatibleServer
from tests.support.ports import free_port
from tests.support.wait import wait_until

TOKEN = "s3cret-token"
LONG_ANSWER = " ".join(f"word{i}" for i in range(300))


@pytest.fixture
def engine(corpus: Corpus, llm_server: OpenAICompatibleServer) -> QueryEngine:
    return new_engine(corpus, llm_server)


# -- auth --------------------------------------------------------------------------------


# One valid request per RPC of both services; the test below checks that none is missing.
SAMPLE_REQUESTS: dict[str, Any] = {
    "/kgstream.v1.KnowledgeGraph/Query": pb.QueryRequest(question=QUESTION),
    "/kgstream.v1.KnowledgeGraph/QueryStream": pb.QueryRequest(question=QUESTION),
    "/kgstream.v1.KnowledgeGraph/Retrieve": pb.QueryRequest(question=QUESTION),
    "/kgstream.v1.KnowledgeGraph/GetEntity": pb.GetEntityRequest(name="Carla Diaz"),
    "/kgstream.v1.KnowledgeGraph/GetRelation": pb.GetRelationRequest(
        source="Carla Diaz", target="Atlas Project"
    ),
    "/kgstream.v1.KnowledgeGraph/GetSubgraph": pb.GetSubgraphRequest(seed="Carla Diaz"),
    "/kgstream.v1.KnowledgeGraph/GetDocument": pb.GetDocumentRequest(doc_id="projects/atlas.md"),
    "/kgstream.v1.KnowledgeGraph/ListDocuments": pb.ListDocumentsRequest(),
    "/kgstream.v1.Ingest/UpsertDocument": ingest_pb2.UpsertDocumentRequest(
        doc_id="a.md", content=b"x"
    ),
    "/kgstream.v1.Ingest/DeleteDocument": ingest_pb2.DeleteDocumentRequest(doc_id="a.md"),
}


def every_rpc() -> list[tuple[str, bool, Any]]:
    """(path, server-streaming, response class) of every method of both services."""
    rpcs = []
    for file in (pb.DESCRIPTOR, ingest_pb2.DESCRIPTOR):
        for service in file.services_by_name.values():
            for method in service.methods:
                path = f"/{service.full_name}/{method.name}"
                rpcs.append((path, method.server_streaming, GetMessageClass(method.output_type)))
    return rpcs


def call_rpc(channel: grpc.Channel, rpc: tuple[str, bool, Any], metadata: Any) -> object:
    path, streaming, response = rpc
    request = SAMPLE_REQUESTS[path]
    if streaming:
        call = channel.unary_stream(path, request.SerializeToString, response.FromString)
        return list(call(request, metadata=metadata, timeout=30))
    return channel.unary_unary(path, request.SerializeToString, response.FromString)(
        request, metadata=metadata, timeout=30
    )


def test_with_a_token_set_every_rpc_needs_the_bearer_token_and_health_and_reflection_do_not(
    engine: QueryEngine, corpus: Corpus
) -> None:
    rpcs = every_rpc()
    assert {path for path, _, _ in rpcs} == set(SAMPLE_REQUESTS)  # a new RPC needs a sample
    options = ServerOptions(address="127.0.0.1:0", auth_token=TOKEN)
    refused = {
        "missing": (),
        "wrong token": (("authorization", "Bearer wrong"),),
        "no scheme": (("authorization", TOKEN),),
        "other scheme": (("authorization", f"Basic {TOKEN}"),),
    }
    with running_gateway(engine, corpus.stores.graph, options) as (_, channel):
        for rpc in rpcs:
            for why, metadata in refused.items():
                code, details = status_of(lambda r=rpc, md=metadata: call_rpc(channel, r, md))
                assert code == grpc.StatusCode.UNAUTHENTICATED, (rpc[0], why)
                assert "authorization" in details
                assert TOKEN not in details
            for scheme in ("Bearer", "bearer", "BEARER"):
                good = (("authorization", f"{scheme} {TOKEN}"),)
                try:
                    call_rpc(channel, rpc, good)
                except grpc.RpcError as error:  # the request's own answer, past auth
                    assert error.code() != grpc.StatusCode.UNAUTHENTICATED, (rpc[0], scheme)
                    # The handler's own answers: no event log here, an unknown relation.
                    assert error.code() in (
                        grpc.StatusCode.FAILED_PRECONDITION,
                        grpc.StatusCode.NOT_FOUND,
                    ), (rpc[0], error)

        stub = query_pb2_grpc.KnowledgeGraphStub(channel)
        good = (("authorization", f"bearer {TOKEN}"),)
        assert stub.Retrieve(pb.QueryRequest(question=QUESTION), metadata=good, timeout=30).entities

        # Health and reflection stay open without a token.
        health = health_pb2_grpc.HealthStub(channel)
        assert health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == (
            health_pb2.HealthCheckResponse.SERVING
        )
        for service in (V1_SERVICE, V1ALPHA_SERVICE):
            assert "kgstream.v1.KnowledgeGraph" in listed_services(channel, service)


# -- health and reflection ---------------------------------------------------------------


def reflection_call(channel: grpc.Channel, service: str) -> Any:
    """ServerReflectionInfo of `service` (v1 or v1alpha: the same messages)."""
    return channel.stream_stream(
        f"/{service}/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )


def listed_services(channel: grpc.Channel, service: str = V1ALPHA_SERVICE) -> set[str]:
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    (response,) = list(reflection_call(channel, service)(iter([request]), timeout=5))
    return {service.name for service in response.list_services_response.service}


def test_health_reports_serving_for_the_server_and_both_services(
    engine: QueryEngine, corpus: Corpus
) -> None:
    with running_gateway(engine, corpus.stores.graph) as (_, channel):
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "kgstream.v1.KnowledgeGraph", "kgstream.v1.Ingest"):
            response = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert response.status == health_pb2.HealthCheckResponse.SERVING, service


def test_reflection_lists_both_services_and_describes_them(
    engine: QueryEngine, corpus: Corpus
) -> None:
    with running_gateway(engine, corpus.stores.graph) as (_, channel):
        assert {
            "kgstream.v1.KnowledgeGraph",
            "kgstream.v1.Ingest",
            "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection",
        } <= listed_services(channel)
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(
            file_containing_symbol="kgstream.v1.Ingest"
        )
        (response,) = list(stub.ServerReflectionInfo(iter([request]), timeout=5))
        files = response.file_descriptor_response.file_descriptor_proto
        # The ingest file and its import (events.proto), so grpcurl can describe every type.
        assert len(files) == 2
        names = {descriptor_pb2.FileDescriptorProto.FromString(f).name for f in files}
        # Named from the proto root, as buf and protoc -I protos name them.
        assert names == {"kgstream/v1/ingest.proto", "kgstream/v1/events.proto"}


def test_reflection_serves_the_protos_with_their_comments(
    engine: QueryEngine, corpus: Corpus
) -> None:
    with running_gateway(engine, corpus.stores.graph) as (_, channel):
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(
            file_containing_symbol="kgstream.v1.GetSubgraphRequest"
        )
        (response,) = list(stub.ServerReflectionInfo(iter([request]), timeout=5))
    (file,) = [
        descriptor_pb2.FileDescriptorProto.FromString(f)
        for f in response.file_descriptor_response.file_descriptor_proto
    ]
    assert file.name == "kgstream/v1/query.proto"
    comments = [
        location.leading_comments + location.trailing_comments
        for location in file.source_code_info.location
    ]
    # What grpcurl describe shows beside the fields: ranges and defaults.
    assert any("Hops from the seed, 0..10 [3]." in comment for comment in comments)
    assert any("1..10000 [1000]" in comment for comment in comments)


def test_reflection_v1_answers_like_v1alpha(engine: QueryEngine, corpus: Corpus) -> None:
    """v1 copies v1alpha's messages field for field, so v1alpha's classes read v1 exactly
    (the Go client test asks v1 with grpc-go's own v1 stubs)."""
    with running_gateway(engine, corpus.stores.graph) as (_, channel):
        v1 = reflection_call(channel, V1_SERVICE)
        request = reflection_pb2.ServerReflectionRequest(
            file_by_filename="kgstream/v1/ingest.proto"
        )
        (by_v1,) = list(v1(iter([request]), timeout=5))
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        (by_v1alpha,) = list(stub.ServerReflectionInfo(iter([request]), timeout=5))
    assert by_v1 == by_v1alpha
    assert len(by_v1.file_descriptor_response.file_descriptor_proto) == 2  # and events.proto


# -- bounded retrievals ----------------------------------------------------------------------


def slow_embedding_engine(
    corpus: Corpus, embeddings: OpenAICompatibleServer, slots: int
) -> QueryEngine:
    """An engine over the corpus whose question embeddings come from the test server (its
    requests in flight show how many retrievals run at once)."""
    embedder = OpenAIEmbedder(
        OpenAIEmbeddingOptions(base_url=embeddings.base_url, model="test-embedding-model")
    )
    return QueryEngine(
        corpus.stores,
        embedder,
        TOKENIZER,
        OfflineKeywordExtractor(),
        options=EngineOptions(max_concurrent_retrievals=slots),
    )


def test_retrievals_beyond_the_bound_wait_for_a_slot_and_then_answer(
    corpus: Corpus, llm_server: OpenAICompatibleServer
) -> None:
    llm_server.delay_seconds = 0.3
    engine = slow_embedding_engine(corpus, llm_server, slots=2)
    with running_gateway(engine, corpus.stores.graph) as (_, channel):
        stub = query_pb2_grpc.KnowledgeGraphStub(channel)
        replies: list[pb.QueryResponse] = []

        def ask(number: int) -> None:
            request = pb.QueryRequest(question=f"{QUESTION} ({number})", mode=pb.QUERY_MODE_NAIVE)
            replies.append(stub.Retrieve(request, timeout=30))

        callers = [threading.Thread(target=ask, args=(n,)) for n in range(6)]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join()
    assert len(replies) == 6 and all(reply.chunks for reply in replies)
    assert llm_server.embedding_calls == 6
    assert llm_server.max_in_flight == 2  # six callers at once, two retrievals at a time


def test_a_call_waiting_for_a_retrieval_slot_ends_at_its_deadline(
    corpus: Corpus, llm_server: OpenAICompatibleServer
) -> None:
    engine = slow_embedding_engine(corpus, llm_server, slots=1)
    llm_server.stall_next(5.0)  # the first retrieval holds the only slot for 5 s
    options = ServerOptions(address="127.0.0.1:0", max_workers=2)
    with running_gateway(engine, corpus.stores.graph, options) as (_, channel):
        stub = query_pb2_grpc.KnowledgeGraphStub(channel)
        request = pb.QueryRequest(question=QUESTION, mode=pb.QUERY_MODE_NAIVE)
        first = threading.Thread(target=lambda: stub.Retrieve(request, timeout=30))
        first.start()
        wait_until(lambda: llm_server.in_flight == 1, 30, "the first call", interval=0.01)
        began = time.monotonic()
        code, _ = status_of(lambda: stub.Retrieve(request, timeout=0.5))
        waited = time.monotonic() - began
        # The waiting call gave its gRPC worker back at its deadline: the second of the two
        # workers serves another call while the first retrieval still holds the slot.
        listed = stub.ListDocuments(pb.ListDocumentsRequest(), timeout=2.0)
        still_stalled = llm_server.in_flight == 1
        first.join()
    assert code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert waited < 3.0  # at its own deadline, not when the slot came free
    assert listed.total > 0 and still_stalled
    assert llm_server.embedding_calls == 1  # the second call never embedded


# -- deadlines and read-your-writes --------------------------------------------------------


def test_a_min_index_version_wait_ends_with_deadline_exceeded_at_the_call_deadline(
    engine: QueryEngine, corpus: Corpus
) -> None:
    options = ServerOptions(address="127.0.0.1:0", max_workers=1)
    unreachable = corpus.stores.graph.version() + 1000
    with running_gateway(engine, corpus.stores.graph, options) as (_, channel):
        stub = query_pb2_grpc.KnowledgeGraphStub(channel)
        request = pb.QueryRequest(question=QUESTION, min_index_version=unreachable)
        for call in (stub.Retrieve, stub.Query):
            code, _ = status_of(lambda c=call: c(request, timeout=0.3))
            assert code == grpc.StatusCode.DEADLINE_EXCEEDED
        code, _ = status_of(lambda: list(stub.QueryStream(request, timeout=0.3)))
        assert code == grpc.StatusCode.DEADLINE_EXCEEDED
        # The one worker was freed at the deadline, not after the engine's 30 s default wait.
        answered = stub.Retrieve(pb.QueryRequest(question=QUESTION), timeout=10)
        assert answered.index_version == unreachable - 1000


def test_a_min_index_version_wait_without_a_deadline_stops_at_the_servers_maximum_and_says_so(
    corpus: Corpus,
) -> None:
    engine = QueryEngine(
        corpus.stores,
        corpus.embedder,
        TOKENIZER,
        OfflineKeywordExtractor(),
        options=EngineOptions(version_wait_seconds=0.3),
    )
    unreachable = corpus.stores.graph.version() + 1000
    with running_gateway(engine, corpus.stores.graph) as (_, channel):
        stub = query_pb2_grpc.KnowledgeGraphStub(channel)
        request = pb.QueryRequest(question=QUESTION, min_index_version=unreachable)
        code, details = status_of(lambda: stub.Retrieve(request))  # no deadline
        assert code == grpc.StatusCode.DEADLINE_EXCEEDED
        assert f"min_index_version {unreachable} not reached within 0.3 s" in details
        assert "the wait stopped at the server's maximum, 0.3 s (version_wait_seconds)" in details
        # A deadline longer than the maximum is cut by it too.
        started = time.monotonic()
        code, details = status_of(lambda: stub.Retrieve(request, timeout=30))
        assert code == grpc.StatusCode.DEADLINE_EXCEEDED
        assert "server's maximum" in details and time.monotonic() - started < 10
        # With a shorter deadline of its own, the call is told about its deadline. (Half the
        # maximum: the grpc-timeout header may round a deadline up, so one equal to the
        # maximum can reach the server a hair over it.)
        code, details = status_of(lambda: stub.Retrieve(request, timeout=0.15))
        assert code == grpc.StatusCode.DEADLINE_EXCEEDED
        assert "server's maximum" not in details


def test_sixteen_min_index_version_waiters_leave_health_and_retrieve_answering(
    engine: QueryEngine, corpus: Corpus
) -> None:
    """16 waits used to occupy all 16 gRPC workers, so even the health check timed out."""
    assert ServerOptions().max_workers == 16 and engine.options.max_version_waits == 8
    unreachable = corpus.stores.graph.version() + 1000
    with running_gateway(engine, corpus.stores.graph) as (_, channel):
        stub = query_pb2_grpc.KnowledgeGraphStub(channel)
        waiting = pb.QueryRequest(question=QUESTION, min_index_version=unreachable)
        waiters = [stub.Retrieve.future(waiting) for _ in range(16)]  # no deadline of their own
        refused = lambda: [w for w in waiters if w.done()]  # noqa: E731
        wait_until(lambda: len(refused()) == 8, 10, "8 waiters over the limit refused")
        for waiter in refused():
            assert waiter.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "8 calls wait for min_index_version already" in waiter.details()

        health = health_pb2_grpc.HealthStub(channel)
        assert health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == (
            health_pb2.HealthCheckResponse.SERVING
        )
        assert stub.Retrieve(pb.QueryRequest(question=QUESTION), timeout=5).entities

        # Cancelled waiters free their places at once, not at the 30 s maximum.
        for waiter in waiters:
            waiter.cancel()

        def admitted() -> bool:
            try:
                stub.Retrieve(waiting, timeout=0.2)
            except grpc.RpcError as error:
                return error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            return False

        wait_until(admitted, 10, "a new waiter admitted after the others were cancelled")


class CountingEmbedder:
    """The corpus's real embedder, counting the texts it is asked to embed."""

    def __init__(self, embedder: Any) -> None:
        self._embedder = embedder
        self.texts: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedder, name)

    def embed(self, texts: Any) -> Any:
        self.texts.extend(texts)
        return self._embedder.embed(texts)


class FinishLine:
    """An engine that says when each call ended and with what (the test's condition)."""

    def __init__(self, engine: QueryEngine) -> None:
        self._engine = engine
        self.ended = threading.Semaphore(0)
        self.errors: list[Exception] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def retrieve(self, params: Any, deadline: Any) -> Any:
        try:
            return self._engine.retrieve(params, deadline)
        except Exception as error:
            self.errors.append(error)
            raise
        finally:
            self.ended.release()


def watched_engine(
    corpus: Corpus, llm_server: OpenAICompatibleServer
) -> tuple[FinishLine, CountingEmbedder]:
    """An engine that asks the test LLM for keywords, saying when each call ended, and the
    embedder it counts the texts of (to see where an abandoned call stopped)."""
    embedder = CountingEmbedder(corpus.embedder)
    client = ChatClient(LLMOptions(base_url=llm_server.base_url, model="m", max_retries=0))
    engine = QueryEngine(corpus.stores, embedder, TOKENIZER, LLMKeywordExtractor(client))
    return FinishLine(engine), embedder


def test_a_call_the_client_left_stops_before_embedding_the_question(
    corpus: Corpus, llm_server: OpenAICompatibleServer
) -> None:
    engine, embedder = watched_engine(corpus, llm_server)
    with running_gateway(engine, corpus.stores.graph) as (_, channel):  # type: ignore[arg-type]
        stub = query_pb2_grpc.KnowledgeGraphStub(channel)
        for how in ("deadline", "cancel"):
            question = f"Who leads the Atlas Project? ({how})"
            llm_server.stall_next(1.5)  # the keyword call outlasts the client
            request = pb.QueryRequest(question=question)
            if how == "deadline":
                code, _ = status_of(lambda r=request: stub.Retrieve(r, timeout=0.3))
                assert code == grpc.StatusCode.DEADLINE_EXCEEDED
            else:
                pending = stub.Retrieve.future(request)
                wait_until(lambda: llm_server.in_flight == 1, 30, "the call", interval=0.01)
                pending.cancel()
            assert engine.ended.acquire(timeout=30), "the engine call never ended"
            error = engine.errors[-1]
            assert isinstance(error, DeadlinePassed if how == "deadline" else CallAbandoned)
            assert str(error).endswith("before embedding the question and keywords"), error
            assert not [text for text in embedder.texts if how in text]
        # A call that stays gets the whole work.
        answered = stub.Retrieve(pb.QueryRequest(question=QUESTION), timeout=30)
        assert answered.entities and embedder.texts


def test_min_index_version_waits_for_an_update_written_during_the_call(
    engine: QueryEngine, corpus: Corpus
) -> None:
    before = corpus.stores.graph.version()
    with running_gateway(engine, corpus.stores.graph) as (_, channel):
        stub = query_pb2_grpc.KnowledgeGraphStub(channel)
        pending = stub.Retrieve.future(
            pb.QueryRequest(question="Who leads the Orion Project?", min_index_version=before + 1),
            timeout=60,
        )
        # The version it waits for cannot exist before the writer starts.
        assert not pending.done()
        writer = threading.Thread(
            target=corpus.apply,
            args=([DocumentUpsert("projects/orion.md", "Dana Lee leads the Orion Project.")],),
        )
        writer.start()
        response = pending.result()
        writer.join(timeout=60)
        assert response.index_version >= before + 1

        after = corpus.stores.graph.version()
        fresh = stub.Retrieve(
            pb.QueryRequest(question="Who leads the Orion Project?", min_index_version=after),
            timeout=30,
        )
        assert fresh.index_version == after
        assert "dana lee" in {e.entity.key for e in fresh.entities}


# -- cancellation --------------------------------------------------------------------------


def test_cancelling_a_query_stream_stops_the_llm_stream_at_once(
    corpus: Corpus, llm_server: OpenAICompatibleServer
) -> None:
    llm_server.default_reply = LONG_ANSWER  # 300 deltas
    llm_server.delta_delay_seconds = 2.0  # a delta every 2 s
    # One LLM slot: the next stream can only start once the cancelled one is closed.
    engine = new_engine(corpus, llm_server, llm_concurrency=1)
    with running_gateway(engine, corpus.stores.graph) as (_, channel):
        stub = query_pb2_grpc.KnowledgeGraphStub(channel)
        request = pb.QueryRequest(question=QUESTION)
        first = stub.QueryStream(request, timeout=60)
        assert next(first).WhichOneof("event") == "context"
        assert next(first).WhichOneof("event") == "delta"
        first.cancel()
        # Closed on cancellation (the next stream's first delta comes 2 s later), not
        # when the cancelled stream's next delta would have arrived (2 s, then 2 s more).
        second = stub.QueryStream(request, timeout=3.0)
        assert next(second).WhichOneof("event") == "context"
        assert next(second).delta.text == "word0 "
        second.cancel()
        # The test server notices a dropped stream on a write after the close took effect
        # (a socket closed under a blocked read closes when that read returns); keep a
        # gap between writes so that the close can land first.
        llm_server.delta_delay_seconds = 0.2
        wait_until(lambda: llm_server.aborted_streams == 2, 30, "both streams aborted")
        wait_until(lambda: llm_server.in_flight == 0, 30, "no call in flight")
        llm_server.delta_delay_seconds = 0.0
        events = list(stub.QueryStream(request, timeout=10))
        assert "".join(e.delta.text for e in events if e.HasField("delta")) == LONG_ANSWER


# -- limits and failures -------------------------------------------------------------------


def test_requests_over_the_message_size_limit_are_rejected(
    engine: QueryEngine, corpus: Corpus
) -> None:
    options = ServerOptions(address="127.0.0.1:0", max_message_bytes=64 * 1024)
    with running_gateway(engine, corpus.stores.graph, options) as (_, channel):
        stub = query_pb2_grpc.KnowledgeGraphStub(channel)
        code, _ = status_of(lambda: stub.Retrieve(pb.QueryRequest(question="x" * 100_000)))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_a_graph_store_that_is_down_gives_unavailable(corpus: Corpus) -> None:
    down = GraphStore.from_url(f"redis://127.0.0.1:{free_port()}/0", "down")
    stores = Stores(down, corpus.stores.vectors)
    engine = QueryEngine(stores, corpus.embedder, TOKENIZER, OfflineKeywordExtractor())
    with running_gateway(engine, down) as (_, channel):
        stub = query_pb2_grpc.KnowledgeGraphStub(channel)
        calls = [
            lambda: stub.Retrieve(pb.QueryRequest(question=QUESTION), timeout=10),
            lambda: stub.Query(pb.QueryRequest(question=QUESTION), timeout=10),
            lambda: list(stub.QueryStream(pb.QueryRequest(question=QUESTION), timeout=10)),
            lambda: stub.GetEntity(pb.GetEntityRequest(name="Carla Diaz"), timeout=10),
            lambda: stub.GetDocument(pb.GetDocumentRequest(doc_id="a.md"), timeout=10),
            lambda: stub.ListDocuments(pb.ListDocumentsRequest(), timeout=10),
        ]
        for call in calls:
            code, details = status_of(call)
            assert code == grpc.StatusCode.UNAVAILABLE, details
    down.close()
