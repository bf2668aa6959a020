"""Retrying, said once: delays as a tiny pure object (`Backoff`) and the loop that uses them
(`Retry`), injected into clients instead of hard-coded in each.

Same shapes as redis-py's ``ExponentialBackoff`` and ``Retry``: the delay doubles with each
consecutive failure and never exceeds ``cap``. No jitter and no randomness, so callers and
tests can reason about exact delays; `Retry.sleep` is injectable so tests need not wait.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

# 2**64 already dwarfs any sensible cap; clamping the exponent keeps the arithmetic finite
# (an int like 2**5000 cannot be multiplied by a float).
_MAX_EXPONENT = 64


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff: ``delay(failures) = min(cap, base * 2**failures)`` seconds."""

    base: float
    cap: float

    def __post_init__(self) -> None:
        if self.base < 0:
            raise ValueError(f"Backoff.base must be >= 0 seconds; got {self.base!r}")
        if self.cap < self.base:
            raise ValueError(
                f"Backoff.cap must be >= base ({self.base!r} s); got {self.cap!r}. "
                "Raise cap or lower base."
            )

    def delay(self, failures: int) -> float:
        """Seconds to wait after ``failures`` consecutive failures (0 = the first retry)."""
        if failures < 0:
            raise ValueError(f"failures must be >= 0; got {failures!r}")
        return float(min(self.cap, self.base * 2 ** min(failures, _MAX_EXPONENT)))


@dataclass(frozen=True)
class Retry:
    """Run a call, retrying transient failures: redis-py's ``Retry(backoff, retries,
    supported_errors).call_with_retry(do, fail)``, plus a server-given wait.

    ``retries`` counts the retries after the first try (0 = try once). Errors that are not
    ``supported_errors`` propagate untouched; supported ones are retried while
    ``is_transient`` says so and retries remain, else ``fail(error, attempts)`` builds the
    error to raise. Between tries it sleeps ``backoff.delay(failures)``, stretched to what
    ``retry_after`` reads from the error (the server knows when it will have room), never
    beyond ``backoff.cap``.
    """

    backoff: Backoff
    retries: int
    supported_errors: tuple[type[Exception], ...] = (Exception,)
    is_transient: Callable[[Exception], bool] = lambda error: True
    retry_after: Callable[[Exception], float | None] = lambda error: None
    sleep: Callable[[float], None] = time.sleep

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise ValueError(f"Retry.retries must be >= 0 (0 = no retry); got {self.retries!r}")

    def call_with_retry(
        self, do: Callable[[], T], fail: Callable[[Exception, int], Exception]
    ) -> T:
        failures = 0
        while True:
            try:
                return do()
            except self.supported_errors as error:
                if not self.is_transient(error) or failures >= self.retries:
                    raise fail(error, failures + 1) from error
                self.sleep(self.delay(error, failures))
                failures += 1

    def delay(self, error: Exception, failures: int) -> float:
        """Seconds to wait before retry number ``failures + 1``."""
        delay = self.backoff.delay(failures)
        asked = self.retry_after(error)
        if asked is not None and math.isfinite(asked):
            delay = max(delay, min(asked, self.backoff.cap))
        return delay
