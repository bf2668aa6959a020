"""The gateway's bearer token on the HTTP API, as an ASGI middleware.

The same token as gRPC (`gateway/auth.py`, same checks and messages) guards every route
under /api/ and /v1/ (Ollama's routes and OpenAI's too), LightRAG's routes (/query,
/documents, /graphs, /graph: the `Authorization: Bearer` header only, not LightRAG's
X-API-Key) and the MCP endpoint /mcp, each refusing in its own error shape
(`gateway/http/errors.py`); the web UI's files, /docs, /healthz, LightRAG's /health and
/openapi.json stay open, as health and reflection do on gRPC. The server-sent event stream of
index changes also takes the token as `?access_token=` (RFC 6750 section 2.3), because a
browser's EventSource cannot set headers; no other route does, so tokens do not end up in URLs
and logs needlessly.
"""

from __future__ import annotations

import hmac
from urllib.parse import parse_qs

import grpc
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.auth import bearer_token_problem
from gateway.http.errors import ErrorShapes

GUARDED_PREFIXES = ("/api/", "/v1/")
# LightRAG's server routes (gateway/http/lightrag/): each of these paths and those below it.
LIGHTRAG_ROOTS = ("/query", "/documents", "/graphs", "/graph")
MCP_ROOT = "/mcp"  # MCP over Streamable HTTP (gateway/mcp/http.py)
GUARDED_ROOTS = (*LIGHTRAG_ROOTS, MCP_ROOT)
QUERY_TOKEN_PATHS = frozenset({"/api/v1/events"})


def is_guarded(path: str) -> bool:
    """Whether a request to `path` needs the token."""
    return path.startswith(GUARDED_PREFIXES) or any(
        path == root or path.startswith(root + "/") for root in GUARDED_ROOTS
    )


class BearerTokenMiddleware:
    def __init__(self, app: ASGIApp, token: str, errors: ErrorShapes) -> None:
        if not token:
            raise ValueError("auth token must be non-empty; pass None to turn auth off")
        self.app = app
        self._expected = token.encode()
        self._errors = errors

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._guarded(scope):
            await self.app(scope, receive, send)
            return
        problem = self._problem(scope)
        if problem is None:
            await self.app(scope, receive, send)
            return
        response = self._errors.response(
            scope["path"],
            401,
            grpc.StatusCode.UNAUTHENTICATED,
            problem,
            headers={"WWW-Authenticate": 'Bearer realm="kgstream"'},
        )
        await response(scope, receive, send)

    @staticmethod
    def _guarded(scope: Scope) -> bool:
        return scope["method"] != "OPTIONS" and is_guarded(scope["path"])

    def _problem(self, scope: Scope) -> str | None:
        header = _header(scope, b"authorization")
        if header is None and _header(scope, b"x-api-key") is not None:
            return (
                "X-API-Key is not accepted: send the same token as 'authorization: Bearer <token>'"
            )
        if header is None and scope["path"] in QUERY_TOKEN_PATHS:
            tokens = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("access_token")
            if tokens:
                if hmac.compare_digest(tokens[0].encode(), self._expected):
                    return None
                return "the access_token is not valid"
        return bearer_token_problem(header, self._expected, "header")


def _header(scope: Scope, name: bytes) -> str | None:
    """The first value of the header `name` (lower case), if the request has one."""
    return next((v.decode("latin-1") for k, v in scope["headers"] if k == name), None)
