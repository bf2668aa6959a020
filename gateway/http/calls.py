"""A call that came over HTTP, run by the gRPC servicers themselves.

The HTTP API does not re-implement the services: each route builds the request message and
hands it, with an `HttpCall`, to the same `KnowledgeGraphService` / `IngestService` method
the gRPC server calls, so validation, limits, deadlines, cancellation and error messages are
the same on both transports (grpc-gateway and Envoy's JSON transcoding do the same over a
network hop; here it is a function call). `HttpCall` is the part of
`grpc.ServicerContext` the servicers use: `abort` raises `CallFailed`, which the route turns
into an HTTP status (`HTTP_STATUS`) and the JSON error body (`error_body`).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn

import grpc

# The HTTP status of each gRPC status, as google.rpc's code.proto maps them.
HTTP_STATUS: dict[grpc.StatusCode, int] = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.ABORTED: 409,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DATA_LOSS: 500,
}
# The longest deadline a call over HTTP may ask for (`?timeout_ms=`).
MAX_TIMEOUT_MS = 3_600_000
# "top_k: must be between 1 and 1000": INVALID_ARGUMENT messages start with the field.
_FIELD_PREFIX = re.compile(r"^([a-z_][\w.\[\]]*): ")


class CallFailed(Exception):
    """The call ended with a gRPC status other than OK (`HttpCall.abort`)."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def http_status(self) -> int:
        return HTTP_STATUS.get(self.code, 500)


def field_of(code: grpc.StatusCode, message: str) -> str:
    """The field a bad request's message names first ("top_k: must be ..."), else ""."""
    found = _FIELD_PREFIX.match(message) if code == grpc.StatusCode.INVALID_ARGUMENT else None
    return found.group(1) if found else ""


def error_body(code: grpc.StatusCode, message: str, field: str | None = None) -> dict[str, Any]:
    """The JSON of an error: the status name, the message and, for a bad request, the field."""
    field = field_of(code, message) if field is None else field
    return {"error": {"code": code.name, "message": message, "field": field}}


class HttpCall:
    """What the servicers need of a `grpc.ServicerContext`, for one HTTP request.

    `timeout_seconds` is the client's deadline (None: none); `is_connected` says whether the
    client is still there. `finish` runs the callbacks the servicer added (a stream's close),
    once, when the response ends for any reason."""

    def __init__(
        self, timeout_seconds: float | None, is_connected: Callable[[], bool] | None = None
    ) -> None:
        self._deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        self._is_connected = is_connected
        self._callbacks: list[Callable[[], object]] = []
        self._finished = threading.Event()

    def abort(self, code: grpc.StatusCode, details: str) -> NoReturn:
        raise CallFailed(code, details)

    def time_remaining(self) -> float | None:
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - time.monotonic())

    def is_active(self) -> bool:
        if self._finished.is_set():
            return False
        if self._deadline is not None and time.monotonic() >= self._deadline:
            return False
        return self._is_connected is None or self._is_connected()

    def add_callback(self, callback: Callable[[], object]) -> bool:
        self._callbacks.append(callback)
        return True

    def finish(self) -> None:
        if self._finished.is_set():
            return
        self._finished.set()
        for callback in self._callbacks:
            callback()
