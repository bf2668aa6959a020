"""`kgstream mcp --grpc` over stdio, spawned by the SDK's own stdio client, in front of a
gateway on the real gRPC wire: the same tools, replies and messages as the gateway's own
/mcp, Ingest into the watched folder, and a client that leaves mid-call cancelling the
gRPC call."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from mcp import Client, StdioServerParameters

from gateway.server import RunningServer
from tests.gateway.corpus import Corpus
from tests.gateway.mcp.test_http import (
    TOOLS,
    error_of,
    leaving_mid_call_stops_the_work,
    url_of,
)
from tests.gateway.test_server import ANSWER, QUESTION
from tests.kgstream.processes import ROOT
from tests.support.llm_server import OpenAICompatibleServer

T = TypeVar("T")


def stdio_server(address: str) -> StdioServerParameters:
    """`kgstream mcp --grpc ADDRESS` as a desktop agent would start it."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "kgstream.cli", "mcp", "--grpc", address],
        cwd=ROOT,
        env={"KGSTREAM_LOG_FORMAT": "text"},
    )


def with_stdio(address: str, use: Callable[[Client], Awaitable[T]], **options: Any) -> T:
    async def scenario() -> T:
        async with Client(stdio_server(address), **options) as client:
            return await use(client)

    return anyio.run(scenario)


def test_stdio_serves_the_gateways_tools_with_its_replies_and_messages(
    gateway: RunningServer, folder: Path
) -> None:
    async def use(client: Client) -> dict[str, Any]:
        return {
            "tools": await client.list_tools(),
            "query": await client.call_tool("query", {"question": QUESTION}),
            "retrieve": await client.call_tool("retrieve", {"question": QUESTION, "top_k": 5}),
            "too long": await client.call_tool("retrieve", {"question": "x" * 4001}),
            "mode": await client.call_tool("query", {"question": QUESTION, "mode": "fast"}),
            "entity": await client.call_tool("get_entity", {"name": "Nobody Atall"}),
            "upsert": await client.call_tool(
                "upsert_document", {"doc_id": "notes/ada.md", "content": "Ada wrote."}
            ),
            "escape": await client.call_tool(
                "upsert_document", {"doc_id": "../escape.md", "content": "x"}
            ),
            "status": await client.call_tool("status"),
        }

    over_stdio = with_stdio(gateway.address, use)

    async def same_over_http(client: Client) -> dict[str, Any]:
        return {
            "query": await client.call_tool("query", {"question": QUESTION}),
            "retrieve": await client.call_tool("retrieve", {"question": QUESTION, "top_k": 5}),
            "too long": await client.call_tool("retrieve", {"question": "x" * 4001}),
            "mode": await client.call_tool("query", {"question": QUESTION, "mode": "fast"}),
            "entity": await client.call_tool("get_entity", {"name": "Nobody Atall"}),
            "status": await client.call_tool("status"),
        }

    async def over_http() -> dict[str, Any]:
        async with Client(url_of(gateway)) as client:
            return await same_over_http(client)

    http = anyio.run(over_http)
    assert {tool.name for tool in over_stdio["tools"].tools} == TOOLS
    for name, result in http.items():
        if name == "query":  # the second answer comes from the answer cache: only `cached`
            assert over_stdio[name].content == result.content  # and the usage differ
        else:
            assert over_stdio[name].model_dump() == result.model_dump(), name
    assert over_stdio["query"].content[0].text.startswith(ANSWER)
    assert error_of(over_stdio["too long"]).startswith("question: is 4001 characters long")
    assert error_of(over_stdio["mode"]).startswith("mode: must be one of local, global,")
    assert error_of(over_stdio["entity"]).startswith("no entity 'Nobody Atall'")
    assert over_stdio["upsert"].structured_content["topic"] == f"folder:{folder.resolve()}"
    assert (folder / "notes" / "ada.md").read_text() == "Ada wrote."
    assert error_of(over_stdio["escape"]).startswith("doc_id: ")
    assert not (folder.parent / "escape.md").exists()


def test_a_stdio_client_that_leaves_mid_call_cancels_the_grpc_call(
    corpus: Corpus, llm_server: OpenAICompatibleServer
) -> None:
    """The agent goes away: the child's stdin closes, and its gRPC call is cancelled."""
    leaving_mid_call_stops_the_work(
        corpus, llm_server, lambda server: Client(stdio_server(server.address)), "stdio", 5.0
    )
