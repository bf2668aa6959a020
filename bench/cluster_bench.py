"""A Bytewax cluster of `kgstream run` processes: throughput per worker and the commit's CPU.

Run from the repository root (~3 min):

    flock /tmp/kg-bench.lock .venv/bin/python bench/cluster_bench.py               # 2 processes
    .venv/bin/python bench/cluster_bench.py --processes 1 --workers 2              # for comparison
    .venv/bin/python bench/cluster_bench.py --docs 100                             # a smoke run

What it does, through the user's own commands:

1. Starts an Apache Kafka broker (tests/support/kafka.py, as the tests do), a redis-server
   that every process shares, and the OpenAI-compatible test server for embeddings (hash
   vectors, answered at once: the figure is kgstream's own cost, not a model's).
2. Writes the seeded corpus of bench/corpus.py to a topic with `--partitions` partitions.
3. Starts `--processes` `kgstream run --kafka ... -i I -a ADDRESSES -w WORKERS --no-serve`,
   each with its own `--data` (its recovery partitions and, given no Qdrant server, its
   own embedded vector store for the points its workers write) and its own metrics address,
   and times them from start to every document PROCESSED in the shared Redis.
4. Scrapes each process's Prometheus metrics: per Bytewax worker the documents it completed,
   the records and writes it made and the seconds in them, the CPU seconds of the commit
   protocol's bookkeeping; per process its CPU seconds.

Printed: the load's time and documents/s, a row per worker, and the commit bookkeeping's
share of the processes' CPU. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import results  # noqa: E402
from bench.corpus import DEFAULT_SEED, generate_corpus  # noqa: E402
from bench.harness import (  # noqa: E402
    ServerProcess,
    clean_environment,
    progress,
    stop_process,
    wait_processed,
)
from bench.results import load_average, machine_facts  # noqa: E402
from tests.support.ports import free_ports  # noqa: E402

TOPIC = "kgstream.bench.cluster"
LOAD_TIMEOUT_SECONDS = 3600.0


@dataclass
class WorkerFigures:
    documents: float = 0.0
    records: float = 0.0
    writes: float = 0.0
    write_seconds: float = 0.0
    commit_cpu_seconds: float = 0.0


@dataclass
class ProcessFigures:
    cpu_seconds: float = 0.0
    workers: dict[str, WorkerFigures] = field(default_factory=lambda: defaultdict(WorkerFigures))


def scrape(address: str) -> ProcessFigures:
    """One process's figures from its Prometheus endpoint."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    figures = ProcessFigures()
    fields = {
        "kgstream_worker_documents_completed_total": "documents",
        "kgstream_worker_records_written_total": "records",
        "kgstream_worker_writes_total": "writes",
        "kgstream_worker_write_seconds_total": "write_seconds",
        "kgstream_worker_commit_cpu_seconds_total": "commit_cpu_seconds",
    }
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "process_cpu_seconds_total":
                figures.cpu_seconds = sample.value
            elif sample.name in fields:
                worker = figures.workers[sample.labels["worker"]]
                name = fields[sample.name]
                setattr(worker, name, getattr(worker, name) + sample.value)
    return figures


def run(args: argparse.Namespace, bench_run: results.BenchRun, work: Path) -> None:
    from connectors.kafka.producer import DocumentEventProducer
    from connectors.redis.graph_store import GraphStore
    from dataflow.core.documents import DocumentUpsert
    from tests.support.kafka import KafkaBroker
    from tests.support.redis import RedisTestServer

    corpus = generate_corpus(args.docs, args.seed)
    with contextlib.ExitStack() as stack:
        progress("starting Apache Kafka, redis-server and the test server for embeddings")
        broker = stack.enter_context(KafkaBroker(work / "kafka"))
        redis_server = RedisTestServer().start()
        stack.callback(redis_server.stop)
        embeddings = ServerProcess()
        stack.callback(embeddings.close)
        broker.create_topic(TOPIC, partitions=args.partitions)
        with DocumentEventProducer(broker.bootstrap_servers, TOPIC) as producer:
            for doc_id, text in corpus.items():
                producer.send(DocumentUpsert(doc_id, text.encode(), doc_id))
        progress(f"{len(corpus)} documents on {TOPIC} ({args.partitions} partitions)")

        env = clean_environment() | {
            "KGSTREAM_REDIS_URL": redis_server.url,
            "KGSTREAM_EMBEDDING_BASE_URL": embeddings.base_url,
            "KGSTREAM_EMBEDDING_MODEL": "test-embedding-model",
        }
        ports = free_ports(2 * args.processes)
        addresses = ";".join(f"127.0.0.1:{port}" for port in ports[: args.processes])
        metrics = [f"127.0.0.1:{port}" for port in ports[args.processes :]]
        began = time.perf_counter()
        processes = []
        for index in range(args.processes):
            command = [sys.executable, "-m", "kgstream.cli", "run", "--kafka"]
            command += [broker.bootstrap_servers, "--topic", TOPIC, "--no-serve"]
            command += ["--data", str(work / f"process-{index}"), "-w", str(args.workers)]
            if args.processes > 1:
                command += ["-i", str(index), "-a", addresses]
            log = (work / f"process-{index}.log").open("wb")
            stack.callback(log.close)
            process = subprocess.Popen(
                command,
                cwd=REPO_ROOT,
                env=env | {"KGSTREAM_METRICS_ADDRESS": metrics[index]},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            processes.append(process)
            stack.callback(stop_process, process)
        progress(f"{args.processes} process(es) x {args.workers} worker(s) started")
        graph = GraphStore.from_url(redis_server.url)
        stack.callback(graph.close)
        wait_processed(graph, len(corpus), processes, work, LOAD_TIMEOUT_SECONDS)
        seconds = time.perf_counter() - began
        figures = [scrape(address) for address in metrics]
    report(args, bench_run, len(corpus), seconds, figures)


def report(
    args: argparse.Namespace,
    bench_run: results.BenchRun,
    documents: int,
    seconds: float,
    figures: list[ProcessFigures],
) -> None:
    title = f"A Bytewax cluster: {args.processes} process(es) x {args.workers} worker(s)"
    rows = [
        (
            index,
            worker,
            f"{w.documents:,.0f}",
            f"{w.documents / seconds:.1f}",
            f"{w.records:,.0f}",
            f"{w.writes:,.0f}",
            f"{w.write_seconds:.1f}",
            f"{w.commit_cpu_seconds:.2f}",
        )
        for index, process in enumerate(figures)
        for worker, w in sorted(process.workers.items(), key=lambda item: int(item[0]))
    ]
    tables = [
        results.table(
            f"{title}: {documents:,} documents from {args.partitions} Kafka partitions, "
            f"all PROCESSED in {seconds:.1f} s ({documents / seconds:.1f} docs/s, start-up "
            "included)",
            (
                "process",
                "worker",
                "docs completed",
                "docs/s",
                "records written",
                "writes",
                "in writes s",
                "commit CPU s",
            ),
            rows,
            text_columns=0,
        )
    ]
    cpu = sum(p.cpu_seconds for p in figures)
    commit = sum(w.commit_cpu_seconds for p in figures for w in p.workers.values())
    notes = [
        f"CPU seconds per process: {', '.join(f'{p.cpu_seconds:.1f}' for p in figures)}; "
        f"the commit protocol's bookkeeping took {commit:.2f} s of {cpu:.1f} "
        f"({commit / cpu:.1%}; store writes excluded)"
        if cpu
        else "no CPU figures scraped"
    ]
    results.print_tables(tables)
    print("\n".join(f"- {line}" for line in [*notes, *machine_facts()]))
    start = " ".join(f"{v:.2f}" for v in bench_run.load_at_start)
    print(f"- load average {start} at start, {load_average()} at end", flush=True)
    bench_run.write(args.results, title, tables, notes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--workers", type=int, default=1, help="Bytewax workers per process")
    parser.add_argument("--partitions", type=int, default=3, help="Kafka partitions")
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--workdir", type=Path, default=None, help="keep files here")
    results.add_results_option(parser)
    bench_run = results.BenchRun.start(__file__)
    args = parser.parse_args()
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        run(args, bench_run, args.workdir)
        return
    with tempfile.TemporaryDirectory(prefix="kgstream-cluster-bench-") as work:
        run(args, bench_run, Path(work))


if __name__ == "__main__":
    main()
