import itertools

import pytest

from tests.support.wait import wait_until


def test_returns_the_first_truthy_value_of_the_condition() -> None:
    calls = itertools.count(1)
    assert wait_until(lambda: max(next(calls) - 2, 0), 30, "the third call", interval=0) == 1


def test_a_timeout_names_what_was_awaited_and_the_last_value_seen() -> None:
    with pytest.raises(AssertionError) as failure:
        wait_until(lambda: [], 0.05, "the queue to fill", interval=0.01)
    assert (
        str(failure.value) == "timed out after 0.05 s waiting for the queue to fill; last seen: []"
    )


def test_an_ignored_error_counts_as_not_yet_and_is_shown_if_it_never_clears() -> None:
    attempts = itertools.count(1)

    def refused_twice() -> str:
        if next(attempts) < 3:
            raise ConnectionRefusedError("still starting")
        return "up"

    assert wait_until(refused_twice, 30, "the server", interval=0, ignoring=(OSError,)) == "up"

    def refused() -> str:
        raise ConnectionRefusedError("still starting")

    with pytest.raises(
        AssertionError, match=r"last seen: ConnectionRefusedError\('still starting'\)"
    ):
        wait_until(refused, 0.05, "the server", interval=0.01, ignoring=(OSError,))


def test_any_other_error_ends_the_wait_at_once() -> None:
    def broken() -> bool:
        raise ValueError("not a waiting matter")

    with pytest.raises(ValueError, match="not a waiting matter"):
        wait_until(broken, 30, "anything", ignoring=(OSError,))


class LongAndFalsy:
    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "x" * 10_000


def test_a_long_last_value_is_cut_short() -> None:
    with pytest.raises(AssertionError) as failure:
        wait_until(LongAndFalsy, 0.01, "nothing", interval=0.01)
    assert str(failure.value).endswith("last seen: " + "x" * 500 + "...")
