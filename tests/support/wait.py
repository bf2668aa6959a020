"""The one way a test waits for something another thread or process does: poll a condition
until it holds or a deadline passes, and on timeout fail saying what was awaited and what
was seen last. Timeouts are generous on purpose: the suite shares two cores with other
work, and a condition that holds returns at once whatever its timeout."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_SHOWN = 500  # characters of the last value a failure shows


def wait_until(
    condition: Callable[[], T],
    timeout: float,
    message: str,
    *,
    interval: float = 0.05,
    ignoring: tuple[type[BaseException], ...] = (),
) -> T:
    """Call `condition` every `interval` seconds until it returns a truthy value, and return
    that value. After `timeout` seconds, fail with an AssertionError that says the test
    timed out waiting for `message` (so `message` names what was awaited, e.g. "the indexer
    to commit a.md") and shows the last value returned. An exception of a type in
    `ignoring` counts as "not yet" (a server that is still starting refuses connections),
    and is shown as the last value if the wait times out; any other exception ends the
    wait at once."""
    deadline = time.monotonic() + timeout
    while True:
        last: object
        try:
            value = condition()
        except ignoring as error:
            last = error
        else:
            if value:
                return value
            last = value
        if time.monotonic() >= deadline:
            shown = repr(last)
            if len(shown) > _SHOWN:
                shown = shown[:_SHOWN] + "..."
            raise AssertionError(
                f"timed out after {timeout:g} s waiting for {message}; last seen: {shown}"
            ) from (last if isinstance(last, BaseException) else None)
        time.sleep(interval)
