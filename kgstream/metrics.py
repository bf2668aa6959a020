"""Prometheus metrics for the indexer and the gateway.

Every `Metrics` owns its own `CollectorRegistry` instead of the process-global
one, so tests (and a process running both the indexer and the gateway) can hold
several side by side without "duplicated timeseries" errors. Label sets that are
closed (LLM call kinds, document statuses) are created up front, so their
series read 0 from the start instead of appearing only after the first event:
Prometheus rates and alerts over a series that does not exist yet are silent.

The index's state (`index_version`, `documents_by_status`, `consumer_lag`) is read from
Redis at each scrape (`watch_index`), so it is right from the first scrape after a restart
and under `kgstream serve`, which commits nothing. Process metrics (CPU, memory, open
files) and Python's are exported too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from connectors.redis.ports import GraphRecords, IndexControl
from dataflow.core.documents import DocumentStatus, FailureKind

_LOGGER = logging.getLogger(__name__)

NAMESPACE = "kgstream"
LLM_CALL_KINDS = ("extract", "summary", "answer", "keywords")
FAILURE_KINDS = tuple(kind.value for kind in FailureKind)  # `failures_total`'s labels
# Event time to visible in query results: the goal is under a second, LLM time aside.
FRESHNESS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)
QUERY_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    """The metric families kgstream exports, in one private registry.

    Use the attributes directly (`metrics.events_in.labels(source="kafka").inc()`);
    they are plain prometheus-client objects.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        registry, ns = self.registry, NAMESPACE
        self.events_in = Counter(
            "events_in",
            "Document-change events read, by source (kafka, folder, ingest).",
            ["source"],
            namespace=ns,
            registry=registry,
        )
        self.chunks_extracted = Counter(
            "chunks_extracted",
            "Chunks sent through entity and relation extraction.",
            namespace=ns,
            registry=registry,
        )
        self.llm_calls = Counter(
            "llm_calls",
            "LLM calls made, by kind (extract, summary, answer, keywords); cache hits excluded.",
            ["kind"],
            namespace=ns,
            registry=registry,
        )
        self.llm_cache_hits = Counter(
            "llm_cache_hits",
            "LLM calls answered from the cache instead of the endpoint.",
            namespace=ns,
            registry=registry,
        )
        self.embedding_calls = Counter(
            "embedding_calls",
            "Embedding batches computed.",
            namespace=ns,
            registry=registry,
        )
        self.failures = Counter(
            "failures",
            f"Documents that failed, by kind of reason ({', '.join(FAILURE_KINDS)}).",
            ["reason_kind"],
            namespace=ns,
            registry=registry,
        )
        self.freshness_seconds = Histogram(
            "freshness_seconds",
            "Seconds from a document event's time to its changes being visible to queries.",
            namespace=ns,
            registry=registry,
            buckets=FRESHNESS_BUCKETS,
        )
        self.query_latency_seconds = Histogram(
            "query_latency_seconds",
            "Gateway query latency, by retrieval mode.",
            ["mode"],
            namespace=ns,
            registry=registry,
            buckets=QUERY_LATENCY_BUCKETS,
        )
        self.dead_letters = Counter(
            "dead_letters",
            "Events that could not be decoded and were set aside.",
            namespace=ns,
            registry=registry,
        )
        self.store_outages = Counter(
            "store_outages",
            "Times the indexer found Redis or the vector store unreachable and waited.",
            namespace=ns,
            registry=registry,
        )
        self.store_waiting = Gauge(
            "store_waiting",
            "1 while the indexer waits for an unreachable store (its writes are held), else 0.",
            namespace=ns,
            registry=registry,
        )
        # Per Bytewax worker (its index in the cluster): commits are partitioned, each worker
        # writing the entities, relations and documents it owns, and these show each one's share.
        self.worker_writes = Counter(
            "worker_writes",
            "Store writes (one transaction each) made by each Bytewax worker.",
            ["worker"],
            namespace=ns,
            registry=registry,
        )
        self.worker_records_written = Counter(
            "worker_records_written",
            "Records each Bytewax worker wrote or deleted, by kind (entity, relation, chunk, "
            "document).",
            ["worker", "kind"],
            namespace=ns,
            registry=registry,
        )
        self.worker_documents_completed = Counter(
            "worker_documents_completed",
            "Documents each Bytewax worker turned PROCESSED or FAILED, or deleted.",
            ["worker"],
            namespace=ns,
            registry=registry,
        )
        self.worker_write_seconds = Counter(
            "worker_write_seconds",
            "Seconds each Bytewax worker spent writing to the stores (wall time).",
            ["worker"],
            namespace=ns,
            registry=registry,
        )
        self.worker_commit_cpu_seconds = Counter(
            "worker_commit_cpu_seconds",
            "CPU seconds each Bytewax worker spent in the commit protocol's bookkeeping "
            "(gathering a document's messages, building write batches), store I/O excluded.",
            ["worker"],
            namespace=ns,
            registry=registry,
        )
        self.source_holding = Gauge(
            "source_holding",
            "1 while the watched folder is missing and the indexer holds its documents, else 0.",
            namespace=ns,
            registry=registry,
        )
        for kind in LLM_CALL_KINDS:
            self.llm_calls.labels(kind=kind)
        for reason_kind in FAILURE_KINDS:
            self.failures.labels(reason_kind=reason_kind)
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)

    def watch_index(
        self, graph: GraphRecords, control: IndexControl, topic: str | None = None
    ) -> None:
        """Export the index state of `graph` and `control` (read at each scrape); `topic`
        labels the consumer lag (the Kafka topic the indexer reads)."""
        self.registry.register(IndexStateCollector(graph, control, topic or ""))

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format (what GET /metrics returns)."""
        return generate_latest(self.registry)


class IndexStateCollector(Collector):
    """`index_version`, `documents_by_status` and `consumer_lag`, read from Redis when
    scraped; while Redis cannot be reached they are left out (the scrape still answers)."""

    def __init__(self, graph: GraphRecords, control: IndexControl, topic: str) -> None:
        self._graph, self._control, self._topic = graph, control, topic

    def describe(self) -> Iterator[Metric]:
        return self._families({}, 0, {})

    def collect(self) -> Iterator[Metric]:
        try:
            version = self._graph.version()
            counts = self._graph.status_counts()
            lag = self._control.consumer_lag()
        except Exception as error:  # a Redis outage: health and logs report it
            _LOGGER.debug("index state not exported: %s", error)
            return iter(())
        return self._families(counts, version, lag)

    def _families(
        self, counts: dict[DocumentStatus, int], version: int, lag: dict[int, int]
    ) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            f"{NAMESPACE}_index_version", "The index version queries currently see.", version
        )
        statuses = GaugeMetricFamily(
            f"{NAMESPACE}_documents_by_status",
            "Documents currently in each status.",
            labels=["status"],
        )
        for status in DocumentStatus:
            statuses.add_metric([status.value], counts.get(status, 0))
        yield statuses
        lags = GaugeMetricFamily(
            f"{NAMESPACE}_consumer_lag",
            "Kafka messages between the indexer's position and the partition end.",
            labels=["topic", "partition"],
        )
        for partition, value in lag.items():
            lags.add_metric([self._topic, str(partition)], value)
        yield lags


@dataclass(frozen=True)
class MetricsServer:
    """A running /metrics HTTP server; `stop()` releases its port."""

    host: str
    port: int
    _httpd: WSGIServer
    _thread: threading.Thread

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


def parse_metrics_address(address: str) -> tuple[str, int]:
    """Split `HOST:PORT` (or `[IPv6]:PORT`) and check the port, naming the setting."""
    host, sep, port_text = address.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(
            f"metrics_address = {address!r} is not HOST:PORT with a port from 0 to 65535; "
            "set KGSTREAM_METRICS_ADDRESS like 127.0.0.1:9100 (port 0 picks a free port)"
        )
    return host, int(port_text)


def start_metrics_server(address: str, metrics: Metrics) -> MetricsServer:
    """Serve `metrics` at http://HOST:PORT/metrics from a daemon thread.

    Port 0 binds an ephemeral port; the returned server's `port` says which.
    """
    host, port = parse_metrics_address(address)
    try:
        httpd, thread = start_http_server(port, addr=host, registry=metrics.registry)
    except OSError as error:
        raise OSError(
            f"cannot serve metrics on {address}: {error}; "
            "choose another KGSTREAM_METRICS_ADDRESS or stop what holds the port"
        ) from error
    return MetricsServer(host=host, port=httpd.server_port, _httpd=httpd, _thread=thread)
