"""MCP over Streamable HTTP at /mcp, on the HTTP API's port (mounted by gateway/server.py
into the app of gateway/http/app.py, behind the same bearer token).

Stateless: each POST is served on its own, with no session kept between requests, so any
gateway replica can answer any request, and a client that goes away ends its call (the
response stream closes, which cancels the tool call and with it the servicer call). The
SDK's session manager runs for the app's lifetime (`McpEndpoint.lifespan`). A browser page
is let in only from the HTTP API's CORS origins (an `Origin` header outside them is
refused, which keeps a page a DNS-rebinding attack loaded from driving the tools); clients
that are not browsers send no `Origin`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import grpc
from mcp.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.http.calls import error_body

MCP_PATH = "/mcp"
# The headers a browser client of Streamable HTTP sends and reads (for CORS).
MCP_REQUEST_HEADERS = ("mcp-protocol-version", "mcp-session-id", "last-event-id")
MCP_RESPONSE_HEADERS = ("mcp-session-id",)


@dataclass(frozen=True)
class McpEndpoint:
    """The /mcp route, and the lifespan the app must run it in."""

    route: BaseRoute
    lifespan: Callable[[Any], AbstractAsyncContextManager[None]]


def mcp_endpoint(
    server: Server[Any], max_body_bytes: int, allowed_origins: tuple[str, ...] = ()
) -> McpEndpoint:
    """`server` over Streamable HTTP; bodies over `max_body_bytes` are refused (413)."""
    manager = StreamableHTTPSessionManager(
        app=server, stateless=True, max_request_body_size=max_body_bytes
    )

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        async with manager.run():
            yield

    app = _OriginCheck(StreamableHTTPASGIApp(manager), frozenset(allowed_origins))
    return McpEndpoint(Route(MCP_PATH, endpoint=app), lifespan)


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
            body = error_body(grpc.StatusCode.PERMISSION_DENIED, message)
            response = JSONResponse(body, status_code=403)
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)
