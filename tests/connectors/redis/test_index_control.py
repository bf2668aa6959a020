"""Contract suite for the control plane in Redis (`RedisIndexControl`, the `IndexControl`
port): run against every backend of conftest.py, beside the graph records of the same
workspace."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from connectors.redis.graph_store import GraphStore
from connectors.redis.index_control import RedisIndexControl
from connectors.redis.ports import TrackedDocument

_workspaces = itertools.count()


@pytest.fixture
def graph(redis_url: str) -> Iterator[GraphStore]:
    """The graph records of a fresh workspace, dropped afterwards."""
    store = GraphStore.from_url(redis_url, workspace=f"control{next(_workspaces)}")
    try:
        yield store
    finally:
        store.clear()
        store.close()


@pytest.fixture
def control(graph: GraphStore) -> RedisIndexControl:
    return RedisIndexControl(graph.client, graph.workspace)


def test_dead_letters_are_listed_newest_first_once_each_and_bounded(graph: GraphStore) -> None:
    control = RedisIndexControl(graph.client, graph.workspace, dead_letters_kept=3)
    assert control.dead_letters() == (0, [])
    for offset in range(4):
        control.record_dead_letter(f"kafka:t/0@{offset}", f"bad {offset}", at=100.0 + offset)
    control.record_dead_letter("kafka:t/0@3", "bad 3", at=999.0)  # a replay: one entry, first time

    assert control.dead_letters(limit=2) == (
        3,
        [("kafka:t/0@3", "bad 3", 103.0), ("kafka:t/0@2", "bad 2", 102.0)],
    )
    assert control.dead_letters(limit=0) == (3, [])
    graph.clear()
    assert control.dead_letters() == (0, [])


def test_the_first_snapshot_dictionary_kept_is_the_one_every_process_gets(
    control: RedisIndexControl,
) -> None:
    """Processes of a cluster may each train one at the end of a run: all must use one."""
    assert control.snapshot_dictionary() is None
    first, second = bytes(range(256)) * 4, b"\x00another\xff" * 50
    assert control.keep_snapshot_dictionary(first) == first
    assert control.keep_snapshot_dictionary(second) == first
    assert control.snapshot_dictionary() == first


def test_retry_requests_consumer_lag_and_the_source_hold_round_trip(
    control: RedisIndexControl,
) -> None:
    assert control.last_retry_request_id() == "0"
    first, second = control.request_retry(1.0), control.request_retry(2.0)
    assert control.retry_requests_after("0", 10) == [first, second]
    assert control.retry_requests_after(first, 10) == [second]
    assert control.last_retry_request_id() == second
    control.set_consumer_lag({0: 5, 2: 0})
    assert control.consumer_lag() == {0: 5, 2: 0}
    control.set_consumer_lag({})
    assert control.consumer_lag() == {}
    control.set_source_hold("watched folder /x is missing")
    assert control.source_hold() == "watched folder /x is missing"
    control.set_source_hold(None)
    assert control.source_hold() is None


def test_the_control_plane_never_moves_the_index_version(
    graph: GraphStore, control: RedisIndexControl
) -> None:
    control.set_consumer_lag({0: 1})
    control.set_source_hold("held")
    control.record_dead_letter("kafka:t/0@0", "bad", at=1.0)
    control.request_retry(1.0)
    control.keep_snapshot_dictionary(b"dictionary")

    assert graph.version() == 0


def test_a_track_is_kept_whole_for_every_reader_until_it_expires(
    graph: GraphStore, control: RedisIndexControl
) -> None:
    published = [
        TrackedDocument("notes/{a}.md", "sha256:" + "a" * 64, 1700000000.25),
        TrackedDocument("café %7B.md", "", 1700000001.5),
    ]
    assert control.tracked_documents("insert_1") is None
    control.remember_track("insert_1", published, keep_seconds=60)

    other_gateway = RedisIndexControl(graph.client, graph.workspace)
    assert other_gateway.tracked_documents("insert_1") == published
    assert control.tracked_documents("insert_{1}") is None  # braces cannot reach another key
    ttl = graph.client.ttl(control.keys.track("insert_1"))
    assert 0 < ttl <= 60
    graph.clear()
    assert control.tracked_documents("insert_1") is None
