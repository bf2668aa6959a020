"""The one retry policy (connectors/retry.py) as a pure object: counts, delays, what it raises."""

from __future__ import annotations

import pytest

from connectors.retry import Backoff, Retry


class Flaky:
    """Fails `failures` times with `error`, then returns "done"."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures, self.error, self.calls = failures, error, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "done"


class GaveUp(Exception):
    pass


def give_up(error: Exception, attempts: int) -> Exception:
    return GaveUp(f"{attempts} attempts: {error}")


def test_retries_count_after_the_first_try_and_sleep_the_backoff() -> None:
    slept: list[float] = []
    call = Flaky(2, ConnectionError("down"))
    retry = Retry(Backoff(base=0.1, cap=1.0), retries=2, sleep=slept.append)

    assert retry.call_with_retry(call, give_up) == "done"
    assert (call.calls, slept) == (3, [0.1, 0.2])


def test_out_of_retries_raises_what_fail_builds_from_the_last_error() -> None:
    call = Flaky(5, ConnectionError("down"))
    retry = Retry(Backoff(base=0.0, cap=0.0), retries=1, sleep=lambda _: None)

    with pytest.raises(GaveUp, match="2 attempts: down") as caught:
        retry.call_with_retry(call, give_up)
    assert isinstance(caught.value.__cause__, ConnectionError)


def test_a_permanent_error_is_not_retried_and_an_unsupported_one_propagates() -> None:
    permanent = Retry(
        Backoff(0.0, 0.0), retries=3, is_transient=lambda e: False, sleep=lambda _: None
    )
    with pytest.raises(GaveUp, match="1 attempts"):
        permanent.call_with_retry(Flaky(1, ValueError("bad")), give_up)

    narrow = Retry(Backoff(0.0, 0.0), retries=3, supported_errors=(ConnectionError,))
    with pytest.raises(KeyError):
        narrow.call_with_retry(Flaky(1, KeyError("not ours")), give_up)


def test_a_server_given_wait_stretches_the_delay_up_to_the_cap() -> None:
    retry = Retry(Backoff(base=0.5, cap=2.0), retries=3, retry_after=lambda e: float(str(e)))

    assert retry.delay(Exception("0.1"), 0) == 0.5  # never sooner than the backoff
    assert retry.delay(Exception("1.5"), 0) == 1.5
    assert retry.delay(Exception("60"), 0) == 2.0


def test_negative_retries_are_rejected() -> None:
    with pytest.raises(ValueError, match="retries must be >= 0"):
        Retry(Backoff(0.0, 0.0), retries=-1)
