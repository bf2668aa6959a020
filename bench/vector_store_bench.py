"""Vector-store backends on a 1,000-document corpus: which one can be the embedded default?

The Retrieve budget is p95 < 50 ms for about three vector searches (entities top 40,
relations top 40, chunks top 20) plus Redis reads. This script writes a synthetic corpus
at LightRAG's usual proportions (1,000 docs -> ~3,000 chunks, ~12,000 entities, ~20,000
relations; 384-d) into each backend through the `VectorStore` port and prints:

- upsert time per collection, and reopen time (close, open, ensure_collections);
- search p50/p95 per kind, unfiltered and with a file-path-prefix or doc-id filter;
- the "Retrieve" figure: the three searches of one query back to back, p50/p95;
- recall@10 against exact brute force (numpy), unfiltered and filtered.

Vectors are clustered, not uniform: 20 areas x 10 topics, each document belongs to one
topic and lives in a folder named after it, so the nearest neighbours of a query are
meaningful and HNSW recall says something (uniform random 384-d vectors have no
structure, which makes every approximate index look bad). Same-topic cosine is ~0.5,
unrelated ~0, as with sentence embeddings.

Run from the repository root:
      .venv/bin/python -m bench.vector_store_bench                  (all backends, minutes)
      .venv/bin/python -m bench.vector_store_bench --backends edge --queries 500
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench import results
from connectors.vectors.base import BaseVectorStore
from connectors.vectors.edge import EdgeVectorStore
from connectors.vectors.port import VectorFilter, VectorKind, VectorPoint
from connectors.vectors.qdrant import QdrantClientVectorStore
from dataflow.core.naming import relation_id, relation_pair

DIMENSION = 384
SPACE = "bench-clustered-384"
WORKSPACE = "bench"
TOP_K = {VectorKind.ENTITY: 40, VectorKind.RELATION: 40, VectorKind.CHUNK: 20}
AREAS, TOPICS_PER_AREA = 20, 10


@dataclass(frozen=True)
class CorpusSize:
    docs: int
    chunks: int
    entities: int
    relations: int


@dataclass(frozen=True)
class Corpus:
    points: dict[VectorKind, list[VectorPoint]]
    matrices: dict[VectorKind, np.ndarray]  # unit rows, same order as points
    queries: np.ndarray  # unit rows
    area_of_query: list[int]
    doc_ids_of_query: list[tuple[str, ...]]


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    unit: np.ndarray = (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32)
    return unit


def around(rng: np.random.Generator, centers: np.ndarray, spread: float) -> np.ndarray:
    """Unit vectors near `centers` (unit rows): noise of norm ~`spread` added."""
    noise = rng.standard_normal(centers.shape) * (spread / np.sqrt(centers.shape[1]))
    return unit_rows(centers + noise)


def build_corpus(size: CorpusSize, queries: int, seed: int, spread: float = 1.0) -> Corpus:
    """A seeded corpus whose vectors cluster by topic and whose folders follow topics."""
    rng = np.random.default_rng(seed)
    areas = unit_rows(rng.standard_normal((AREAS, DIMENSION)))
    topic_area = np.repeat(np.arange(AREAS), TOPICS_PER_AREA)
    topics = around(rng, areas[topic_area], 0.8)
    n_topics = len(topics)

    doc_topic = rng.integers(0, n_topics, size.docs)
    doc_ids = [f"doc-{d:05d}" for d in range(size.docs)]
    doc_paths = [
        f"docs/area-{topic_area[t]:02d}/topic-{t:03d}/note-{d:05d}.md"
        for d, t in enumerate(doc_topic)
    ]
    docs_by_topic: dict[int, list[int]] = {}
    for d, t in enumerate(doc_topic):
        docs_by_topic.setdefault(int(t), []).append(d)

    chunk_doc = np.sort(rng.integers(0, size.docs, size.chunks))
    chunk_vectors = around(rng, topics[doc_topic[chunk_doc]], spread)
    chunks = [
        VectorPoint(
            VectorKind.CHUNK,
            f"chunk-{i:06d}",
            chunk_vectors[i],
            {"doc_id": doc_ids[d], "file_path": doc_paths[d], "chunk_order": i},
        )
        for i, d in enumerate(chunk_doc)
    ]

    entity_topic = rng.choice(sorted(docs_by_topic), size.entities)
    entity_vectors = around(rng, topics[entity_topic], spread)
    entity_docs: list[list[int]] = []
    for t in entity_topic:
        pool = docs_by_topic[int(t)]
        picks = rng.choice(pool, min(len(pool), int(rng.integers(1, 4))), replace=False)
        entity_docs.append(sorted(int(d) for d in picks))
    entity_keys = [f"entity {i:05d}" for i in range(size.entities)]
    entities = [
        VectorPoint(
            VectorKind.ENTITY,
            entity_keys[i],
            entity_vectors[i],
            {
                "entity_name": entity_keys[i].title(),
                "entity_type": "CONCEPT",
                "doc_ids": [doc_ids[d] for d in entity_docs[i]],
                "file_paths": [doc_paths[d] for d in entity_docs[i]],
            },
        )
        for i in range(size.entities)
    ]

    entities_by_topic: dict[int, list[int]] = {}
    for i, t in enumerate(entity_topic):
        entities_by_topic.setdefault(int(t), []).append(i)
    pairs: set[tuple[int, int]] = set()
    while len(pairs) < size.relations:
        a = int(rng.integers(0, size.entities))
        same_topic = entities_by_topic[int(entity_topic[a])]
        b = (
            int(rng.choice(same_topic))
            if rng.random() < 0.8
            else int(rng.integers(0, size.entities))
        )
        if a != b:
            pairs.add((min(a, b), max(a, b)))
    ordered_pairs = sorted(pairs)
    relation_centers = unit_rows(
        np.stack([topics[entity_topic[a]] + topics[entity_topic[b]] for a, b in ordered_pairs])
    )
    relation_vectors = around(rng, relation_centers, spread)
    relations = []
    for i, (a, b) in enumerate(ordered_pairs):
        docs = sorted(set(entity_docs[a]) | set(entity_docs[b]))
        relations.append(
            VectorPoint(
                VectorKind.RELATION,
                relation_id(relation_pair(entity_keys[a], entity_keys[b])),
                relation_vectors[i],
                {
                    "source": entity_keys[a],
                    "target": entity_keys[b],
                    "weight": 1.0,
                    "doc_ids": [doc_ids[d] for d in docs],
                    "file_paths": [doc_paths[d] for d in docs],
                },
            )
        )

    query_topic = rng.integers(0, n_topics, queries)
    query_docs = [
        tuple(doc_ids[int(d)] for d in rng.choice(size.docs, 3, replace=False))
        for _ in range(queries)
    ]
    return Corpus(
        points={
            VectorKind.CHUNK: chunks,
            VectorKind.ENTITY: entities,
            VectorKind.RELATION: relations,
        },
        matrices={
            VectorKind.CHUNK: chunk_vectors,
            VectorKind.ENTITY: entity_vectors,
            VectorKind.RELATION: relation_vectors,
        },
        queries=around(rng, topics[query_topic], spread),
        area_of_query=[int(topic_area[t]) for t in query_topic],
        doc_ids_of_query=query_docs,
    )


def exact_top(
    corpus: Corpus, kind: VectorKind, query: int, k: int, mask: np.ndarray | None
) -> set[str]:
    scores = corpus.matrices[kind] @ corpus.queries[query]
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    order = np.argsort(-scores, kind="stable")[:k]
    return {corpus.points[kind][i].key for i in order if np.isfinite(scores[i])}


def area_mask(corpus: Corpus, kind: VectorKind, area: int) -> np.ndarray:
    prefix = f"docs/area-{area:02d}/"
    return np.array(
        [any(str(p).startswith(prefix) for p in _paths(point)) for point in corpus.points[kind]]
    )


def _paths(point: VectorPoint) -> list[str]:
    payload = point.payload
    if "file_path" in payload:
        return [str(payload["file_path"])]
    paths = payload["file_paths"]
    return [str(p) for p in paths] if isinstance(paths, list) else []


def percentile(samples: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(samples) * 1000.0, q))


@dataclass(frozen=True)
class Backend:
    name: str
    open: Callable[[Path], BaseVectorStore]
    queries: int
    persistent: bool = True
    optimize: bool = False


def run_backend(backend: Backend, corpus: Corpus, root: Path) -> list[tuple[str, ...]]:
    """Writes, reopens and searches one backend; returns its rows of the report."""
    directory = root / backend.name
    shutil.rmtree(directory, ignore_errors=True)
    store = backend.open(directory)
    store.ensure_collections(SPACE, DIMENSION)
    print(f"\n== {backend.name} ==")
    rows: list[tuple[str, ...]] = []
    for kind in (VectorKind.CHUNK, VectorKind.ENTITY, VectorKind.RELATION):
        started = time.perf_counter()
        store.upsert(corpus.points[kind])
        elapsed = time.perf_counter() - started
        count = len(corpus.points[kind])
        rate = count / elapsed
        print(f"upsert {kind.value:<9} {count:>6} points  {elapsed:7.2f} s  ({rate:,.0f}/s)")
        rows.append((backend.name, f"upsert {count:,} {kind.value} points", f"{elapsed:.2f} s"))
    if isinstance(store, EdgeVectorStore) and backend.optimize:
        started = time.perf_counter()
        store.optimize()
        elapsed = time.perf_counter() - started
        print(f"optimize (HNSW build)        {elapsed:7.2f} s")
        rows.append((backend.name, "optimize (HNSW build)", f"{elapsed:.2f} s"))
    if backend.persistent:
        started = time.perf_counter()
        store.close()
        store = backend.open(directory)
        store.ensure_collections(SPACE, DIMENSION)
        elapsed = time.perf_counter() - started
        print(f"reopen (close + open)        {elapsed:7.2f} s")
        rows.append((backend.name, "reopen (close + open)", f"{elapsed:.2f} s"))
    for kind in VectorKind:
        if store.count(kind) != len(corpus.points[kind]):
            raise RuntimeError(
                f"{backend.name}: {kind.value} holds {store.count(kind)} points after reopen; "
                f"wrote {len(corpus.points[kind])}"
            )

    for label, p50, p95, cpu_ms, recall in measure_searches(store, corpus, backend.queries):
        figures = f"p50 {p50:.2f} ms, p95 {p95:.2f} ms, CPU {cpu_ms:.2f} ms"
        if recall is not None:
            figures += f", recall@10 {recall:.3f}"
        rows.append((backend.name, label, figures))
    store.close()
    return rows


def measure_searches(
    store: BaseVectorStore, corpus: Corpus, queries: int
) -> list[tuple[str, float, float, float, float | None]]:
    """(search, p50 ms, p95 ms, CPU ms, recall@10) of each kind and filter, and of the
    three searches of a Retrieve."""
    measured: list[tuple[str, float, float, float, float | None]] = []
    variants: dict[str, Callable[[int], VectorFilter | None]] = {
        "no filter": lambda q: None,
        "path prefix": lambda q: VectorFilter(
            file_path_prefix=f"docs/area-{corpus.area_of_query[q]:02d}"
        ),
        "3 doc ids": lambda q: VectorFilter(doc_ids=corpus.doc_ids_of_query[q]),
    }
    kinds = (VectorKind.ENTITY, VectorKind.RELATION, VectorKind.CHUNK)
    doc_ids = {kind: [_doc_ids(point) for point in corpus.points[kind]] for kind in kinds}
    print(
        f"{'search':<34} {'p50 ms':>8} {'p95 ms':>8} {'cpu ms':>8} {'recall@10':>10}"
        f"   ({queries} queries; cpu = mean process CPU time, load-independent)"
    )
    for variant, make_filter in variants.items():
        retrieve: list[float] = [0.0] * queries
        retrieve_cpu: list[float] = [0.0] * queries
        for kind in kinds:
            latencies, cpu, recalls = [], [], []
            masks = {}
            for q in range(queries):
                query_filter = make_filter(q)
                vector = corpus.queries[q].tolist()
                started, started_cpu = time.perf_counter(), time.process_time()
                hits = store.search(kind, vector, TOP_K[kind], query_filter)
                elapsed = time.perf_counter() - started
                elapsed_cpu = time.process_time() - started_cpu
                latencies.append(elapsed)
                cpu.append(elapsed_cpu)
                retrieve[q] += elapsed
                retrieve_cpu[q] += elapsed_cpu
                mask = None
                if query_filter is not None and query_filter.file_path_prefix is not None:
                    area = corpus.area_of_query[q]
                    if area not in masks:
                        masks[area] = area_mask(corpus, kind, area)
                    mask = masks[area]
                elif query_filter is not None:
                    wanted = set(query_filter.doc_ids)
                    mask = np.array([bool(wanted & ids) for ids in doc_ids[kind]])
                truth = exact_top(corpus, kind, q, 10, mask)
                if truth:
                    got = {hit.key for hit in hits[:10]}
                    recalls.append(len(got & truth) / len(truth))
            recall = statistics.fmean(recalls) if recalls else float("nan")
            label = f"{kind.value} top{TOP_K[kind]}, {variant}"
            p50, p95 = percentile(latencies, 50), percentile(latencies, 95)
            cpu_ms = statistics.fmean(cpu) * 1000
            print(f"{label:<34} {p50:8.2f} {p95:8.2f} {cpu_ms:8.2f} {recall:10.3f}")
            measured.append((label, p50, p95, cpu_ms, recall))
        label = f"RETRIEVE (3 searches), {variant}"
        p50, p95 = percentile(retrieve, 50), percentile(retrieve, 95)
        cpu_ms = statistics.fmean(retrieve_cpu) * 1000
        print(f"{label:<34} {p50:8.2f} {p95:8.2f} {cpu_ms:8.2f}")
        measured.append((label, p50, p95, cpu_ms, None))
    return measured


def _doc_ids(point: VectorPoint) -> set[str]:
    payload = point.payload
    if "doc_id" in payload:
        return {str(payload["doc_id"])}
    ids = payload["doc_ids"]
    return {str(d) for d in ids} if isinstance(ids, list) else set()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=200, help="queries per Edge run")
    parser.add_argument(
        "--local-queries",
        type=int,
        default=20,
        help="queries per qdrant-client local-mode run (slow)",
    )
    parser.add_argument(
        "--backends",
        default="edge,edge-optimized,qdrant-local-memory,qdrant-local-path",
        help="comma-separated subset of: edge, edge-optimized, qdrant-local-memory, "
        "qdrant-local-path",
    )
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument(
        "--spread",
        type=float,
        default=1.0,
        help="noise around topic centres: 1.0 gives same-topic cosine ~0.5 (sentence-embedding "
        "like); larger values approach structureless random vectors, the worst case for HNSW",
    )
    parser.add_argument(
        "--dir", type=Path, default=None, help="scratch directory (default: a temp dir)"
    )
    results.add_results_option(parser)
    run = results.BenchRun.start(__file__)
    args = parser.parse_args()

    size = CorpusSize(
        docs=args.docs, chunks=3 * args.docs, entities=12 * args.docs, relations=20 * args.docs
    )
    started = time.perf_counter()
    corpus = build_corpus(size, max(args.queries, args.local_queries), args.seed, args.spread)
    built = time.perf_counter() - started
    cpus, load = os.cpu_count(), os.getloadavg()[0]
    print(f"machine: {cpus} CPUs, load average {load:.1f} (latencies suffer when it exceeds them)")
    print(
        f"corpus: {size.docs} docs, {size.chunks} chunks, {size.entities} entities, "
        f"{size.relations} relations, {DIMENSION}-d, spread {args.spread} (built in {built:.1f} s)"
    )
    backends = {
        "edge": Backend("edge", lambda d: EdgeVectorStore(d, WORKSPACE), args.queries),
        "edge-optimized": Backend(
            "edge-optimized", lambda d: EdgeVectorStore(d, WORKSPACE), args.queries, optimize=True
        ),
        "qdrant-local-memory": Backend(
            "qdrant-local-memory",
            lambda d: QdrantClientVectorStore.in_memory(WORKSPACE),
            args.local_queries,
            persistent=False,
        ),
        "qdrant-local-path": Backend(
            "qdrant-local-path",
            lambda d: QdrantClientVectorStore.from_path(str(d), WORKSPACE),
            args.local_queries,
        ),
    }
    root = args.dir or Path(tempfile.mkdtemp(prefix="kgstream-vector-bench-"))
    rows = []
    try:
        for name in args.backends.split(","):
            rows += run_backend(backends[name], corpus, root)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    title = (
        f"{size.docs:,} documents: {size.chunks:,} chunks, {size.entities:,} entities, "
        f"{size.relations:,} relations ({DIMENSION}-d, spread {args.spread})"
    )
    tables = [results.table(title, ("backend", "operation", "figures"), rows, text_columns=3)]
    run.write(args.results, "Vector-store backends", tables)


if __name__ == "__main__":
    main()
