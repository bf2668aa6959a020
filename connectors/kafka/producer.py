"""Document changes -> Kafka, one acknowledged message at a time.

Messages are keyed by doc id, so Kafka's key partitioner puts every event of one document in
one partition and the indexer sees them in the order they were sent. `send` waits for the
broker's acknowledgement from all in-sync replicas: when it returns, the change is durable
and its (partition, offset) can be reported to the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaError

from connectors.kafka.codec import encode_change
from dataflow.core.documents import DocumentChange


class DocumentEventSendError(RuntimeError):
    """A document change was not acknowledged by Kafka."""


class DocumentEventProducer:
    """Sends `DocumentChange`s to one topic as `kgstream.v1.DocumentEvent` protobuf values."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        *,
        send_timeout_s: float = 30.0,
        producer_config: Mapping[str, Any] | None = None,
    ) -> None:
        if not topic:
            raise ValueError("DocumentEventProducer.topic must name the document-event topic")
        if send_timeout_s <= 0:
            raise ValueError(
                f"DocumentEventProducer.send_timeout_s must be > 0 seconds; got {send_timeout_s}"
            )
        self.topic = topic
        self._bootstrap_servers = bootstrap_servers
        self._send_timeout_s = send_timeout_s
        config: dict[str, Any] = {"bootstrap_servers": bootstrap_servers, "acks": "all"}
        config.update(producer_config or {})
        self._producer = KafkaProducer(**config)

    def send(self, change: DocumentChange, event_time_ms: int | None = None) -> tuple[int, int]:
        """Send one change and wait for the ack; returns its (partition, offset).

        ``event_time_ms`` is when the change happened; without it the source uses the
        Kafka message timestamp.
        """
        key, value = encode_change(change, event_time_ms or 0)
        try:
            metadata = self._producer.send(self.topic, key=key, value=value).get(
                timeout=self._send_timeout_s
            )
        except KafkaError as error:
            raise DocumentEventSendError(
                f"Kafka at {self._bootstrap_servers} did not acknowledge document "
                f"{change.doc_id!r} on topic {self.topic!r} within {self._send_timeout_s} s: "
                f"{error}. Check that the broker is up and the topic exists."
            ) from error
        return int(metadata.partition), int(metadata.offset)

    def flush(self) -> None:
        self._producer.flush(timeout=self._send_timeout_s)

    def close(self) -> None:
        self._producer.close(timeout=self._send_timeout_s)

    def __enter__(self) -> DocumentEventProducer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
