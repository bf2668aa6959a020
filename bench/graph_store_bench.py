"""Graph store throughput and 1-hop read latency on the embedded redis-server.

Writes N entities and M random relations (batches of 1,000, each one MULTI/EXEC
with the version bump, as the dataflow's sink does), then reads the 1-hop
neighbourhood of 1,000 random entities one at a time, the way the gateway's
`local` mode does: neighbours with degrees (one script call), then the
relations and the neighbour entities (one pipeline). Seeded, so runs compare.

    .venv/bin/python bench/graph_store_bench.py [--entities 100000 --relations 300000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import results
from connectors.redis.embedded import EmbeddedRedis
from connectors.redis.graph_store import GraphStore
from dataflow.core.commit import GraphBatch
from dataflow.core.contributions import EntityRecord, RelationRecord
from dataflow.core.naming import relation_pair


def entity_record(index: int) -> EntityRecord:
    key = f"entity {index:07d}"
    return EntityRecord(
        key=key,
        name=key.title(),
        type="concept",
        description=f"Entity number {index}, described in a sentence of ordinary length.",
        source_chunk_ids=(f"chunk-{index % 5000:064x}",),
        file_paths=(f"docs/file-{index % 500}.md",),
        doc_ids=(f"docs/file-{index % 500}.md",),
    )


def relation_record(pair: tuple[str, str], rng: random.Random) -> RelationRecord:
    return RelationRecord(
        source=pair[0],
        target=pair[1],
        source_name=pair[0].title(),
        target_name=pair[1].title(),
        keywords=("related", "co-occurs"),
        description=f"{pair[0]} is related to {pair[1]} in a short sentence.",
        weight=round(rng.uniform(0.5, 10.0), 3),
        source_chunk_ids=(f"chunk-{rng.randrange(5000):064x}",),
        file_paths=(f"docs/file-{rng.randrange(500)}.md",),
        doc_ids=(f"docs/file-{rng.randrange(500)}.md",),
    )


def random_pairs(entities: int, relations: int, rng: random.Random) -> list[tuple[str, str]]:
    if relations > entities * (entities - 1) // 2:
        raise SystemExit(f"--relations {relations} is more than {entities} entities can hold")
    pairs: set[tuple[str, str]] = set()
    while len(pairs) < relations:
        a, b = rng.randrange(entities), rng.randrange(entities)
        if a != b:
            pairs.add(relation_pair(f"entity {a:07d}", f"entity {b:07d}"))
    return sorted(pairs)


def percentile(samples: Sequence[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def write_all(store: GraphStore, batches: list[GraphBatch]) -> float:
    start = time.perf_counter()
    for batch in batches:
        store.apply(batch, now=0.0)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--relations", type=int, default=300_000)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--reads", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=20261130)
    results.add_results_option(parser)
    run = results.BenchRun.start(__file__)
    args = parser.parse_args()
    rng = random.Random(args.seed)

    entities = [entity_record(i) for i in range(args.entities)]
    relations = [relation_record(p, rng) for p in random_pairs(args.entities, args.relations, rng)]
    rng.shuffle(relations)
    entity_batches = [
        GraphBatch(entity_upserts=tuple(entities[i : i + args.batch]))
        for i in range(0, len(entities), args.batch)
    ]
    relation_batches = [
        GraphBatch(relation_upserts=tuple(relations[i : i + args.batch]))
        for i in range(0, len(relations), args.batch)
    ]

    with (
        tempfile.TemporaryDirectory(prefix="kgbench-") as data_dir,
        EmbeddedRedis(data_dir) as server,
        GraphStore.from_url(server.url, "bench") as store,
    ):
        info = store.client.info("server")
        print(f"redis-server {info['redis_version']} (embedded, unix socket, AOF everysec)")

        entity_seconds = write_all(store, entity_batches)
        relation_seconds = write_all(store, relation_batches)
        total = len(entities) + len(relations)
        print(
            f"write entities : {len(entities):>7,} in {entity_seconds:6.2f} s = "
            f"{len(entities) / entity_seconds:>9,.0f} records/s"
        )
        print(
            f"write relations: {len(relations):>7,} in {relation_seconds:6.2f} s = "
            f"{len(relations) / relation_seconds:>9,.0f} records/s"
        )
        print(
            f"write total    : {total:>7,} in {entity_seconds + relation_seconds:6.2f} s = "
            f"{total / (entity_seconds + relation_seconds):>9,.0f} records/s "
            f"({len(entity_batches) + len(relation_batches)} batches, "
            f"version {store.version()})"
        )

        keys = [e.key for e in rng.sample(entities, args.reads)]
        latencies: list[float] = []
        edges = 0
        for key in keys:
            start = time.perf_counter()
            neighbours = store.get_neighbours([key])[key]
            pairs = [relation_pair(key, n) for n, _ in neighbours]
            found, ends = store.get_relations_with_endpoints(pairs)
            latencies.append(time.perf_counter() - start)
            if len(found) != len(pairs) or (pairs and key not in ends):
                raise SystemExit(f"inconsistent neighbourhood for {key!r}")
            edges += len(found)
        print(
            f"1-hop reads    : {args.reads:,} keys, {edges / args.reads:.1f} edges each: "
            f"p50 {percentile(latencies, 0.50) * 1e3:.2f} ms, "
            f"p95 {percentile(latencies, 0.95) * 1e3:.2f} ms, "
            f"mean {statistics.fmean(latencies) * 1e3:.2f} ms "
            f"({args.reads / sum(latencies):,.0f} neighbourhoods/s, 2 round trips each)"
        )

        start = time.perf_counter()
        batched = store.get_neighbours(keys)
        batched_ms = (time.perf_counter() - start) * 1e3
        print(
            f"batched read   : neighbours+degrees of all {len(batched):,} keys in one call: "
            f"{batched_ms:.1f} ms"
        )
        memory = store.client.info("memory")["used_memory_human"]
        print(f"redis memory   : {memory}")
        version = info["redis_version"]
    tables = [
        results.table(
            f"Writes in batches of {args.batch:,} (one MULTI/EXEC each), redis-server {version}",
            ("records", "count", "seconds", "records/s"),
            [
                (
                    "entities",
                    f"{len(entities):,}",
                    f"{entity_seconds:.2f}",
                    f"{len(entities) / entity_seconds:,.0f}",
                ),
                (
                    "relations",
                    f"{len(relations):,}",
                    f"{relation_seconds:.2f}",
                    f"{len(relations) / relation_seconds:,.0f}",
                ),
            ],
        ),
        results.table(
            "1-hop neighbourhood reads (neighbours with degrees, then relations and ends)",
            ("keys", "edges each", "p50 ms", "p95 ms", "all keys in one call ms", "redis memory"),
            [
                (
                    f"{args.reads:,}",
                    f"{edges / args.reads:.1f}",
                    f"{percentile(latencies, 0.50) * 1e3:.2f}",
                    f"{percentile(latencies, 0.95) * 1e3:.2f}",
                    f"{batched_ms:.1f}",
                    memory,
                )
            ],
            text_columns=0,
        ),
    ]
    run.write(args.results, "The graph store on the embedded redis-server", tables)


if __name__ == "__main__":
    main()
