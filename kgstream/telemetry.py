"""Wiring the Prometheus metrics (kgstream/metrics.py) to the indexer, the LLM client,
the Kafka source and the gateway. Nothing here changes behaviour; it only counts."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from connectors.embeddings.base import Embedder
from connectors.redis.ports import IndexControl
from dataflow.core.commit import CommitBatch
from dataflow.core.messages import SourceEvent
from gateway.types import (
    Answer,
    AnswerStream,
    CallDeadline,
    QueryParams,
    RequestLimits,
    Retrieval,
)
from gateway.version_waits import VersionWaits
from kgstream.metrics import Metrics

_LOGGER = logging.getLogger(__name__)


class IndexerMetrics:
    """An `IndexObserver` that counts events, chunks, embeddings, failures and freshness
    (the index-state gauges are read from Redis at scrape time: `Metrics.watch_index`)."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def event_received(self, event: SourceEvent) -> None:
        self.metrics.events_in.labels(source=event.origin.split(":", 1)[0]).inc()

    def chunks_extracted(self, count: int) -> None:
        self.metrics.chunks_extracted.inc(count)

    def embedding_call(self, texts: int) -> None:
        self.metrics.embedding_calls.inc()

    def committed(self, batch: CommitBatch) -> None:
        now = time.time()
        for document in batch.completed:
            if document.event_time:
                self.metrics.freshness_seconds.observe(max(0.0, now - document.event_time))
            kind = document.record.failure_kind if document.record is not None else None
            if kind is not None:  # FAILED
                self.metrics.failures.labels(reason_kind=kind.value).inc()

    def wrote(self, worker: int, batch: CommitBatch, seconds: float) -> None:
        label = str(worker)
        metrics = self.metrics
        metrics.worker_writes.labels(worker=label).inc()
        metrics.worker_write_seconds.labels(worker=label).inc(seconds)
        for kind, count in batch.size().items():
            metrics.worker_records_written.labels(worker=label, kind=kind).inc(count)
        if batch.completed:
            metrics.worker_documents_completed.labels(worker=label).inc(len(batch.completed))

    def commit_cpu(self, worker: int, seconds: float) -> None:
        self.metrics.worker_commit_cpu_seconds.labels(worker=str(worker)).inc(seconds)

    def store_outage(self, reason: str | None) -> None:
        """`OutageWait.on_outage`: a store outage began (its reason) or ended (None)."""
        if reason is None:
            self.metrics.store_waiting.set(0)
        else:
            self.metrics.store_waiting.set(1)
            self.metrics.store_outages.inc()


def observe_llm(metrics: Metrics) -> Any:
    """A `ChatClient.observer` counting calls by kind, and cache hits."""

    def observe(kind: str, cached: bool) -> None:
        if cached:
            metrics.llm_cache_hits.inc()
        else:
            metrics.llm_calls.labels(kind=kind).inc()

    return observe


def record_dead_letter(control: IndexControl, metrics: Metrics | None) -> Any:
    """The Kafka source's dead-letter hook: counted in the metrics and listed in Redis for
    `kgstream status`. A Redis outage loses the listing, never the stream."""

    def on_dead_letter(letter: Any) -> None:
        if metrics is not None:
            metrics.dead_letters.inc()
        try:
            control.record_dead_letter(letter.origin, letter.reason, time.time())
        except Exception as error:  # the letter is logged and counted already
            _LOGGER.warning("dead letter %s not listed for status: %s", letter.origin, error)

    return on_dead_letter


class MeteredEngine:
    """The query engine with latency by mode recorded (the gateway's `Engine`)."""

    def __init__(self, engine: Any, metrics: Metrics) -> None:
        self._engine = engine
        self._metrics = metrics

    @property
    def limits(self) -> RequestLimits:
        limits: RequestLimits = self._engine.limits
        return limits

    @property
    def embedder(self) -> Embedder:
        embedder: Embedder = self._engine.embedder
        return embedder

    @property
    def version_waits(self) -> VersionWaits:
        waits: VersionWaits = self._engine.version_waits
        return waits

    def validate(self, params: QueryParams) -> None:
        self._engine.validate(params)

    def retrieve(
        self, params: QueryParams, deadline: float | CallDeadline | None = None
    ) -> Retrieval:
        with self._timed(params):
            result: Retrieval = self._engine.retrieve(params, deadline)
            return result

    def answer(self, params: QueryParams, deadline: float | CallDeadline | None = None) -> Answer:
        with self._timed(params):
            result: Answer = self._engine.answer(params, deadline)
            return result

    def stream_answer(
        self, params: QueryParams, deadline: float | CallDeadline | None = None
    ) -> tuple[Retrieval, AnswerStream]:
        with self._timed(params):
            result: tuple[Retrieval, AnswerStream] = self._engine.stream_answer(params, deadline)
            return result

    def _timed(self, params: QueryParams) -> Any:
        return self._metrics.query_latency_seconds.labels(mode=params.mode.value).time()


class ConsumerLagReporter:
    """Every `interval` seconds: Kafka end offsets minus the indexer's positions, to the
    control plane (where `kgstream status` and the `consumer_lag` gauge read it)."""

    def __init__(
        self,
        source: Any,
        bootstrap_servers: str,
        topic: str,
        control: IndexControl,
        metrics: Metrics | None,
        interval: float = 2.0,
    ) -> None:
        self._source = source
        self._bootstrap, self._topic = bootstrap_servers, topic
        self._control, self._metrics = control, metrics
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kgstream-lag", daemon=True)

    def start(self) -> ConsumerLagReporter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        from kafka import TopicPartition

        from connectors.kafka.source import new_consumer, topic_partitions

        consumer = None  # one consumer for the reporter's life, made again after an error
        while not self._stop.wait(self._interval):
            try:
                if consumer is None:
                    consumer = new_consumer(self._bootstrap)
                tps = [
                    TopicPartition(self._topic, n) for n in topic_partitions(consumer, self._topic)
                ]
                ends = consumer.end_offsets(tps)
                positions = self._source.positions()
                lag = {
                    tp.partition: max(0, int(end) - positions.get(tp.partition, 0))
                    for tp, end in ends.items()
                }
                self._control.set_consumer_lag(lag)  # the metrics read it from there
            except Exception:  # a broker hiccup must not kill the indexer; next tick retries
                if consumer is not None:
                    consumer.close()
                consumer = None
        if consumer is not None:
            consumer.close()


def record_source_hold(control: IndexControl, metrics: Metrics | None) -> Any:
    """The folder source's `on_hold` hook: the `source_holding` gauge, and the reason kept in
    Redis for `kgstream status`. A Redis outage loses the record, never the stream."""

    def on_hold(reason: str | None) -> None:
        if metrics is not None:
            metrics.source_holding.set(0 if reason is None else 1)
        try:
            control.set_source_hold(reason)
        except Exception as error:  # the hold is logged by the source already
            _LOGGER.warning("source hold not recorded for status: %s", error)

    return on_hold
