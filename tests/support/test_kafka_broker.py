"""Smoke tests: the test broker is a real Kafka that kafka-python can use end to end."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaTimeoutError

from tests.support.kafka import (
    KafkaBroker,
    KafkaBrokerError,
    KafkaBrokerOptions,
    new_cluster_id,
)
from tests.support.ports import LOOPBACK, free_port
from tests.support.wait import wait_until

TOPIC = "smoke-keyed"
PARTITIONS = 3
KEY_COUNT = 40
TOMBSTONE_KEY = b"doc-07"
CONSUME_DEADLINE_S = 60.0


@dataclass(frozen=True)
class WrittenRecord:
    """What the producer was told: where a record landed, and what it held."""

    partition: int
    offset: int
    key: bytes
    value: bytes | None


def produce_keyed_records(bootstrap_servers: str) -> list[WrittenRecord]:
    """Send KEY_COUNT keyed records, then a tombstone, acks=all, in multi-record batches."""
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, acks="all", linger_ms=20)
    try:
        sent: list[tuple[bytes, bytes | None]] = [
            (f"doc-{i:02d}".encode(), f"body of doc {i}".encode()) for i in range(KEY_COUNT)
        ]
        sent.append((TOMBSTONE_KEY, None))
        futures = [(key, value, producer.send(TOPIC, key=key, value=value)) for key, value in sent]
        producer.flush(timeout=10)
        written = []
        for key, value, future in futures:
            metadata = future.get(timeout=10)
            written.append(WrittenRecord(metadata.partition, metadata.offset, key, value))
        return written
    finally:
        producer.close()


def consume_all(bootstrap_servers: str, expected: int) -> tuple[list[WrittenRecord], KafkaConsumer]:
    """Read every partition from the start without joining a group (assign + seek)."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap_servers, group_id=None, enable_auto_commit=False
    )
    partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    received: list[WrittenRecord] = []

    def read() -> bool:
        for batch in consumer.poll(timeout_ms=200).values():
            received.extend(WrittenRecord(r.partition, r.offset, r.key, r.value) for r in batch)
        return len(received) >= expected

    try:
        wait_until(read, CONSUME_DEADLINE_S, f"{expected} records of {TOPIC}", interval=0)
    except BaseException:
        consumer.close()
        raise
    return received, consumer


@pytest.fixture(scope="module")
def written(kafka_broker: KafkaBroker) -> list[WrittenRecord]:
    kafka_broker.create_topic(TOPIC, PARTITIONS)
    return produce_keyed_records(kafka_broker.bootstrap_servers)


@pytest.fixture
def consumed(
    kafka_broker: KafkaBroker,
    written: list[WrittenRecord],
) -> Iterator[tuple[list[WrittenRecord], KafkaConsumer]]:
    received, consumer = consume_all(kafka_broker.bootstrap_servers, len(written))
    yield received, consumer
    consumer.close()


def test_broker_lists_the_topic_it_created_with_three_partitions(
    kafka_broker: KafkaBroker,
    written: list[WrittenRecord],
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers)
    try:
        (described,) = admin.describe_topics([TOPIC])
    finally:
        admin.close()
    assert described["error_code"] == 0
    assert sorted(p["partition_index"] for p in described["partitions"]) == [0, 1, 2]
    assert kafka_broker.start_duration_s is not None
    assert kafka_broker.log_path.read_text().count("Kafka Server started") == 1


def test_every_keyed_record_comes_back_with_its_key_value_partition_and_offset(
    written: list[WrittenRecord],
    consumed: tuple[list[WrittenRecord], KafkaConsumer],
) -> None:
    received, _ = consumed
    assert sorted(received, key=_position) == sorted(written, key=_position)
    assert {record.partition for record in written} == {0, 1, 2}, "keys should spread"


def test_same_key_always_lands_in_the_same_partition(written: list[WrittenRecord]) -> None:
    partitions_by_key: dict[bytes, set[int]] = {}
    for record in written:
        partitions_by_key.setdefault(record.key, set()).add(record.partition)
    assert all(len(partitions) == 1 for partitions in partitions_by_key.values())
    assert len(partitions_by_key[TOMBSTONE_KEY]) == 1


def test_tombstone_arrives_with_value_none(
    consumed: tuple[list[WrittenRecord], KafkaConsumer],
) -> None:
    received, _ = consumed
    for_key = [record.value for record in received if record.key == TOMBSTONE_KEY]
    assert for_key == [b"body of doc 7", None]


def test_end_offsets_equal_records_written_and_the_caught_up_position(
    written: list[WrittenRecord],
    consumed: tuple[list[WrittenRecord], KafkaConsumer],
) -> None:
    _, consumer = consumed
    partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    written_per_partition = {
        tp: sum(1 for r in written if r.partition == tp.partition) for tp in partitions
    }
    last_offset_plus_one = {
        tp: 1 + max(r.offset for r in written if r.partition == tp.partition) for tp in partitions
    }
    end_offsets = consumer.end_offsets(partitions)
    assert end_offsets == written_per_partition == last_offset_plus_one
    assert {tp: consumer.position(tp) for tp in partitions} == end_offsets


def test_producing_to_a_missing_topic_does_not_create_it(
    kafka_broker: KafkaBroker,
) -> None:
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers, max_block_ms=500)
    try:
        with pytest.raises(KafkaTimeoutError):
            producer.send("never-created", value=b"x")
    finally:
        producer.close()
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers)
    try:
        assert "never-created" not in admin.list_topics()
    finally:
        admin.close()


def test_start_failure_raises_with_the_kafka_log_tail(
    kafka_broker: KafkaBroker,  # ensures the jars are installed
    tmp_path: Path,
) -> None:
    with socket.socket() as busy:
        busy.bind((LOOPBACK, 0))
        busy.listen()
        busy_port, controller_port = busy.getsockname()[1], free_port()
        options = KafkaBrokerOptions(
            bind_attempts=1,
            server_overrides={
                "controller.quorum.bootstrap.servers": f"{LOOPBACK}:{controller_port}",
                "listeners": f"PLAINTEXT://{LOOPBACK}:{busy_port},"
                f"CONTROLLER://{LOOPBACK}:{controller_port}",
                "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{busy_port}",
            },
        )
        broker = KafkaBroker(tmp_path, options)
        with pytest.raises(KafkaBrokerError, match="Address already in use") as failure:
            broker.start()
    assert str(tmp_path / "server.log") in str(failure.value)
    with pytest.raises(KafkaBrokerError, match="not running"):
        _ = broker.bootstrap_servers


def _position(record: WrittenRecord) -> tuple[int, int]:
    return record.partition, record.offset


def test_cluster_ids_never_start_with_a_dash() -> None:
    # One in 64 random ids does; `kafka-storage format --cluster-id -x...` then fails.
    ids = [new_cluster_id() for _ in range(3000)]
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
    assert len(set(ids)) == len(ids)
