"""Errors to gRPC status codes, said once for every servicer of the gateway.

`statuses` is the one table from the engine's, the stores' and the LLM client's errors to
status codes; `invalid` and `in_range` are the request checks the servicers make
themselves; `deadline_of` puts the call's deadline on the engine's clock, and
`call_deadline_of` adds whether the client is still there.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import NoReturn

import grpc

from connectors.embeddings.base import EmbeddingRequestError
from connectors.errors import StoreUnavailable, store_outages
from connectors.llm.client import LLMError
from gateway import convert
from gateway.types import (
    CallAbandoned,
    CallDeadline,
    DeadlinePassed,
    IndexVersionTimeout,
    InvalidQuery,
    TooManyVersionWaits,
)

# gRPC reports "no deadline" as a deadline centuries away.
_NO_DEADLINE_SECONDS = 1e8

# Which status each failure of a call becomes, with what the message starts with.
# InvalidQuery (-> INVALID_ARGUMENT) is not here: its field is renamed to the request's.
STATUS_OF: tuple[tuple[type[Exception], grpc.StatusCode, str], ...] = (
    (IndexVersionTimeout, grpc.StatusCode.DEADLINE_EXCEEDED, ""),
    (TooManyVersionWaits, grpc.StatusCode.RESOURCE_EXHAUSTED, ""),
    (DeadlinePassed, grpc.StatusCode.DEADLINE_EXCEEDED, ""),
    (CallAbandoned, grpc.StatusCode.CANCELLED, ""),
    (StoreUnavailable, grpc.StatusCode.UNAVAILABLE, ""),
    (LLMError, grpc.StatusCode.UNAVAILABLE, "the LLM call failed: "),
    (EmbeddingRequestError, grpc.StatusCode.UNAVAILABLE, "the embedding call failed: "),
)
_MAPPED = tuple(kind for kind, _, _ in STATUS_OF)


def abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
    context.abort(code, message)
    raise AssertionError("unreachable: context.abort raises")  # pragma: no cover


@contextlib.contextmanager
def statuses(context: grpc.ServicerContext) -> Iterator[None]:
    """Turn the engine's, the stores' and the LLM client's errors into gRPC status codes."""
    try:
        with store_outages():  # direct store reads fail with the stores' own errors
            yield
    except InvalidQuery as error:
        field = convert.request_field(error.field)
        detail = str(error).removeprefix(f"{error.field}: ")
        abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{field}: {detail}")
    except _MAPPED as error:
        code, prefix = next((c, p) for kind, c, p in STATUS_OF if isinstance(error, kind))
        abort(context, code, f"{prefix}{error}")


def deadline_of(context: grpc.ServicerContext) -> float | None:
    """The call's deadline on the `time.monotonic()` clock, or None when it has none."""
    remaining = context.time_remaining()
    if remaining is None or remaining > _NO_DEADLINE_SECONDS:
        return None
    return time.monotonic() + float(remaining)


def call_deadline_of(context: grpc.ServicerContext) -> CallDeadline:
    """The call's deadline and liveness, for the engine to stop work once it is abandoned."""
    return CallDeadline(deadline_of(context), context.is_active)


def invalid(context: grpc.ServicerContext, field: str, message: str) -> NoReturn:
    abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{field}: {message}")


def in_range(context: grpc.ServicerContext, field: str, value: int, low: int, high: int) -> int:
    if not low <= value <= high:
        invalid(context, field, f"must be between {low} and {high}; got {value}")
    return value
