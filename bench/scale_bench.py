"""How kgstream's costs grow with the corpus: the seeded corpus at 1,000, 4,000 and 16,000 docs.

Run from the repository root (one size at a time; about 35 min for all three on 2 cores):

    flock /tmp/kg-bench.lock .venv/bin/python bench/scale_bench.py
    .venv/bin/python bench/scale_bench.py --sizes 500 2000 --edits 20     # a smaller run

For each size: `kgstream run --watch` (the user's command, embedded Redis and Qdrant Edge, the
offline extractor) with embeddings from the OpenAI-compatible test server (hash vectors, in a
child process), so the figures are kgstream's own costs, not a model's. It measures

* the initial load: documents/s and chunks/s over the load, and when the first document and
  half of them were PROCESSED (steady commits show as a first figure far below the total);
* freshness of edits, from the file save to PROCESSED with the new content, separately for
  documents that mention a hub entity (one of the ten entities cited by the most chunks) and
  documents whose every entity is rare (the tenth of documents whose most-cited entity is cited
  least). The edit is the same for both, a neutral sentence appended, so the only difference is
  which entities the edited chunk touches;
* bytes on disk per document after the edits, in allocated blocks: the Bytewax recovery database,
  the embedded Redis files, the vector store, the LLM/embedding caches (everything else), once
  the indexer stopped; and the recovery database against the corpus text, while the indexer
  runs (after the edits, its WAL included) and once it stopped;
* the resident memory of the indexer process and of its redis-server;
* what the indexer process wrote to disk during the load (`/proc/PID/io` write_bytes: the
  recovery database with its WAL, the vectors and the caches). Not per edit: the timed edits
  take a few seconds, less than an epoch (10 s), so their writes are whichever snapshot and
  checkpoint fall among them.

The last table is each figure's ratio to the previous size's: a cost per change that does not grow
with the corpus keeps the freshness ratios near 1 while the corpus grows 4x. Figures are printed,
never asserted; the machine facts end the report.
"""

from __future__ import annotations

import argparse
import itertools
import random
import sqlite3
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import results  # noqa: E402
from bench.corpus import DEFAULT_SEED, generate_corpus, write_corpus  # noqa: E402
from bench.harness import (  # noqa: E402
    ServerProcess,
    allocated_bytes,
    attach_graph,
    expected_hash,
    kgstream_run,
    percentile,
    progress,
    wait_visible,
)
from bench.results import machine_facts  # noqa: E402

HUB_ENTITIES = 10


@dataclass(frozen=True)
class SizeResult:
    documents: int
    chunks: int
    load_seconds: float
    first_processed_seconds: float
    half_processed_seconds: float
    hub_edits: tuple[float, ...]
    rare_edits: tuple[float, ...]
    hub_citations: int  # chunks citing the least-cited of the hub entities
    rare_citations: int  # chunks citing the most-cited entity of a rare document, at most
    disk_bytes: dict[str, int]  # after the indexer stopped
    running_recovery_bytes: int  # the recovery database before the stop, WAL included
    corpus_bytes: int  # the corpus text, as files
    indexer_rss: int
    redis_rss: int
    load_written: int  # bytes the indexer process wrote to disk during the load

    @property
    def docs_per_second(self) -> float:
        return self.documents / self.load_seconds

    @property
    def chunks_per_second(self) -> float:
        return self.chunks / self.load_seconds

    def disk_per_document(self, part: str) -> float:
        return self.disk_bytes[part] / self.documents

    def recovery_to_corpus(self, running: bool = False) -> float:
        """The recovery database's size over the corpus text's (the target: at most 3x)."""
        size = self.running_recovery_bytes if running else self.disk_bytes["recovery"]
        return size / self.corpus_bytes


def redis_work(client: Any) -> str:
    """What the embedded redis-server has done so far: its CPU seconds (its own, and its
    children's: the append-only file's rewrites), the rewrites, and the bytes it was sent."""
    cpu, persistence, stats = client.info("cpu"), client.info("persistence"), client.info("stats")
    own = cpu["used_cpu_user"] + cpu["used_cpu_sys"]
    children = cpu["used_cpu_user_children"] + cpu["used_cpu_sys_children"]
    received = stats["total_net_input_bytes"] / 1e6
    return (
        f"redis used {own:.1f} s of CPU and its AOF rewrites {children:.1f} s "
        f"({persistence['aof_rewrites']} rewrites), received {received:.0f} MB"
    )


def recovery_parts(data_dir: Path) -> str:
    """Where a running index's recovery bytes are: each partition's file, its free pages
    (read by a second connection, as SQLite allows beside Bytewax's) and its WAL."""
    parts = []
    for path in sorted((data_dir / "recovery").glob("part-*.sqlite3")):
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as db:
            (free,) = db.execute("PRAGMA freelist_count").fetchone()
            (page,) = db.execute("PRAGMA page_size").fetchone()
        wal = path.with_name(path.name + "-wal")
        wal_bytes = wal.stat().st_size if wal.exists() else 0
        parts.append(
            f"{path.name} {path.stat().st_size / 1e6:.1f} MB ({free * page / 1e6:.1f} MB free "
            f"pages) + WAL {wal_bytes / 1e6:.1f} MB"
        )
    return "; ".join(parts)


def disk_usage(data_dir: Path) -> dict[str, int]:
    parts = {"recovery": data_dir / "recovery", "redis": data_dir / "redis"}
    parts["vectors"] = data_dir / "vectors"
    used = {name: allocated_bytes(path) if path.exists() else 0 for name, path in parts.items()}
    used["other"] = allocated_bytes(data_dir) - sum(used.values())
    used["total"] = allocated_bytes(data_dir)
    return used


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def written_bytes(pid: int) -> int:
    """The bytes `pid` has caused to be written to storage (`/proc/PID/io`, write_bytes):
    the recovery database (its WAL and checkpoints), the vectors and the caches."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    return 0


def redis_pid(data_dir: Path) -> int | None:
    for pid_file in (data_dir / "redis").glob("*.pid"):
        return int(pid_file.read_text().strip())
    return None


def wait_loaded(graph: Any, count: int, process: Any, log: Path) -> tuple[float, float, float]:
    """Seconds (from now) until the first, half and all of `count` documents are PROCESSED."""
    from dataflow.core.documents import DocumentStatus

    began = time.perf_counter()
    first = half = None
    while True:
        counts = graph.status_counts()
        done = counts.get(DocumentStatus.PROCESSED, 0) + counts.get(DocumentStatus.FAILED, 0)
        now = time.perf_counter() - began
        if done and first is None:
            first = now
        if done * 2 >= count and half is None:
            half = now
        if done >= count:
            assert first is not None and half is not None
            return first, half, now
        if process.poll() is not None:
            raise RuntimeError(f"kgstream run exited with {process.returncode}; see {log}")
        time.sleep(0.05)


def classify_documents(graph: Any) -> tuple[list[str], list[str], int, int]:
    """(documents mentioning a hub entity, documents of rare entities only, and the citation
    thresholds): hubs are the HUB_ENTITIES entities with the most source chunks."""
    citations: dict[str, int] = {}
    entities_of: dict[str, list[str]] = defaultdict(list)
    for entity in graph.iter_entities():
        citations[entity.key] = len(entity.source_chunk_ids)
        for doc_id in entity.doc_ids:
            entities_of[doc_id].append(entity.key)
    hubs = sorted(citations, key=lambda key: (-citations[key], key))[:HUB_ENTITIES]
    hub_set = set(hubs)
    hub_docs = sorted(d for d, keys in entities_of.items() if hub_set.intersection(keys))
    most_cited = {d: max(citations[k] for k in keys) for d, keys in entities_of.items()}
    by_rarity = sorted(most_cited, key=lambda d: (most_cited[d], d))
    rare_docs = by_rarity[: max(1, len(by_rarity) // 10)]
    return hub_docs, rare_docs, citations[hubs[-1]], most_cited[rare_docs[-1]]


def timed_edits(
    doc_ids: Sequence[str],
    corpus: dict[str, str],
    folder: Path,
    edits: int,
    warmup: int,
    rng: random.Random,
    wait: Callable[[str, str], float],
) -> tuple[float, ...]:
    """Append a neutral sentence (no names: it adds no entity) to random documents of
    `doc_ids`, one at a time; seconds from the save to visible, warm-up edits not counted."""
    latencies = []
    for number in range(warmup + edits):
        doc_id = rng.choice(doc_ids)
        text = corpus[doc_id].rstrip("\n") + f"\n\nthis note was reviewed again, pass {number}.\n"
        corpus[doc_id] = text
        wanted = expected_hash(doc_id, text)
        began = time.perf_counter()
        (folder / doc_id).write_text(text, encoding="utf-8")
        seen = wait(doc_id, wanted)
        if number >= warmup:
            latencies.append(seen - began)
    return tuple(latencies)


def run_size(size: int, args: argparse.Namespace, work: Path, server: ServerProcess) -> SizeResult:
    folder, data_dir = work / f"corpus-{size}", work / f"data-{size}"
    write_corpus(folder, size, args.seed)
    corpus = generate_corpus(size, args.seed)
    log = work / f"kgstream-run-{size}.log"
    env = {
        "KGSTREAM_EMBEDDING_BASE_URL": server.base_url,
        "KGSTREAM_EMBEDDING_MODEL": "test-embedding-model",
    }
    progress(f"{size} documents: kgstream run --watch (log {log})")
    with kgstream_run(["--watch", str(folder), "--data", str(data_dir)], log, env) as process:
        graph = attach_graph(data_dir, process, log)
        first, half, load = wait_loaded(graph, size, process, log)
        load_written = written_bytes(process.pid)
        chunks = sum(len(d.record.chunk_ids) for d in graph.iter_documents())
        progress(f"{size} documents: loaded in {load:.1f} s (first PROCESSED after {first:.1f} s)")
        progress(f"{size} documents: after the load, {redis_work(graph.client)}")
        hub_docs, rare_docs, hub_citations, rare_citations = classify_documents(graph)
        rng = random.Random(f"kgstream-scale-{args.seed}-{size}")

        def wait(doc_id: str, content_hash: str) -> float:
            return float(wait_visible(graph, doc_id, content_hash, process, log))

        hub = timed_edits(hub_docs, corpus, folder, args.edits, args.warmup, rng, wait)
        rare = timed_edits(rare_docs, corpus, folder, args.edits, args.warmup, rng, wait)
        progress(
            f"{size} documents: freshness p50 hub {percentile(hub, 50) * 1000:.0f} ms, "
            f"rare {percentile(rare, 50) * 1000:.0f} ms"
        )
        running_recovery = allocated_bytes(data_dir / "recovery")
        progress(f"{size} documents: recovery while running: {recovery_parts(data_dir)}")
        indexer_rss = rss_bytes(process.pid)
        pid = redis_pid(data_dir)
        redis_rss = rss_bytes(pid) if pid is not None else 0
        graph.close()
    return SizeResult(
        documents=size,
        chunks=chunks,
        load_seconds=load,
        first_processed_seconds=first,
        half_processed_seconds=half,
        hub_edits=hub,
        rare_edits=rare,
        hub_citations=hub_citations,
        rare_citations=rare_citations,
        disk_bytes=disk_usage(data_dir),
        running_recovery_bytes=running_recovery,
        corpus_bytes=sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()),
        indexer_rss=indexer_rss,
        redis_rss=redis_rss,
        load_written=load_written,
    )


def ms(values: Sequence[float], q: float) -> float:
    return percentile(values, q) * 1000


def figures(result: SizeResult) -> dict[str, float]:
    """The figures the growth table compares, by name."""
    return {
        "docs/s": result.docs_per_second,
        "first PROCESSED s": result.first_processed_seconds,
        "hub edit p50 ms": ms(result.hub_edits, 50),
        "hub edit p95 ms": ms(result.hub_edits, 95),
        "rare edit p50 ms": ms(result.rare_edits, 50),
        "rare edit p95 ms": ms(result.rare_edits, 95),
        "disk bytes/doc": result.disk_per_document("total"),
        "recovery bytes/doc": result.disk_per_document("recovery"),
        "indexer RSS MB": result.indexer_rss / 2**20,
    }


def report_tables(sizes: Sequence[SizeResult]) -> list[results.Table]:
    tables = [
        results.table(
            "Initial load (test-server embeddings, offline extractor, one worker)",
            (
                "docs",
                "chunks",
                "load s",
                "docs/s",
                "chunks/s",
                "first PROCESSED s",
                "half PROCESSED s",
            ),
            [
                (
                    f"{r.documents:,}",
                    f"{r.chunks:,}",
                    f"{r.load_seconds:.1f}",
                    f"{r.docs_per_second:.1f}",
                    f"{r.chunks_per_second:.1f}",
                    f"{r.first_processed_seconds:.1f}",
                    f"{r.half_processed_seconds:.1f}",
                )
                for r in sizes
            ],
            text_columns=0,
        ),
        results.table(
            "Freshness (file save -> PROCESSED), ms",
            ("docs", "edits touching", "chunks citing", "p50", "p95", "max"),
            [
                (
                    f"{r.documents:,}",
                    label,
                    citing,
                    f"{ms(values, 50):.0f}",
                    f"{ms(values, 95):.0f}",
                    f"{max(values) * 1000:.0f}",
                )
                for r in sizes
                for label, values, citing in (
                    ("a hub entity", r.hub_edits, f">= {r.hub_citations:,}"),
                    ("rare entities only", r.rare_edits, f"<= {r.rare_citations:,}"),
                )
            ],
            text_columns=2,
        ),
        results.table(
            "Disk (allocated blocks, bytes per document, once stopped) and memory",
            (
                "docs",
                "recovery",
                "redis",
                "vectors",
                "other",
                "total",
                "indexer RSS MB",
                "redis RSS MB",
            ),
            [
                (
                    f"{r.documents:,}",
                    *(
                        f"{r.disk_per_document(part):,.0f}"
                        for part in ("recovery", "redis", "vectors", "other", "total")
                    ),
                    f"{r.indexer_rss / 2**20:,.0f}",
                    f"{r.redis_rss / 2**20:,.0f}",
                )
                for r in sizes
            ],
            text_columns=0,
        ),
        results.table(
            "Disk writes of the indexer process during the load (/proc/PID/io write_bytes)",
            ("docs", "MB", "MB per 1,000 chunks loaded"),
            [
                (
                    f"{r.documents:,}",
                    f"{r.load_written / 2**20:,.1f}",
                    f"{r.load_written / 2**20 / r.chunks * 1000:.1f}",
                )
                for r in sizes
            ],
            text_columns=0,
        ),
        results.table(
            "Recovery database against the corpus text (target: at most 3x)",
            (
                "docs",
                "corpus text MB",
                "running MB",
                "running / text",
                "stopped MB",
                "stopped / text",
            ),
            [
                (
                    f"{r.documents:,}",
                    f"{r.corpus_bytes / 1e6:.1f}",
                    f"{r.running_recovery_bytes / 1e6:.1f}",
                    f"{r.recovery_to_corpus(running=True):.1f}x",
                    f"{r.disk_bytes['recovery'] / 1e6:.1f}",
                    f"{r.recovery_to_corpus():.1f}x",
                )
                for r in sizes
            ],
            text_columns=0,
        ),
    ]
    if len(sizes) > 1:
        names = list(figures(sizes[0]))
        rows = []
        for before, after in itertools.pairwise(sizes):
            a, b = figures(before), figures(after)
            ratios = [f"{b[n] / a[n]:.2f}" if a[n] else "-" for n in names]
            rows.append((f"{before.documents:,} -> {after.documents:,}", *ratios))
        tables.append(
            results.table(
                "Growth: each figure's ratio to the previous size's", ("from -> to", *names), rows
            )
        )
    return tables


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 4000, 16000])
    parser.add_argument("--edits", type=int, default=30, help="timed edits of each kind")
    parser.add_argument("--warmup", type=int, default=3, help="untimed first edits of each kind")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--workdir", type=Path, default=None, help="kept (default: a temp dir)")
    results.add_results_option(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    run = results.BenchRun.start(__file__, argv)
    args = build_parser().parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="kgstream-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    sizes = []
    with ServerProcess() as server:
        for size in sorted(args.sizes):
            sizes.append(run_size(size, args, work, server))
    tables = report_tables(sizes)
    results.print_tables(tables)
    print("\n".join(machine_facts()))
    print(f"load average before the run: {' '.join(f'{v:.2f}' for v in run.load_at_start)}")
    title = "Scaling: " + " to ".join(f"{size:,}" for size in sorted(args.sizes)) + " documents"
    run.write(args.results, title, tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
