"""Ingest over the real wire: document changes published to a real Kafka broker."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from kafka import KafkaConsumer, TopicPartition

from connectors.kafka.codec import DecodedEvent, decode_message
from connectors.kafka.producer import DocumentEventProducer
from dataflow.core.documents import MAX_DOC_ID_BYTES, DocumentDelete, DocumentUpsert, content_hash
from kgstream_protos.v1 import events_pb2, ingest_pb2, ingest_pb2_grpc, query_pb2_grpc
from kgstream_protos.v1 import query_pb2 as pb
from tests.gateway.corpus import Corpus, build_corpus
from tests.gateway.test_server import http_gateway, new_engine, running_gateway, status_of
from tests.support.kafka import KafkaBroker
from tests.support.redis import RedisTestServer
from tests.support.wait import wait_until


@pytest.fixture
def corpus(redis_server: RedisTestServer, tmp_path: Path) -> Iterator[Corpus]:
    built = build_corpus(redis_server.url, tmp_path, documents={})
    yield built
    built.close()


@pytest.fixture
def topic(kafka_broker: KafkaBroker) -> str:
    name = f"gateway-ingest-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(name, partitions=2)
    return name


def read_events(
    bootstrap_servers: str, topic: str, partition: int, offset: int, count: int
) -> list[DecodedEvent]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False)
    try:
        where = TopicPartition(topic, partition)
        consumer.assign([where])
        consumer.seek(where, offset)
        records: list[Any] = []

        def read() -> bool:
            for batch in consumer.poll(timeout_ms=200).values():
                records.extend(batch)
            return len(records) >= count

        wait_until(read, 30, f"{count} events at {topic}/{partition}@{offset}", interval=0)
    finally:
        consumer.close()
    decoded = [decode_message(r.key, r.value) for r in records[:count]]
    assert all(isinstance(d, DecodedEvent) for d in decoded), decoded
    return decoded  # type: ignore[return-value]


def test_upsert_and_delete_publish_document_events_and_report_where_they_landed(
    corpus: Corpus, kafka_broker: KafkaBroker, topic: str
) -> None:
    graph = corpus.stores.graph
    with (
        DocumentEventProducer(kafka_broker.bootstrap_servers, topic) as producer,
        running_gateway(new_engine(corpus, None), graph, producer=producer) as (_, channel),
    ):
        ingest = ingest_pb2_grpc.IngestStub(channel)
        upsert = ingest.UpsertDocument(
            ingest_pb2.UpsertDocumentRequest(
                doc_id="notes/kafka.md", content=b"  Ada Lovelace wrote notes on engines.\n"
            ),
            timeout=30,
        )
        delete = ingest.DeleteDocument(
            ingest_pb2.DeleteDocumentRequest(doc_id="notes/kafka.md"), timeout=30
        )

    assert upsert.op == events_pb2.DocumentEvent.UPSERT
    assert delete.op == events_pb2.DocumentEvent.DELETE
    assert upsert.topic == delete.topic == topic
    # One document, one partition: its events stay in order.
    assert upsert.partition == delete.partition and delete.offset == upsert.offset + 1
    assert upsert.content_hash == content_hash("Ada Lovelace wrote notes on engines.")
    assert delete.content_hash == ""
    assert upsert.index_version == graph.version() == 0
    assert upsert.min_index_version == upsert.index_version + 1

    events = read_events(
        kafka_broker.bootstrap_servers, topic, upsert.partition, upsert.offset, count=2
    )
    assert events[0].change == DocumentUpsert(
        "notes/kafka.md", b"  Ada Lovelace wrote notes on engines.\n", "notes/kafka.md"
    )
    assert events[0].event_time_ms > 0
    assert events[1].change == DocumentDelete("notes/kafka.md")


def test_a_published_upsert_becomes_visible_as_processed_with_the_returned_content_hash(
    corpus: Corpus, kafka_broker: KafkaBroker, topic: str
) -> None:
    """The wait the proto documents: GetDocument until PROCESSED with the same hash."""
    graph = corpus.stores.graph
    with (
        DocumentEventProducer(kafka_broker.bootstrap_servers, topic) as producer,
        running_gateway(new_engine(corpus, None), graph, producer=producer) as (_, channel),
    ):
        ingest = ingest_pb2_grpc.IngestStub(channel)
        stub = query_pb2_grpc.KnowledgeGraphStub(channel)
        published = ingest.UpsertDocument(
            ingest_pb2.UpsertDocumentRequest(
                doc_id="notes/ada.md",
                content=b"Ada Lovelace worked with Charles Babbage.",
                file_path="notes/ada.md",
            ),
            timeout=30,
        )
        (event,) = read_events(
            kafka_broker.bootstrap_servers, topic, published.partition, published.offset, 1
        )
        corpus.apply([event.change])  # the indexer's part, through the real dataflow

        document = stub.GetDocument(pb.GetDocumentRequest(doc_id="notes/ada.md"), timeout=10)
        assert document.document.status == pb.DOCUMENT_STATUS_PROCESSED
        assert document.document.content_hash == published.content_hash
        assert document.index_version >= published.min_index_version
        retrieval = stub.Retrieve(
            pb.QueryRequest(
                question="Who worked with Charles Babbage?",
                min_index_version=published.min_index_version,
            ),
            timeout=30,
        )
        assert "ada lovelace" in {e.entity.key for e in retrieval.entities}


def test_ingest_without_an_event_log_is_failed_precondition(corpus: Corpus) -> None:
    with running_gateway(new_engine(corpus, None), corpus.stores.graph) as (_, channel):
        ingest = ingest_pb2_grpc.IngestStub(channel)
        calls = [
            lambda: ingest.UpsertDocument(
                ingest_pb2.UpsertDocumentRequest(doc_id="a.md", content=b"text"), timeout=10
            ),
            lambda: ingest.DeleteDocument(
                ingest_pb2.DeleteDocumentRequest(doc_id="a.md"), timeout=10
            ),
        ]
        for call in calls:
            code, details = status_of(call)
            assert code == grpc.StatusCode.FAILED_PRECONDITION
            assert "no event log is configured" in details


@contextlib.contextmanager
def ingest_stub(corpus: Corpus, kafka_broker: KafkaBroker, topic: str) -> Iterator[Any]:
    """An Ingest stub on a gateway publishing to `topic`."""
    with (
        DocumentEventProducer(kafka_broker.bootstrap_servers, topic) as producer,
        running_gateway(new_engine(corpus, None), corpus.stores.graph, producer=producer) as (
            _,
            channel,
        ),
    ):
        yield ingest_pb2_grpc.IngestStub(channel)


def test_ingest_rejects_a_missing_doc_id_naming_the_field(
    corpus: Corpus, kafka_broker: KafkaBroker, topic: str
) -> None:
    with ingest_stub(corpus, kafka_broker, topic) as ingest:
        code, details = status_of(
            lambda: ingest.UpsertDocument(ingest_pb2.UpsertDocumentRequest(content=b"x"))
        )
    assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("doc_id: ")


def test_ingest_refuses_a_doc_id_over_the_limit_and_takes_one_at_it(
    corpus: Corpus, kafka_broker: KafkaBroker, topic: str
) -> None:
    at_limit = "d" * (MAX_DOC_ID_BYTES - 2) + "é"  # 1,024 bytes: é is two
    with ingest_stub(corpus, kafka_broker, topic) as ingest:
        code, details = status_of(
            lambda: ingest.DeleteDocument(
                ingest_pb2.DeleteDocumentRequest(doc_id=at_limit + "x"), timeout=10
            )
        )
        accepted = ingest.DeleteDocument(
            ingest_pb2.DeleteDocumentRequest(doc_id=at_limit), timeout=30
        )
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details == "doc_id: is 1025 bytes, over the limit of 1024 bytes"
    assert accepted.doc_id == at_limit


def test_http_upsert_and_delete_publish_the_same_events(
    corpus: Corpus, kafka_broker: KafkaBroker, topic: str
) -> None:
    graph = corpus.stores.graph
    with (
        DocumentEventProducer(kafka_broker.bootstrap_servers, topic) as producer,
        http_gateway(new_engine(corpus, None), graph, producer=producer) as server,
    ):
        assert server.http is not None
        url = f"{server.http.url}/api/v1/documents/notes/http.md"
        upsert = httpx.put(url, json={"content": "Ada Lovelace wrote notes.", "file_path": "n.md"})
        delete = httpx.delete(url)
    assert upsert.status_code == delete.status_code == 200, (upsert.text, delete.text)
    published, removed = upsert.json(), delete.json()
    assert published["op"] == "UPSERT" and removed["op"] == "DELETE"
    assert published["topic"] == topic and published["min_index_version"] == graph.version() + 1
    assert published["content_hash"] == content_hash("Ada Lovelace wrote notes.")
    events = read_events(
        kafka_broker.bootstrap_servers, topic, published["partition"], published["offset"], 2
    )
    assert events[0].change == DocumentUpsert("notes/http.md", b"Ada Lovelace wrote notes.", "n.md")
    assert events[1].change == DocumentDelete("notes/http.md")
