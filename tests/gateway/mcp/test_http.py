"""MCP at /mcp of the gateway's HTTP port, called with the SDK's own client over Streamable
HTTP on the indexed test corpus: the tools and their schemas, the same replies and error
messages as the gRPC servicers give, the resources, ingest into the watched folder, auth,
and a client that leaves mid-call."""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import grpc
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from gateway.http.messages import to_json
from gateway.mcp.render import context_output
from gateway.server import RunningServer
from gateway.types import MODE_NAMES, CallAbandoned
from kgstream_protos.v1 import query_pb2 as pb
from kgstream_protos.v1 import query_pb2_grpc
from tests.gateway.corpus import Corpus
from tests.gateway.test_server import ANSWER, QUESTION, http_gateway, new_engine
from tests.gateway.test_server_safety import watched_engine
from tests.support.llm_server import OpenAICompatibleServer
from tests.support.wait import wait_until

T = TypeVar("T")
TOKEN = "mcp-test-token"
TOOLS = {
    "query",
    "retrieve",
    "search_entities",
    "get_entity",
    "get_relation",
    "get_subgraph",
    "list_documents",
    "get_document",
    "upsert_document",
    "delete_document",
    "wait_for_version",
    "status",
}


def url_of(server: RunningServer) -> str:
    assert server.http is not None
    return server.http.url + "/mcp"


def with_client(url: str, use: Callable[[Client], Awaitable[T]], **options: Any) -> T:
    """`use(client)` with an MCP client connected to `url`, in an event loop of its own."""

    async def scenario() -> T:
        async with Client(url, **options) as client:
            return await use(client)

    return anyio.run(scenario)


def call(url: str, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    return with_client(url, lambda client: client.call_tool(tool, arguments))


def grpc_reply(server: RunningServer, method: str, request: Any) -> Any:
    with grpc.insecure_channel(server.address) as channel:
        return getattr(query_pb2_grpc.KnowledgeGraphStub(channel), method)(request, timeout=30)


def grpc_error(server: RunningServer, method: str, request: Any) -> str:
    with pytest.raises(grpc.RpcError) as raised:
        grpc_reply(server, method, request)
    return str(raised.value.details())


async def raised(pending: Awaitable[Any]) -> MCPError:
    """The JSON-RPC error `pending` fails with."""
    try:
        await pending
    except MCPError as error:
        return error
    raise AssertionError("no MCPError raised")


def error_of(result: Any) -> str:
    assert result.is_error, result
    text: str = result.content[0].text
    assert result.structured_content["error"]["message"] == text
    return text


# -- the tools ------------------------------------------------------------------------------


def test_tools_are_listed_with_schemas_that_state_their_limits(gateway: RunningServer) -> None:
    listed = with_client(url_of(gateway), lambda client: client.list_tools())
    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) == TOOLS
    assert all(tool.description for tool in tools.values())
    query = tools["query"].input_schema
    assert query["required"] == ["question"] and query["additionalProperties"] is False
    props = query["properties"]
    assert props["question"]["maxLength"] == 4000
    assert props["mode"]["enum"] == list(MODE_NAMES) and props["mode"]["default"] == "mix"
    assert (props["top_k"]["minimum"], props["top_k"]["maximum"]) == (1, 1000)
    assert props["top_k"]["default"] == 40 and props["chunk_top_k"]["default"] == 20
    subgraph = tools["get_subgraph"].input_schema["properties"]
    assert (subgraph["depth"]["maximum"], subgraph["max_nodes"]["maximum"]) == (10, 10_000)
    upsert = tools["upsert_document"].input_schema["properties"]
    assert upsert["doc_id"]["maxLength"] == 1024
    assert tools["delete_document"].annotations.destructive_hint
    assert tools["get_entity"].annotations.read_only_hint


def test_query_answers_with_numbered_references_and_the_index_version(
    gateway: RunningServer, corpus: Corpus
) -> None:
    result = call(url_of(gateway), "query", {"question": QUESTION, "mode": "hybrid"})
    assert not result.is_error, result
    version = corpus.stores.graph.version()
    text = result.content[0].text
    assert text.startswith(ANSWER)
    assert "References:\n- [1] " in text and text.endswith(f"(index version {version})")
    data = result.structured_content
    assert data["answer"] == ANSWER and data["index_version"] == version
    assert data["llm_configured"] and data["references"][0]["reference_id"] == 1
    assert data["references"][0]["file_path"] in text


def test_each_look_up_returns_what_the_grpc_servicer_returns(gateway: RunningServer) -> None:
    url = url_of(gateway)
    cases = [
        ("get_entity", {"name": "carla diaz"}, "GetEntity", pb.GetEntityRequest(name="Carla Diaz")),
        (
            "get_relation",
            {"source": "Carla Diaz", "target": "Atlas Project"},
            "GetRelation",
            pb.GetRelationRequest(source="Carla Diaz", target="Atlas Project"),
        ),
        (
            "get_subgraph",
            {"seed": "Northwind Labs", "depth": 1},
            "GetSubgraph",
            pb.GetSubgraphRequest(seed="Northwind Labs", depth=1),
        ),
        (
            "list_documents",
            {"status": "processed", "page_size": 2},
            "ListDocuments",
            pb.ListDocumentsRequest(status=pb.DOCUMENT_STATUS_PROCESSED, page_size=2),
        ),
        (
            "get_document",
            {"doc_id": "projects/atlas.md"},
            "GetDocument",
            pb.GetDocumentRequest(doc_id="projects/atlas.md"),
        ),
    ]
    for tool, arguments, method, request in cases:
        result = call(url, tool, arguments)
        assert not result.is_error, (tool, result)
        assert result.structured_content == to_json(grpc_reply(gateway, method, request)), tool
    retrieved = call(url, "retrieve", {"question": QUESTION, "mode": "local", "top_k": 5})
    request = pb.QueryRequest(question=QUESTION, mode=pb.QUERY_MODE_LOCAL, top_k=5)
    expected = context_output(grpc_reply(gateway, "Retrieve", request))
    assert retrieved.content[0].text == expected.text
    assert retrieved.structured_content == expected.data
    assert "- Carla Diaz (" in expected.text and "References:\n[1] " in expected.text
    assert expected.data["mode"] == "QUERY_MODE_LOCAL" and expected.data["references"]


def test_search_entities_status_and_wait_for_version(
    gateway: RunningServer, corpus: Corpus
) -> None:
    url, version = url_of(gateway), corpus.stores.graph.version()
    found = call(url, "search_entities", {"text": "Carla Diaz", "limit": 3}).structured_content
    assert found["entities"][0]["entity"]["key"] == "carla diaz"
    assert len(found["entities"]) <= 3 and found["index_version"] == version
    status = call(url, "status").structured_content
    assert status == {
        "index_version": version,
        "documents": {"pending": 0, "processing": 0, "processed": 4, "failed": 0},
        "failed": [],
    }
    reached = call(url, "wait_for_version", {"min_index_version": version, "doc_id": "x.md"})
    assert reached.structured_content == {"index_version": version, "document": None}
    too_late = call(url, "wait_for_version", {"min_index_version": version + 5, "timeout_ms": 50})
    assert error_of(too_late).startswith(f"min_index_version {version + 5} not reached within")
    assert too_late.structured_content["error"]["code"] == "DEADLINE_EXCEEDED"


# -- bad input ------------------------------------------------------------------------------


def test_bad_arguments_get_the_servicers_messages_naming_the_field(
    gateway: RunningServer,
) -> None:
    url = url_of(gateway)
    long_question = "x" * 4001
    for arguments, request in [
        ({"question": long_question}, pb.QueryRequest(question=long_question)),
        ({"question": QUESTION, "top_k": 0}, pb.QueryRequest(question=QUESTION, top_k=0)),
        ({"question": " "}, pb.QueryRequest(question=" ")),
    ]:
        expected = grpc_error(gateway, "Retrieve", request)
        for tool in ("query", "retrieve"):
            result = call(url, tool, arguments)
            assert error_of(result) == expected, tool
            assert result.structured_content["error"]["code"] == "INVALID_ARGUMENT"
    assert error_of(call(url, "retrieve", {"question": long_question})).startswith(
        "question: is 4001 characters long; the limit is 4000"
    )
    missing = grpc_error(gateway, "GetEntity", pb.GetEntityRequest(name="Nobody Atall"))
    assert error_of(call(url, "get_entity", {"name": "Nobody Atall"})) == missing
    assert missing.startswith("no entity 'Nobody Atall'")
    assert error_of(call(url, "query", {"question": QUESTION, "mode": "fast"})) == (
        "mode: must be one of local, global, hybrid, naive, mix (or leave it unset for mix); "
        "got 'fast'"
    )
    assert error_of(call(url, "retrieve", {"question": QUESTION, "top_k": "ten"})) == (
        "top_k: must be an integer; got 'ten'"
    )
    assert error_of(call(url, "retrieve", {"question": 42})) == (
        "question: must be a string; got 42"
    )
    assert error_of(call(url, "retrieve", {"question": QUESTION, "top_k": 2**40})) == (
        f"top_k: must be a 32-bit integer; got {2**40}"
    )
    assert error_of(call(url, "retrieve", {"question": QUESTION, "doc_ids": ["a", 1]})) == (
        "doc_ids[1]: must be a string; got 1"
    )
    assert error_of(call(url, "retrieve", {"question": QUESTION, "topk": 3})).startswith(
        "topk: is not an argument of retrieve (it takes question, mode, top_k"
    )
    assert error_of(call(url, "retrieve", {})).startswith("question: is required")
    assert error_of(call(url, "list_documents", {"status": "done"})).startswith(
        "status: must be one of pending, processing, processed, failed"
    )
    unknown = with_client(url, lambda client: raised(client.call_tool("ask", {"question": "?"})))
    assert unknown.message.startswith("no tool 'ask'; the tools: query, retrieve,")


def test_ingest_writes_into_the_watched_folder_and_refuses_ids_that_leave_it(
    gateway: RunningServer, folder: Path, corpus: Corpus
) -> None:
    url = url_of(gateway)
    upsert = call(url, "upsert_document", {"doc_id": "notes/ada.md", "content": "Ada wrote."})
    assert not upsert.is_error, upsert
    published = upsert.structured_content
    assert published["topic"] == f"folder:{folder.resolve()}" and published["op"] == "UPSERT"
    assert published["min_index_version"] == corpus.stores.graph.version() + 1
    assert published["content_hash"].startswith("sha256:")
    assert (folder / "notes" / "ada.md").read_text() == "Ada wrote."
    binary = bytes(range(256)) * 4
    encoded = base64.b64encode(binary).decode()
    stored = call(url, "upsert_document", {"doc_id": "blob.bin", "content_base64": encoded})
    assert not stored.is_error and stored.structured_content["content_hash"] == ""
    assert (folder / "blob.bin").read_bytes() == binary

    (folder.parent / "elsewhere").mkdir()
    (folder.parent / "elsewhere" / "victim.md").write_text("outside")
    (folder / "linked").symlink_to(folder.parent / "elsewhere")
    before = sorted(p for p in folder.parent.rglob("*"))
    ids = ("../escape.md", "notes/../../escape.md", "/etc/escape.md", "a\x00b.md", "linked/x.md")
    for doc_id in ids:
        refused = call(url, "upsert_document", {"doc_id": doc_id, "content": "x"})
        assert error_of(refused).startswith("doc_id: "), doc_id
        assert refused.structured_content["error"]["field"] == "doc_id"
    assert "must not contain a NUL character" in error_of(
        call(url, "delete_document", {"doc_id": "a\x00b.md"})
    )
    assert error_of(call(url, "delete_document", {"doc_id": "linked/victim.md"})).startswith(
        "doc_id: goes through 'linked', a symbolic link"
    )
    assert (folder.parent / "elsewhere" / "victim.md").read_text() == "outside"
    assert sorted(p for p in folder.parent.rglob("*")) == before
    assert error_of(call(url, "upsert_document", {"doc_id": "a.md"})).startswith(
        "content: is required"
    )
    assert error_of(
        call(url, "upsert_document", {"doc_id": "a.md", "content_base64": "not base64!"})
    ).startswith("content_base64: is not base64")

    deleted = call(url, "delete_document", {"doc_id": "notes/ada.md"})
    assert deleted.structured_content["op"] == "DELETE"
    assert not (folder / "notes" / "ada.md").exists()


# -- resources ------------------------------------------------------------------------------


def test_resources_are_a_documents_text_and_an_entitys_record(gateway: RunningServer) -> None:
    async def read(client: Client) -> tuple[Any, ...]:
        templates = await client.list_resource_templates()
        listed = await client.list_resources()
        document = await client.read_resource("kgstream://documents/projects/atlas.md")
        entity = await client.read_resource("kgstream://entities/Carla%20Diaz")
        missing = await raised(client.read_resource("kgstream://documents/nothing.md"))
        return templates, listed, document, entity, missing

    templates, listed, document, entity, missing = with_client(url_of(gateway), read)
    assert {t.uri_template for t in templates.resource_templates} == {
        "kgstream://documents/{doc_id}",
        "kgstream://entities/{name}",
    }
    assert "kgstream://documents/projects/atlas.md" in {str(r.uri) for r in listed.resources}
    assert document.contents[0].text == (
        "--- chunk 1 of 2 ---\n\nCarla Diaz leads the Atlas Project at Northwind Labs."
        "\n\n--- chunk 2 of 2 ---\n\n"
        "The Atlas Project builds solar batteries for remote villages in Kenya."
    )
    assert '"name": "Carla Diaz"' in entity.contents[0].text
    assert missing.code == -32002 and "no document 'nothing.md'" in missing.message


# -- auth, origins --------------------------------------------------------------------------


def test_with_a_token_mcp_refuses_calls_without_it(corpus: Corpus) -> None:
    with http_gateway(new_engine(corpus, None), corpus.stores.graph, auth_token=TOKEN) as server:
        url = url_of(server)
        bare = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert bare.status_code == 401
        assert bare.headers["www-authenticate"] == 'Bearer realm="kgstream"'
        assert bare.json()["error"]["message"] == "missing header 'authorization: Bearer <token>'"
        with pytest.raises(BaseExceptionGroup) as refused:  # the client's task group's
            with_client(url, lambda client: client.list_tools())
        assert refused.group_contains(
            MCPError, match=r"^missing header 'authorization: Bearer <token>'$"
        )

        async def listed() -> Any:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with (
                httpx2.AsyncClient(headers=headers) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                return await client.list_tools()

        assert {tool.name for tool in anyio.run(listed).tools} == TOOLS


def test_a_browser_page_from_another_origin_is_refused(gateway: RunningServer) -> None:
    refused = httpx.post(
        url_of(gateway),
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Origin": "http://evil.example:9621"},
    )
    assert refused.status_code == 403
    assert "http_cors_origins" in refused.json()["error"]["message"]  # JSON-RPC's error


def test_a_body_over_the_message_limit_is_413_and_the_endpoint_goes_on(corpus: Corpus) -> None:
    limit = 64 * 1024
    engine = new_engine(corpus, None)
    with http_gateway(engine, corpus.stores.graph, max_message_bytes=limit) as server:
        url = url_of(server)
        content = "x" * (2 * limit)
        arguments = {"doc_id": "big.md", "content": content}
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "upsert_document", "arguments": arguments},
        }
        headers = {"Accept": "application/json, text/event-stream"}
        refused = httpx.post(url, json=body, headers=headers)
        assert refused.status_code == 413
        assert refused.json()["error"]["message"] == (
            f"the request body is over the server's limit of {limit} bytes"
        )
        assert {tool.name for tool in with_client(url, lambda c: c.list_tools()).tools} == TOOLS


# -- a client that leaves -------------------------------------------------------------------


def leaving_mid_call_stops_the_work(
    corpus: Corpus,
    llm_server: OpenAICompatibleServer,
    connect: Callable[[RunningServer], Client],
    tag: str,
    stall_seconds: float = 3.0,
) -> None:
    """A client that asks `retrieve`, then leaves (its call and its connection end) while
    the engine waits for the keyword call: the engine stops before embedding anything."""
    engine, embedder = watched_engine(corpus, llm_server)
    question = f"Who leads the Atlas Project? ({tag})"
    with http_gateway(engine, corpus.stores.graph) as server:  # type: ignore[arg-type]
        llm_server.stall_next(stall_seconds)  # the keyword call outlasts the client

        async def leave_mid_call() -> None:
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tasks:

                    async def ask() -> None:
                        async with connect(server) as mcp_client:
                            await mcp_client.call_tool("retrieve", {"question": question})

                    tasks.start_soon(ask)
                    await anyio.to_thread.run_sync(
                        lambda: wait_until(lambda: llm_server.in_flight == 1, 60, "the call")
                    )
                    scope.cancel()

        anyio.run(leave_mid_call)
        assert engine.ended.acquire(timeout=30), "the engine call never ended"
    assert isinstance(engine.errors[-1], CallAbandoned), engine.errors
    assert str(engine.errors[-1]).endswith("before embedding the question and keywords")
    assert not [text for text in embedder.texts if f"({tag})" in text]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_client_that_disconnects_mid_call_stops_the_work(
    corpus: Corpus, llm_server: OpenAICompatibleServer, mode: str
) -> None:
    leaving_mid_call_stops_the_work(
        corpus, llm_server, lambda server: Client(url_of(server), mode=mode), mode
    )
