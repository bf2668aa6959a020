"""The gRPC health service follows the stores: NOT_SERVING while one cannot be reached.

A `StoreHealth` thread runs each named check (one cheap round trip: Redis PING, the
vector store's `ping`) every `interval` seconds and sets the server's and both services'
status: SERVING when every check passes, NOT_SERVING when one fails. A change is logged
once, with the failing store and its error, so an outage shows in the log, in `grpcurl
... grpc.health.v1.Health/Check` and in a container's health check, while Retrieve
answers UNAVAILABLE meanwhile.

`ListingHealthServicer` answers Health/List too: health.proto has the method, but
grpcio-health-checking's servicer leaves it to the generated base, which answers
UNIMPLEMENTED and logs an ERROR traceback at every call.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence

import grpc
from grpc_health.v1 import health, health_pb2
from typing_extensions import override

_LOGGER = logging.getLogger(__name__)

HealthCheck = Callable[[], object]
"""Returns when its store answers; raises when it cannot be reached."""

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


class ListingHealthServicer(health.HealthServicer):  # type: ignore[misc]
    """grpcio-health-checking's servicer plus List: the status of every service set so far,
    the server's own ("") included, as Check would answer each."""

    def __init__(self) -> None:
        super().__init__()
        # Re-entrant: the base's graceful shutdown sets each status through `set`.
        self._listed_lock = threading.RLock()
        self._listed: dict[str, int] = {"": SERVING}  # the base starts the server SERVING
        self._frozen = False

    @override
    def set(self, service: str, status: int) -> None:
        with self._listed_lock:
            super().set(service, status)
            if not self._frozen:
                self._listed[service] = status

    @override
    def enter_graceful_shutdown(self) -> None:
        """Every status NOT_SERVING, and later changes ignored (as the base does)."""
        with self._listed_lock:
            super().enter_graceful_shutdown()
            self._frozen = True

    @override
    def List(
        self, request: health_pb2.HealthListRequest, context: grpc.ServicerContext
    ) -> health_pb2.HealthListResponse:
        with self._listed_lock:
            statuses = {
                service: health_pb2.HealthCheckResponse(status=status)
                for service, status in self._listed.items()
            }
        return health_pb2.HealthListResponse(statuses=statuses)


class StoreHealth:
    """Runs `checks` every `interval` seconds and sets `services`' status in `servicer`."""

    def __init__(
        self,
        servicer: health.HealthServicer,
        services: Sequence[str],
        checks: Mapping[str, HealthCheck],
        interval: float = 2.0,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"StoreHealth interval must be > 0; got {interval}")
        self._servicer, self._services, self._checks = servicer, tuple(services), dict(checks)
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kgstream-health", daemon=True)
        self._failing: dict[str, str] = {}
        self.check_once()  # the first answer already reflects the stores

    def start(self) -> StoreHealth:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def failing(self) -> dict[str, str]:
        """The stores the last check could not reach, with their errors (empty: SERVING)."""
        return dict(self._failing)

    def check_once(self) -> dict[str, str]:
        """Run every check now and set the status; returns the failing stores' errors."""
        failing: dict[str, str] = {}
        for name, check in self._checks.items():
            try:
                check()
            except Exception as error:  # any failure means: not reachable now
                failing[name] = f"{type(error).__name__}: {error}"
        if failing != self._failing:
            if failing:
                detail = "; ".join(f"{name}: {error}" for name, error in failing.items())
                _LOGGER.warning("health NOT_SERVING: cannot reach %s", detail)
            elif self._failing:
                _LOGGER.warning("health SERVING again: %s reachable", ", ".join(self._failing))
        self._failing = failing
        status = NOT_SERVING if failing else SERVING
        for service in self._services:
            self._servicer.set(service, status)
        return failing

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.check_once()
