import itertools
import re
import urllib.request
from collections.abc import Iterator

import pytest

from connectors.redis.graph_store import GraphStore
from connectors.redis.index_control import RedisIndexControl
from dataflow.core.commit import CommitBatch, CompletedDocument, GraphBatch
from dataflow.core.documents import DocumentRecord, DocumentStatus, FailureKind
from dataflow.core.messages import Ticket
from kgstream.metrics import (
    FAILURE_KINDS,
    Metrics,
    MetricsServer,
    parse_metrics_address,
    start_metrics_server,
)
from kgstream.telemetry import IndexerMetrics

_workspaces = itertools.count()


@pytest.fixture
def served() -> Iterator[tuple[Metrics, MetricsServer]]:
    metrics = Metrics()
    server = start_metrics_server("127.0.0.1:0", metrics)
    try:
        yield metrics, server
    finally:
        server.stop()


def scrape(server: MetricsServer) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as reply:
        assert reply.status == 200
        return reply.read().decode()


def sample(text: str, name: str, labels: str = "") -> float:
    """The value of one exposed series; fails when the series is missing."""
    series = f"{name}{{{labels}}}" if labels else name
    match = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
    assert match, f"{series} not in the exposition:\n{text}"
    return float(match.group(1))


def test_port_zero_binds_an_ephemeral_port_that_serves_metrics(served):
    _, server = served
    assert server.port > 0
    assert "# TYPE kgstream_events_in_total counter" in scrape(server)


def test_updates_show_in_the_scrape_with_their_labels_and_values(served):
    metrics, server = served
    metrics.events_in.labels(source="kafka").inc(3)
    metrics.events_in.labels(source="folder").inc()
    metrics.chunks_extracted.inc(12)
    metrics.llm_calls.labels(kind="extract").inc(5)
    metrics.llm_cache_hits.inc(2)
    metrics.embedding_calls.inc(4)
    metrics.failures.labels(reason_kind="too_large").inc()
    metrics.dead_letters.inc()

    text = scrape(server)

    assert sample(text, "kgstream_events_in_total", 'source="kafka"') == 3
    assert sample(text, "kgstream_events_in_total", 'source="folder"') == 1
    assert sample(text, "kgstream_chunks_extracted_total") == 12
    assert sample(text, "kgstream_llm_calls_total", 'kind="extract"') == 5
    assert sample(text, "kgstream_llm_cache_hits_total") == 2
    assert sample(text, "kgstream_embedding_calls_total") == 4
    assert sample(text, "kgstream_failures_total", 'reason_kind="too_large"') == 1
    assert sample(text, "kgstream_dead_letters_total") == 1


def test_histograms_count_observations_into_buckets(served):
    metrics, server = served
    metrics.freshness_seconds.observe(0.3)
    metrics.freshness_seconds.observe(2.0)
    metrics.query_latency_seconds.labels(mode="mix").observe(0.02)

    text = scrape(server)

    assert sample(text, "kgstream_freshness_seconds_count") == 2
    assert sample(text, "kgstream_freshness_seconds_sum") == pytest.approx(2.3)
    assert sample(text, "kgstream_freshness_seconds_bucket", 'le="0.5"') == 1
    assert sample(text, "kgstream_freshness_seconds_bucket", 'le="+Inf"') == 2
    assert sample(text, "kgstream_query_latency_seconds_count", 'mode="mix"') == 1
    assert sample(text, "kgstream_query_latency_seconds_bucket", 'le="0.025",mode="mix"') == 1


def test_closed_label_sets_are_exposed_as_zero_before_any_event():
    text = Metrics().exposition().decode()
    for kind in ("extract", "summary", "answer", "keywords"):
        assert sample(text, "kgstream_llm_calls_total", f'kind="{kind}"') == 0
    for kind in FAILURE_KINDS:
        assert sample(text, "kgstream_failures_total", f'reason_kind="{kind}"') == 0
    assert set(FAILURE_KINDS) == {kind.value for kind in FailureKind}


def test_process_metrics_are_exported():
    text = Metrics().exposition().decode()
    assert sample(text, "process_resident_memory_bytes") > 0
    assert sample(text, "process_cpu_seconds_total") >= 0
    assert "python_info{" in text


def test_the_index_state_is_read_from_redis_at_every_scrape(redis_server):
    graph = GraphStore.from_url(redis_server.url, workspace=f"metrics{next(_workspaces)}")
    try:
        graph.apply(
            GraphBatch(
                document_upserts=(
                    DocumentRecord("a.md", DocumentStatus.PROCESSED, "a.md", "sha256:1", ()),
                    DocumentRecord("b.md", DocumentStatus.FAILED, "b.md", "sha256:2", ()),
                )
            )
        )
        control = RedisIndexControl(graph.client, graph.workspace)
        control.set_consumer_lag({0: 4, 2: 9})
        metrics = Metrics()  # as after a restart: nothing was counted in this process
        metrics.watch_index(graph, control, "docs")
        text = metrics.exposition().decode()
        assert sample(text, "kgstream_index_version") == graph.version() == 1
        assert sample(text, "kgstream_documents_by_status", 'status="PROCESSED"') == 1
        assert sample(text, "kgstream_documents_by_status", 'status="FAILED"') == 1
        assert sample(text, "kgstream_documents_by_status", 'status="PENDING"') == 0
        assert sample(text, "kgstream_consumer_lag", 'partition="2",topic="docs"') == 9
        graph.apply(GraphBatch(document_deletes=("b.md",)))
        text = metrics.exposition().decode()
        assert sample(text, "kgstream_index_version") == 2
        assert sample(text, "kgstream_documents_by_status", 'status="FAILED"') == 0
    finally:
        graph.clear()
        graph.close()


def test_a_failed_document_is_counted_under_the_kind_it_failed_with():
    metrics = Metrics()
    failed = DocumentRecord(
        "a.md",
        DocumentStatus.FAILED,
        reason="extraction failed for 1 chunk(s): HTTP 500",
        failure_kind=FailureKind.EXTRACTION,
        failed_chunk_ids=("c1",),
    )
    done = DocumentRecord("b.md", DocumentStatus.PROCESSED)
    completed = tuple(
        CompletedDocument(Ticket(record.doc_id, "t"), record, 0.0) for record in (failed, done)
    )

    IndexerMetrics(metrics).committed(CommitBatch(completed=completed))

    text = metrics.exposition().decode()
    assert sample(text, "kgstream_failures_total", 'reason_kind="extraction"') == 1
    assert (
        sum(sample(text, "kgstream_failures_total", f'reason_kind="{k}"') for k in FAILURE_KINDS)
        == 1
    )


def test_each_metrics_object_has_its_own_registry():
    first, second = Metrics(), Metrics()
    first.dead_letters.inc(5)
    assert sample(first.exposition().decode(), "kgstream_dead_letters_total") == 5
    assert sample(second.exposition().decode(), "kgstream_dead_letters_total") == 0


def test_stopping_the_server_releases_its_port():
    server = start_metrics_server("127.0.0.1:0", Metrics())
    port = server.port
    server.stop()
    again = start_metrics_server(f"127.0.0.1:{port}", Metrics())
    try:
        assert again.port == port
    finally:
        again.stop()


def test_an_address_in_use_is_an_error_naming_it(served):
    _, server = served
    with pytest.raises(OSError, match=f"cannot serve metrics on 127.0.0.1:{server.port}"):
        start_metrics_server(f"127.0.0.1:{server.port}", Metrics())


@pytest.mark.parametrize("address", ["9100", "localhost", ":9100", "host:port", "h:70000"])
def test_malformed_addresses_name_the_setting(address):
    with pytest.raises(ValueError, match="metrics_address"):
        parse_metrics_address(address)


def test_ipv6_addresses_lose_their_brackets():
    assert parse_metrics_address("[::1]:9100") == ("::1", 9100)
