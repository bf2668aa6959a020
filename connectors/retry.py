"""Retry delays as a tiny pure object, injected into clients instead of hard-coded in loops.

Same shape as redis-py's ``ExponentialBackoff``: the delay doubles with each consecutive
failure and never exceeds ``cap``. No jitter, no clock and no randomness here, so callers and
tests can reason about exact delays; a client that wants jitter adds it where it sleeps.
"""

from __future__ import annotations

from dataclasses import dataclass

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
