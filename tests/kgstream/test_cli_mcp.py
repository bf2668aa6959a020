"""MCP end to end, as an agent uses it: `kgstream run --watch` serving /mcp on its HTTP port
and `kgstream mcp` over stdio (in front of that gateway with --grpc, or over the stores
with --data), called with the SDK's own client. Read-your-writes through the watched
folder (upsert, wait for its version, find it by query, delete, see it gone), a binary
upload that becomes a FAILED document with its reason, doc ids that would leave the folder,
and the bearer token."""

from __future__ import annotations

import base64
import contextlib
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import httpx2
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.kgstream.processes import ROOT, clean_environment, finish, kgstream
from tests.kgstream.test_cli_http import read_until, stop
from tests.support.wait import wait_until

T = TypeVar("T")
TOKEN = "mcp-cli-token"
DOCS = {"people/carla.md": "Carla Diaz leads the Atlas Project at Northwind Labs in Lisbon."}


@pytest.fixture
def env(llm_server):
    return clean_environment(llm_server.base_url)


def write_docs(folder: Path) -> None:
    for name, text in DOCS.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


class Agent:
    """One MCP client session for a whole test, called from plain test code (its event loop
    runs in a portal thread)."""

    def __init__(self, portal: BlockingPortal, client: Client) -> None:
        self._portal, self._client = portal, client

    def use(self, work: Callable[[Client], Awaitable[T]]) -> T:
        return self._portal.call(work, self._client)

    def call(self, tool: str, arguments: dict[str, Any] | None = None) -> Any:
        return self.use(lambda client: client.call_tool(tool, arguments))

    def ok(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        result = self.call(tool, arguments)
        assert not result.is_error, (tool, result.content)
        data: dict[str, Any] = result.structured_content
        return data

    def error(self, tool: str, arguments: dict[str, Any]) -> str:
        result = self.call(tool, arguments)
        assert result.is_error, (tool, result)
        text: str = result.content[0].text
        return text


@contextlib.contextmanager
def connected(session: Callable[[], AbstractAsyncContextManager[Client]]) -> Iterator[Agent]:
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(session()) as client,
    ):
        yield Agent(portal, client)


def over_http(url: str, token: str) -> Callable[[], AbstractAsyncContextManager[Client]]:
    @contextlib.asynccontextmanager
    async def session() -> AsyncIterator[Client]:
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            yield client

    return session


def over_stdio(
    env: dict[str, str], *args: str
) -> Callable[[], AbstractAsyncContextManager[Client]]:
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "kgstream.cli", "mcp", *args], cwd=ROOT, env=env
    )
    return lambda: Client(server)


def read_your_writes(agent: Agent, folder: Path, doc_id: str, person: str) -> None:
    """Upsert a document, wait for its version, find it by query, delete it, see it gone."""
    text = f"{person} wrote notes on the Analytical Engine."
    published = agent.ok("upsert_document", {"doc_id": doc_id, "content": text})
    assert (folder / doc_id).read_text() == text
    waited = agent.ok(
        "wait_for_version",
        {"min_index_version": published["min_index_version"], "timeout_ms": 60_000},
    )
    assert waited["index_version"] >= published["min_index_version"]

    def indexed() -> bool:
        found = agent.ok("wait_for_version", {"min_index_version": 0, "doc_id": doc_id})
        document = found["document"]
        return document is not None and document["content_hash"] == published["content_hash"]

    wait_until(indexed, 60, f"{doc_id} indexed with the upserted content")
    answer = agent.call("query", {"question": f"Who did {person} write notes on?"})
    assert not answer.is_error, answer.content
    assert f"] {doc_id}" in answer.content[0].text  # among the numbered references
    assert agent.ok("get_entity", {"name": person})["entity"]["doc_ids"] == [doc_id]

    deleted = agent.ok("delete_document", {"doc_id": doc_id})
    assert not (folder / doc_id).exists()
    wait_until(
        lambda: (
            agent.ok(
                "wait_for_version",
                {"min_index_version": deleted["min_index_version"], "doc_id": doc_id},
            )["document"]
            is None
        ),
        60,
        f"{doc_id} deleted",
    )
    assert agent.error("get_entity", {"name": person}).startswith(f"no entity {person!r}")
    context = agent.ok("retrieve", {"question": f"Who did {person} write notes on?"})
    assert doc_id not in {reference["file_path"] for reference in context["references"]}


@pytest.mark.services
def test_mcp_over_http_and_stdio_reads_its_writes_through_the_watched_folder(
    env, tmp_path: Path
) -> None:
    folder, data = tmp_path / "docs", tmp_path / "data"
    write_docs(folder)
    env = {**env, "KGSTREAM_GRPC_AUTH_TOKEN": TOKEN}
    running = kgstream(
        "run", "--watch", str(folder), "--data", str(data), "--grpc", "127.0.0.1:0", env=env
    )
    try:
        banner = read_until(running, "web:")
        url = re.search(r"web:\s+(http://\S+?)/ ", banner).group(1) + "/mcp"
        grpc_address = re.search(r"gateway on (\S+) ", banner).group(1)
        with (
            connected(over_http(url, TOKEN)) as http,
            connected(over_stdio(env, "--grpc", grpc_address)) as stdio,
        ):
            wait_until(
                lambda: http.ok("status")["documents"]["processed"] == 1, 60, "the first document"
            )
            read_your_writes(http, folder, "notes/ada.md", "Ada Lovelace")
            read_your_writes(stdio, folder, "notes/grace.md", "Grace Hopper")

            binary = bytes(range(256)) * 3
            encoded = base64.b64encode(binary).decode()
            http.ok("upsert_document", {"doc_id": "blob.bin", "content_base64": encoded})

            def failed() -> bool:
                found = http.ok("wait_for_version", {"min_index_version": 0, "doc_id": "blob.bin"})
                return (found["document"] or {}).get("status") == "DOCUMENT_STATUS_FAILED"

            wait_until(failed, 60, "the binary document FAILED")
            status = stdio.ok("status")
            assert status["failed"] == [
                {"doc_id": "blob.bin", "reason": "content is binary, not text"}
            ]
            assert status["documents"]["processed"] == 1

            for agent in (http, stdio):
                for doc_id in ("../escape.md", "notes/../../escape.md", "a\x00b.md"):
                    message = agent.error("upsert_document", {"doc_id": doc_id, "content": "x"})
                    assert message.startswith("doc_id: "), message
            assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "docs"]

        bare = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert bare.status_code == 401
        tokenless = {k: v for k, v in env.items() if k != "KGSTREAM_GRPC_AUTH_TOKEN"}
        with connected(over_stdio(tokenless, "--grpc", grpc_address)) as refused:
            assert refused.error("status", {}) == (
                "missing metadata 'authorization: Bearer <token>'"
            )
    finally:
        stop(running)


@pytest.mark.services
def test_mcp_over_stdio_opens_the_stores_with_data(env, tmp_path: Path) -> None:
    folder, data = tmp_path / "docs", tmp_path / "data"
    write_docs(folder)
    finish(kgstream("index", str(folder), "--data", str(data), env=env))
    with connected(over_stdio(env, "--data", str(data), "--watch", str(folder))) as agent:

        async def read(client: Client) -> Any:
            return await client.read_resource("kgstream://documents/people/carla.md")

        assert agent.use(read).contents[0].text == DOCS["people/carla.md"]
        context = agent.ok("retrieve", {"question": "Who leads the Atlas Project?"})
        assert context["references"][0]["file_path"] == "people/carla.md"
        assert agent.ok("get_entity", {"name": "Carla Diaz"})["entity"]["name"] == "Carla Diaz"
        published = agent.ok("upsert_document", {"doc_id": "notes/new.md", "content": "New."})
        assert published["topic"] == f"folder:{folder.resolve()}"
        assert (folder / "notes" / "new.md").read_text() == "New."
    with connected(over_stdio(env, "--data", str(data))) as without_sink:
        refused = without_sink.error("delete_document", {"doc_id": "notes/new.md"})
        assert refused.startswith("no event log is configured")
