"""The gateway's bearer token on the HTTP API, as an ASGI middleware.

The same token as gRPC (`gateway/auth.py`, same checks and messages) guards every route
under /api/ and /v1/, and the MCP endpoint /mcp; the web UI's files, /healthz and
/openapi.json stay open, as health and reflection do on gRPC. The server-sent event stream
of index changes also takes the token as `?access_token=` (RFC 6750 section 2.3), because a
browser's EventSource cannot set headers; no other route does, so tokens do not end up in
URLs and logs needlessly.
"""

from __future__ import annotations

import hmac
from urllib.parse import parse_qs

import grpc
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.auth import bearer_token_problem
from gateway.http.calls import error_body

GUARDED_PREFIXES = ("/api/", "/v1/")
GUARDED_PATHS = frozenset({"/mcp"})  # the MCP endpoint (gateway/mcp/http.py)
JSONRPC_INVALID_REQUEST = -32600
QUERY_TOKEN_PATHS = frozenset({"/api/v1/events"})


class BearerTokenMiddleware:
    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ValueError("auth token must be non-empty; pass None to turn auth off")
        self.app = app
        self._expected = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._guarded(scope):
            await self.app(scope, receive, send)
            return
        problem = self._problem(scope)
        if problem is None:
            await self.app(scope, receive, send)
            return
        response = JSONResponse(
            _error(scope["path"], problem),
            status_code=401,
            headers={"WWW-Authenticate": 'Bearer realm="kgstream"'},
        )
        await response(scope, receive, send)

    @staticmethod
    def _guarded(scope: Scope) -> bool:
        path: str = scope["path"]
        guarded = path.startswith(GUARDED_PREFIXES) or path.rstrip("/") in GUARDED_PATHS
        return scope["method"] != "OPTIONS" and guarded

    def _problem(self, scope: Scope) -> str | None:
        header = next(
            (v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), None
        )
        if header is None and scope["path"] in QUERY_TOKEN_PATHS:
            tokens = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("access_token")
            if tokens:
                if hmac.compare_digest(tokens[0].encode(), self._expected):
                    return None
                return "the access_token is not valid"
        return bearer_token_problem(header, self._expected, "header")


def _error(path: str, problem: str) -> dict[str, object]:
    """The body of a 401: the API's error, or for MCP a JSON-RPC error, which MCP clients
    show with its message (they reduce any other body to its status)."""
    if path.rstrip("/") in GUARDED_PATHS:
        error = {"code": JSONRPC_INVALID_REQUEST, "message": problem}
        return {"jsonrpc": "2.0", "id": None, "error": error}
    return error_body(grpc.StatusCode.UNAUTHENTICATED, problem, "")
