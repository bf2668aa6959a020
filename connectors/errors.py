"""Store outages, said once: which store errors mean "cannot reach the store right now",
the one error type they become (`StoreUnavailable`), and the indexer's wait for the store
to come back (`OutageWait`).

Redis and Qdrant fail with their own exception types; `store_outages` turns the outages
among them into `StoreUnavailable`, which the gateway maps to gRPC UNAVAILABLE
(gateway/status.py). The embedding endpoint counts as a store here: nothing can be written
without its vectors, so when it stays away through its own retries the indexer waits for it
too. Anything else (a malformed request, a rejected key, a bug) passes through unchanged:
waiting would not fix it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import redis
from qdrant_client.http.exceptions import ApiException, UnexpectedResponse

from connectors.embeddings.base import EmbeddingRequestError
from connectors.retry import Backoff

T = TypeVar("T")

logger = logging.getLogger("kgstream.stores")

# Redis answers these while it cannot serve writes yet: loading its data after a restart
# (BusyLoadingError is a ConnectionError), a replica not yet promoted, a cluster slot moving,
# a Redis Cluster down (CLUSTERDOWN, MASTERDOWN: a node failed and no replica took over) or
# whose client knows no node for a slot.
_REDIS_OUTAGES = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.SlotNotCoveredError,
)


# From 0.1 s, doubling, to one try every 5 s: a restart is noticed within seconds.
OUTAGE_BACKOFF = Backoff(0.1, 5.0)


class StoreUnavailable(RuntimeError):
    """A store (the Redis graph store, the Qdrant vector store) cannot be reached; retrying
    later may work (-> gRPC UNAVAILABLE)."""


def is_qdrant_outage(error: ApiException) -> bool:
    """No answer at all (refused, reset, timed out), or 429 / 5xx: the server's state, not
    the request's fault."""
    if isinstance(error, UnexpectedResponse):
        status = error.status_code or 0
        return status == 429 or status >= 500
    return True


@contextlib.contextmanager
def store_outages(workspace: str | None = None) -> Iterator[None]:
    """Re-raise the stores' outages as `StoreUnavailable`.

    `workspace` (the graph store's) only makes the message more precise.
    """
    try:
        yield
    except _REDIS_OUTAGES as exc:
        where = f", workspace {workspace!r}" if workspace is not None else ""
        raise StoreUnavailable(
            f"graph store (Redis{where}) is unreachable: {_sentence(exc)}; "
            "check that Redis runs at the configured URL"
        ) from exc
    except ApiException as exc:
        if not is_qdrant_outage(exc):
            raise
        raise StoreUnavailable(
            f"vector store (Qdrant) request failed: {_sentence(exc)}; check that Qdrant runs at "
            "the configured URL"
        ) from exc
    except EmbeddingRequestError as exc:
        if not exc.transient:
            raise
        raise StoreUnavailable(f"the embedding endpoint is away: {_sentence(exc)}") from exc


def _sentence(error: Exception) -> str:
    return str(error).rstrip(". ")


class StoppedDuringOutage(RuntimeError):
    """A stop was asked for while a store write waited for its store; the write did not
    happen (the run resumes from its last snapshot)."""


@dataclass
class OutageWait:
    """Run a store call until it succeeds, waiting out store outages.

    The indexer's writes go through here: while a store cannot be reached the call is
    retried after ``backoff.delay(failures)`` seconds, without end (nothing is lost, the
    stream only waits), until `stop` is set; then `when_stopped(reason)` ends the wait (by
    default with `StoppedDuringOutage`). The call must be idempotent (a store write is:
    see `Stores.write`). One warning is logged when an outage starts and one when it
    ends; `on_outage(reason)` and `on_outage(None)` report the same to the metrics.
    """

    backoff: Backoff = OUTAGE_BACKOFF
    stop: threading.Event = field(default_factory=threading.Event)
    on_outage: Callable[[str | None], None] | None = None
    revive: Callable[[], None] | None = None  # tried before each retry (embedded stores)
    when_stopped: Callable[[str], None] | None = None
    clock: Callable[[], float] = time.monotonic
    # The calls waiting now (several threads may call: the extraction pool embeds while the
    # dataflow writes), by thread, with their reasons; an outage lasts while any waits.
    _waiting: dict[int, str] = field(default_factory=dict, init=False, repr=False)
    _since: float | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def outage(self) -> str | None:
        """The reason of a call waiting for its store now, or None."""
        with self._lock:
            return next(iter(self._waiting.values()), None)

    def call(self, do: Callable[[], T]) -> T:
        failures = 0
        me = threading.get_ident()
        while True:
            try:
                with store_outages():
                    result = do()
            except StoreUnavailable as error:
                self._waits(me, str(error))
                if self.stop.wait(self.backoff.delay(failures)):
                    self._done(me)
                    if self.when_stopped is not None:
                        self.when_stopped(str(error))
                    raise StoppedDuringOutage(str(error)) from error
                failures += 1
                self._revive()
                continue
            if failures:
                self._done(me)
            return result

    def _waits(self, caller: int, reason: str) -> None:
        """One warning when an outage starts (no call was waiting), however many wait."""
        with self._lock:
            starts = not self._waiting
            self._waiting[caller] = reason
            if starts:
                self._since = self.clock()
        if starts:
            logger.warning(
                "%s; the indexer waits for it (retrying every %g s at most; nothing is lost)",
                reason,
                self.backoff.cap,
            )
            self._report(reason)

    def _done(self, caller: int) -> None:
        """One warning when the last waiting call gets through."""
        with self._lock:
            self._waiting.pop(caller, None)
            since = None if self._waiting else self._since
            if since is not None:
                self._since = None
        if since is not None and not self.stop.is_set():
            logger.warning(
                "the stores are reachable again after %.1f s; the indexer resumes",
                self.clock() - since,
            )
            self._report(None)

    def _revive(self) -> None:
        if self.revive is None:
            return
        try:
            self.revive()
        except Exception as error:  # e.g. redis-server cannot start: wait, try again later
            logger.warning("could not restart the embedded store: %s", error)

    def _report(self, reason: str | None) -> None:
        if self.on_outage is not None:
            self.on_outage(reason)
