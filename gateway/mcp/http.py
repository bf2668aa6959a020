"""MCP over Streamable HTTP at /mcp, on the HTTP API's port: a door of the app of
gateway/http/app.py (opened by gateway/server.py), behind the same bearer token.

Stateless: each POST is served on its own, with no session kept between requests, so any
gateway replica can answer any request, and a client that goes away ends its call (the
response stream closes, which cancels the tool call and with it the servicer call). The
SDK's session manager runs for the app's lifetime (the door's lifespan). A browser page
is let in only from the HTTP API's CORS origins (an `Origin` header outside them is
refused, which keeps a page a DNS-rebinding attack loaded from driving the tools); clients
that are not browsers send no `Origin`. Errors the app writes under /mcp (a missing token's
401, a 404 or 405) are JSON-RPC errors, which MCP clients show with their message (they
reduce any other body to its status).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
from mcp.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.http.app import BodyTooLarge
from gateway.http.auth import MCP_ROOT
from gateway.http.routes import Door

JSONRPC_INVALID_REQUEST = -32600
# The headers a browser client of Streamable HTTP sends and reads (for CORS).
MCP_REQUEST_HEADERS = ("mcp-protocol-version", "mcp-session-id", "last-event-id")
MCP_RESPONSE_HEADERS = ("mcp-session-id",)


def mcp_door(
    server: Server[Any], max_body_bytes: int, allowed_origins: tuple[str, ...] = ()
) -> Door:
    """`server` over Streamable HTTP at /mcp, run for the app's lifetime; bodies over
    `max_body_bytes` are refused (413)."""
    manager = StreamableHTTPSessionManager(
        app=server, stateless=True, max_request_body_size=max_body_bytes
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        async with manager.run():
            yield

    app = _OriginCheck(
        _DeclaredSizeCheck(StreamableHTTPASGIApp(manager), max_body_bytes),
        frozenset(allowed_origins),
    )
    return Door(
        routes=(),
        error_shapes={MCP_ROOT: jsonrpc_error},
        mounts=(Route(MCP_ROOT, endpoint=app),),
        lifespan=lifespan,
    )


def jsonrpc_error(status: int, code: grpc.StatusCode, message: str, field: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": JSONRPC_INVALID_REQUEST, "message": message},
    }


class _OriginCheck:
    """Refuses a request whose `Origin` is not one of `allowed` (403)."""

    def __init__(self, app: ASGIApp, allowed: frozenset[str]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        origin = Headers(scope=scope).get("origin")
        if scope["type"] == "http" and origin is not None and origin not in self.allowed:
            message = (
                f"the origin {origin!r} may not call /mcp: add it to http_cors_origins "
                "(KGSTREAM_HTTP_CORS_ORIGINS) to let a page from it in"
            )
            body = jsonrpc_error(403, grpc.StatusCode.PERMISSION_DENIED, message, "")
            response = JSONResponse(body, status_code=403)
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


class _DeclaredSizeCheck:
    """Refuses a request whose Content-Length is over `limit` (413) with a JSON-RPC error
    that names the limit, before a byte of it is read. A body sent without a length is
    counted by the SDK as it arrives (`max_request_body_size`), whose 413 says less."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared = Headers(scope=scope).get("content-length", "")
        if scope["type"] == "http" and declared.isdigit() and int(declared) > self.limit:
            message = str(BodyTooLarge(self.limit))
            body = jsonrpc_error(413, grpc.StatusCode.RESOURCE_EXHAUSTED, message, "")
            response = JSONResponse(body, status_code=413, headers={"Connection": "close"})
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)
