"""A Bytewax cluster of two OS processes (2 workers each) consuming a 3-partition topic:
the stores equal a fresh build. Commits are partitioned: both processes write, each the
keys its workers own (here each keeps its vectors in its own Qdrant Edge store, so each
point is in exactly one of them)."""

import itertools
import multiprocessing

from bytewax.testing import cluster_main

from connectors.index_export import read_index
from connectors.kafka.producer import DocumentEventProducer
from connectors.kafka.source import KafkaDocumentSource, KafkaSourceOptions
from connectors.redis.graph_store import GraphStore
from connectors.stores import Stores
from connectors.vectors.edge import EdgeVectorStore
from connectors.vectors.port import VectorKind
from dataflow.core.naming import relation_id
from dataflow.flow import build_flow
from tests.dataflow.harness import fresh_build, new_components
from tests.dataflow.test_kafka_flow import SCENARIO, final_documents
from tests.support.ports import free_ports

_topics = itertools.count()


def run_process(proc_id, addresses, bootstrap, topic, redis_url, embeddings_url, workdir, out):
    components = new_components(redis_url, embeddings_url, workdir / f"vectors-{proc_id}")
    workspace = components.stores.graph.workspace
    options = KafkaSourceOptions(bootstrap, topic, stop_at_end=True)
    flow = build_flow(KafkaDocumentSource(options), components)
    cluster_main(flow, addresses, proc_id, worker_count_per_proc=2)
    counts = {kind.value: components.stores.vectors.count(kind) for kind in VectorKind}
    components.stores.vectors.close()
    out.put((proc_id, workspace, counts))


def test_two_process_cluster_equals_fresh_build(kafka_broker, redis_server, llm_server, tmp_path):
    topic = f"cluster-{next(_topics)}"
    kafka_broker.create_topic(topic, 3)
    with DocumentEventProducer(kafka_broker.bootstrap_servers, topic) as producer:
        for change in SCENARIO:
            producer.send(change)
    addresses = [f"127.0.0.1:{port}" for port in free_ports(2)]
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    processes = [
        context.Process(
            target=run_process,
            args=(
                proc_id,
                addresses,
                kafka_broker.bootstrap_servers,
                topic,
                redis_server.url,
                llm_server.base_url,
                tmp_path,
                results,
            ),
        )
        for proc_id in (0, 1)
    ]
    for process in processes:
        process.start()
    reported = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0

    expected = fresh_build(final_documents(SCENARIO))
    assert all(any(counts.values()) for _, _, counts in reported), reported  # both wrote
    [workspace] = {workspace for _, workspace, _ in reported}
    graph = GraphStore.from_url(redis_server.url, workspace)
    points: dict[VectorKind, list[str]] = {kind: [] for kind in VectorKind}
    try:
        for proc_id in (0, 1):
            vectors = EdgeVectorStore(tmp_path / f"vectors-{proc_id}", workspace)
            vectors.ensure_collections("test-embedding-model-384", 384)
            try:
                index = read_index(Stores(graph, vectors))
                for kind in VectorKind:
                    points[kind] += index.vectors[kind]
            finally:
                vectors.close()
        assert index.graph == expected
        assert sorted(points[VectorKind.CHUNK]) == sorted(expected.chunks)
        assert sorted(points[VectorKind.ENTITY]) == sorted(expected.entities)
        assert sorted(points[VectorKind.RELATION]) == sorted(map(relation_id, expected.relations))
    finally:
        graph.clear()
