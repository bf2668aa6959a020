"""The time the dataflow's steps read, injected (as Bytewax's operators take a `now_getter`)
so that tests control it; no step reads a clock of its own."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Clock:
    """`now`: the wall clock, for the times Bytewax wakes a step at (`notify_at`) and the
    times a step keeps; `monotonic`: for how long something has waited; `thread_time`: the
    calling thread's CPU time, for the commit protocol's cost."""

    now: Callable[[], datetime] = utc_now
    monotonic: Callable[[], float] = time.monotonic
    thread_time: Callable[[], float] = time.thread_time
