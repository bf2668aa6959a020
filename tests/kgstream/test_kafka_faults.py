"""`kgstream run --kafka` through a broker restart: its own broker, stopped mid-stream and
started again on the same storage. After it returns every partition is consumed to the end,
the lag is reported truthfully, and the stores equal an uninterrupted run (a replay)."""

import itertools
import random
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.embeddings.base import embedding_space_name
from connectors.embeddings.remote import OpenAIEmbedder, OpenAIEmbeddingOptions
from connectors.index_export import read_index
from connectors.kafka.producer import DocumentEventProducer, DocumentEventSendError
from connectors.kafka.source import topic_end_offsets
from connectors.stores import StoreLocations, open_stores
from dataflow.core.documents import DocumentDelete
from tests.kgstream.processes import (
    SNAPSHOT_EVERY_SECOND,
    Output,
    clean_environment,
    finish,
    kgstream,
    llm_environment,
)
from tests.kgstream.test_cli_kafka import consumer_lag, document, export, processed
from tests.support.kafka import KafkaBroker
from tests.support.llm_server import offline_extraction_reply
from tests.support.ports import free_ports
from tests.support.wait import wait_until

OUTAGE_SECONDS = 15.0  # how long the broker stays down: the fault itself, not a synchronisation


@pytest.fixture
def broker(tmp_path) -> Iterator[KafkaBroker]:
    with KafkaBroker(tmp_path / "broker") as own:  # restarted by the test: not the shared one
        yield own


@pytest.fixture
def env(llm_server):
    return clean_environment(llm_server.base_url)  # the offline extractor


@pytest.fixture
def llm_env(llm_server):
    """Extraction through the test LLM, so its call count shows where the indexer is."""
    llm_server.responder = offline_extraction_reply
    return {**llm_environment(llm_server.base_url), **SNAPSHOT_EVERY_SECOND}


def send_all(producer: DocumentEventProducer, changes) -> None:
    for change in changes:
        producer.send(change)


class SteadyProducer:
    """About 10 keyed events a second on a thread, through the outage: a send that is not
    acknowledged is sent again until it is (a copy may land twice: the replay sees it too)."""

    def __init__(self, bootstrap_servers: str, topic: str) -> None:
        self._servers, self._topic = bootstrap_servers, topic
        self._stop = threading.Event()
        self.sent = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with DocumentEventProducer(self._servers, self._topic, send_timeout_s=2) as producer:
            for n in itertools.count():
                change = document(n % 24, version=1 + n // 24)
                while not self._stop.is_set():
                    try:
                        producer.send(change)
                        break
                    except DocumentEventSendError:  # the broker is down: try again
                        self._stop.wait(0.5)
                if self._stop.wait(0.1):
                    break
                self.sent += 1
            self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


def test_after_a_broker_restart_every_partition_is_consumed_to_the_end(broker, env, tmp_path):
    topic = "restarted-documents"
    broker.create_topic(topic, 3)
    kafka = ["--kafka", broker.bootstrap_servers, "--topic", topic]
    live, reference = tmp_path / "live", tmp_path / "reference"
    running = kgstream("run", *kafka, "--data", str(live), "--no-serve", env=env)
    producer = SteadyProducer(broker.bootstrap_servers, topic)
    try:
        wait_until(lambda: processed(live) == 24, 90, "every document to be indexed once")
        before = topic_end_offsets(broker.bootstrap_servers, topic)
        broker.stop()
        try:
            code = running.wait(timeout=OUTAGE_SECONDS)
        except subprocess.TimeoutExpired:
            pass  # the indexer rode the whole outage out
        else:
            output = running.stdout.read() if running.stdout else ""
            raise AssertionError(f"the indexer exited with {code} during the outage:\n{output}")
        broker.start_again()
        sent = producer.sent
        wait_until(lambda: producer.sent >= sent + 48, 60, "two rounds of every key")
        producer.stop()

        ends = topic_end_offsets(broker.bootstrap_servers, topic)
        assert all(ends[n] > before[n] for n in before), (before, ends)  # news everywhere
        wait_until(lambda: consumer_lag(live) == {0: 0, 1: 0, 2: 0}, 90, "every partition consumed")
        finish(kgstream("replay", *kafka, "--data", str(reference), env=env))
        wait_until(lambda: export(live, env) == export(reference, env), 60, "the same stores")
    finally:
        producer.stop()
        running.terminate()
        output, _ = running.communicate(timeout=60)
    assert running.returncode == 0, output


def test_kill_9_at_random_points_three_times_then_the_stores_equal_an_uninterrupted_run(
    kafka_broker, llm_env, llm_server, tmp_path
):
    topic = "killed-thrice"
    kafka_broker.create_topic(topic, 3)
    kafka = ["--kafka", kafka_broker.bootstrap_servers, "--topic", topic]
    killed, reference = tmp_path / "killed", tmp_path / "reference"
    seed = random.randrange(1 << 32)
    chance = random.Random(seed)
    events = [document(i) for i in range(200)]
    events += [document(chance.randrange(200), version=v) for v in range(1, 251)]
    events += [DocumentDelete(f"doc-{chance.randrange(200):03d}") for _ in range(50)]
    with DocumentEventProducer(kafka_broker.bootstrap_servers, topic) as producer:
        send_all(producer, events)  # 500 events, about 450 extractions

    llm_server.delay_seconds = 0.02  # each kill lands mid-extraction, between commits
    for kill in range(3):
        running = kgstream("run", *kafka, "--data", str(killed), "--no-serve", env=llm_env)
        calls = llm_server.chat_calls + chance.randrange(10, 100)
        wait_until(
            lambda: llm_server.chat_calls >= calls or running.poll() is not None,  # noqa: B023
            120,
            f"kill {kill + 1} (seed {seed})",
        )
        assert running.poll() is None, f"the indexer stopped before kill {kill + 1} (seed {seed})"
        running.send_signal(signal.SIGKILL)
        running.communicate(timeout=30)
    llm_server.delay_seconds = 0.0

    caught_up = ["--until-caught-up", "--no-serve"]
    finish(kgstream("run", *kafka, "--data", str(killed), *caught_up, env=llm_env), timeout=300)
    finish(kgstream("replay", *kafka, "--data", str(reference), env=llm_env), timeout=300)
    exported = export(killed, llm_env)
    assert exported == export(reference, llm_env), f"seed {seed}"
    deleted = {event.doc_id for event in events if isinstance(event, DocumentDelete)}
    assert len(exported["documents"]) == 200 - len(deleted)  # the deletes come last
    assert stored_vectors(killed, llm_server) == stored_vectors(reference, llm_server), seed


def stored_vectors(data: Path, llm_server) -> dict:
    """Every vector point, by kind and key, with its payload (the stores are not running)."""
    embedder = OpenAIEmbedder(OpenAIEmbeddingOptions(llm_server.base_url, "test-embedding-model"))
    space = embedding_space_name(embedder)
    with open_stores(StoreLocations(data), space, embedder.dimension) as stores:
        return read_index(stores).vectors


def test_a_run_started_while_its_broker_is_down_waits_for_it_in_one_line(broker, env, tmp_path):
    topic = "late-broker"
    broker.create_topic(topic, 1)
    servers = broker.bootstrap_servers
    missing = kgstream("run", "--kafka", servers, "--topic", "no-such-topic", "--no-serve",
                       "--data", str(tmp_path / "missing"), env=env)  # fmt: skip
    said, _ = missing.communicate(timeout=120)
    assert missing.returncode == 2, said
    assert "Kafka topic 'no-such-topic' does not exist" in said and "Traceback" not in said

    broker.stop()
    live = tmp_path / "live"
    running = kgstream("run", "--kafka", servers, "--topic", topic, "--data", str(live),
                       "--no-serve", env=env)  # fmt: skip
    output = Output(running)
    try:
        wait_until(lambda: output.has("is unreachable"), 60, "the line saying Kafka is away")
        assert running.poll() is None, output.text()  # waiting, not gone
        broker.start_again()
        with DocumentEventProducer(servers, topic) as producer:
            producer.send(document(1))
        wait_until(lambda: processed(live) == 1, 120, "the document, once the broker is back")
    finally:
        running.send_signal(signal.SIGINT)
        running.wait(timeout=60)
    text = output.join()
    assert running.returncode == 0, text
    assert text.count("is unreachable") == 1, text
    assert "panicked" not in text and "Traceback" not in text, text


def test_a_stop_while_waiting_for_kafka_is_one_line_and_exit_0(env, tmp_path):
    (closed,) = free_ports(1)
    running = kgstream("run", "--kafka", f"127.0.0.1:{closed}", "--topic", "t", "--no-serve",
                       "--data", str(tmp_path / "data"), env=env)  # fmt: skip
    output = Output(running)
    wait_until(lambda: output.has("is unreachable"), 60, "the line saying Kafka is away")
    running.send_signal(signal.SIGTERM)
    running.wait(timeout=60)
    text = output.join()
    assert running.returncode == 0, text
    assert text.strip().splitlines()[-1] == (
        "kgstream: SIGTERM: stopping while waiting for Kafka"
    ), text
    assert "Traceback" not in text and "panicked" not in text, text
