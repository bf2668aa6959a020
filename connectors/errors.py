"""The one error for a store outage, low enough that any layer can raise or catch it.

Redis and Qdrant fail with their own exception types; `store_outages` turns the ones that
mean "cannot reach the store right now" into `StoreUnavailable`, and the gateway maps that
single type to gRPC UNAVAILABLE (gateway/status.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import redis
from qdrant_client.http.exceptions import ApiException


class StoreUnavailable(RuntimeError):
    """A store (the Redis graph store, the Qdrant vector store) cannot be reached; retrying
    later may work (-> gRPC UNAVAILABLE)."""


@contextlib.contextmanager
def store_outages(workspace: str | None = None) -> Iterator[None]:
    """Re-raise the stores' connection and request failures as `StoreUnavailable`.

    `workspace` (the graph store's) only makes the message more precise.
    """
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        where = f", workspace {workspace!r}" if workspace is not None else ""
        raise StoreUnavailable(
            f"graph store (Redis{where}) is unreachable: {exc}; check that Redis runs at "
            "the configured URL"
        ) from exc
    except ApiException as exc:
        raise StoreUnavailable(
            f"vector store (Qdrant) request failed: {exc}; check that Qdrant runs at "
            "the configured URL"
        ) from exc
