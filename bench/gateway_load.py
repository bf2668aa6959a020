"""The gateway under load while it indexes: errors, p50/p95 per mode, monotonic versions.

Run from the repository root (~2 min):

    .venv/bin/python bench/gateway_load.py        # 8 clients, 60 s, 1,000 documents
    .venv/bin/python bench/gateway_load.py --clients 4 --seconds 5 --docs 50  # smoke run

What it does, through the user's own command and the real gRPC wire:

1. Starts `kgstream run --watch FOLDER --data DATA --grpc 127.0.0.1:0` on an empty folder
   with the default embedded settings (offline extractor, local MiniLM, embedded
   redis-server + Qdrant Edge), and reads the bound address from its banner.
2. Writes the seeded corpus of bench/corpus.py into the folder, in 20 equal batches over
   the first half of the run, so the indexer works while the clients query.
3. Meanwhile `--clients` threads (each its own channel and connection) call Retrieve back
   to back for `--seconds`, each cycling through the five modes (local, global, hybrid,
   naive, mix; every client starts at a different one) with seeded questions about the
   corpus. Each call records its latency, its error if any, and the index version it
   reflects; a version below one the same client saw before is a violation
   (read-your-writes promises versions never go back).

Printed: calls, errors (each kind once, with its count), p50/p95 per mode, the index
versions seen, how many documents were PROCESSED by the end, and the machine's load
average; exit status 1 when any call failed or any client saw its version go back.
`tests/gateway/test_gateway_load.py` runs a short version of the same `run_load`.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import results  # noqa: E402
from bench.corpus import DEFAULT_SEED, build_world, generate_corpus  # noqa: E402
from bench.harness import kgstream_gateway, ms, progress  # noqa: E402
from bench.queries import (  # noqa: E402
    MODES,
    ClientLog,
    build_questions,
    open_channel,
    query_until,
    retrieve_stub,
)
from bench.results import load_average  # noqa: E402

WRITE_BATCHES = 20


@dataclass(frozen=True)
class LoadReport:
    clients: list[ClientLog]
    seconds: float
    documents_written: int

    @property
    def calls(self) -> int:
        return sum(len(c.versions) + len(c.errors) for c in self.clients)

    @property
    def errors(self) -> list[str]:
        return [error for client in self.clients for error in client.errors]

    @property
    def backward_steps(self) -> list[tuple[int, int]]:
        return [step for client in self.clients for step in client.backward_steps()]

    def latencies(self, mode: str) -> list[float]:
        return [value for client in self.clients for value in client.latencies[mode]]

    def versions(self) -> list[int]:
        return [version for client in self.clients for version in client.versions]


def write_in_batches(
    folder: Path, documents: dict[str, str], over_seconds: float, stop: threading.Event
) -> int:
    """Write `documents` into `folder` in `WRITE_BATCHES` batches spread over
    `over_seconds`; returns how many were written (fewer if `stop` is set first)."""
    items = list(documents.items())
    size = max(1, -(-len(items) // WRITE_BATCHES))
    pause = over_seconds / WRITE_BATCHES
    written = 0
    for start in range(0, len(items), size):
        for name, text in items[start : start + size]:
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            written += 1
        if stop.wait(pause):
            break
    return written


def run_load(
    address: str,
    folder: Path,
    documents: dict[str, str],
    questions: Sequence[str],
    clients: int,
    seconds: float,
) -> LoadReport:
    """`clients` threads query `address` for `seconds` while `documents` are written into
    the watched `folder` over the first half of that time."""
    until = time.monotonic() + seconds
    logs = [ClientLog() for _ in range(clients)]
    stop = threading.Event()
    written: list[int] = []
    writer = threading.Thread(
        target=lambda: written.append(write_in_batches(folder, documents, seconds / 2, stop)),
        name="bench-writer",
    )
    threads = [
        threading.Thread(
            target=query_until,
            args=(address, questions, index, lambda: time.monotonic() >= until, log),
            name=f"bench-client-{index}",
        )
        for index, log in enumerate(logs)
    ]
    began = time.monotonic()
    writer.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stop.set()
    writer.join()
    return LoadReport(logs, time.monotonic() - began, written[0] if written else 0)


def processed_documents(address: str) -> int:
    """How many documents the index holds as PROCESSED (ListDocuments' total)."""
    from kgstream_protos.v1 import query_pb2 as pb

    channel = open_channel(address)
    try:
        request = pb.ListDocumentsRequest(status=pb.DOCUMENT_STATUS_PROCESSED, page_size=1)
        return int(retrieve_stub(channel).ListDocuments(request, timeout=30).total)
    finally:
        channel.close()


CATCH_UP_SECONDS = 300.0


def seconds_until_processed(address: str, documents: int, timeout: float) -> float | None:
    """Seconds until `documents` are PROCESSED (None: not within `timeout`)."""
    started = time.monotonic()
    while processed_documents(address) < documents:
        if time.monotonic() - started > timeout:
            return None
        time.sleep(0.2)  # a poll of the index, not a wait standing in for one
    return time.monotonic() - started


def report_tables(report: LoadReport) -> list[results.Table]:
    summary = results.table(
        "Calls while the corpus is written into the watched folder",
        ("clients", "seconds", "calls", "calls/s", "errors", "versions going back", "written"),
        [
            (
                len(report.clients),
                f"{report.seconds:.1f}",
                f"{report.calls:,}",
                f"{report.calls / report.seconds:.0f}",
                len(report.errors),
                len(report.backward_steps),
                f"{report.documents_written:,}",
            )
        ],
        text_columns=0,
    )
    by_mode = results.table(
        "Retrieve latency by mode, under load",
        ("mode", "calls", "p50 ms", "p95 ms"),
        [
            (mode, len(values), ms(values, 50), ms(values, 95))
            for mode in MODES
            for values in [report.latencies(mode)]
        ],
    )
    return [summary, by_mode]


def report_notes(
    report: LoadReport, documents: int, processed: int, caught_up: float | None
) -> list[str]:
    notes = [f"{processed:,} documents PROCESSED when the load ended"]
    notes.append(
        f"all {documents:,} PROCESSED {caught_up:.1f} s after the load ended"
        if caught_up is not None
        else f"not all {documents:,} PROCESSED within {CATCH_UP_SECONDS:.0f} s after the load"
    )
    versions = report.versions()
    if versions:
        notes.append(f"index versions seen: {min(versions)} .. {max(versions)}")
    kinds = collections.Counter(report.errors)
    notes += [f"error, {count} x: {error}" for error, count in kinds.most_common()]
    return notes


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--docs", type=int, default=1000, help="documents ingested meanwhile")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument(
        "--work-dir", type=Path, default=None, help="kept afterwards (default: a temporary one)"
    )
    results.add_results_option(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    run = results.BenchRun.start(__file__, argv)
    args = build_parser().parse_args(argv)
    if args.work_dir is None:
        with tempfile.TemporaryDirectory(prefix="kgstream-load-") as work:
            return measure(args, run, Path(work))
    return measure(args, run, args.work_dir)


def measure(args: argparse.Namespace, run: results.BenchRun, work: Path) -> int:
    """The run `main` describes, with its folder, data and log under `work`."""
    folder, data, log_path = work / "docs", work / "data", work / "run.log"
    folder.mkdir(parents=True, exist_ok=True)
    documents = generate_corpus(args.docs, seed=args.seed)
    questions = build_questions(build_world(args.seed), documents, 200, args.seed)
    arguments = ("run", "--watch", str(folder), "--data", str(data))
    progress(f"starting kgstream {' '.join(arguments)} (log {log_path})")
    with kgstream_gateway(log_path, *arguments) as (_, address):
        load_before = load_average()
        progress(f"{args.clients} clients for {args.seconds:g} s, {args.docs} documents")
        report = run_load(address, folder, documents, questions, args.clients, args.seconds)
        processed = processed_documents(address)
        caught_up = seconds_until_processed(address, args.docs, CATCH_UP_SECONDS)
    tables, notes = report_tables(report), report_notes(report, args.docs, processed, caught_up)
    results.print_tables(tables)
    print("\n".join(f"- {note}" for note in notes))
    print(f"- load average: {load_before} at start, {load_average()} at end", flush=True)
    run.write(args.results, "Gateway under load while indexing", tables, notes)
    return 1 if report.errors or report.backward_steps else 0


if __name__ == "__main__":
    sys.exit(main())
