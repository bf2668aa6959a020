"""`kgstream run --kafka` and `kgstream replay` as processes, with a real Kafka broker:
replay rebuilds the live index, and a kill -9 mid-stream loses and doubles nothing."""

import itertools
import json
import signal
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer

from connectors.kafka.producer import DocumentEventProducer
from connectors.redis.index_control import RedisIndexControl
from connectors.stores import StoreLocations, open_graph_store
from dataflow.core.documents import DocumentDelete, DocumentStatus, DocumentUpsert
from tests.kgstream.processes import SNAPSHOT_EVERY_SECOND, finish, kgstream, llm_environment
from tests.support.llm_server import offline_extraction_reply
from tests.support.wait import wait_until

_topics = itertools.count()
PEOPLE = ["Alice Moreau", "Bob Tanaka", "Carla Diaz", "Dmitri Volkov", "Erin Walsh", "Farah Khan"]
ORGS = ["Northwind Labs", "Helios Corp", "Atlas Foundation", "Kestrel Bank"]
CITIES = ["Lisbon", "Porto", "Geneva", "Nairobi"]


def document(i: int, version: int = 0) -> DocumentUpsert:
    person, org = PEOPLE[i % len(PEOPLE)], ORGS[(i + version) % len(ORGS)]
    city = CITIES[(i * 3 + version) % len(CITIES)]
    text = (
        f"{person} joined {org} in {city} in {2000 + i}.\n\n"
        f"{org} worked with {ORGS[(i + 1) % len(ORGS)]} on report {i}."
    )
    return DocumentUpsert(f"doc-{i:03d}", text, f"reports/doc-{i:03d}.md")


def processed(data: Path) -> int:
    """PROCESSED documents in a running kgstream's embedded redis (0 until it is up)."""
    if not (data / "redis" / "redis.sock").exists():
        return 0
    graph, embedded = open_graph_store(StoreLocations(data))
    try:
        return graph.status_counts()[DocumentStatus.PROCESSED]
    except Exception:
        return 0
    finally:
        assert embedded is None, "the test must attach to kgstream's redis, not start one"


def consumer_lag(data: Path) -> dict[int, int]:
    """The lag a running `kgstream run --kafka` records for `kgstream status`."""
    graph, embedded = open_graph_store(StoreLocations(data))
    assert embedded is None
    return RedisIndexControl(graph.client, graph.workspace).consumer_lag()


def export(data: Path, env: dict[str, str]) -> dict:
    output = data.parent / f"{data.name}.json"
    finish(kgstream("export", "--data", str(data), "--output", str(output), env=env))
    return json.loads(output.read_text())


@pytest.fixture
def env(llm_server):
    llm_server.responder = offline_extraction_reply
    return {**llm_environment(llm_server.base_url), **SNAPSHOT_EVERY_SECOND}


@pytest.fixture
def topic(kafka_broker):
    name = f"cli-documents-{next(_topics)}"
    kafka_broker.create_topic(name, 3)
    return name


def produce(kafka_broker, topic, changes) -> None:
    with DocumentEventProducer(kafka_broker.bootstrap_servers, topic) as producer:
        for change in changes:
            producer.send(change)


def test_replay_into_empty_stores_rebuilds_the_live_index(kafka_broker, topic, env, tmp_path):
    kafka = ["--kafka", kafka_broker.bootstrap_servers, "--topic", topic]
    live, rebuilt = tmp_path / "live", tmp_path / "rebuilt"
    produce(kafka_broker, topic, [document(i) for i in range(8)])
    finish(kgstream("run", *kafka, "--data", str(live), "--until-caught-up", "--no-serve", env=env))
    produce(
        kafka_broker,
        topic,
        [document(2, version=1), DocumentDelete("doc-005"), document(9), DocumentDelete("doc-009")],
    )
    finish(kgstream("run", *kafka, "--data", str(live), "--until-caught-up", "--no-serve", env=env))
    finish(kgstream("replay", *kafka, "--data", str(rebuilt), env=env))

    exported = export(live, env)
    assert exported == export(rebuilt, env)
    assert {d["doc_id"] for d in exported["documents"]} == {
        f"doc-{i:03d}" for i in (0, 1, 2, 3, 4, 6, 7)
    }

    refused = kgstream("replay", *kafka, "--data", str(rebuilt), env=env)
    output, _ = refused.communicate(timeout=60)
    assert refused.returncode == 2 and "already holds an index" in output


def resume_and_compare_with_a_replay(
    kafka: list[str], killed: Path, reference: Path, env: dict[str, str], documents: int
) -> None:
    """Run the killed index until caught up, replay the topic into `reference`: the two
    exports are equal, with `documents` documents, every one PROCESSED."""
    finish(
        kgstream("run", *kafka, "--data", str(killed), "--until-caught-up", "--no-serve", env=env)
    )
    finish(kgstream("replay", *kafka, "--data", str(reference), env=env))
    exported = export(killed, env)
    assert exported == export(reference, env)
    assert len(exported["documents"]) == documents
    assert all(d["status"] == "PROCESSED" for d in exported["documents"])


def test_kill_9_mid_stream_then_restart_equals_an_uninterrupted_run(
    kafka_broker, topic, env, llm_server, tmp_path
):
    kafka = ["--kafka", kafka_broker.bootstrap_servers, "--topic", topic]
    killed, reference = tmp_path / "killed", tmp_path / "reference"
    first_wave = [document(i) for i in range(12)]
    second_wave = (
        [document(i, version=1) for i in range(0, 12, 2)]
        + [DocumentDelete(f"doc-{i:03d}") for i in (3, 7)]
        + [document(i) for i in range(12, 30)]
    )
    produce(kafka_broker, topic, first_wave)

    running = kgstream("run", *kafka, "--data", str(killed), "--no-serve", env=env)
    wait_until(lambda: processed(killed) == 12, 60, "the first wave to be indexed")
    wait_until(lambda: consumer_lag(killed) == {0: 0, 1: 0, 2: 0}, 30, "the lag to reach 0")
    llm_server.delay_seconds = 0.15
    calls_before = llm_server.chat_calls
    produce(kafka_broker, topic, second_wave)
    wait_until(lambda: llm_server.chat_calls >= calls_before + 6, 60, "the second wave to start")
    running.send_signal(signal.SIGKILL)
    running.communicate(timeout=30)
    llm_server.delay_seconds = 0.0
    resume_and_compare_with_a_replay(kafka, killed, reference, env, documents=28)


def progress(data: Path, doc_id: str) -> tuple[int, int]:
    """(chunks settled, chunks changed) of a document a running kgstream is processing."""
    if not (data / "redis" / "redis.sock").exists():
        return 0, 0
    graph, embedded = open_graph_store(StoreLocations(data))
    assert embedded is None
    stored = graph.get_documents([doc_id]).get(doc_id)
    if stored is None or stored.record.status is not DocumentStatus.PROCESSING:
        return 0, 0
    return stored.record.chunks_settled, stored.record.chunks_changed


def test_kill_9_while_a_large_document_streams_through_then_restart_equals_a_replay(
    kafka_broker, topic, env, llm_server, tmp_path
):
    """A large document is passed on from extraction in pieces and shows its progress; the
    chunks not passed on yet are keyed state, so a kill -9 partway and a restart index it
    exactly as a run that was never interrupted."""
    env = {
        **env,
        "KGSTREAM_CHUNK_TOKEN_SIZE": "100",
        "KGSTREAM_CHUNK_OVERLAP_TOKENS": "10",
        "KGSTREAM_DOCUMENT_CHUNKS_PER_ROUND": "8",
    }
    kafka = ["--kafka", kafka_broker.bootstrap_servers, "--topic", topic]
    killed, reference = tmp_path / "killed", tmp_path / "reference"
    paragraphs = (
        f"{PEOPLE[n % 6]} met {PEOPLE[(n + 1) % 6]} of {ORGS[n % 4]} in {CITIES[n % 4]} "
        f"to plan report {n}, due in {2000 + n}."
        for n in range(300)
    )
    large = DocumentUpsert("large", "\n\n".join(paragraphs), "reports/large.md")
    produce(kafka_broker, topic, [large, *(document(i) for i in range(4))])
    llm_server.delay_seconds = 0.05

    running = kgstream("run", *kafka, "--data", str(killed), "--no-serve", env=env)

    # Partway: some pieces settled, the rest still in extraction (168 calls at 50 ms, 4 at a
    # time) or on their way. How far it got by the first look depends on the machine: the
    # extraction runs ahead of the renders.
    def partway() -> bool:
        settled, changed = progress(killed, "large")
        return 0 < settled < changed

    wait_until(partway, 120, "the large document's progress")
    running.send_signal(signal.SIGKILL)
    running.communicate(timeout=30)
    llm_server.delay_seconds = 0.0
    resume_and_compare_with_a_replay(kafka, killed, reference, env, documents=5)


def test_undecodable_messages_go_to_the_dead_letter_topic_and_show_in_status(
    kafka_broker, topic, env, tmp_path
):
    dead_topic = f"{topic}.dead"
    kafka_broker.create_topic(dead_topic, 1)
    env = {**env, "KGSTREAM_DLQ_TOPIC": dead_topic}
    produce(kafka_broker, topic, [document(0)])
    bad = {
        b"": "send a tombstone (a null value, not an empty one)",
        b'{"op": "UPSERT", "content": "aGVsbG8="}': "its form is ambiguous",
    }
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
    for value in bad:
        producer.send(topic, key=b"doc-bad", value=value, partition=0).get(timeout=30)
    producer.close()
    data = tmp_path / "data"
    kafka = ["--kafka", kafka_broker.bootstrap_servers, "--topic", topic]
    finish(kgstream("run", *kafka, "--data", str(data), "--until-caught-up", "--no-serve", env=env))

    status = json.loads(finish(kgstream("status", "--data", str(data), "--json", env=env)))
    assert status["documents"]["PROCESSED"] == 1
    letters = status["dead_letters"]
    assert letters["count"] == 2
    reasons = sorted(letter["reason"] for letter in letters["newest"])
    assert all(any(hint in reason for reason in reasons) for hint in bad.values())
    assert all(letter["origin"].startswith(f"kafka:{topic}/0@") for letter in letters["newest"])

    consumer = KafkaConsumer(
        dead_topic,
        bootstrap_servers=kafka_broker.bootstrap_servers,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
    )
    copied = sorted(message.value for message in itertools.islice(consumer, 2))
    consumer.close()
    assert copied == sorted(bad)
