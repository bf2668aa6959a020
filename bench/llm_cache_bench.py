"""The LLM cache's share of an initial index: wall time inside SqliteResponseCache's methods.

Run from the repository root (about 40 s on 2 cores; under the bench lock if others work):

    .venv/bin/python bench/llm_cache_bench.py [--docs 300] [--concurrency 4]

indexer_bench's code path (`index_folder`) over its seeded corpus, the test LLM answering at
0 ms a call so that everything but the model is measured. Each cache method is wrapped with a
timer; the seconds are summed over the extraction and render threads, so they are thread time,
not a slice of one profile. A flush started by a full buffer is counted in `put` and in
`flush` both. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import results
from bench.corpus import write_corpus
from bench.harness import ServerProcess
from bench.indexer_bench import index_folder
from connectors.llm.client import SqliteResponseCache

METHODS = ("get", "put", "flush", "close")


def time_methods(totals: dict[str, list[float]]) -> None:
    lock = threading.Lock()

    def timed(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                with lock:
                    totals[name][0] += time.perf_counter() - began
                    totals[name][1] += 1

        return wrapper

    for name in METHODS:
        if hasattr(SqliteResponseCache, name):
            setattr(SqliteResponseCache, name, timed(name, getattr(SqliteResponseCache, name)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=4, help="llm_max_concurrency")
    results.add_results_option(parser)
    run = results.BenchRun.start(__file__, argv)
    args = parser.parse_args(argv)
    totals = {name: [0.0, 0] for name in METHODS}
    time_methods(totals)
    work = Path(tempfile.mkdtemp(prefix="kgstream-llm-cache-"))
    write_corpus(work / "corpus", args.docs, 7)
    with (
        ServerProcess(0.0, "extract") as llm,
        ServerProcess() as embeddings,
    ):
        result = index_folder(
            "LLM 0 ms/call",
            work / "corpus",
            work / "data",
            1,
            llm_base_url=llm.base_url,
            llm_model="test-chat-model",
            llm_max_concurrency=args.concurrency,
            embedding_base_url=embeddings.base_url,
            embedding_model="test-embedding-model",
        )
    print(
        f"{result.counts.documents} docs, {llm.counts.get('chat')} chat calls, "
        f"indexing {result.seconds:.2f} s"
    )
    rows = []
    for name, (seconds, calls) in totals.items():
        per_call = seconds / calls * 1e6 if calls else 0.0
        print(f"  {name}: {calls:.0f} calls, {seconds:.3f} s ({per_call:.0f} us a call)")
        rows.append((name, f"{calls:,.0f}", f"{seconds:.3f}", f"{per_call:.0f}"))
    spent = sum(seconds for seconds, _ in totals.values())  # flushes from put count twice
    share = f"{100 * spent / result.seconds:.1f}%"
    print(f"  cache: at most {spent:.3f} s, {share} of indexing")
    title = (
        f"{result.counts.documents} documents, {llm.counts.get('chat')} LLM calls at 0 ms, "
        f"indexed in {result.seconds:.2f} s"
    )
    tables = [results.table(title, ("method", "calls", "seconds", "us a call"), rows)]
    notes = [f"the cache: at most {spent:.3f} s, {share} of the indexing time"]
    run.write(args.results, "The LLM cache's share of an initial index", tables, notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
