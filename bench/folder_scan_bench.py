"""The watched folder's rescan: how long the folder source takes to look at every file.

Run from the repository root:

    .venv/bin/python bench/folder_scan_bench.py                     # 16,000 documents
    .venv/bin/python bench/folder_scan_bench.py --docs 1000 4000 16000

`kgstream run --watch` scans its whole folder once at start and again every 30 s, to catch what
the watcher missed; the scans run in the indexer's one thread, in slices between batches, so
their cost comes out of indexing time. Per size: bench/corpus.py's documents are written to a
folder, the source (connectors/folder/source.py, no watcher) scans it once to take its snapshot,
then, `--rounds` times each, (1) a source resumed from that snapshot scans the unchanged folder
(the start-up scan: every file read and hashed), and (2) one source rescans it periodically (a
rescan reads only files whose status changed since it read them). The table gives the best and
the median round, per 1,000 files too. The files are in the page cache after the first scan, as
on a machine whose indexer keeps running. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import results  # noqa: E402
from bench.corpus import DEFAULT_SEED, write_corpus  # noqa: E402
from bench.results import code_version, machine_facts  # noqa: E402
from connectors.folder.source import (  # noqa: E402
    FolderPartition,
    FolderSnapshot,
    FolderSourceOptions,
)
from dataflow.state.codec import SnapshotCodec  # noqa: E402

CODEC = SnapshotCodec()


def scan(
    options: FolderSourceOptions, snapshot: FolderSnapshot | None
) -> tuple[float, int, FolderSnapshot]:
    """One whole-tree scan: (seconds, events emitted, the source's snapshot after it)."""
    began = time.perf_counter()
    partition = FolderPartition(options, CODEC, snapshot)
    events = 0
    try:
        while True:
            events += len(partition.next_batch())
    except StopIteration:
        pass
    return time.perf_counter() - began, events, partition.snapshot()


def periodic_rescans(
    options: FolderSourceOptions, snapshot: FolderSnapshot, rounds: int
) -> list[float]:
    """Seconds of each of `rounds` periodic rescans by one source (after its start-up scan)."""
    partition = FolderPartition(
        replace(options, stop_after_scan=False, rescan_seconds=1e-3), CODEC, snapshot
    )
    times = []
    try:
        for number in range(rounds + 1):
            while partition.next_awake() is not None:  # until the next rescan is queued
                partition.next_batch()
            began, events = time.perf_counter(), 0
            while partition.next_awake() is None:  # until it is done
                events += len(partition.next_batch())
            if events:
                raise RuntimeError(f"a rescan of the unchanged folder emitted {events} events")
            if number:  # the first is the start-up scan
                times.append(time.perf_counter() - began)
    finally:
        partition.close()
    return times


def measure(size: int, rounds: int, seed: int, work: Path) -> tuple[list[float], list[float], int]:
    """(start-up scan seconds, periodic rescan seconds, files)."""
    folder = work / f"corpus-{size}"
    write_corpus(folder, size, seed)
    options = FolderSourceOptions(root=folder, watch=False, stop_after_scan=True)
    _, files, snapshot = scan(options, None)
    start_up = []
    for _ in range(rounds):
        seconds, events, _ = scan(options, snapshot)
        if events:
            raise RuntimeError(f"a rescan of the unchanged folder emitted {events} events")
        start_up.append(seconds)
    return start_up, periodic_rescans(options, snapshot, rounds), files


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, nargs="+", default=[16000])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    results.add_results_option(parser)
    run = results.BenchRun.start(__file__, argv)
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="kgstream-scan-") as directory:
        for size in args.docs:
            start_up, periodic, files = measure(size, args.rounds, args.seed, Path(directory))
            rows.append((size, files, "start-up scan", start_up))
            rows.append((size, files, "periodic rescan", periodic))
    tables = [
        results.table(
            f"Scans of an unchanged folder ({args.rounds} rounds)",
            ("documents", "files", "scan", "best s", "median s", "median us per file"),
            [
                (
                    f"{size:,}",
                    f"{files:,}",
                    kind,
                    f"{min(times):.3f}",
                    f"{statistics.median(times):.3f}",
                    f"{statistics.median(times) * 1e6 / files:.0f}",
                )
                for size, files, kind, times in rows
            ],
            text_columns=0,
        )
    ]
    results.print_tables(tables)
    print("\n".join([f"code {code_version()}", *machine_facts()]), flush=True)
    run.write(args.results, "The watched folder's rescans", tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
