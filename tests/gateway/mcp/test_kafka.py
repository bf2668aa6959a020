"""MCP's upsert_document and delete_document publish through the gateway's Kafka producer,
the same events gRPC's Ingest publishes, on a real broker."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.kafka.producer import DocumentEventProducer
from dataflow.core.documents import DocumentDelete, DocumentUpsert, content_hash
from tests.gateway.corpus import Corpus, build_corpus
from tests.gateway.mcp.test_http import call, url_of
from tests.gateway.test_server import http_gateway, new_engine
from tests.gateway.test_server_ingest import read_events
from tests.support.kafka import KafkaBroker
from tests.support.redis import RedisTestServer


@pytest.fixture
def corpus(redis_server: RedisTestServer, tmp_path: Path) -> Iterator[Corpus]:
    built = build_corpus(redis_server.url, tmp_path, documents={})
    yield built
    built.close()


def test_mcp_ingest_publishes_document_events_to_kafka(
    corpus: Corpus, kafka_broker: KafkaBroker
) -> None:
    topic = f"mcp-ingest-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, partitions=2)
    graph = corpus.stores.graph
    with (
        DocumentEventProducer(kafka_broker.bootstrap_servers, topic) as producer,
        http_gateway(new_engine(corpus, None), graph, producer) as server,
    ):
        text = "  Ada Lovelace wrote notes on engines.\n"
        upsert = call(
            url_of(server), "upsert_document", {"doc_id": "notes/ada.md", "content": text}
        )
        delete = call(url_of(server), "delete_document", {"doc_id": "notes/ada.md"})
    published, removed = upsert.structured_content, delete.structured_content
    assert published["topic"] == removed["topic"] == topic
    assert published["content_hash"] == content_hash(text.strip())
    assert removed["offset"] == published["offset"] + 1
    events = read_events(
        kafka_broker.bootstrap_servers, topic, published["partition"], published["offset"], 2
    )
    assert events[0].change == DocumentUpsert("notes/ada.md", text.encode(), "notes/ada.md")
    assert events[1].change == DocumentDelete("notes/ada.md")
