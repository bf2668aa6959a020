"""The `services` marker: the tests that start Kafka, Redis, the test LLM server or any
other program, which `scripts/test --fast` leaves out.

A test that requests a service fixture, directly or through another fixture, is marked
here. A test that starts a program in any other way says so with `@pytest.mark.services`;
until it does, starting the program fails it, so the fast subset cannot come to start
services unseen. Registered in tests/conftest.py."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

# `redis_url` (tests/connectors/redis/conftest.py) asks for a Redis backend by name, which
# pytest cannot see in the fixture closure.
SERVICE_FIXTURES = frozenset(
    {
        "kafka_broker",
        "redis_server",
        "redis_cluster",
        "embedded_redis",
        "llm_server",
        "redis_url",
        "qdrant_server",
        "qdrant_cluster",
    }
)

# The audit events of starting a program (https://docs.python.org/3/library/audit_events.html).
_PROGRAM_EVENTS = frozenset(
    {"subprocess.Popen", "os.system", "os.posix_spawn", "os.spawn", "os.exec", "os.fork"}
)
_unmarked: list[str] = []  # the node id of the unmarked test setting up or running, if any


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.services)


def _refuse_programs(event: str, args: tuple[object, ...]) -> None:
    if _unmarked and event in _PROGRAM_EVENTS:
        program = args[0] if args else ""
        raise RuntimeError(
            f"{_unmarked[0]} starts a program ({event} {program!r}) but is not marked "
            "`services`: decorate it with @pytest.mark.services (scripts/test --fast runs "
            "no services)"
        )


sys.addaudithook(_refuse_programs)


def _checked(item: pytest.Item) -> Iterator[None]:
    """Refuse programs while an unmarked test sets up or runs. Its teardown is left alone:
    the last test's teardown also stops the session's services."""
    _unmarked[:] = [] if item.get_closest_marker("services") else [item.nodeid]
    try:
        yield
    finally:
        _unmarked.clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    yield from _checked(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    yield from _checked(item)
