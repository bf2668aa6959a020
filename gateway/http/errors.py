"""How the HTTP port says an error, by where the request went.

kgstream's own routes answer `{"error": {"code", "message", "field"}}` (`calls.error_body`);
routes that speak another API answer in that API's shape, so its client libraries raise
their usual exceptions: OpenAI's `{"error": {"message", "type", "param", "code"}}` under
/v1/, Ollama's `{"error": "message"}` under /api/ (but /api/v1/, kgstream's). A shape is
registered with its path prefix (`ErrorShapes`, the longest prefix wins), so every error
under the prefix has it: the route's own, an unknown path's 404, a wrong method's 405, a
missing token's 401 and an oversized body's 413, which no route writes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import grpc
from starlette.responses import JSONResponse

from gateway.http.calls import CallFailed, error_body, field_of

# (HTTP status, gRPC status, message, the bad field or "") -> the JSON body of an error.
ErrorBody = Callable[[int, grpc.StatusCode, str, str], dict[str, Any]]

API_PREFIX = "/api/v1/"  # kgstream's own routes, inside Ollama's /api/


def kgstream_error(status: int, code: grpc.StatusCode, message: str, field: str) -> dict[str, Any]:
    return error_body(code, message, field or None)


def openai_body(status: int, message: str, param: str | None, code: str | None) -> dict[str, Any]:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def openai_error(status: int, code: grpc.StatusCode, message: str, field: str) -> dict[str, Any]:
    """OpenAI's shape; a missing or wrong token is `invalid_api_key`, as OpenAI says it."""
    named = "invalid_api_key" if code == grpc.StatusCode.UNAUTHENTICATED else code.name.lower()
    return openai_body(status, message, field or None, named)


def ollama_error(status: int, code: grpc.StatusCode, message: str, field: str) -> dict[str, Any]:
    return {"error": message}


class Refusal(Exception):
    """A request a door of another API refuses, or a call of it that failed: the HTTP
    status, the message, the request field it is about (None: the request as a whole) and a
    short code ("model_not_found", "invalid_argument"); the door writes it in its shape."""

    def __init__(self, status: int, message: str, param: str | None, code: str) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code

    @classmethod
    def of(cls, failure: CallFailed) -> Refusal:
        """The refusal of a servicer's failed call (its status, message and field)."""
        param = field_of(failure.code, failure.message) or None
        return cls(failure.http_status, failure.message, param, failure.code.name.lower())

    def openai(self) -> JSONResponse:
        body = openai_body(self.status, self.message, self.param, self.code)
        return JSONResponse(body, status_code=self.status)

    def ollama(self) -> JSONResponse:
        return JSONResponse({"error": self.message}, status_code=self.status)


class ErrorShapes:
    """The error body of each path prefix; kgstream's where no prefix matches."""

    def __init__(self, shapes: Mapping[str, ErrorBody]) -> None:
        table = {"": kgstream_error, API_PREFIX: kgstream_error, **shapes}
        self._by_prefix = sorted(table.items(), key=lambda item: len(item[0]), reverse=True)

    def body(
        self, path: str, status: int, code: grpc.StatusCode, message: str, field: str = ""
    ) -> dict[str, Any]:
        shape = next(shape for prefix, shape in self._by_prefix if path.startswith(prefix))
        return shape(status, code, message, field)

    def response(
        self,
        path: str,
        status: int,
        code: grpc.StatusCode,
        message: str,
        field: str = "",
        headers: Mapping[str, str] | None = None,
    ) -> JSONResponse:
        body = self.body(path, status, code, message, field)
        return JSONResponse(body, status_code=status, headers=dict(headers or {}))
