"""The dataflow fed by a real Apache Kafka topic (3 partitions), with 1 and 2 workers."""

import itertools

import pytest

from connectors.kafka.producer import DocumentEventProducer
from connectors.kafka.source import KafkaDocumentSource, KafkaSourceOptions
from dataflow.core.documents import DocumentDelete, DocumentUpsert
from tests.dataflow.harness import entry_point_for, fresh_build, new_components, run_flow, stored
from tests.dataflow.test_flow import ALICE, BOB, CARLA

_topics = itertools.count()

SCENARIO = [
    DocumentUpsert("a.md", ALICE, "a.md"),
    DocumentUpsert("b.md", BOB, "b.md"),
    DocumentUpsert("c.md", CARLA, "c.md"),
    DocumentUpsert("d.md", "Helios Corp opened an office in Nairobi.", "d.md"),
    DocumentUpsert("a.md", ALICE.replace("Lisbon", "Porto"), "a.md"),
    DocumentDelete("c.md"),
    DocumentUpsert("b.md", BOB, "b.md"),
    DocumentUpsert("e.md", b"\xff not text", "e.md"),
    DocumentDelete("d.md"),
    DocumentUpsert("d.md", "Helios Corp closed its office in Nairobi.", "d.md"),
]


def final_documents(changes):
    final = {}
    for change in changes:
        if isinstance(change, DocumentDelete):
            final.pop(change.doc_id, None)
        else:
            final[change.doc_id] = change
    return list(final.values())


@pytest.fixture
def topic(kafka_broker):
    name = f"documents-{next(_topics)}"
    kafka_broker.create_topic(name, 3)
    with DocumentEventProducer(kafka_broker.bootstrap_servers, name) as producer:
        for change in SCENARIO:
            producer.send(change)
    return name


@pytest.mark.parametrize("workers", [1, 2])
def test_topic_scenario_equals_fresh_build(
    kafka_broker, topic, redis_server, llm_server, tmp_path, workers
):
    components = new_components(redis_server.url, llm_server.base_url, tmp_path / "vectors")
    try:
        options = KafkaSourceOptions(kafka_broker.bootstrap_servers, topic, stop_at_end=True)
        run_flow(components, KafkaDocumentSource(options), entry_point_for(workers))
        index = stored(components)
        assert index.graph == fresh_build(final_documents(SCENARIO))
        assert index.graph.documents["e.md"].reason
    finally:
        components.stores.graph.clear()
        components.stores.vectors.close()
