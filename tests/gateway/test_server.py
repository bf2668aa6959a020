"""The gateway over the real gRPC wire: queries and look-ups on a real indexed corpus.

The corpus (tests/gateway/corpus.py) is indexed once per module through the real
dataflow into the session's redis-server; each test starts its own server on a
free port and calls it through `grpc.insecure_channel`. The plain helpers here
(`new_engine`, `running_gateway`, `http_gateway`) are shared with the other test_server_* modules.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from connectors.llm.client import ChatClient, LLMOptions
from connectors.redis.graph_store import GraphStore
from connectors.redis.index_control import RedisIndexControl
from gateway import convert
from gateway.engine import QueryEngine
from gateway.extractive import EXTRACTIVE_NOTE
from gateway.ingest import EventPublisher
from gateway.keywords import OfflineKeywordExtractor
from gateway.server import RunningServer, ServerOptions, serve
from gateway.types import Mode, QueryParams
from kgstream_protos.v1 import query_pb2 as pb
from kgstream_protos.v1 import query_pb2_grpc
from tests.dataflow.harness import TOKENIZER
from tests.gateway.corpus import DOCUMENTS, Corpus, build_corpus
from tests.support.llm_server import OpenAICompatibleServer
from tests.support.redis import RedisTestServer

ANSWER = "Carla Diaz leads the Atlas Project at Northwind Labs."
QUESTION = "Who leads the Atlas Project?"


def new_engine(
    corpus: Corpus, llm: OpenAICompatibleServer | None, llm_concurrency: int = 4
) -> QueryEngine:
    options = (
        LLMOptions(
            base_url=llm.base_url,
            model="test-chat-model",
            max_retries=0,
            max_concurrency=llm_concurrency,
        )
        if llm is not None
        else None
    )
    client = ChatClient(options) if options is not None else None
    return QueryEngine(
        corpus.stores, corpus.embedder, TOKENIZER, OfflineKeywordExtractor(), llm=client
    )


@contextlib.contextmanager
def running_gateway(
    engine: QueryEngine,
    graph: GraphStore,
    options: ServerOptions | None = None,
    producer: EventPublisher | None = None,
) -> Iterator[tuple[RunningServer, grpc.Channel]]:
    control = RedisIndexControl(graph.client, graph.workspace)
    server = serve(
        engine, graph, control, options or ServerOptions(address="127.0.0.1:0"), producer
    )
    channel = grpc.insecure_channel(server.address)
    try:
        yield server, channel
    finally:
        channel.close()
        server.stop(grace=None)


@contextlib.contextmanager
def http_gateway(
    engine: QueryEngine, graph: GraphStore, producer: EventPublisher | None = None, **options: Any
) -> Iterator[RunningServer]:
    """The gateway on free ports, gRPC and HTTP (`RunningServer.http`), over `engine`."""
    addresses = ServerOptions(address="127.0.0.1:0", http_address="127.0.0.1:0", **options)
    control = RedisIndexControl(graph.client, graph.workspace)
    server = serve(engine, graph, control, addresses, producer)
    try:
        yield server
    finally:
        server.stop(grace=None)


@pytest.fixture
def engine(corpus: Corpus, llm_server: OpenAICompatibleServer) -> QueryEngine:
    llm_server.default_reply = ANSWER
    return new_engine(corpus, llm_server)


@pytest.fixture
def stub(engine: QueryEngine, corpus: Corpus) -> Iterator[query_pb2_grpc.KnowledgeGraphStub]:
    with running_gateway(engine, corpus.stores.graph) as (_, channel):
        yield query_pb2_grpc.KnowledgeGraphStub(channel)


def status_of(call: object) -> tuple[grpc.StatusCode, str]:
    """Run `call` (a zero-argument callable) and return the error status it ended with."""
    with pytest.raises(grpc.RpcError) as raised:
        call()  # type: ignore[operator]
    return raised.value.code(), raised.value.details()


# -- queries -------------------------------------------------------------------------


def test_query_returns_the_llm_answer_with_the_context_it_used(
    stub: query_pb2_grpc.KnowledgeGraphStub, corpus: Corpus, llm_server: OpenAICompatibleServer
) -> None:
    response = stub.Query(pb.QueryRequest(question=QUESTION), timeout=30)

    assert response.answer == ANSWER
    assert response.llm_configured and not response.cached
    assert response.usage.completion_tokens > 0
    assert "carla diaz" in {e.entity.key for e in response.context.entities}
    assert any(c.doc_id == "projects/atlas.md" for c in response.context.chunks)
    assert response.context.references[0].file_path in DOCUMENTS
    assert response.index_version == response.context.index_version
    assert response.index_version == corpus.stores.graph.version() > 0
    # The context the LLM saw is the one returned.
    prompt = "\n".join(m["content"] for m in llm_server.bodies()[-1]["messages"])
    assert response.context.chunks[0].text in prompt


def test_query_without_llm_returns_the_context_and_an_extractive_answer_saying_why(
    corpus: Corpus,
) -> None:
    with running_gateway(new_engine(corpus, None), corpus.stores.graph) as (_, channel):
        stub = query_pb2_grpc.KnowledgeGraphStub(channel)
        response = stub.Query(pb.QueryRequest(question=QUESTION), timeout=30)
        events = list(stub.QueryStream(pb.QueryRequest(question=QUESTION), timeout=30))
    assert response.answer.startswith(ANSWER + " [")
    assert response.answer.endswith(EXTRACTIVE_NOTE)
    assert not response.llm_configured
    assert response.context.entities
    assert events[0].context == response.context
    assert "".join(e.delta.text for e in events if e.HasField("delta")) == response.answer
    assert not events[-1].done.llm_configured


def test_query_stream_sends_references_and_context_before_any_delta_and_ends_with_the_version(
    stub: query_pb2_grpc.KnowledgeGraphStub, corpus: Corpus
) -> None:
    events = list(stub.QueryStream(pb.QueryRequest(question=QUESTION), timeout=30))

    kinds = [event.WhichOneof("event") for event in events]
    assert kinds[0] == "context"
    assert kinds[-1] == "done"
    assert set(kinds[1:-1]) == {"delta"} and len(kinds) > 3
    context = events[0].context
    assert context.references and context.chunks and context.entities
    assert "".join(e.delta.text for e in events[1:-1]) == ANSWER
    done = events[-1].done
    assert done.index_version == context.index_version == corpus.stores.graph.version()
    assert done.llm_configured


def test_retrieve_returns_exactly_what_the_engine_retrieves_for_the_same_request(
    stub: query_pb2_grpc.KnowledgeGraphStub, engine: QueryEngine, llm_server: OpenAICompatibleServer
) -> None:
    request = pb.QueryRequest(question=QUESTION, mode=pb.QUERY_MODE_HYBRID, top_k=5)

    response = stub.Retrieve(request, timeout=30)

    expected = engine.retrieve(QueryParams(question=QUESTION, mode=Mode.HYBRID, top_k=5))
    assert response == convert.retrieval_to_proto(expected)
    assert response.mode == pb.QUERY_MODE_HYBRID
    assert response.entities and response.relations
    assert llm_server.chat_calls == 0  # context only: no answer, offline keywords


def test_unset_knobs_take_lightrag_defaults_and_set_ones_are_honoured(
    stub: query_pb2_grpc.KnowledgeGraphStub,
) -> None:
    default = stub.Retrieve(pb.QueryRequest(question=QUESTION), timeout=30)
    narrow = stub.Retrieve(
        pb.QueryRequest(question=QUESTION, chunk_top_k=1, include_references=False), timeout=30
    )
    assert default.mode == pb.QUERY_MODE_MIX
    assert len(default.chunks) > 1 and default.references
    assert len(narrow.chunks) == 1 and not narrow.references


def test_document_filter_keeps_retrieval_inside_the_chosen_documents(
    stub: query_pb2_grpc.KnowledgeGraphStub,
) -> None:
    request = pb.QueryRequest(
        question="Who bakes bread?",
        mode=pb.QUERY_MODE_NAIVE,
        document_filter=pb.DocumentFilter(file_path_prefix="companies/"),
    )
    response = stub.Retrieve(request, timeout=30)
    assert response.chunks
    assert {c.file_path for c in response.chunks} <= {
        "companies/northwind.md",
        "companies/helios.md",
    }


def test_empty_index_gives_a_normal_empty_result(
    redis_server: RedisTestServer, tmp_path: Path
) -> None:
    empty = build_corpus(redis_server.url, tmp_path, documents={})
    try:
        with running_gateway(new_engine(empty, None), empty.stores.graph) as (_, channel):
            stub = query_pb2_grpc.KnowledgeGraphStub(channel)
            retrieval = stub.Retrieve(pb.QueryRequest(question=QUESTION), timeout=30)
            listing = stub.ListDocuments(pb.ListDocumentsRequest(), timeout=10)
    finally:
        empty.close()
    assert not (retrieval.entities or retrieval.relations or retrieval.chunks)
    assert retrieval.index_version == 0
    assert not listing.documents and listing.total == 0 and not listing.next_page_token


# -- errors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (pb.QueryRequest(question="   "), "question"),
        (pb.QueryRequest(question=QUESTION, top_k=0), "top_k"),
        (pb.QueryRequest(question=QUESTION, chunk_top_k=-3), "chunk_top_k"),
        (pb.QueryRequest(question=QUESTION, max_total_tokens=0), "max_total_tokens"),
        (pb.QueryRequest(question=QUESTION, mode=42), "mode"),  # type: ignore[arg-type]
        (
            pb.QueryRequest(question=QUESTION, history=[pb.ConversationTurn(role="system")]),
            "history[0].role",
        ),
        (
            pb.QueryRequest(question=QUESTION, document_filter=pb.DocumentFilter(doc_ids=[""])),
            "document_filter.doc_ids[0]",
        ),
        (pb.QueryRequest(question=QUESTION, min_index_version=-1), "min_index_version"),
    ],
)
def test_invalid_query_fields_are_invalid_argument_naming_the_field(
    stub: query_pb2_grpc.KnowledgeGraphStub, request_: pb.QueryRequest, field: str
) -> None:
    for method in (stub.Query, stub.Retrieve):
        code, details = status_of(lambda m=method: m(request_, timeout=10))
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert details.startswith(f"{field}: "), details
    code, details = status_of(lambda: list(stub.QueryStream(request_, timeout=10)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith(f"{field}: ")


def test_unknown_enum_values_are_answered_with_the_enum_names_clients_send(
    stub: query_pb2_grpc.KnowledgeGraphStub,
) -> None:
    bad_mode = pb.QueryRequest(question=QUESTION, mode=42)  # type: ignore[arg-type]
    _, details = status_of(lambda: stub.Retrieve(bad_mode, timeout=10))
    assert details == (
        "mode: must be one of QUERY_MODE_LOCAL, QUERY_MODE_GLOBAL, QUERY_MODE_HYBRID, "
        "QUERY_MODE_NAIVE, QUERY_MODE_MIX (or leave it unset for QUERY_MODE_MIX); got 42"
    )
    bad_status = pb.ListDocumentsRequest(status=9)  # type: ignore[arg-type]
    _, details = status_of(lambda: stub.ListDocuments(bad_status, timeout=10))
    assert details == (
        "status: unknown DocumentStatus value 9; use one of DOCUMENT_STATUS_PENDING, "
        "DOCUMENT_STATUS_PROCESSING, DOCUMENT_STATUS_PROCESSED, DOCUMENT_STATUS_FAILED "
        "(or DOCUMENT_STATUS_UNSPECIFIED for every status)"
    )


@pytest.mark.parametrize(
    ("call", "what"),
    [
        (lambda s: s.GetEntity(pb.GetEntityRequest(name="Nobody Known")), "Nobody Known"),
        (
            lambda s: s.GetRelation(pb.GetRelationRequest(source="Carla Diaz", target="Naples")),
            "Naples",
        ),
        (lambda s: s.GetSubgraph(pb.GetSubgraphRequest(seed="Nobody Known")), "Nobody Known"),
        (lambda s: s.GetDocument(pb.GetDocumentRequest(doc_id="missing.md")), "missing.md"),
    ],
)
def test_unknown_entities_relations_and_documents_are_not_found(
    stub: query_pb2_grpc.KnowledgeGraphStub, call: object, what: str
) -> None:
    code, details = status_of(lambda: call(stub))  # type: ignore[operator]
    assert code == grpc.StatusCode.NOT_FOUND
    assert what in details and "index version" in details


HUGE_NAME = "Zed " + "x" * 1_000_000  # 1 MB: fits a request, not a status message


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.GetEntity(pb.GetEntityRequest(name=HUGE_NAME), timeout=30),
        lambda s: s.GetRelation(
            pb.GetRelationRequest(source=HUGE_NAME, target="Carla Diaz"), timeout=30
        ),
        lambda s: s.GetSubgraph(pb.GetSubgraphRequest(seed=HUGE_NAME), timeout=30),
        lambda s: s.GetDocument(pb.GetDocumentRequest(doc_id=HUGE_NAME), timeout=30),
    ],
)
def test_not_found_for_a_1_mb_name_quotes_its_start_and_length_not_the_whole_name(
    stub: query_pb2_grpc.KnowledgeGraphStub, call: object
) -> None:
    code, details = status_of(lambda: call(stub))  # type: ignore[operator]
    assert code == grpc.StatusCode.NOT_FOUND  # not RESOURCE_EXHAUSTED by an echoed name
    assert len(details) < 1000
    assert "'Zed xxxxxxxx" in details and f"... ({len(HUGE_NAME)} characters)" in details


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda s: s.GetEntity(pb.GetEntityRequest(name=" ")), "name"),
        (lambda s: s.GetRelation(pb.GetRelationRequest(source="A", target="a")), "target"),
        (lambda s: s.GetSubgraph(pb.GetSubgraphRequest(seed="Carla Diaz", depth=11)), "depth"),
        (
            lambda s: s.GetSubgraph(pb.GetSubgraphRequest(seed="Carla Diaz", max_nodes=0)),
            "max_nodes",
        ),
        (lambda s: s.GetDocument(pb.GetDocumentRequest()), "doc_id"),
        (lambda s: s.ListDocuments(pb.ListDocumentsRequest(page_size=1001)), "page_size"),
        (lambda s: s.ListDocuments(pb.ListDocumentsRequest(page_token="x")), "page_token"),
        (lambda s: s.ListDocuments(pb.ListDocumentsRequest(status=9)), "status"),
    ],
)
def test_invalid_look_ups_are_invalid_argument_naming_the_field(
    stub: query_pb2_grpc.KnowledgeGraphStub, call: object, field: str
) -> None:
    code, details = status_of(lambda: call(stub))  # type: ignore[operator]
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details.startswith(f"{field}: "), details


# -- graph and document look-ups -------------------------------------------------------


def test_get_entity_accepts_any_spelling_of_the_name_and_reports_degree(
    stub: query_pb2_grpc.KnowledgeGraphStub, corpus: Corpus
) -> None:
    graph = corpus.stores.graph
    response = stub.GetEntity(pb.GetEntityRequest(name='"CARLA   diaz"'), timeout=10)
    assert response.entity == convert.entity_to_proto(
        graph.get_entities(["carla diaz"])["carla diaz"]
    )
    assert response.entity.file_paths == ["projects/atlas.md"]
    assert response.degree == graph.node_degrees(["carla diaz"])["carla diaz"] > 0
    assert response.index_version == graph.version()


def test_get_relation_is_undirected(
    stub: query_pb2_grpc.KnowledgeGraphStub, corpus: Corpus
) -> None:
    pair = corpus.stores.graph.edges_of(["carla diaz"])["carla diaz"][0]
    forward = stub.GetRelation(pb.GetRelationRequest(source=pair[0], target=pair[1]), timeout=10)
    backward = stub.GetRelation(pb.GetRelationRequest(source=pair[1], target=pair[0]), timeout=10)
    assert forward == backward
    assert (forward.relation.source, forward.relation.target) == pair
    assert forward.relation.weight > 0 and forward.relation.description


def test_get_subgraph_walks_breadth_first_from_the_seed_within_depth_and_node_limit(
    stub: query_pb2_grpc.KnowledgeGraphStub, corpus: Corpus
) -> None:
    graph = corpus.stores.graph
    neighbours = {key for key, _ in graph.get_neighbours(["carla diaz"])["carla diaz"]}

    one_hop = stub.GetSubgraph(pb.GetSubgraphRequest(seed="Carla Diaz", depth=1), timeout=10)
    assert one_hop.entities[0].key == "carla diaz"
    assert {e.key for e in one_hop.entities} == {"carla diaz"} | neighbours
    assert not one_hop.truncated
    keys = {e.key for e in one_hop.entities}
    assert one_hop.relations
    assert all(r.source in keys and r.target in keys for r in one_hop.relations)
    assert one_hop.index_version == graph.version()

    deeper = stub.GetSubgraph(pb.GetSubgraphRequest(seed="Carla Diaz"), timeout=10)
    assert len(deeper.entities) > len(one_hop.entities)  # the default depth (3) reaches further

    capped = stub.GetSubgraph(pb.GetSubgraphRequest(seed="Carla Diaz", max_nodes=2), timeout=10)
    assert len(capped.entities) == 2 and capped.truncated
    assert capped.entities[0].key == "carla diaz"

    alone = stub.GetSubgraph(pb.GetSubgraphRequest(seed="Carla Diaz", depth=0), timeout=10)
    assert [e.key for e in alone.entities] == ["carla diaz"] and not alone.relations


def test_get_document_reports_the_indexed_status_and_content_hash(
    stub: query_pb2_grpc.KnowledgeGraphStub, corpus: Corpus
) -> None:
    stored = corpus.stores.graph.get_documents(["projects/atlas.md"])["projects/atlas.md"]
    response = stub.GetDocument(pb.GetDocumentRequest(doc_id="projects/atlas.md"), timeout=10)
    document = response.document
    assert document.status == pb.DOCUMENT_STATUS_PROCESSED
    assert document.content_hash == stored.record.content_hash
    assert document.content_hash.startswith("sha256:")
    assert list(document.chunk_ids) == list(stored.record.chunk_ids) and document.chunk_ids
    assert document.file_path == "projects/atlas.md"
    assert document.updated_at_ms == round(stored.updated_at * 1000) > 0
    assert response.index_version == corpus.stores.graph.version()


def test_list_documents_pages_through_every_document_in_id_order(
    stub: query_pb2_grpc.KnowledgeGraphStub,
) -> None:
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        page = stub.ListDocuments(
            pb.ListDocumentsRequest(page_size=3, page_token=token), timeout=10
        )
        assert page.total == len(DOCUMENTS)
        seen.extend(d.doc_id for d in page.documents)
        pages += 1
        token = page.next_page_token
        if not token:
            break
    assert pages == 2
    assert seen == sorted(DOCUMENTS)

    processed = stub.ListDocuments(
        pb.ListDocumentsRequest(status=pb.DOCUMENT_STATUS_PROCESSED), timeout=10
    )
    failed = stub.ListDocuments(pb.ListDocumentsRequest(status=pb.DOCUMENT_STATUS_FAILED))
    assert [d.doc_id for d in processed.documents] == sorted(DOCUMENTS)
    assert not failed.documents and failed.total == 0
