"""The retry-request input against a real redis-server: what it reads, where it ends, and
that an unreachable Redis makes it wait instead of ending the dataflow."""

import pytest

from connectors.redis.graph_store import GraphStore
from connectors.redis.index_control import RedisIndexControl
from connectors.redis.retry_requests import RetryRequestSource
from tests.support.ports import free_port


@pytest.fixture
def graph(redis_server):
    store = GraphStore.from_url(redis_server.url, "retry-requests-test")
    yield store
    store.clear()


def test_a_one_shot_partition_reads_the_requests_there_at_its_first_read_then_ends(graph):
    control = RedisIndexControl(graph.client, graph.workspace)
    control.request_retry(1.0)
    control.request_retry(2.0)
    source = RetryRequestSource(graph, control, follow=False)
    part = source.build_part("retries", "retry-requests", None)

    assert part.next_batch() == []  # no FAILED document to retry, but both requests are read
    control.request_retry(3.0)  # after the first read: for the next run
    with pytest.raises(StopIteration):
        part.next_batch()
    resumed = RetryRequestSource(graph, control, follow=True).build_part(
        "retries", "retry-requests", part.snapshot()
    )
    assert resumed.next_batch() == [] and resumed.snapshot() > part.snapshot()


def test_an_unreachable_redis_makes_the_partition_wait_not_fail():
    port = free_port()  # a port nobody listens on once the probe closes
    graph = GraphStore.from_url(f"redis://127.0.0.1:{port}/0", "retry-requests-test")
    control = RedisIndexControl(graph.client, graph.workspace)
    for follow in (True, False):
        source = RetryRequestSource(graph, control, follow=follow)
        part = source.build_part("retries", "retry-requests", "0")

        assert part.next_batch() == []
        assert part.next_awake() is not None
        assert part.snapshot() == "0"
