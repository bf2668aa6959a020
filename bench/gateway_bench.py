"""The gateway's figures: Retrieve latency per mode, and sustained requests/s.

Run from the repository root:

    .venv/bin/python bench/gateway_bench.py            # the full run (~12 min; 9 indexing)
    .venv/bin/python bench/gateway_bench.py --quick    # a small smoke run (~2 min)
    .venv/bin/python bench/gateway_bench.py --data DIR # reuse (or build once into) DIR

What it does, all through the user's own commands and the real gRPC wire:

1. Writes the seeded corpus of bench/corpus.py (1,000 documents by default) and
   builds the index with `kgstream index CORPUS --data DATA` as a subprocess, with
   the default embedded settings (offline extractor, local MiniLM, embedded redis
   + Qdrant Edge). With `--data DIR` an index already there is reused as it is.
2. Starts `kgstream serve --data DATA --grpc 127.0.0.1:0` as a subprocess and reads
   the bound address from its "gateway on HOST:PORT" line.
3. Latency: per mode (local, global, hybrid, naive, mix), sequential Retrieve calls
   from one client, after untimed warm-up calls. Questions are seeded, about entity
   names and topics that occur in the corpus, and no question is asked twice in the
   whole run: the gateway caches the embeddings of recent query texts, and a question
   asked in an earlier mode would be timed without its embedding. Keywords do recur
   (many questions name the same person), as they do for real users. The clock runs
   around the stub call (serialisation and the loopback included).
4. Embedding share: the gateway embeds, per request, the texts the mode needs
   (low-level keywords, high-level keywords, the question). The same texts for the
   same questions are embedded here, in-process, in one call with the same local
   MiniLM settings, so each mode's row shows what embedding them costs (the gateway
   embeds the first lane's text first and the rest while that lane reads the stores).
   One question alone is timed too.
5. Sustained load: 8 client threads (each its own channel and connection) call
   Retrieve in mode mix back to back for ~20 s, each call a new question;
   requests/s counts completed calls over the wall time, with p50/p95 under load, and
   the server's CPU time per call.

Figures are printed, never asserted. The client runs on the same 2-core machine
as the server (and whatever else runs there): the table ends with the machine's
load average at start and end, to quote beside the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import shlex
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
    write_corpus,
)
from bench.harness import (  # noqa: E402
    IndexCounts,
    attach_graph,
    build_index,
    count_index,
    group_cpu_seconds,
    has_index,
    kgstream_serve,
    ms,
    percentile,
    progress,
)
from bench.queries import (  # noqa: E402
    CALL_TIMEOUT_SECONDS,
    MODES,
    build_questions,
    open_channel,
    retrieve_stub,
)
from bench.results import load_average, machine_facts  # noqa: E402
from gateway.engine import LaneTexts  # noqa: E402
from gateway.types import Keywords, parse_mode  # noqa: E402

LOAD_MODE = "mix"
LOAD_QUESTIONS_PER_SECOND = 100  # distinct questions for the load run, per second of it
P95_GOAL_MS = 50.0  # the goal: Retrieve p95 under 50 ms on the 1,000-doc corpus


# -- results ---------------------------------------------------------------------


@dataclass(frozen=True)
class ModeResult:
    mode: str
    latencies: tuple[float, ...]  # seconds per call
    entities: float  # mean result sizes
    relations: float
    chunks: float
    errors: int
    embed_latencies: tuple[float, ...] = ()  # in-process embed of the same texts
    texts_embedded: float = 0.0  # mean texts per request


@dataclass(frozen=True)
class LoadResult:
    clients: int
    seconds: float
    latencies: tuple[float, ...]
    errors: int
    server_cpu_seconds: float | None
    first_error: str = ""

    @property
    def requests_per_second(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class IndexInfo:
    counts: IndexCounts
    seconds: float | None  # None: reused
    status_line: str


def meets_goal(result: ModeResult) -> str:
    """ "yes" when the mode's p95 is under the goal (P95_GOAL_MS)."""
    if not result.latencies:
        return "no data"
    return "yes" if percentile(result.latencies, 95) * 1000 < P95_GOAL_MS else "NO"


# -- gRPC clients ----------------------------------------------------------------


def measure_mode(address: str, mode: str, questions: Sequence[str], warmup: int) -> ModeResult:
    """Sequential Retrieve calls in `mode`: the first `warmup` questions untimed."""
    import grpc

    from kgstream.query_command import build_request

    latencies: list[float] = []
    sizes: list[tuple[int, int, int]] = []
    errors = 0
    with open_channel(address) as channel:
        stub = retrieve_stub(channel)
        for number, question in enumerate(questions):
            request = build_request(question, parse_mode(mode), None)
            began = time.perf_counter()
            try:
                result = stub.Retrieve(request, timeout=CALL_TIMEOUT_SECONDS)
            except grpc.RpcError as error:
                errors += 1
                progress(f"{mode}: {error.code().name}: {error.details()}")
                continue
            elapsed = time.perf_counter() - began
            if number >= warmup:
                latencies.append(elapsed)
                sizes.append((len(result.entities), len(result.relations), len(result.chunks)))
    count = max(1, len(sizes))
    return ModeResult(
        mode,
        tuple(latencies),
        entities=sum(s[0] for s in sizes) / count,
        relations=sum(s[1] for s in sizes) / count,
        chunks=sum(s[2] for s in sizes) / count,
        errors=errors,
    )


def run_load(
    address: str,
    questions: Sequence[str],
    clients: int,
    seconds: float,
    server_pid: int,
) -> LoadResult:
    """`clients` threads, each with its own channel, calling Retrieve back to back; each
    call asks the next of `questions` (they wrap around only if the run outlasts them)."""
    import grpc

    from kgstream.query_command import build_request

    channels = [open_channel(address) for _ in range(clients)]
    start = threading.Barrier(clients + 1)
    results: list[list[float]] = [[] for _ in range(clients)]
    errors: list[list[str]] = [[] for _ in range(clients)]
    stop_at = [0.0]

    turns = itertools.count()  # next() on a count is atomic: each call its own question

    def client(number: int) -> None:
        stub = retrieve_stub(channels[number])
        start.wait()
        while time.perf_counter() < stop_at[0]:
            question = questions[next(turns) % len(questions)]
            request = build_request(question, parse_mode(LOAD_MODE), None)
            began = time.perf_counter()
            try:
                stub.Retrieve(request, timeout=CALL_TIMEOUT_SECONDS)
            except grpc.RpcError as error:
                errors[number].append(f"{error.code().name}: {error.details()}")
                continue
            results[number].append(time.perf_counter() - began)

    threads = [
        threading.Thread(target=client, args=(n,), name=f"bench-client-{n}", daemon=True)
        for n in range(clients)
    ]
    for thread in threads:
        thread.start()
    cpu_before = group_cpu_seconds(server_pid)
    began = time.perf_counter()
    stop_at[0] = began + seconds
    start.wait()
    for thread in threads:
        thread.join(timeout=seconds + CALL_TIMEOUT_SECONDS + 10)
    wall = time.perf_counter() - began
    cpu_after = group_cpu_seconds(server_pid)
    for channel in channels:
        channel.close()
    all_errors = [message for messages in errors for message in messages]
    server_cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return LoadResult(
        clients,
        wall,
        tuple(latency for latencies in results for latency in latencies),
        len(all_errors),
        server_cpu,
        all_errors[0] if all_errors else "",
    )


# -- the embedding share (in-process) ---------------------------------------------


def texts_embedded(question: str, mode: str, extractor: Any) -> list[str]:
    """The texts gateway/engine.py embeds for `question` in `mode` (offline keywords)."""
    plan = parse_mode(mode).plan  # the engine's own table of what a mode runs
    keywords = Keywords(high_level=(), low_level=())
    if plan.extracts_keywords:
        keywords = extractor.extract(question)
        if not keywords.low_level and not keywords.high_level:
            keywords = Keywords(high_level=(), low_level=(question.strip(),))
    return list(LaneTexts.of(plan, question, keywords).embedded)


def time_embeddings(
    asked: Mapping[str, Sequence[str]], warmup: int
) -> tuple[dict[str, tuple[tuple[float, ...], float]], tuple[float, ...]]:
    """Per mode, over the questions it was asked: (embed seconds per request, mean texts
    per request); and each timed question alone."""
    from connectors.embeddings.local import (
        LocalEmbeddingOptions,
        LocalMiniLMEmbedder,
        automatic_threads,
    )
    from gateway.keywords import OfflineKeywordExtractor

    # the options the gateway's build_embedder uses by default
    embedder = LocalMiniLMEmbedder(LocalEmbeddingOptions(threads=automatic_threads()))
    embedder.load()
    extractor = OfflineKeywordExtractor()
    for question in asked[MODES[0]][:warmup]:
        embedder.embed([question])
    by_mode: dict[str, tuple[tuple[float, ...], float]] = {}
    for mode in MODES:
        seconds: list[float] = []
        counts: list[int] = []
        for question in asked[mode][warmup:]:
            texts = texts_embedded(question, mode, extractor)
            began = time.perf_counter()
            embedder.embed(texts)
            seconds.append(time.perf_counter() - began)
            counts.append(len(texts))
        by_mode[mode] = (tuple(seconds), sum(counts) / max(1, len(counts)))
    alone = []
    for question in (question for mode in MODES for question in asked[mode][warmup:]):
        began = time.perf_counter()
        embedder.embed([question])
        alone.append(time.perf_counter() - began)
    return by_mode, tuple(alone)


# -- the report ------------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    documents: int
    words: int
    index: IndexInfo | None
    modes: tuple[ModeResult, ...]
    question_embed: tuple[float, ...]
    load: LoadResult | None
    loads: tuple[tuple[str, str], ...]  # (when, load average)
    notes: tuple[str, ...]


def report_tables(args: argparse.Namespace, report: Report) -> list[results.Table]:
    tables = []
    if report.modes:
        rows = []
        for m in report.modes:
            errors = f" ({m.errors} errors)" if m.errors else ""
            embed = (
                f"{ms(m.embed_latencies, 50)} ({m.texts_embedded:.1f})"
                if m.embed_latencies
                else "-"
            )
            rows.append(
                (
                    f"{m.mode}{errors}",
                    ms(m.latencies, 50),
                    ms(m.latencies, 95),
                    ms(m.latencies, 99),
                    embed,
                    f"{m.entities:.1f}",
                    f"{m.relations:.1f}",
                    f"{m.chunks:.1f}",
                )
            )
        tables.append(
            results.table(
                f"Retrieve latency ({args.calls} sequential calls a mode, 1 client)",
                (
                    "mode",
                    "p50 ms",
                    "p95 ms",
                    "p99 ms",
                    "of which embedding, p50 ms (texts)",
                    "entities",
                    "relations",
                    "chunks",
                ),
                rows,
            )
        )
    if report.load is not None:
        load = report.load
        per_call = (
            f"{load.server_cpu_seconds / len(load.latencies) * 1000:.1f}"
            if load.server_cpu_seconds is not None and load.latencies
            else "-"
        )
        errors = f"{load.errors} ({load.first_error})" if load.errors else "0"
        tables.append(
            results.table(
                f"Sustained load: Retrieve, mode {LOAD_MODE}, back to back",
                (
                    "clients",
                    "seconds",
                    "calls",
                    "requests/s",
                    "p50 ms",
                    "p95 ms",
                    "p99 ms",
                    "server CPU ms/call (gateway + redis)",
                    "errors",
                ),
                [
                    (
                        load.clients,
                        f"{load.seconds:.1f}",
                        f"{len(load.latencies):,}",
                        f"{load.requests_per_second:.1f}",
                        ms(load.latencies, 50),
                        ms(load.latencies, 95),
                        ms(load.latencies, 99),
                        per_call,
                        errors,
                    )
                ],
                text_columns=0,
            )
        )
    return tables


def report_notes(args: argparse.Namespace, report: Report) -> list[str]:
    notes = []
    if report.modes:
        verdicts = ", ".join(f"{m.mode} {meets_goal(m)}" for m in report.modes)
        notes.append(f"Retrieve p95 under {P95_GOAL_MS:.0f} ms (1 client): {verdicts}")
    if report.question_embed:
        notes.append(
            "embedding one question in-process (local MiniLM int8 ONNX, one thread per "
            f"core as the gateway): p50 {ms(report.question_embed, 50)} ms, "
            f"p95 {ms(report.question_embed, 95)} ms; the embedding column times the same "
            "texts the gateway embeds for each mode (keywords and/or question, one call)"
        )
    if report.index is not None:
        c = report.index.counts
        built = (
            f"built by `kgstream index` in {report.index.seconds:.1f} s (start-up included)"
            if report.index.seconds is not None
            else "reused from --data"
        )
        notes.append(
            f"index: {c.documents:,} documents ({c.failed} failed), {c.chunks:,} chunks, "
            f"{c.entities:,} entities, {c.relations:,} relations; {built}"
        )
    notes.append(
        f"corpus: bench/corpus.py seed {args.seed}, {report.documents:,} documents, "
        f"{report.words:,} words; questions about its entity names and topics (seeded)"
    )
    notes += report.notes
    notes += [f"load average {when}: {value}" for when, value in report.loads]
    return notes


def print_report(args: argparse.Namespace, run: results.BenchRun, report: Report) -> None:
    tables, notes = report_tables(args, report), report_notes(args, report)
    print("\n## Gateway figures (Retrieve over gRPC, embedded stores)")
    results.print_tables(tables)
    lines = [f"- {note}" for note in notes]
    lines += [f"- {fact}" for fact in machine_facts()]
    lines.append(f"- command: `{shlex.join(run.argv)}`")
    print("\n".join(lines), flush=True)
    run.write(args.results, "Gateway: Retrieve latency and sustained load", tables, notes)


# -- command line ------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Print the gateway's Retrieve latency per mode and sustained requests/s "
        "(see the module docstring). Defaults give the full run."
    )
    parser.add_argument("--quick", action="store_true", help="a small smoke run (~2 min)")
    parser.add_argument("--docs", type=int, default=None, help="corpus size (default 1000)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--calls", type=int, default=None, help="timed calls per mode (200)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed calls per mode (20)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients under load")
    parser.add_argument(
        "--load-seconds", type=float, default=None, help="length of the load phase (20)"
    )
    parser.add_argument(
        "--index-timeout",
        type=float,
        default=1800.0,
        help="give up on `kgstream index` after this many seconds",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        help="data directory: reused when it holds an index, else indexed into and kept "
        "(default: a temporary one)",
    )
    parser.add_argument(
        "--workdir", type=Path, default=None, help="keep corpus and logs here (default: temp)"
    )
    results.add_results_option(parser)
    return parser


def resolve_defaults(args: argparse.Namespace) -> argparse.Namespace:
    quick = args.quick
    args.docs = args.docs if args.docs is not None else (100 if quick else 1000)
    args.calls = args.calls if args.calls is not None else (40 if quick else 200)
    args.warmup = args.warmup if args.warmup is not None else (5 if quick else 20)
    args.load_seconds = args.load_seconds if args.load_seconds is not None else (5 if quick else 20)
    for name in ("docs", "calls", "clients"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name} must be >= 1; got {getattr(args, name)}")
    if args.warmup < 0 or args.load_seconds <= 0:
        raise SystemExit("--warmup must be >= 0 and --load-seconds > 0")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    run = results.BenchRun.start(__file__, argv)
    args = resolve_defaults(build_parser().parse_args(argv))
    loads = [("at start", load_average())]
    notes: list[str] = []
    with contextlib.ExitStack() as stack:
        if args.workdir is None:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kggw-")))
        else:
            work = args.workdir
            work.mkdir(parents=True, exist_ok=True)
        data_dir: Path = args.data if args.data is not None else work / "data"
        corpus = generate_corpus(args.docs, args.seed)
        words = corpus_words(corpus)
        index_seconds: float | None = None
        if has_index(data_dir):
            progress(
                f"reusing the index in {data_dir} (assumed: {args.docs} docs, seed {args.seed})"
            )
        else:
            folder = work / "corpus"
            write_corpus(folder, args.docs, args.seed)
            progress(f"corpus: {len(corpus)} documents, {words:,} words in {folder}")
            index_seconds, _ = build_index(
                folder, data_dir, work / "kgstream-index.log", args.index_timeout
            )
            loads.append(("after indexing", load_average()))
        # Every mode, and the load run, asks its own questions: the gateway caches query
        # embeddings, and a question asked before would be timed without its embedding.
        per_mode = args.warmup + args.calls
        load_pool = int(args.load_seconds * LOAD_QUESTIONS_PER_SECOND)
        questions = build_questions(
            build_world(args.seed),
            corpus,
            len(MODES) * per_mode + load_pool,
            args.seed,
            distinct=True,
        )
        asked = {
            mode: questions[number * per_mode : (number + 1) * per_mode]
            for number, mode in enumerate(MODES)
        }
        modes: list[ModeResult] = []
        load: LoadResult | None = None
        index: IndexInfo | None = None
        question_embed: tuple[float, ...] = ()
        try:
            with kgstream_serve(data_dir, work / "kgstream-serve.log") as (process, address):
                progress(f"gateway on {address} (pid {process.pid})")
                graph = attach_graph(data_dir, process, work / "kgstream-serve.log")
                try:
                    counts = count_index(graph)
                finally:
                    graph.close()
                index = IndexInfo(counts, index_seconds, "")
                if counts.documents != args.docs:
                    notes.append(
                        f"the index holds {counts.documents} documents, not --docs {args.docs}"
                    )
                loads.append(("before the latency runs", load_average()))
                for mode in MODES:
                    progress(f"{mode}: {args.warmup} warm-up + {args.calls} timed calls")
                    result = measure_mode(address, mode, asked[mode], args.warmup)
                    progress(
                        f"{mode}: p50 {ms(result.latencies, 50)} ms, "
                        f"p95 {ms(result.latencies, 95)} ms"
                    )
                    modes.append(result)
                progress("embedding the same texts in-process (the gateway idle)")
                embeds, question_embed = time_embeddings(asked, args.warmup)
                modes = [
                    ModeResult(
                        m.mode,
                        m.latencies,
                        m.entities,
                        m.relations,
                        m.chunks,
                        m.errors,
                        embeds[m.mode][0],
                        embeds[m.mode][1],
                    )
                    for m in modes
                ]
                loads.append(("before the load run", load_average()))
                progress(
                    f"load: {args.clients} clients, mode {LOAD_MODE}, {args.load_seconds:.0f} s"
                )
                load = run_load(
                    address,
                    questions[len(MODES) * per_mode :],
                    args.clients,
                    args.load_seconds,
                    process.pid,
                )
                progress(f"load: {load.requests_per_second:.1f} requests/s")
                loads.append(("at end", load_average()))
        finally:
            print_report(
                args,
                run,
                Report(
                    documents=args.docs,
                    words=words,
                    index=index,
                    modes=tuple(modes),
                    question_embed=question_embed,
                    load=load,
                    loads=tuple(loads),
                    notes=tuple(notes),
                ),
            )
            if args.workdir is not None or args.data is not None:
                progress(f"files kept in {args.workdir or ''} {args.data or ''}".strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
