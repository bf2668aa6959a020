"""The Kafka source and producer against a real Apache Kafka broker, inside real dataflows."""

from __future__ import annotations

import itertools
import json
import logging
import random
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import bytewax.operators as op
import pytest
from bytewax.dataflow import Dataflow
from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.testing import TestingSink, cluster_main, run_main
from kafka import KafkaProducer, TopicPartition

from connectors.kafka.codec import DecodedEvent, decode_message
from connectors.kafka.producer import DocumentEventProducer
from connectors.kafka.source import (
    DLQ_ORIGIN_HEADER,
    DLQ_REASON_HEADER,
    DeadLetter,
    KafkaDocumentSource,
    KafkaPartition,
    KafkaSourceOptions,
    ReplayProgress,
    measure_replay,
    new_consumer,
    topic_end_offsets,
)
from dataflow.core.documents import DocumentDelete, DocumentUpsert
from dataflow.core.messages import SourceEvent
from tests.support.kafka import KafkaBroker
from tests.support.wait import wait_until

PARTITIONS = 3
DEADLINE_S = 60.0
_topic_numbers = itertools.count()

Runner = Callable[..., None]


def run_one_worker(flow: Dataflow, recovery: RecoveryConfig | None = None) -> None:
    run_main(flow, recovery_config=recovery)


def run_two_workers(flow: Dataflow, recovery: RecoveryConfig | None = None) -> None:
    cluster_main(flow, [], 0, recovery_config=recovery, worker_count_per_proc=2)


RUNNERS = pytest.mark.parametrize(
    "runner", [run_one_worker, run_two_workers], ids=["1-worker", "2-workers"]
)


@pytest.fixture
def new_topic(kafka_broker: KafkaBroker, request: pytest.FixtureRequest) -> Callable[..., str]:
    """Creates topics named after the test, unique within the session's broker."""

    def create(partitions: int = PARTITIONS) -> str:
        base = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name).strip("-")[:150]
        name = f"{base}-{next(_topic_numbers)}"
        kafka_broker.create_topic(name, partitions)
        return name

    return create


@pytest.fixture
def raw_producer(kafka_broker: KafkaBroker) -> Iterator[KafkaProducer]:
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers, acks="all")
    yield producer
    producer.close()


@dataclass(frozen=True)
class Sent:
    doc_id: str
    kind: str  # "upsert" or "delete"
    content: bytes = b""


def produce_history(
    bootstrap: str, topic: str, raw: KafkaProducer, seed: int, count: int
) -> list[Sent]:
    """A seeded mix of protobuf and JSON upserts, protobuf deletes and tombstones."""
    rng = random.Random(seed)
    sent: list[Sent] = []
    with DocumentEventProducer(bootstrap, topic) as producer:
        for index in range(count):
            doc_id = f"doc-{seed}-{rng.randrange(8)}"
            form = rng.choice(["proto", "proto", "json", "proto-delete", "tombstone"])
            content = f"version {index} of {doc_id}"
            if form == "proto":
                producer.send(DocumentUpsert(doc_id, content, f"{doc_id}.md"))
            elif form == "json":
                value = {"doc_id": doc_id, "op": "UPSERT", "content": content}
                raw.send(topic, key=doc_id.encode(), value=json.dumps(value).encode()).get(10)
            elif form == "proto-delete":
                producer.send(DocumentDelete(doc_id))
            else:
                raw.send(topic, key=doc_id.encode(), value=None).get(10)
            if form in ("proto", "json"):
                sent.append(Sent(doc_id, "upsert", content.encode()))
            else:
                sent.append(Sent(doc_id, "delete"))
    return sent


def as_sent(event: SourceEvent) -> Sent:
    change = event.change
    if isinstance(change, DocumentDelete):
        return Sent(change.doc_id, "delete")
    content = change.content if isinstance(change.content, bytes) else change.content.encode()
    return Sent(change.doc_id, "upsert", content)


def by_document(items: list[Sent]) -> dict[str, list[Sent]]:
    grouped: dict[str, list[Sent]] = {}
    for item in items:
        grouped.setdefault(item.doc_id, []).append(item)
    return grouped


def origin_order(event: SourceEvent) -> tuple[int, int]:
    """(partition, offset) from ``kafka:<topic>/<partition>@<offset>``."""
    match = re.fullmatch(r"kafka:[^/]+/(\d+)@(\d+)", event.origin)
    if match is None:
        raise AssertionError(f"origin {event.origin!r} is not kafka:<topic>/<partition>@<offset>")
    return int(match.group(1)), int(match.group(2))


def replay(
    source: KafkaDocumentSource, runner: Runner, recovery: RecoveryConfig | None = None
) -> list[SourceEvent]:
    received: list[SourceEvent] = []
    flow = Dataflow("kafka_source_test")
    stream = op.input("kafka", flow, source)
    op.output("out", stream, TestingSink(received))
    runner(flow, recovery)
    return received


def replay_options(bootstrap: str, topic: str, **overrides: object) -> KafkaSourceOptions:
    return KafkaSourceOptions(bootstrap, topic, stop_at_end=True, **overrides)  # type: ignore[arg-type]


@RUNNERS
def test_replay_delivers_every_event_exactly_once_in_per_document_order(
    kafka_broker: KafkaBroker,
    new_topic: Callable[..., str],
    raw_producer: KafkaProducer,
    runner: Runner,
) -> None:
    topic = new_topic()
    bootstrap = kafka_broker.bootstrap_servers
    sent = produce_history(bootstrap, topic, raw_producer, seed=11, count=80)

    received = replay(KafkaDocumentSource(replay_options(bootstrap, topic)), runner)

    origins = [event.origin for event in received]
    assert len(origins) == len(set(origins)) == len(sent)
    # Workers interleave partitions; within a partition the source emits in offset order.
    received.sort(key=origin_order)
    assert by_document([as_sent(event) for event in received]) == by_document(sent)
    assert {origin_order(event)[0] for event in received} == set(range(PARTITIONS))


def test_tombstones_become_deletes_and_json_and_protobuf_both_decode(
    kafka_broker: KafkaBroker, new_topic: Callable[..., str], raw_producer: KafkaProducer
) -> None:
    topic = new_topic(partitions=1)
    bootstrap = kafka_broker.bootstrap_servers
    with DocumentEventProducer(bootstrap, topic) as producer:
        producer.send(DocumentUpsert("a", "from protobuf", "a.md"), event_time_ms=1_700_000_000_250)
    json_value = {"doc_id": "b", "op": "upsert", "content": "from JSON", "file_path": "b.txt"}
    raw_producer.send(topic, key=b"b", value=json.dumps(json_value).encode()).get(10)
    raw_producer.send(topic, key=b"a", value=None).get(10)
    before = time.time()

    received = replay(KafkaDocumentSource(replay_options(bootstrap, topic)), run_one_worker)

    assert [event.change for event in received] == [
        DocumentUpsert("a", b"from protobuf", "a.md"),
        DocumentUpsert("b", b"from JSON", "b.txt"),
        DocumentDelete("a"),
    ]
    assert [event.origin for event in received] == [f"kafka:{topic}/0@{n}" for n in range(3)]
    # event_time_ms when the producer set it, else the Kafka timestamp.
    assert received[0].event_time == pytest.approx(1_700_000_000.25)
    assert abs(received[1].event_time - before) < 30


def test_malformed_messages_go_to_the_dead_letter_topic_and_the_flow_goes_on(
    kafka_broker: KafkaBroker,
    new_topic: Callable[..., str],
    raw_producer: KafkaProducer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic, dlq_topic = new_topic(), new_topic(partitions=1)
    bootstrap = kafka_broker.bootstrap_servers
    sent = produce_history(bootstrap, topic, raw_producer, seed=5, count=30)
    garbage = b"\xff\xff\xff\xff\xff"
    bad_op = json.dumps({"doc_id": "bad-op", "op": "RENAME", "content": "x"}).encode()
    raw_producer.send(topic, key=b"garbage", value=garbage, headers=[("trace", b"t-1")]).get(10)
    raw_producer.send(topic, key=b"bad-op", value=bad_op).get(10)
    letters: list[DeadLetter] = []
    source = KafkaDocumentSource(
        replay_options(bootstrap, topic, dlq_topic=dlq_topic), on_dead_letter=letters.append
    )

    with caplog.at_level(logging.WARNING, logger="kgstream.kafka"):
        received = replay(source, run_two_workers)

    assert sorted(origin_order(e) for e in received) == sorted(set(map(origin_order, received)))
    assert sorted(map(as_sent, received), key=repr) == sorted(sent, key=repr)
    assert source.dead_letter_count() == 2
    reasons = {letter.key: letter.reason for letter in letters}
    assert "neither JSON nor" in reasons[b"garbage"]
    assert "op must be UPSERT or DELETE" in reasons[b"bad-op"]
    logged = [r.getMessage() for r in caplog.records if r.name == "kgstream.kafka"]
    for letter in letters:
        assert any(
            f"topic={topic} partition={letter.partition} offset={letter.offset}" in line
            and letter.reason in line
            for line in logged
        ), logged

    copies = consume_all(bootstrap, dlq_topic, expected=2)
    by_key = {record.key: record for record in copies}
    assert by_key[b"garbage"].value == garbage
    assert by_key[b"bad-op"].value == bad_op
    for key, record in by_key.items():
        headers = dict(record.headers)
        letter = next(letter for letter in letters if letter.key == key)
        assert headers[DLQ_REASON_HEADER].decode() == letter.reason
        assert headers[DLQ_ORIGIN_HEADER].decode() == letter.origin
    assert dict(by_key[b"garbage"].headers)["trace"] == b"t-1"


def consume_all(bootstrap: str, topic: str, expected: int) -> list[Any]:
    """Every record of a one-partition topic, once `expected` of them are readable."""
    consumer = new_consumer(bootstrap)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    records: list[Any] = []

    def read() -> bool:
        records.extend(consumer.poll(timeout_ms=200).get(tp, []))
        return len(records) >= expected

    try:
        wait_until(read, DEADLINE_S, f"{expected} records of {topic}", interval=0)
    finally:
        consumer.close()
    assert len(records) == expected, records
    return records


def test_resumed_replay_reads_only_events_produced_since_the_last_snapshot(
    kafka_broker: KafkaBroker,
    new_topic: Callable[..., str],
    raw_producer: KafkaProducer,
    tmp_path: Path,
) -> None:
    topic = new_topic()
    bootstrap = kafka_broker.bootstrap_servers
    init_db_dir(tmp_path, 1)
    recovery = RecoveryConfig(str(tmp_path))
    first = produce_history(bootstrap, topic, raw_producer, seed=1, count=30)
    first_run = replay(
        KafkaDocumentSource(replay_options(bootstrap, topic)), run_one_worker, recovery
    )
    assert sorted(map(as_sent, first_run), key=repr) == sorted(first, key=repr)

    second = produce_history(bootstrap, topic, raw_producer, seed=2, count=20)
    # A different worker count on resume: offsets come from the snapshots, not a group.
    second_run = replay(
        KafkaDocumentSource(replay_options(bootstrap, topic)), run_two_workers, recovery
    )

    assert sorted(map(as_sent, second_run), key=repr) == sorted(second, key=repr)
    assert not {e.origin for e in first_run} & {e.origin for e in second_run}


def test_partition_polls_without_blocking_and_waits_before_polling_an_idle_partition(
    kafka_broker: KafkaBroker, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=1)
    bootstrap = kafka_broker.bootstrap_servers
    with DocumentEventProducer(bootstrap, topic) as producer:
        producer.send(DocumentUpsert("old", "before the source started"))
        options = KafkaSourceOptions(bootstrap, topic, start="end")
        partition = KafkaDocumentSource(options).build_part("kafka", f"{topic}-0", None)
        try:
            began = time.monotonic()
            assert partition.next_batch() == []
            assert time.monotonic() - began < 0.5
            awake = partition.next_awake()
            assert awake is not None and awake > datetime.now(UTC)
            assert partition.snapshot() == 1

            producer.send(DocumentUpsert("new", "after"))
            events = poll_until_events(partition)
        finally:
            partition.close()
    assert [event.change.doc_id for event in events] == ["new"]
    assert events[0].origin == f"kafka:{topic}/0@1"
    assert partition.snapshot() == 2
    assert partition.next_awake() is None


def poll_until_events(partition: KafkaPartition) -> list[SourceEvent]:
    return wait_until(
        partition.next_batch,
        DEADLINE_S,
        f"an event at offset {partition.snapshot()}",
        interval=0.01,
    )


def test_partition_resumes_from_its_snapshot_offset(
    kafka_broker: KafkaBroker, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=1)
    bootstrap = kafka_broker.bootstrap_servers
    with DocumentEventProducer(bootstrap, topic) as producer:
        for n in range(4):
            producer.send(DocumentUpsert(f"d{n}", "text"))
    source = KafkaDocumentSource(replay_options(bootstrap, topic))
    partition = source.build_part("kafka", f"{topic}-0", 2)
    events: list[SourceEvent] = []

    def read_to_the_end() -> bool:
        try:
            events.extend(partition.next_batch())
        except StopIteration:
            return True
        return False

    try:
        wait_until(read_to_the_end, DEADLINE_S, "the end of the replay", interval=0.01)
    finally:
        partition.close()
    assert [event.change.doc_id for event in events] == ["d2", "d3"]
    assert source.positions() == {0: 4}


def test_a_consumer_reset_back_to_the_beginning_neither_repeats_nor_loses_events(
    kafka_broker: KafkaBroker, new_topic: Callable[..., str], caplog: pytest.LogCaptureFixture
) -> None:
    """kafka-python resets a partition it cannot validate after a broker restart to the
    earliest offset; the seek below does what that reset does to the consumer."""
    topic = new_topic(partitions=1)
    bootstrap = kafka_broker.bootstrap_servers
    with DocumentEventProducer(bootstrap, topic) as producer:
        for n in range(4):
            producer.send(DocumentUpsert(f"old-{n}", "text"))
    options = KafkaSourceOptions(bootstrap, topic)
    consumer = new_consumer(bootstrap, options.consumer_config)
    partition = KafkaPartition(options, 0, None, consumer=consumer)
    try:
        read = []
        while len(read) < 4:
            read.extend(poll_until_events(partition))
        consumer.seek(TopicPartition(topic, 0), 0)  # the reset
        with DocumentEventProducer(bootstrap, topic) as producer:
            producer.send(DocumentUpsert("new", "text"))
        with caplog.at_level(logging.WARNING, logger="kgstream.kafka"):
            after = poll_until_events(partition)
    finally:
        partition.close()
    assert [event.change.doc_id for event in after] == ["new"]
    assert partition.snapshot() == 5
    # One fetch may already bring the old records and the new one (skipped, then read), and
    # leave the consumer where the partition is; otherwise the move back is sought and said.
    if partition.position_resets:
        assert "moved back to offset 0" in caplog.text and "resuming at 4" in caplog.text


def test_producer_acks_each_send_and_keeps_one_document_in_one_partition(
    kafka_broker: KafkaBroker, new_topic: Callable[..., str]
) -> None:
    topic = new_topic()
    bootstrap = kafka_broker.bootstrap_servers
    with DocumentEventProducer(bootstrap, topic) as producer:
        first = producer.send(DocumentUpsert("same-doc", "one"), event_time_ms=5_000)
        second = producer.send(DocumentUpsert("same-doc", "two"))
        third = producer.send(DocumentDelete("same-doc"))
        others = {producer.send(DocumentUpsert(f"other-{n}", "x"))[0] for n in range(12)}
    assert first[0] == second[0] == third[0]
    assert (second[1], third[1]) == (first[1] + 1, first[1] + 2)
    assert len(others) > 1
    # The ack means it is on the broker: the log end is past the last offset.
    assert topic_end_offsets(bootstrap, topic)[first[0]] >= third[1] + 1
    consumer = new_consumer(bootstrap)
    tp = TopicPartition(topic, first[0])
    consumer.assign([tp])
    consumer.seek(tp, first[1])
    try:
        record = consumer.poll(timeout_ms=5_000, max_records=1)[tp][0]
    finally:
        consumer.close()
    assert decode_message(record.key, record.value) == DecodedEvent(
        DocumentUpsert("same-doc", b"one", "same-doc"), 5_000
    )


def test_replay_progress_counts_offsets_between_begin_and_end() -> None:
    progress = ReplayProgress(begin_offsets={0: 0, 1: 10, 2: 5}, end_offsets={0: 4, 1: 14, 2: 5})
    assert progress.total == 8
    assert progress.fraction_done({}) == 0.0
    assert progress.fraction_done({0: 2, 1: 12}) == 0.5
    assert progress.remaining({0: 2, 1: 12}) == 4
    # Messages written during the replay do not push past 100 %.
    assert progress.fraction_done({0: 9, 1: 20, 2: 7}) == 1.0
    assert ReplayProgress({}, {0: 0}).fraction_done({}) == 1.0


def test_replay_progress_reaches_one_when_a_replay_finishes(
    kafka_broker: KafkaBroker, new_topic: Callable[..., str], raw_producer: KafkaProducer
) -> None:
    topic = new_topic()
    bootstrap = kafka_broker.bootstrap_servers
    sent = produce_history(bootstrap, topic, raw_producer, seed=3, count=15)
    progress = measure_replay(bootstrap, topic)
    assert progress.total == len(sent)
    assert progress.fraction_done({}) == 0.0
    source = KafkaDocumentSource(replay_options(bootstrap, topic))

    replay(source, run_one_worker)

    assert source.positions() == topic_end_offsets(bootstrap, topic)
    assert progress.fraction_done(source.positions()) == 1.0


def test_source_options_reject_values_that_cannot_work() -> None:
    with pytest.raises(ValueError, match="max_batch must be >= 1; got 0"):
        KafkaSourceOptions("127.0.0.1:9092", "docs", max_batch=0)
    with pytest.raises(ValueError, match="dlq_topic must be a non-empty topic other than"):
        KafkaSourceOptions("127.0.0.1:9092", "docs", dlq_topic="docs")
    with pytest.raises(ValueError, match="start must be 'beginning' or 'end'"):
        KafkaSourceOptions("127.0.0.1:9092", "docs", start="middle")  # type: ignore[arg-type]


def test_unknown_topic_fails_listing_partitions_with_the_topic_name(
    kafka_broker: KafkaBroker,
) -> None:
    source = KafkaDocumentSource(KafkaSourceOptions(kafka_broker.bootstrap_servers, "no-such"))
    with pytest.raises(ValueError, match="Kafka topic 'no-such' does not exist"):
        source.list_parts()
