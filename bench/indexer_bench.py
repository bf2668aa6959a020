"""The live indexer's figures: throughput of an initial index, and freshness of edits.

Run from the repository root:

    .venv/bin/python bench/indexer_bench.py            # every section (~20 min on 2 cores)
    .venv/bin/python bench/indexer_bench.py --quick    # a smaller smoke run (~2.5 min)
    .venv/bin/python bench/indexer_bench.py --only llm --llm-docs 1000   # one section
    .venv/bin/python bench/indexer_bench.py --only fresh-folder --query-clients 8  # under load

What it measures, on the seeded corpus of bench/corpus.py (a fictional world,
150-400 words a document, so one chunk each at the default 1,200-token chunks):

* Throughput: `kgstream index`'s own code path (build_components + run_indexer
  over a one-shot FolderSource) into a fresh data directory with the embedded
  stores (redis-server + Qdrant Edge). Start-up (model load, redis start) is
  timed apart from indexing; chunks/s is over the indexing time only.
  - offline extractor + local MiniLM: the real default;
  - offline extractor + embeddings from the OpenAI-compatible test server, which
    answers at once with hash vectors: the pipeline without embedding cost;
  - an LLM at 200 ms a call (the test server with delay_seconds=0.2 and a
    responder that runs the offline extractor on the chunk in the prompt and
    answers in the delimited record format, so the graph is realistic), at
    llm_max_concurrency 4 and 16. Embeddings then come from an undelayed test
    server, so the figure is the LLM's. Gleaning is on (the default
    max_gleaning=1: two calls a chunk), summaries are real LLM calls too.
  The test servers run in child processes, so their work does not share this
  process's GIL with the indexer (they do share the machine's cores).
* Freshness: `kgstream run` as a subprocess (the user's command with default
  settings: offline extractor, local MiniLM, embedded stores, and its gRPC
  gateway, here on a free port) over an index that already holds the whole
  corpus. Each edit rewrites one document's last paragraph
  (bench.corpus.revise_document); the clock runs from just before the file write
  (folder) or the producer's send (Kafka, acks=all) until Redis shows the
  document PROCESSED with the new content hash, polled every 2 ms from here.
  Edits are sequential (each waits for the previous to be visible); the first
  few are warm-up and not counted. With `--query-clients N`, N threads call
  Retrieve on the gateway back to back meanwhile (bench/gateway_load.py's
  clients, the five modes in turn): freshness under query load. Each source is
  measured again with the test-server embeddings, to show what is embedding and
  what is the rest.

Figures are printed, never asserted. The machine (cores, load) changes them a
lot: the table ends with the facts to quote beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shlex
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import results  # noqa: E402
from bench.corpus import (  # noqa: E402
    DEFAULT_SEED,
    build_world,
    corpus_words,
    generate_corpus,
    revise_document,
    write_corpus,
)
from bench.harness import (  # noqa: E402
    IndexCounts,
    ServerProcess,
    attach_graph,
    count_index,
    expected_hash,
    kgstream_run,
    percentile,
    progress,
    run_settings,
    wait_caught_up,
    wait_processed,
    wait_visible,
)
from bench.queries import ClientLog, build_questions, query_until  # noqa: E402
from bench.results import code_version, machine_facts  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

TOPIC = "kgstream.bench.documents"


# -- results ---------------------------------------------------------------------


@dataclass(frozen=True)
class StepTimes:
    """Wall time spent inside the extract and embed calls of the dataflow's batch steps."""

    extract_seconds: float = 0.0
    embed_seconds: float = 0.0
    texts_embedded: int = 0


@dataclass
class WorkerShare:
    """What one Bytewax worker wrote: commits are partitioned by key across workers."""

    documents: int = 0  # documents it completed (PROCESSED, FAILED or deleted)
    records: int = 0  # entity, relation, chunk and document records written or deleted
    writes: int = 0  # store writes (one transaction each)
    write_seconds: float = 0.0  # wall time in those writes
    commit_cpu_seconds: float = 0.0  # CPU in the commit protocol's bookkeeping


class WorkerShares:
    """An `IndexObserver` that only records each worker's share of the writes."""

    def __init__(self) -> None:
        self.workers: dict[int, WorkerShare] = {}
        self._lock = threading.Lock()

    def _of(self, worker: int) -> WorkerShare:
        return self.workers.setdefault(worker, WorkerShare())

    def wrote(self, worker: int, batch: Any, seconds: float) -> None:
        with self._lock:
            share = self._of(worker)
            share.documents += len(batch.completed)
            share.records += sum(batch.size().values())
            share.writes += 1
            share.write_seconds += seconds

    def commit_cpu(self, worker: int, seconds: float) -> None:
        with self._lock:
            self._of(worker).commit_cpu_seconds += seconds

    def event_received(self, event: Any) -> None:
        pass

    def chunks_extracted(self, count: int) -> None:
        pass

    def embedding_call(self, texts: int) -> None:
        pass

    def committed(self, batch: Any) -> None:
        pass

    def store_outage(self, reason: str | None) -> None:
        pass


@dataclass(frozen=True)
class ThroughputResult:
    label: str
    counts: IndexCounts
    startup_seconds: float
    seconds: float
    steps: StepTimes = StepTimes()
    chat_calls: int | None = None
    note: str = ""
    workers: tuple[tuple[int, WorkerShare], ...] = ()
    cpu_seconds: float = 0.0  # the process's CPU time while indexing

    @property
    def commit_cpu_share(self) -> float:
        spent = sum(share.commit_cpu_seconds for _, share in self.workers)
        return spent / self.cpu_seconds if self.cpu_seconds > 0 else 0.0

    @property
    def chunks_per_second(self) -> float:
        return self.counts.chunks / self.seconds if self.seconds > 0 else 0.0

    @property
    def docs_per_second(self) -> float:
        return self.counts.documents / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class FreshnessResult:
    label: str
    latencies: tuple[float, ...]
    base_documents: int
    note: str = ""
    code: str = ""

    def percentile(self, q: float) -> float:
        return percentile(self.latencies, q)


@dataclass
class Report:
    throughput: list[ThroughputResult] = field(default_factory=list)
    freshness: list[FreshnessResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# -- throughput (in-process, kgstream index's code path) --------------------------


class TimedEmbedder:
    """Wraps the real embedder to count texts and time the calls (same vectors, same space)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.texts = 0

    @property
    def model_name(self) -> str:
        return str(self.inner.model_name)

    @property
    def dimension(self) -> int:
        return int(self.inner.dimension)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        began = time.perf_counter()
        try:
            return list(self.inner.embed(texts))
        finally:
            self.seconds += time.perf_counter() - began
            self.texts += len(texts)


class TimedExtractor:
    """Wraps `Components.extract_many` to time it."""

    def __init__(self, inner: Callable[[Sequence[str]], list[Any]]) -> None:
        self.inner = inner
        self.seconds = 0.0

    def __call__(self, texts: Sequence[str]) -> list[Any]:
        began = time.perf_counter()
        try:
            return self.inner(texts)
        finally:
            self.seconds += time.perf_counter() - began


def index_folder(
    label: str, folder: Path, data_dir: Path, workers: int, **settings_fields: Any
) -> ThroughputResult:
    """`kgstream index FOLDER --data DATA_DIR` with explicit settings, timed in parts."""
    from connectors.folder.source import FolderSource, FolderSourceOptions
    from kgstream.assembly import build_components
    from kgstream.indexer import RunOptions, run_indexer
    from kgstream.settings import Settings

    settings = Settings(data_dir=data_dir, **settings_fields)
    progress(f"{label}: indexing {folder.name} into {data_dir.name}")
    began = time.perf_counter()
    components = build_components(settings)
    startup = time.perf_counter() - began
    embedder = TimedEmbedder(components.embedder)
    extractor = TimedExtractor(components.extract_many)
    components.embedder, components.extract_many = embedder, extractor
    shares = WorkerShares()
    components.observer = shares
    try:
        source = FolderSource(
            FolderSourceOptions(
                root=folder.resolve(),
                stop_after_scan=True,
                watch=False,
                max_document_bytes=settings.max_document_bytes,
            ),
            components.codec,
        )
        began, cpu_began = time.perf_counter(), time.process_time()
        run_indexer(components, source, settings.data_dir, RunOptions(workers=workers))
        seconds, cpu = time.perf_counter() - began, time.process_time() - cpu_began
        counts = count_index(components.stores.graph)
    finally:
        components.close()
    steps = StepTimes(extractor.seconds, embedder.seconds, embedder.texts)
    by_worker = tuple(sorted(shares.workers.items()))
    result = ThroughputResult(
        label, counts, startup, seconds, steps, workers=by_worker, cpu_seconds=cpu
    )
    progress(
        f"{label}: {counts.documents} docs, {counts.chunks} chunks in {seconds:.1f} s "
        f"({result.chunks_per_second:.1f} chunks/s; start-up {startup:.1f} s)"
    )
    return result


def run_throughput(args: argparse.Namespace, work: Path, folder: Path, report: Report) -> None:
    sections = args.sections
    if "offline" in sections:
        report.throughput.append(
            index_folder(
                "offline extractor, local MiniLM (default)",
                folder,
                work / "data-offline-local",
                args.workers,
            )
        )
    if "offline-server-embed" in sections:
        with ServerProcess() as server:
            result = index_folder(
                "offline extractor, test-server embeddings",
                folder,
                work / "data-offline-server",
                args.workers,
                embedding_base_url=server.base_url,
                embedding_model="test-embedding-model",
            )
        report.throughput.append(result)
    if "llm" in sections:
        llm_folder = work / f"corpus-{args.llm_docs}"
        if args.llm_docs == args.docs:
            llm_folder = folder
        else:
            write_corpus(llm_folder, args.llm_docs, args.seed)
        for concurrency in args.llm_concurrency:
            with (
                ServerProcess(args.llm_delay, "extract") as llm,
                ServerProcess() as embeddings,
            ):
                result = index_folder(
                    f"LLM {args.llm_delay * 1000:.0f} ms/call, concurrency {concurrency}",
                    llm_folder,
                    work / f"data-llm-c{concurrency}",
                    args.workers,
                    llm_base_url=llm.base_url,
                    llm_model="test-chat-model",
                    llm_max_concurrency=concurrency,
                    embedding_base_url=embeddings.base_url,
                    embedding_model="test-embedding-model",
                )
            calls = llm.counts.get("chat")
            note = f"{args.llm_docs}-doc subset" if args.llm_docs != args.docs else ""
            if llm.counts:
                note = ", ".join(
                    filter(None, [note, f"peak {llm.counts.get('max_in_flight')} calls in flight"])
                )
            report.throughput.append(
                ThroughputResult(
                    result.label,
                    result.counts,
                    result.startup_seconds,
                    result.seconds,
                    result.steps,
                    chat_calls=calls,
                    note=note,
                    workers=result.workers,
                    cpu_seconds=result.cpu_seconds,
                )
            )


# -- freshness (kgstream run as a subprocess) -------------------------------------


def measure_edits(
    corpus: dict[str, str],
    edits: int,
    warmup: int,
    seed: int,
    apply_edit: Callable[[str, str], None],
    graph: Any,
    process: Any,
    log: Path,
) -> tuple[float, ...]:
    """Edit random documents one at a time; seconds from `apply_edit` to visible, per edit."""
    rng = random.Random(f"kgstream-bench-edits-{seed}")
    paths = sorted(corpus)
    latencies: list[float] = []
    for number in range(warmup + edits):
        doc_id = rng.choice(paths)
        text = revise_document(corpus[doc_id], seed=number, world_seed=seed)
        corpus[doc_id] = text
        wanted = expected_hash(doc_id, text)
        began = time.perf_counter()
        apply_edit(doc_id, text)
        seen = wait_visible(graph, doc_id, wanted, process, log)
        if number >= warmup:
            latencies.append(seen - began)
    return tuple(latencies)


def run_freshness_folder(
    args: argparse.Namespace,
    work: Path,
    folder: Path,
    corpus: dict[str, str],
    report: Report,
    server_embeddings: bool,
) -> None:
    """Edits saved into the watched folder; `corpus` is the folder's current content."""
    with contextlib.ExitStack() as stack:
        settings: dict[str, str] = {}
        name, label, note = "local", "folder: file save -> visible", "local MiniLM"
        if server_embeddings:
            server = stack.enter_context(ServerProcess())
            settings = {
                "embedding_base_url": server.base_url,
                "embedding_model": "test-embedding-model",
            }
            name, note = "server", "test-server embeddings"
        data_dir = work / f"data-offline-{name}"
        if not (data_dir / "recovery").exists():
            progress(f"freshness (folder, {note}): indexing the corpus first (not timed)")
            index_folder("base index for freshness", folder, data_dir, args.workers, **settings)
        log = work / f"kgstream-run-folder-{name}.log"
        progress(
            f"freshness (folder, {note}): kgstream run --watch, {args.edits} edits "
            f"(+{args.warmup} warm-up)"
        )
        arguments = ["--watch", str(folder), "--data", str(data_dir)]
        arguments += ["--workers", str(args.workers)]
        env = {f"KGSTREAM_{key.upper()}": value for key, value in settings.items()}
        env.update(run_settings(args.run_setting))
        code = code_version()
        grpc = f"127.0.0.1:{free_port()}"
        with kgstream_run(arguments, log, env, grpc) as process:
            graph = attach_graph(data_dir, process, log)
            # An index built before earlier edits catches up on start: wait for that first.
            wait_caught_up(graph, corpus, process, log)

            def save(doc_id: str, text: str) -> None:
                (folder / doc_id).write_text(text, encoding="utf-8")

            with query_load(grpc, args.query_clients, corpus, args.seed) as load:
                latencies = measure_edits(
                    corpus, args.edits, args.warmup, args.seed, save, graph, process, log
                )
            graph.close()
    if args.run_setting:
        note += "; " + ", ".join(args.run_setting)
    if args.query_clients:
        note += f"; {load.describe()}"
    report.freshness.append(
        FreshnessResult(label, latencies, len(corpus), f"{note}; in-place write", code)
    )
    progress(f"freshness (folder, {note}): p50 {percentile(latencies, 50) * 1000:.0f} ms")


class QueryLoad:
    """Client threads calling Retrieve on a running gateway, back to back, until stopped."""

    def __init__(self, address: str, clients: int, questions: Sequence[str]) -> None:
        self.logs = [ClientLog() for _ in range(clients)]
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(
                target=query_until,
                args=(address, questions, index, self._stop.is_set, log),
                name=f"bench-client-{index}",
            )
            for index, log in enumerate(self.logs)
        ]
        self._began = self._ended = 0.0

    def __enter__(self) -> QueryLoad:
        self._began = time.monotonic()
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._ended = time.monotonic()

    def describe(self) -> str:
        calls = sum(len(log.versions) for log in self.logs)
        errors = sum(len(log.errors) for log in self.logs)
        rate = calls / max(self._ended - self._began, 1e-9)
        return (
            f"{len(self.logs)} clients querying: {calls:,} Retrieve calls ({rate:.0f}/s), "
            f"{errors} errors"
        )


@contextlib.contextmanager
def query_load(
    address: str, clients: int, corpus: dict[str, str], seed: int
) -> Iterator[QueryLoad]:
    """`clients` threads querying the gateway at `address` meanwhile (none for 0)."""
    questions = build_questions(build_world(seed), corpus, 400, seed) if clients else []
    with QueryLoad(address, clients, questions) as load:
        yield load


def run_freshness_kafka(
    args: argparse.Namespace, work: Path, report: Report, variants: Sequence[bool]
) -> None:
    """One broker; per variant (False: local MiniLM, True: test-server embeddings) a topic
    loaded with the corpus, a `kgstream run --kafka` over it, then the timed edits."""
    from tests.support.kafka import KafkaBroker

    progress("freshness (Kafka): starting an Apache Kafka broker")
    with KafkaBroker(work / "kafka") as broker:
        for server_embeddings in variants:
            with contextlib.ExitStack() as stack:
                env: dict[str, str] = {}
                name, note = "local", "local MiniLM"
                if server_embeddings:
                    server = stack.enter_context(ServerProcess())
                    env = {
                        "KGSTREAM_EMBEDDING_BASE_URL": server.base_url,
                        "KGSTREAM_EMBEDDING_MODEL": "test-embedding-model",
                    }
                    name, note = "server", "test-server embeddings"
                code = code_version()
                latencies = _kafka_edits(args, work, broker, name, note, env, report)
            report.freshness.append(
                FreshnessResult(
                    "Kafka: produce (acked) -> visible",
                    latencies,
                    args.kafka_docs,
                    note=f"{note}; {args.kafka_partitions} partitions",
                    code=code,
                )
            )
            progress(f"freshness (Kafka, {note}): p50 {percentile(latencies, 50) * 1000:.0f} ms")


def _kafka_edits(
    args: argparse.Namespace,
    work: Path,
    broker: Any,
    name: str,
    note: str,
    env: dict[str, str],
    report: Report,
) -> tuple[float, ...]:
    from connectors.kafka.producer import DocumentEventProducer
    from dataflow.core.documents import DocumentUpsert

    topic = f"{TOPIC}.{name}"
    broker.create_topic(topic, partitions=args.kafka_partitions)
    corpus = generate_corpus(args.kafka_docs, args.seed)
    bootstrap = broker.bootstrap_servers
    with DocumentEventProducer(bootstrap, topic) as producer:

        def send(doc_id: str, text: str) -> None:
            producer.send(DocumentUpsert(doc_id, text.encode(), doc_id))

        for doc_id, text in corpus.items():
            send(doc_id, text)
        data_dir = work / f"data-kafka-{name}"
        log = work / f"kgstream-run-kafka-{name}.log"
        arguments = ["--kafka", bootstrap, "--topic", topic, "--data", str(data_dir)]
        arguments += ["--workers", str(args.workers)]
        progress(f"freshness (Kafka, {note}): kgstream run --kafka over {len(corpus)} documents")
        with kgstream_run(arguments, log, env) as process:
            began = time.perf_counter()
            graph = attach_graph(data_dir, process, log)
            wait_processed(graph, len(corpus), [process], log, timeout=3600)
            report.notes.append(
                f"Kafka initial load ({note}): {len(corpus)} docs indexed in "
                f"{time.perf_counter() - began:.1f} s after `kgstream run --kafka` started "
                "(start-up included)"
            )
            progress(f"freshness (Kafka, {note}): {args.edits} edits (+{args.warmup} warm-up)")
            latencies = measure_edits(
                corpus, args.edits, args.warmup, args.seed, send, graph, process, log
            )
            graph.close()
    return latencies


# -- the report ------------------------------------------------------------------


def report_tables(args: argparse.Namespace, report: Report) -> list[results.Table]:
    tables = []
    if report.throughput:
        rows = []
        for t in report.throughput:
            label = f"{t.label} ({t.note})" if t.note else t.label
            calls = "-" if t.chat_calls is None else f"{t.chat_calls:,}"
            failed = f" ({t.counts.failed} failed)" if t.counts.failed else ""
            rows.append(
                (
                    label,
                    f"{t.counts.documents:,}{failed}",
                    f"{t.counts.chunks:,}",
                    f"{t.counts.entities:,}",
                    f"{t.counts.relations:,}",
                    calls,
                    f"{t.steps.texts_embedded:,}",
                    f"{t.steps.extract_seconds:.1f}",
                    f"{t.steps.embed_seconds:.1f}",
                    f"{t.seconds:.1f}",
                    f"{t.chunks_per_second:.1f}",
                )
            )
        tables.append(
            results.table(
                "Initial index (throughput)",
                (
                    "run",
                    "docs",
                    "chunks",
                    "entities",
                    "relations",
                    "LLM calls",
                    "texts embedded",
                    "in extract s",
                    "in embed s",
                    "total s",
                    "chunks/s",
                ),
                rows,
            )
        )
        tables.append(
            results.table(
                f"Per worker ({args.workers} worker(s); commits are partitioned by key)",
                (
                    "run",
                    "worker",
                    "docs completed",
                    "docs/s",
                    "records written",
                    "records/s",
                    "writes",
                    "in writes s",
                    "commit CPU s",
                ),
                [
                    (
                        t.label,
                        worker,
                        f"{share.documents:,}",
                        f"{share.documents / t.seconds:.1f}",
                        f"{share.records:,}",
                        f"{share.records / t.seconds:.1f}",
                        f"{share.writes:,}",
                        f"{share.write_seconds:.1f}",
                        f"{share.commit_cpu_seconds:.2f}",
                    )
                    for t in report.throughput
                    for worker, share in t.workers
                ],
            )
        )
    if report.freshness:
        tables.append(
            results.table(
                "Freshness: the change to PROCESSED (offline extractor, embedded stores)",
                ("run", "edits", "index holds", "p50 ms", "p95 ms", "max ms"),
                [
                    (
                        f"{f.label} ({f.note})" if f.note else f.label,
                        len(f.latencies),
                        f"{f.base_documents:,} docs",
                        f"{f.percentile(50) * 1000:.0f}",
                        f"{f.percentile(95) * 1000:.0f}",
                        f"{max(f.latencies) * 1000:.0f}",
                    )
                    for f in report.freshness
                ],
            )
        )
    return tables


def report_notes(args: argparse.Namespace, report: Report, words: int) -> list[str]:
    notes = []
    for t in report.throughput:
        commit_cpu = sum(share.commit_cpu_seconds for _, share in t.workers)
        notes.append(
            f"{t.label}: the commit step's bookkeeping took {commit_cpu:.2f} s of the "
            f"process's {t.cpu_seconds:.1f} CPU s ({t.commit_cpu_share:.1%}), store writes "
            f"excluded; {args.workers} worker(s)."
        )
    if report.throughput:
        startups = ", ".join(f"{t.startup_seconds:.1f}" for t in report.throughput)
        notes.append(
            f"start-up before indexing (model load, redis start), not in the time: {startups} s"
        )
    notes += report.notes
    codes = {args.code_at_start} if report.throughput else set()
    codes |= {f.code for f in report.freshness}
    if len(codes) > 1:
        notes.append(
            f"WARNING: the code changed during the run. Throughput: {args.code_at_start}; "
            + "; ".join(f"{f.label} ({f.note}): {f.code}" for f in report.freshness)
        )
    notes.append(
        f"corpus: bench/corpus.py seed {args.seed}, {args.docs:,} documents, {words:,} words"
    )
    return notes


def print_report(
    args: argparse.Namespace, run: results.BenchRun, report: Report, words: int
) -> None:
    tables, notes = report_tables(args, report), report_notes(args, report, words)
    print("\n## Indexer figures")
    results.print_tables(tables)
    lines = [f"- {note}" for note in notes]
    lines += [f"- {fact}" for fact in machine_facts()]
    lines.append(f"- load average at start: {' '.join(f'{v:.2f}' for v in run.load_at_start)}")
    lines.append(f"- command: `{shlex.join(run.argv)}`")
    print("\n".join(lines), flush=True)
    measured = [
        part
        for part, prefix in (("initial index", ("offline", "llm")), ("freshness", ("fresh",)))
        if any(section.startswith(prefix) for section in args.sections)
    ]
    run.write(args.results, "Indexer: " + " and ".join(measured), tables, notes)


# -- command line ------------------------------------------------------------------

SECTIONS = (
    "offline",
    "offline-server-embed",
    "llm",
    "fresh-folder",
    "fresh-folder-server-embed",
    "fresh-kafka",
    "fresh-kafka-server-embed",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Print the live indexer's throughput and freshness figures (see the module "
        "docstring). Defaults run every section."
    )
    parser.add_argument("--quick", action="store_true", help="a small smoke run (~2.5 min)")
    parser.add_argument("--docs", type=int, default=None, help="corpus size (default 1000)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--workers", type=int, default=1, help="Bytewax workers")
    parser.add_argument(
        "--llm-docs", type=int, default=None, help="documents for the LLM runs (default 200)"
    )
    parser.add_argument("--llm-delay", type=float, default=0.2, help="seconds per LLM call")
    parser.add_argument(
        "--llm-concurrency", type=int, nargs="+", default=[4, 16], help="llm_max_concurrency values"
    )
    parser.add_argument("--edits", type=int, default=None, help="timed edits (default 100)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed first edits (default 3)")
    parser.add_argument(
        "--kafka-docs",
        type=int,
        default=None,
        help="documents loaded through Kafka (default --docs)",
    )
    parser.add_argument("--kafka-partitions", type=int, default=3)
    parser.add_argument(
        "--run-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a kgstream setting for the folder freshness run (repeatable)",
    )
    parser.add_argument(
        "--query-clients",
        type=int,
        default=0,
        help="client threads calling Retrieve on the gateway during the folder edits",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=SECTIONS,
        default=None,
        help="run only these sections (default: all)",
    )
    parser.add_argument(
        "--workdir", type=Path, default=None, help="keep files here (default: a temp dir)"
    )
    results.add_results_option(parser)
    return parser


def resolve_defaults(args: argparse.Namespace) -> argparse.Namespace:
    quick = args.quick
    args.docs = args.docs if args.docs is not None else (100 if quick else 1000)
    args.llm_docs = args.llm_docs if args.llm_docs is not None else (40 if quick else 200)
    args.llm_docs = min(args.llm_docs, args.docs)
    args.edits = args.edits if args.edits is not None else (20 if quick else 100)
    args.warmup = args.warmup if args.warmup is not None else (2 if quick else 3)
    args.kafka_docs = args.kafka_docs if args.kafka_docs is not None else args.docs
    args.sections = tuple(args.only or SECTIONS)
    for name in ("docs", "llm_docs", "edits", "kafka_docs", "kafka_partitions", "workers"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be >= 1; got {getattr(args, name)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    run = results.BenchRun.start(__file__, argv)
    args = resolve_defaults(build_parser().parse_args(argv))
    args.code_at_start = run.commit_at_start
    temporary = args.workdir is None
    work = Path(tempfile.mkdtemp(prefix="kgbench-")) if temporary else args.workdir
    work.mkdir(parents=True, exist_ok=True)
    report = Report()
    words = 0
    try:
        folder = work / "corpus"
        if folder.exists():
            shutil.rmtree(folder)
        corpus = write_corpus(folder, args.docs, args.seed)
        words = corpus_words(corpus)
        progress(f"corpus: {len(corpus)} documents, {words:,} words in {folder}")
        run_throughput(args, work, folder, report)
        if "fresh-folder" in args.sections or "fresh-folder-server-embed" in args.sections:
            current = dict(corpus)  # the folder's content as the edits change it
            if "fresh-folder" in args.sections:
                run_freshness_folder(args, work, folder, current, report, False)
            if "fresh-folder-server-embed" in args.sections:
                run_freshness_folder(args, work, folder, current, report, True)
        kafka_variants = [
            server_embeddings
            for server_embeddings, section in (
                (False, "fresh-kafka"),
                (True, "fresh-kafka-server-embed"),
            )
            if section in args.sections
        ]
        if kafka_variants:
            run_freshness_kafka(args, work, report, kafka_variants)
    finally:
        print_report(args, run, report, words)
        if temporary:
            shutil.rmtree(work, ignore_errors=True)
        else:
            progress(f"files kept in {work}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
