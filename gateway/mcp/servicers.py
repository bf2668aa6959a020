"""The servicers an MCP tool calls: in this process (the gateway's own, as the HTTP routes
call them), or a running gateway's over gRPC (`kgstream mcp --grpc`).

Either way a tool hands a request message to a servicer method by its gRPC name and gets
the reply, or `CallFailed` with the status and the servicer's message, so validation,
limits and errors are the gateway's. An MCP call that is cancelled (the client sent
`notifications/cancelled`, closed the response stream, or went away) cancels the servicer
call as a gRPC cancel does: in this process the call turns inactive, which stops the
engine at its next stage; over gRPC the call itself is cancelled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import anyio
import anyio.to_thread
import grpc
from google.protobuf.message import Message

from connectors.redis.ports import GraphRecords
from gateway.http.calls import CallFailed, HttpCall
from gateway.ingest import IngestService
from gateway.knowledge_graph import KnowledgeGraphService
from gateway.status import statuses
from kgstream_protos.v1 import ingest_pb2_grpc, query_pb2, query_pb2_grpc

KNOWLEDGE_GRAPH_METHODS = (
    "Query",
    "Retrieve",
    "GetEntity",
    "GetRelation",
    "GetSubgraph",
    "GetDocument",
    "ListDocuments",
)
INGEST_METHODS = ("UpsertDocument", "DeleteDocument")


class Servicers(Protocol):
    """The gateway's servicer methods, by their gRPC names, as an MCP tool calls them."""

    async def call(self, method: str, request: Message, timeout: float | None = None) -> Any:
        """The reply of `method` to `request`; `CallFailed` with its status otherwise.
        `timeout`: the call's deadline in seconds from now (None: none)."""
        ...

    async def chunk_texts(self, chunk_ids: Sequence[str]) -> dict[str, str] | None:
        """The texts of these chunks, or None where they cannot be read (the gRPC API has
        no chunk look-up)."""
        ...


class LocalServicers:
    """The servicers of this process: each call runs in a worker thread with an `HttpCall`
    for its context, as the HTTP routes run them."""

    def __init__(
        self, knowledge_graph: KnowledgeGraphService, ingest: IngestService, graph: GraphRecords
    ) -> None:
        self._methods: dict[str, Callable[[Any, Any], Any]] = {
            **{name: getattr(knowledge_graph, name) for name in KNOWLEDGE_GRAPH_METHODS},
            **{name: getattr(ingest, name) for name in INGEST_METHODS},
        }
        self._knowledge_graph = knowledge_graph
        self._graph = graph

    async def call(self, method: str, request: Message, timeout: float | None = None) -> Any:
        call = HttpCall(timeout)
        if isinstance(request, query_pb2.QueryRequest):
            # The wait for min_index_version holds no thread (a cancel ends it at once).
            with statuses(call):
                await self._knowledge_graph.reach_version(request, call.time_remaining())
        return await _in_thread(self._methods[method], request, call)

    async def chunk_texts(self, chunk_ids: Sequence[str]) -> dict[str, str] | None:
        def read(_: object, call: HttpCall) -> dict[str, str]:
            with statuses(call):
                chunks = self._graph.get_chunks(list(chunk_ids))
            return {chunk_id: chunk.text for chunk_id, chunk in chunks.items()}

        result: dict[str, str] = await _in_thread(read, None, HttpCall(None))
        return result


async def _in_thread(method: Callable[[Any, Any], Any], request: Any, call: HttpCall) -> Any:
    """`method(request, call)` in a worker thread. Cancelled, the call finishes at once, so
    `call.is_active()` turns False and the servicer stops at its next check; the thread is
    left to get there by itself."""
    try:
        return await anyio.to_thread.run_sync(method, request, call, abandon_on_cancel=True)
    finally:
        call.finish()


class GatewayServicers:
    """A running gateway's servicers, over a gRPC channel (with the bearer token, if any)."""

    def __init__(self, channel: grpc.Channel, auth_token: str | None = None) -> None:
        knowledge_graph = query_pb2_grpc.KnowledgeGraphStub(channel)  # type: ignore[no-untyped-call]
        ingest = ingest_pb2_grpc.IngestStub(channel)  # type: ignore[no-untyped-call]
        self._methods: dict[str, Any] = {
            **{name: getattr(knowledge_graph, name) for name in KNOWLEDGE_GRAPH_METHODS},
            **{name: getattr(ingest, name) for name in INGEST_METHODS},
        }
        self._metadata = [("authorization", f"Bearer {auth_token}")] if auth_token else []

    async def call(self, method: str, request: Message, timeout: float | None = None) -> Any:
        future = self._methods[method].future(request, metadata=self._metadata, timeout=timeout)
        try:
            return await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)
        except grpc.RpcError as error:
            raise CallFailed(error.code(), error.details() or "") from None
        finally:
            future.cancel()  # a no-op once the call is done; a gRPC cancel before

    async def chunk_texts(self, chunk_ids: Sequence[str]) -> dict[str, str] | None:
        return None
