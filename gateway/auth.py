"""Optional bearer-token auth for the gateway, as a gRPC server interceptor.

Every method of every kgstream service needs the token once one is set. Health checks
and reflection stay open: load balancers and `grpcurl list` must work without the
secret, and they reveal nothing that the .proto files do not. The scheme is matched
case-insensitively ("bearer", "BEARER": RFC 6750 and RFC 9110 say schemes are
case-insensitive), the token exactly, in constant time.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any

import grpc
from grpc_health.v1 import health

from gateway import reflection

OPEN_SERVICES = frozenset({health.SERVICE_NAME, *reflection.SERVICE_NAMES})


def _service_of(method: str) -> str:
    """'/pkg.Service/Method' -> 'pkg.Service'."""
    return method.lstrip("/").partition("/")[0]


def _metadata_value(metadata: Any, key: str) -> str | None:
    for name, value in metadata or ():
        if name.lower() == key:
            return value if isinstance(value, str) else value.decode("utf-8", "replace")
    return None


class BearerTokenInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    """Rejects calls without metadata ``authorization: Bearer <token>`` (UNAUTHENTICATED)."""

    def __init__(self, token: str) -> None:
        if not token:
            raise ValueError("auth token must be non-empty; pass None to turn auth off")
        self._expected = token.encode()

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        method: str = handler_call_details.method
        if handler is None or _service_of(method) in OPEN_SERVICES:
            return handler
        presented = _metadata_value(handler_call_details.invocation_metadata, "authorization")
        problem = bearer_token_problem(presented, self._expected, "metadata")
        if problem is not None:
            return _rejecting(handler, problem)
        return handler


def bearer_token_problem(presented: str | None, expected: bytes, carrier: str) -> str | None:
    """Why an ``authorization`` value does not carry the `expected` token (None: it does).

    `carrier` names where the value travels ("metadata", "header") for the message."""
    if presented is None:
        return f"missing {carrier} 'authorization: Bearer <token>'"
    scheme, _, presented_token = presented.strip().partition(" ")
    if scheme.lower() != "bearer":
        return "'authorization' must read 'Bearer <token>'"
    if not hmac.compare_digest(presented_token.strip().encode(), expected):
        return "the bearer token in 'authorization' is not valid"
    return None


def _rejecting(handler: grpc.RpcMethodHandler, message: str) -> grpc.RpcMethodHandler:
    """A handler of the same shape as `handler` that answers UNAUTHENTICATED."""

    def reject(request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    request_streaming = handler.request_streaming
    response_streaming = handler.response_streaming
    if request_streaming and response_streaming:
        return grpc.stream_stream_rpc_method_handler(reject)
    if request_streaming:
        return grpc.stream_unary_rpc_method_handler(reject)
    if response_streaming:
        return grpc.unary_stream_rpc_method_handler(reject)
    return grpc.unary_unary_rpc_method_handler(reject)
