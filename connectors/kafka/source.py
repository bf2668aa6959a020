"""Kafka topic -> `SourceEvent`s, as a Bytewax source that keeps its offsets in recovery.

One Bytewax partition per Kafka partition. Each owns a kafka-python consumer that is
*assigned* its partition (no consumer group: joining one takes seconds with kafka-python,
and Bytewax recovery already stores where to resume) and seeks to the resume offset.
`snapshot()` is the next offset to read, so a resumed dataflow reads each message once at
the source; downstream sinks are idempotent for the replays around a resume.

Malformed messages never stop the flow: they are logged, counted, reported to an optional
callback and, when a dead-letter topic is configured, copied there with headers naming
the reason and origin.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaConnectionError, KafkaTimeoutError

from connectors.kafka.codec import DecodedEvent, decode_message
from dataflow.core.messages import SourceEvent

LOGGER = logging.getLogger("kgstream.kafka")

DLQ_REASON_HEADER = "kgstream-dlq-reason"
DLQ_ORIGIN_HEADER = "kgstream-dlq-origin"

# Metadata and offset look-ups happen once per partition build; a dead broker should fail
# the start with a clear error rather than hang it.
_METADATA_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class KafkaSourceOptions:
    """Where to read document events and how.

    ``start`` applies only to partitions without resume state. ``stop_at_end`` is replay
    mode: each partition finishes once it reaches the end offset it saw when it was built.
    ``poll_timeout_ms`` stays 0 in a dataflow (sources must not block); idle partitions
    wait ``idle_wait_ms`` before polling again. ``consumer_config`` and ``producer_config``
    are extra kafka-python settings (security, timeouts) for the consumers and for the
    dead-letter producer. ``max_batch`` bounds the records one partition hands on per
    poll; like the folder source's, it sets how soon documents turn PROCESSED during a
    big replay (connectors/folder/source.py, `FolderSourceOptions`).
    """

    bootstrap_servers: str
    topic: str
    start: Literal["beginning", "end"] = "beginning"
    stop_at_end: bool = False
    max_batch: int = 64
    poll_timeout_ms: int = 0
    idle_wait_ms: int = 100
    dlq_topic: str | None = None
    consumer_config: Mapping[str, Any] = field(default_factory=dict)
    producer_config: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.bootstrap_servers:
            raise ValueError("KafkaSourceOptions.bootstrap_servers must be 'host:port[,...]'")
        if not self.topic:
            raise ValueError("KafkaSourceOptions.topic must name the document-event topic")
        if self.start not in ("beginning", "end"):
            raise ValueError(
                f"KafkaSourceOptions.start must be 'beginning' or 'end'; got {self.start!r}"
            )
        if self.max_batch < 1:
            raise ValueError(f"KafkaSourceOptions.max_batch must be >= 1; got {self.max_batch}")
        if self.poll_timeout_ms < 0:
            raise ValueError(
                f"KafkaSourceOptions.poll_timeout_ms must be >= 0; got {self.poll_timeout_ms}"
            )
        if self.idle_wait_ms < 0:
            raise ValueError(
                f"KafkaSourceOptions.idle_wait_ms must be >= 0; got {self.idle_wait_ms}"
            )
        if self.dlq_topic is not None and (not self.dlq_topic or self.dlq_topic == self.topic):
            raise ValueError(
                f"KafkaSourceOptions.dlq_topic must be a non-empty topic other than "
                f"{self.topic!r}; got {self.dlq_topic!r}"
            )


@dataclass(frozen=True)
class DeadLetter:
    """A message the source could not decode, with the reason and where it was."""

    topic: str
    partition: int
    offset: int
    reason: str
    key: bytes | None
    value: bytes | None

    @property
    def origin(self) -> str:
        return kafka_origin(self.topic, self.partition, self.offset)


DeadLetterHook = Callable[[DeadLetter], None]


def kafka_origin(topic: str, partition: int, offset: int) -> str:
    """The `SourceEvent.origin` of a Kafka message."""
    return f"kafka:{topic}/{partition}@{offset}"


def part_key(topic: str, partition: int) -> str:
    """The Bytewax partition key of a Kafka partition: ``<topic>-<n>``."""
    return f"{topic}-{partition}"


def parse_part_key(key: str, topic: str) -> int:
    """The Kafka partition number in a key made by `part_key` for `topic`."""
    name, _, number = key.rpartition("-")
    if name != topic or not number.isdigit():
        raise ValueError(
            f"partition key {key!r} does not belong to topic {topic!r}; the recovery store "
            "was written for another topic: use a fresh recovery directory for this topic"
        )
    return int(number)


def new_consumer(
    bootstrap_servers: str, consumer_config: Mapping[str, Any] | None = None
) -> KafkaConsumer:
    """A consumer for manual assignment: no group, no auto commit (offsets live in recovery)."""
    config: dict[str, Any] = {
        "bootstrap_servers": bootstrap_servers,
        "group_id": None,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
    }
    config.update(consumer_config or {})
    return KafkaConsumer(**config)


def topic_partitions(consumer: KafkaConsumer, topic: str) -> list[int]:
    """The partition numbers of `topic`, sorted; raises if the topic does not exist."""
    partitions = sorted(consumer.partitions_for_topic(topic) or ())
    if not partitions:
        raise ValueError(
            f"Kafka topic {topic!r} does not exist or has no partitions; create it first "
            "(kafka-topics.sh --create --topic ...) or fix the topic name"
        )
    return partitions


BROKER_RETRY_SECONDS = 2.0  # between tries to reach a broker that is away at start
_BROKER_AWAY = (KafkaConnectionError, KafkaTimeoutError)


def wait_for_topic(
    bootstrap_servers: str,
    topic: str,
    on_away: Callable[[str], None],
    consumer_config: Mapping[str, Any] | None = None,
) -> list[int]:
    """The partition numbers of `topic`, once a broker answers: while none does, `on_away`
    is told why (once) and the brokers are tried again every `BROKER_RETRY_SECONDS`, as a
    store that is away is waited out. ValueError when the topic does not exist."""
    told = False
    while True:
        try:
            consumer = new_consumer(bootstrap_servers, consumer_config)
        except _BROKER_AWAY as error:
            if not told:
                on_away(
                    f"Kafka ({bootstrap_servers}) is unreachable ({error}); waiting for it, "
                    "retrying every few seconds (Ctrl-C to stop)"
                )
                told = True
            time.sleep(BROKER_RETRY_SECONDS)
            continue
        try:
            return topic_partitions(consumer, topic)
        finally:
            consumer.close()


def topic_end_offsets(
    bootstrap_servers: str, topic: str, consumer_config: Mapping[str, Any] | None = None
) -> dict[int, int]:
    """partition -> offset of the next message to be written (the log end)."""
    return _topic_offsets(bootstrap_servers, topic, consumer_config, end=True)


def topic_beginning_offsets(
    bootstrap_servers: str, topic: str, consumer_config: Mapping[str, Any] | None = None
) -> dict[int, int]:
    """partition -> first offset still in the log (after retention or compaction)."""
    return _topic_offsets(bootstrap_servers, topic, consumer_config, end=False)


def _topic_offsets(
    bootstrap_servers: str, topic: str, consumer_config: Mapping[str, Any] | None, *, end: bool
) -> dict[int, int]:
    consumer = new_consumer(bootstrap_servers, consumer_config)
    try:
        tps = [TopicPartition(topic, n) for n in topic_partitions(consumer, topic)]
        lookup = consumer.end_offsets if end else consumer.beginning_offsets
        offsets = lookup(tps, timeout_ms=_METADATA_TIMEOUT_MS)
        return {tp.partition: int(offset) for tp, offset in offsets.items()}
    finally:
        consumer.close()


@dataclass(frozen=True)
class ReplayProgress:
    """How far a replay got: from ``begin_offsets`` to the ``end_offsets`` seen at start.

    Partitions missing from ``positions`` count as not started; positions past the end
    (messages written during the replay) count as done.
    """

    begin_offsets: Mapping[int, int]
    end_offsets: Mapping[int, int]

    @property
    def total(self) -> int:
        return sum(
            max(0, end - self.begin_offsets.get(part, 0)) for part, end in self.end_offsets.items()
        )

    def done(self, positions: Mapping[int, int]) -> int:
        count = 0
        for part, end in self.end_offsets.items():
            begin = self.begin_offsets.get(part, 0)
            position = positions.get(part, begin)
            count += max(0, min(position, end) - begin)
        return count

    def remaining(self, positions: Mapping[int, int]) -> int:
        return self.total - self.done(positions)

    def fraction_done(self, positions: Mapping[int, int]) -> float:
        """0.0 .. 1.0; an empty topic is already done."""
        total = self.total
        return 1.0 if total == 0 else self.done(positions) / total


def measure_replay(
    bootstrap_servers: str, topic: str, consumer_config: Mapping[str, Any] | None = None
) -> ReplayProgress:
    """The offsets a replay of `topic` from its beginning will cover, as of now."""
    return ReplayProgress(
        begin_offsets=topic_beginning_offsets(bootstrap_servers, topic, consumer_config),
        end_offsets=topic_end_offsets(bootstrap_servers, topic, consumer_config),
    )


class KafkaPartition(StatefulSourcePartition[SourceEvent, int]):
    """One Kafka partition; its only state is the next offset to read.

    `consumer`: the consumer to read with (None: a new one for `options`, `new_consumer`);
    the partition assigns it to itself, seeks it and closes it.
    """

    def __init__(
        self,
        options: KafkaSourceOptions,
        partition: int,
        resume_state: int | None,
        on_dead_letter: DeadLetterHook | None = None,
        *,
        consumer: KafkaConsumer | None = None,
    ) -> None:
        self._options = options
        self._tp = TopicPartition(options.topic, partition)
        self._on_dead_letter = on_dead_letter
        self._dlq_producer: KafkaProducer | None = None
        self._next_awake: datetime | None = None
        self._closed = False
        self.dead_letters = 0
        self.events = 0
        self.position_resets = 0
        if consumer is None:
            consumer = new_consumer(options.bootstrap_servers, options.consumer_config)
        try:
            consumer.assign([self._tp])
            self._position = self._starting_offset(consumer, resume_state)
            consumer.seek(self._tp, self._position)
            self.end_offset: int | None = (
                int(consumer.end_offsets([self._tp], timeout_ms=_METADATA_TIMEOUT_MS)[self._tp])
                if options.stop_at_end
                else None
            )
        except BaseException:
            consumer.close()
            raise
        self._consumer = consumer

    def _starting_offset(self, consumer: KafkaConsumer, resume_state: int | None) -> int:
        if resume_state is not None:
            if not isinstance(resume_state, int) or resume_state < 0:
                raise ValueError(
                    f"resume state for {part_key(*self._tp)} must be an offset >= 0; got "
                    f"{resume_state!r}: the recovery store was written by another source"
                )
            LOGGER.info("%s resumes at offset %d", part_key(*self._tp), resume_state)
            return resume_state
        if self._options.start == "end":
            offsets = consumer.end_offsets([self._tp], timeout_ms=_METADATA_TIMEOUT_MS)
        else:
            offsets = consumer.beginning_offsets([self._tp], timeout_ms=_METADATA_TIMEOUT_MS)
        offset = int(offsets[self._tp])
        LOGGER.info("%s starts at offset %d (no snapshot to resume)", part_key(*self._tp), offset)
        return offset

    @property
    def partition(self) -> int:
        return int(self._tp.partition)

    @property
    def position(self) -> int:
        """The next offset this partition will read."""
        return self._position

    def next_batch(self) -> list[SourceEvent]:
        if self.end_offset is not None and self._position >= self.end_offset:
            raise StopIteration()
        records = self._consumer.poll(
            timeout_ms=self._options.poll_timeout_ms, max_records=self._options.max_batch
        ).get(self._tp, [])
        events: list[SourceEvent] = []
        for record in records:
            if int(record.offset) < self._position:
                continue  # read already (see _hold_position): sending it again would undo news
            event = self._decode(record)
            if event is not None:
                events.append(event)
            self._position = int(record.offset) + 1
        self._hold_position()
        self.events += len(events)
        if records:
            self._next_awake = None
        else:
            wait = timedelta(milliseconds=self._options.idle_wait_ms)
            self._next_awake = datetime.now(UTC) + wait
        return events

    def _hold_position(self) -> None:
        """Follow the consumer forward, never back.

        The fetch position also moves past offsets that hold no record (compaction,
        transaction markers); without following it a replay could wait forever for them.
        It can also move back: after a broker restart kafka-python may see a leader epoch
        it cannot validate and reset the partition by ``auto_offset_reset`` (the earliest
        offset). This partition owns its position, so it seeks back to it, with one log line.
        """
        fetched = self._consumer.position(self._tp, timeout_ms=0)
        if fetched is None or int(fetched) == self._position:
            return
        if int(fetched) > self._position:
            self._position = int(fetched)
            return
        LOGGER.warning(
            "Kafka consumer of %s moved back to offset %d (a reset after a broker restart); "
            "resuming at %d, where this partition had read to",
            part_key(*self._tp),
            fetched,
            self._position,
        )
        self.position_resets += 1
        self._consumer.seek(self._tp, self._position)

    def _decode(self, record: Any) -> SourceEvent | None:
        offset = int(record.offset)
        origin = kafka_origin(self._tp.topic, self.partition, offset)
        decoded = decode_message(record.key, record.value)
        if not isinstance(decoded, DecodedEvent):
            self._dead_letter(record, decoded.reason)
            return None
        if decoded.event_time_ms:
            event_time = decoded.event_time_ms / 1000
        elif record.timestamp is not None and record.timestamp >= 0:
            event_time = record.timestamp / 1000
        else:
            event_time = time.time()
        return SourceEvent(decoded.change, origin, event_time)

    def _dead_letter(self, record: Any, reason: str) -> None:
        letter = DeadLetter(
            topic=self._tp.topic,
            partition=self.partition,
            offset=int(record.offset),
            reason=reason,
            key=record.key,
            value=record.value,
        )
        self.dead_letters += 1
        LOGGER.warning(
            "dead letter: topic=%s partition=%d offset=%d reason=%s",
            letter.topic,
            letter.partition,
            letter.offset,
            reason,
        )
        if self._options.dlq_topic is not None:
            self._send_to_dlq(letter, list(record.headers or []))
        if self._on_dead_letter is not None:
            self._on_dead_letter(letter)

    def _send_to_dlq(self, letter: DeadLetter, headers: list[tuple[str, bytes]]) -> None:
        """Queue the copy; `snapshot()` flushes, so no offset past it commits before the ack."""
        if self._dlq_producer is None:
            self._dlq_producer = KafkaProducer(
                bootstrap_servers=self._options.bootstrap_servers,
                acks="all",
                **dict(self._options.producer_config),
            )
        headers = [
            *headers,
            (DLQ_REASON_HEADER, letter.reason.encode("utf-8")),
            (DLQ_ORIGIN_HEADER, letter.origin.encode("utf-8")),
        ]
        # A tombstone without a key cannot be produced as is (Kafka needs a key or a value).
        value = letter.value if letter.value is not None or letter.key is not None else b""
        future = self._dlq_producer.send(
            self._options.dlq_topic, key=letter.key, value=value, headers=headers
        )
        future.add_errback(_log_dlq_failure, letter, self._options.dlq_topic)

    def next_awake(self) -> datetime | None:
        return self._next_awake

    def snapshot(self) -> int:
        if self._dlq_producer is not None:
            self._dlq_producer.flush()
        return self._position

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._dlq_producer is not None:
            self._dlq_producer.flush()
            self._dlq_producer.close()
        self._consumer.close()


def _log_dlq_failure(letter: DeadLetter, dlq_topic: str | None, error: BaseException) -> None:
    LOGGER.error(
        "could not copy dead letter %s to topic %s: %s; check that the topic exists",
        letter.origin,
        dlq_topic,
        error,
    )


class KafkaDocumentSource(FixedPartitionedSource[SourceEvent, int]):
    """Document events from every partition of one Kafka topic.

    ``on_dead_letter`` is called (on the worker thread) for each malformed message, e.g.
    to count it in metrics. The partitions built in this process are kept for progress and
    counters (`positions`, `dead_letter_count`).
    """

    def __init__(
        self, options: KafkaSourceOptions, on_dead_letter: DeadLetterHook | None = None
    ) -> None:
        self.options = options
        self._on_dead_letter = on_dead_letter
        self._lock = threading.Lock()
        self._parts: list[KafkaPartition] = []

    def list_parts(self) -> list[str]:
        consumer = new_consumer(self.options.bootstrap_servers, self.options.consumer_config)
        try:
            partitions = topic_partitions(consumer, self.options.topic)
        finally:
            consumer.close()
        return [part_key(self.options.topic, n) for n in partitions]

    def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> KafkaPartition:
        partition = KafkaPartition(
            self.options,
            parse_part_key(for_part, self.options.topic),
            resume_state,
            self._on_dead_letter,
        )
        with self._lock:
            self._parts.append(partition)
        return partition

    def positions(self) -> dict[int, int]:
        """partition -> next offset, for the partitions read in this process."""
        with self._lock:
            return {part.partition: part.position for part in self._parts}

    def dead_letter_count(self) -> int:
        with self._lock:
            return sum(part.dead_letters for part in self._parts)
