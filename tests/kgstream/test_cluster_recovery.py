"""A Bytewax cluster of two `kgstream run` processes (one worker each, and two) on a
3-partition topic, one process killed with -9 at a random point three times: each time its
peer stops by itself, the cluster is started again and resumes from the recovery
partitions each process keeps in its own data directory, and the stores then equal an
uninterrupted run (a single-process replay)."""

import random
import re
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from connectors.embeddings.base import embedding_space_name
from connectors.embeddings.remote import OpenAIEmbedder, OpenAIEmbeddingOptions
from connectors.kafka.producer import DocumentEventProducer
from connectors.kafka.source import topic_end_offsets
from connectors.vectors.edge import EdgeVectorStore
from connectors.vectors.port import VectorKind
from dataflow.core.documents import DocumentDelete
from dataflow.state.partitions import read_partitions
from tests.kgstream.processes import (
    SNAPSHOT_EVERY_SECOND,
    Output,
    finish,
    kgstream,
    llm_environment,
)
from tests.kgstream.test_cli_kafka import document, export
from tests.kgstream.test_kafka_faults import stored_vectors
from tests.support.llm_server import offline_extraction_reply
from tests.support.ports import free_ports
from tests.support.wait import wait_until

PROCESSES = 2
RESUMES = re.compile(r"-(\d+) resumes at offset (\d+)")


def resume_offsets(output: str) -> dict[int, int]:
    """Where each Kafka partition a process read resumed, from its log."""
    return {int(p): int(offset) for p, offset in RESUMES.findall(output)}


def cluster_vectors(datas: list[Path], llm_server, workspace: str) -> dict:
    """Every vector point of the cluster, by kind and key: each process keeps the points
    its workers wrote in its own data directory (the cluster is given no Qdrant server, so
    each uses the embedded store), and no point may be in two of them."""
    embedder = OpenAIEmbedder(OpenAIEmbeddingOptions(llm_server.base_url, "test-embedding-model"))
    space = embedding_space_name(embedder)
    union: dict = {kind: {} for kind in VectorKind}
    for data in datas:
        store = EdgeVectorStore(data / "vectors", workspace)
        try:
            store.ensure_collections(space, embedder.dimension)
            for kind in VectorKind:
                for point in store.iter_points(kind):
                    assert point.key not in union[kind], (kind, point.key, data)
                    union[kind][point.key] = (tuple(point.vector), dict(point.payload))
        finally:
            store.close()
    return union


class Cluster:
    """`kgstream run -i I -a ...` for each process, with its own data directory."""

    def __init__(self, tmp_path: Path, kafka: list[str], workers: int, env: dict[str, str]):
        self.datas = [tmp_path / f"process-{i}" for i in range(PROCESSES)]
        self.addresses = ";".join(f"127.0.0.1:{port}" for port in free_ports(PROCESSES))
        self.kafka, self.workers, self.env = kafka, workers, env

    def start(self, *extra: str) -> list:
        return [
            kgstream(
                "run",
                *self.kafka,
                "--data",
                str(data),
                "--no-serve",
                "-w",
                str(self.workers),
                "-i",
                str(i),
                "-a",
                self.addresses,
                *extra,
                env=self.env,
            )
            for i, data in enumerate(self.datas)
        ]


class PacedProducer:
    """Sends `events` on a thread at about `per_second`, so the cluster is always busy
    (its epochs then close every second or so: a kill lands between snapshots)."""

    def __init__(self, bootstrap_servers: str, topic: str, events: list, per_second: float):
        self.done = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(bootstrap_servers, topic, events, 1 / per_second)
        )
        self._thread.start()

    def _run(self, bootstrap_servers: str, topic: str, events: list, pause: float) -> None:
        with DocumentEventProducer(bootstrap_servers, topic) as producer:
            for event in events:
                producer.send(event)
                time.sleep(pause)  # the pace of the stream, not a synchronisation
        self.done.set()

    def join(self) -> None:
        self._thread.join(timeout=120)
        assert self.done.is_set()


def committed_epoch(datas: list[Path]) -> int:
    """The newest snapshot every recovery partition of the cluster has committed (-1: none)."""
    epochs = []
    for path in (p for data in datas for p in (data / "recovery").glob("part-*.sqlite3")):
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = connection.execute("SELECT MIN(commit_epoch) FROM commits").fetchone()
        finally:
            connection.close()
        epochs.append(-1 if row[0] is None else int(row[0]))
    return min(epochs, default=-1)


def run_and_kill_one(
    cluster: Cluster, producer: PacedProducer, llm_server, chance: random.Random, kill: str
) -> dict[int, int]:
    """Start the cluster, let it commit a snapshot and make a few more LLM calls, then kill
    -9 one of its processes: the other stops by itself, exit 1 and one line. Returns where
    each Kafka partition resumed (nothing at a first start)."""
    processes = cluster.start()
    outputs = [Output(p) for p in processes]

    def stopped() -> bool:
        return any(p.poll() is not None for p in processes)

    before = committed_epoch(cluster.datas)
    wait_until(lambda: committed_epoch(cluster.datas) > before or stopped(), 120, "a snapshot")
    calls = llm_server.chat_calls + chance.randrange(5, 30)
    wait_until(
        lambda: llm_server.chat_calls >= calls or producer.done.is_set() or stopped(),
        120,
        f"kill {kill}",
    )
    assert not stopped(), [o.text() for o in outputs]
    victim = chance.randrange(PROCESSES)
    processes[victim].kill()
    peer, peer_output = processes[1 - victim], outputs[1 - victim]
    wait_until(lambda: peer.poll() is not None, 60, f"the peer to stop after kill {kill}")
    processes[victim].wait(timeout=30)
    said = peer_output.join()
    assert peer.returncode == 1 and "the Bytewax cluster stopped" in said, said
    return {**resume_offsets(said), **resume_offsets(outputs[victim].join())}


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2], ids=["2x1", "2x2"])
def test_a_cluster_killed_thrice_resumes_and_its_stores_equal_an_uninterrupted_run(
    workers, kafka_broker, redis_server, llm_server, tmp_path
):
    topic = f"cluster-killed-{workers}"
    kafka_broker.create_topic(topic, 3)
    kafka = ["--kafka", kafka_broker.bootstrap_servers, "--topic", topic]
    llm_server.responder = offline_extraction_reply
    reference_env = llm_environment(llm_server.base_url)  # embedded stores, one process
    workspace = f"cluster{workers}"
    env = dict(reference_env, KGSTREAM_REDIS_URL=redis_server.url, KGSTREAM_WORKSPACE=workspace)
    env.update(SNAPSHOT_EVERY_SECOND)
    seed = random.randrange(1 << 32)
    chance = random.Random(seed)
    print(f"seed {seed}")  # shown with a failure
    events = [document(i) for i in range(100)]
    events += [document(chance.randrange(100), version=v) for v in range(1, 101)]
    events += [DocumentDelete(f"doc-{chance.randrange(100):03d}") for _ in range(25)]
    producer = PacedProducer(kafka_broker.bootstrap_servers, topic, events, per_second=8)

    cluster = Cluster(tmp_path, kafka, workers, env)
    llm_server.delay_seconds = 0.02  # each kill lands mid-extraction
    resumed: list[dict[int, int]] = []
    try:
        for kill in range(3):
            resumed.append(run_and_kill_one(cluster, producer, llm_server, chance, f"{kill + 1}"))
    finally:
        producer.join()
    llm_server.delay_seconds = 0.0

    last = cluster.start("--until-caught-up")
    resumed.append(resume_offsets("".join(finish(process, timeout=300) for process in last)))
    reference = tmp_path / "reference"
    finish(kgstream("replay", *kafka, "--data", str(reference), env=reference_env), timeout=300)

    # every start after the first resumed every Kafka partition from a snapshot, not from 0
    assert resumed[0] == {}, resumed
    for offsets in resumed[1:]:
        assert set(offsets) == {0, 1, 2} and sum(offsets.values()) > 0, (seed, resumed)
    exported = export(cluster.datas[0], env)
    assert exported == export(reference, reference_env), f"seed {seed}"
    deleted = {event.doc_id for event in events if isinstance(event, DocumentDelete)}
    assert len(exported["documents"]) == 100 - len(deleted)  # the deletes come last
    assert all(d["status"] == "PROCESSED" for d in exported["documents"])
    assert cluster_vectors(cluster.datas, llm_server, workspace) == stored_vectors(
        reference, llm_server
    ), seed
    # each process made its own share of the first cluster's partitions, and kept them
    held = [read_partitions(data / "recovery") for data in cluster.datas]
    assert [(p.held, p.count) for p in held] == [
        (tuple(range(i, PROCESSES * workers, PROCESSES)), PROCESSES * workers)
        for i in range(PROCESSES)
    ]


@pytest.mark.slow
def test_a_cluster_rescaled_between_runs_resumes_every_partition_where_it_ended(
    kafka_broker, redis_server, llm_server, tmp_path
):
    """Two processes, then three (the new one holds no partition: the stores hold an
    index), then one with two workers, holding every partition once they are moved to it:
    each run resumes each Kafka partition exactly where the previous run ended, and the
    graph equals a replay. (Vectors are not compared: without a Qdrant server each process
    keeps its own, and rescaling moves keys between processes.)"""
    topic = "cluster-rescaled"
    kafka_broker.create_topic(topic, 3)
    kafka = ["--kafka", kafka_broker.bootstrap_servers, "--topic", topic]
    llm_server.responder = offline_extraction_reply
    reference_env = llm_environment(llm_server.base_url)
    env = dict(reference_env, KGSTREAM_REDIS_URL=redis_server.url, KGSTREAM_WORKSPACE="rescaled")
    datas = [tmp_path / f"process-{i}" for i in range(3)]
    waves = [
        [document(i) for i in range(30)],
        [document(i, version=1) for i in range(0, 30, 3)] + [document(i) for i in range(30, 40)],
        [DocumentDelete(f"doc-{i:03d}") for i in range(0, 40, 4)] + [document(1, version=2)],
    ]
    topologies = [(2, 1), (3, 1), (1, 2)]  # (processes, workers per process)
    ends: dict[int, int] = {}
    for wave, (processes, workers) in zip(waves, topologies, strict=True):
        if processes == 1:  # the processes that leave hand their partitions to the one left
            for data in datas[1:]:
                for part in (data / "recovery").glob("part-*"):
                    part.rename(datas[0] / "recovery" / part.name)
        with DocumentEventProducer(kafka_broker.bootstrap_servers, topic) as producer:
            for event in wave:
                producer.send(event)
        addresses = ";".join(f"127.0.0.1:{port}" for port in free_ports(processes))
        cluster = ["-a", addresses] if processes > 1 else []
        running = [
            kgstream(
                "run", *kafka, "--data", str(datas[i]), "--no-serve", "--until-caught-up",
                "-w", str(workers), *(["-i", str(i)] if cluster else []), *cluster, env=env,
            )
            for i in range(processes)
        ]  # fmt: skip
        said = "".join(finish(process, timeout=180) for process in running)
        assert resume_offsets(said) == ends, said  # where the previous run ended (none at first)
        ends = topic_end_offsets(kafka_broker.bootstrap_servers, topic)
        if processes == 3:
            assert "process 2: no recovery partition in" in said, said
    assert [read_partitions(data / "recovery").held for data in datas] == [(0, 1), (), ()]

    reference = tmp_path / "reference"
    finish(kgstream("replay", *kafka, "--data", str(reference), env=reference_env), timeout=180)
    exported = export(datas[0], env)
    assert exported == export(reference, reference_env)
    assert len(exported["documents"]) == 30
