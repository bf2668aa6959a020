"""Waits for an index version (read-your-writes), the same for every transport.

A call that asks for `min_index_version` waits here, whether it came over gRPC (a worker
thread blocks in `reach`) or over HTTP (the event loop awaits `reach_async`, holding no
thread). Every wait is bounded the same way: at most `limit` wait at once (one more is
`TooManyVersionWaits` at once, naming the setting), none longer than `longest_seconds`
whatever its own deadline, and a caller that leaves frees its place at once.

One poller thread reads the version for every waiter and wakes those whose version came,
so the store sees one read per poll however many wait; it runs only while someone waits.
A read that fails (a store outage) fails every wait with that error, as a wait of its own
would. Server-sent event streams follow the version through the same poller (`changed`)
without taking a place, since they are not waiting for a version of their own; while only
they follow it, the poller reads it 4 times a second rather than every few milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable

import anyio.to_thread

from gateway.types import CallAbandoned, CallDeadline, IndexVersionTimeout, TooManyVersionWaits

POLL_SECONDS = 0.005  # a GET every few milliseconds is cheap, and one is shared by all
WATCH_POLL_SECONDS = 0.25  # while only streams follow the version (a UI needs no more)
CHECK_SECONDS = 0.05  # how often a blocked waiter looks whether its caller is still there

Wake = Callable[[int, BaseException | None], None]


class _Waiter:
    """One wait: woken (from the poller's thread) once the version is `minimum` or more,
    or with the error that ended the polling."""

    __slots__ = ("eager", "minimum", "wake")

    def __init__(self, minimum: int, wake: Wake, eager: bool = True) -> None:
        self.minimum = minimum
        self.wake = wake
        self.eager = eager  # a call waiting (polled every `poll_seconds`), not a stream


class VersionWaits:
    """The waits for an index version over one graph store (see the module docstring).

    `read_version` reads the index version from the store; `limit` is `max_version_waits`,
    `longest_seconds` is `version_wait_seconds`."""

    def __init__(
        self,
        read_version: Callable[[], int],
        limit: int,
        longest_seconds: float,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        if limit < 1:
            raise ValueError(f"VersionWaits.limit must be >= 1; got {limit}")
        self._read = read_version
        self.limit = limit
        self.longest_seconds = longest_seconds
        self._poll_seconds = poll_seconds
        self._registered = threading.Event()  # cuts the poller's pause short
        self._slots = threading.BoundedSemaphore(limit)
        self._lock = threading.Lock()
        self._waiters: set[_Waiter] = set()
        self._poller: threading.Thread | None = None
        self._last_version = 0
        self._taken = 0

    @property
    def waiting(self) -> int:
        """How many calls wait for a version now (each holding one of the `limit` places)."""
        with self._lock:
            return self._taken

    # -- waiting ---------------------------------------------------------------

    def reach(self, minimum: int, call: CallDeadline) -> int:
        """The index version once it is >= `minimum`, blocking this thread: until the call's
        deadline, at most `longest_seconds`, and only while fewer than `limit` calls wait."""
        current = self._last_version = self._read()
        if minimum <= current:
            return current
        timeout, capped = self._timeout(call.remaining())
        self._take_place(current)
        try:
            done = threading.Event()
            woken: list[tuple[int, BaseException | None]] = []

            def wake(version: int, error: BaseException | None) -> None:
                woken.append((version, error))
                done.set()

            waiter = _Waiter(minimum, wake)
            self._register(waiter)
            try:
                ends = time.monotonic() + timeout
                while not done.wait(max(0.0, min(CHECK_SECONDS, ends - time.monotonic()))):
                    if time.monotonic() >= ends or call.passed():
                        raise self._timed_out(minimum, timeout, capped)
                    if not call.is_active():
                        raise CallAbandoned(
                            f"the call was cancelled while waiting for index version {minimum}"
                        )
            finally:
                self._unregister(waiter)
            version, error = woken[0]
            if error is not None:
                raise error
            return version
        finally:
            self._give_place()

    async def reach_async(
        self,
        minimum: int,
        timeout_seconds: float | None,
        left: Callable[[], Awaitable[object]] | None = None,
    ) -> int:
        """`reach` on the event loop, holding no thread while it waits: until
        `timeout_seconds` (None: none of its own), at most `longest_seconds`; `left()`
        returns once the caller is gone, which ends the wait with `CallAbandoned`."""
        current = self._last_version = await anyio.to_thread.run_sync(self._read)
        if minimum <= current:
            return current
        timeout, capped = self._timeout(timeout_seconds)
        self._take_place(current)
        try:
            loop = asyncio.get_running_loop()
            reached: asyncio.Future[int] = loop.create_future()
            waiter = _Waiter(minimum, _waking(loop, reached))
            gone = asyncio.ensure_future(left()) if left is not None else None
            self._register(waiter)
            try:
                awaited: set[asyncio.Future[object]] = {reached}  # type: ignore[arg-type]
                if gone is not None:
                    awaited.add(gone)
                await asyncio.wait(awaited, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                if reached.done():
                    return reached.result()
                if gone is not None and gone.done():
                    raise CallAbandoned(
                        f"the client left while waiting for index version {minimum}"
                    )
                raise self._timed_out(minimum, timeout, capped)
            finally:
                self._unregister(waiter)
                reached.cancel()
                if gone is not None:
                    gone.cancel()
        finally:
            self._give_place()

    async def changed(self, after: int, timeout_seconds: float) -> int | None:
        """The index version once it is past `after`, or None after `timeout_seconds`;
        takes no place among the `limit` (for streams that follow every change)."""
        loop = asyncio.get_running_loop()
        reached: asyncio.Future[int] = loop.create_future()
        waiter = _Waiter(after + 1, _waking(loop, reached), eager=False)
        self._register(waiter)
        try:
            await asyncio.wait({reached}, timeout=timeout_seconds)
            return reached.result() if reached.done() else None
        finally:
            self._unregister(waiter)
            reached.cancel()

    # -- the bounds ------------------------------------------------------------

    def _timeout(self, remaining: float | None) -> tuple[float, bool]:
        """How long a wait may last, and whether the server's maximum cut it."""
        most = self.longest_seconds
        if remaining is None or remaining > most:
            return most, True
        return max(0.0, remaining), False

    def _take_place(self, current: int) -> None:
        if not self._slots.acquire(blocking=False):
            raise TooManyVersionWaits(
                f"{self.limit} calls wait for min_index_version already "
                f"(the limit, max_version_waits; index is at version {current}): retry later"
            )
        with self._lock:
            self._taken += 1

    def _give_place(self) -> None:
        with self._lock:
            self._taken -= 1
        self._slots.release()

    def _timed_out(self, minimum: int, timeout: float, capped: bool) -> IndexVersionTimeout:
        note = (
            f"; the wait stopped at the server's maximum, {self.longest_seconds:g} s "
            "(version_wait_seconds)"
            if capped
            else ""
        )
        return IndexVersionTimeout(
            f"min_index_version {minimum} not reached within {timeout:.3g} s "
            f"(index is at version {self._last_version}){note}; the indexer may be behind: "
            "retry later or allow a longer deadline"
        )

    # -- the poller ------------------------------------------------------------

    def _register(self, waiter: _Waiter) -> None:
        with self._lock:
            self._waiters.add(waiter)
            self._registered.set()
            if self._poller is None:
                self._poller = threading.Thread(
                    target=self._poll, name="kgstream-version-poller", daemon=True
                )
                self._poller.start()

    def _unregister(self, waiter: _Waiter) -> None:
        with self._lock:
            self._waiters.discard(waiter)

    def _poll(self) -> None:
        """Read the version for every waiter and wake those it satisfies; end once none
        is left (the next waiter starts a new poller)."""
        while True:
            with self._lock:
                if not self._waiters:
                    self._poller = None
                    return
                self._registered.clear()
            version, error = self._last_version, None
            try:
                version = self._last_version = self._read()
            except Exception as failure:  # each waiter raises it as its own
                error = failure
            with self._lock:
                woken = [w for w in self._waiters if error is not None or w.minimum <= version]
                self._waiters.difference_update(woken)
                eager = any(w.eager for w in self._waiters)
            for waiter in woken:
                waiter.wake(version, error)
            pause = self._poll_seconds if eager else WATCH_POLL_SECONDS
            self._registered.wait(pause)  # a new waiter is looked at at once


def _waking(loop: asyncio.AbstractEventLoop, future: asyncio.Future[int]) -> Wake:
    """A `Wake` that settles `future` on its event loop (the poller runs on its own thread)."""

    def settle(version: int, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(version)

    def wake(version: int, error: BaseException | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(settle, version, error)

    return wake
