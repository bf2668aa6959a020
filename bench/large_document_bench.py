"""A large document and a small one behind it, through `kgstream run --watch`: how long the
small one waits, and how the large one shows its progress.

Run from the repository root (one run per `--chunks-per-round` value, default 64, 8 and 0,
which is no bound: the large document's chunks are one extraction):

    .venv/bin/python bench/large_document_bench.py                  # ~2 MB, LLM at 200 ms
    .venv/bin/python bench/large_document_bench.py --megabytes 10 --llm-delay 0

What it does, per value: an empty watched folder; the OpenAI-compatible test server in a
child process as the LLM (indexer_bench's extraction responder: the offline extractor's
records in the LLM's format, `--llm-delay` seconds a call, gleaning off) and for the
embeddings (hash vectors at once); `kgstream run --watch` with
`document_chunks_per_round` set. The large document (paragraphs of bench/corpus.py's
world, `--megabytes` of text) is saved; `--small-after` seconds later (while the large one
is being extracted) the small document is saved, and the clock runs from that save to the
small document's PROCESSED. Redis is polled every 20 ms meanwhile: the table shows how many distinct
progress values the large document showed, and when it turned PROCESSED.

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from bench import results  # noqa: E402
from bench.corpus import generate_corpus  # noqa: E402
from bench.harness import (  # noqa: E402
    ServerProcess,
    attach_graph,
    expected_hash,
    kgstream_run,
    run_settings,
)
from bench.results import code_version, machine_facts  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

POLL_SECONDS = 0.02
TIMEOUT_SECONDS = 3600.0


@dataclass(frozen=True)
class Result:
    chunks_per_round: int
    chunks: int
    first_progress_seconds: float  # large saved -> first PROCESSING record with settled > 0
    small_wait_seconds: float  # small saved -> small PROCESSED
    large_seconds: float  # large saved -> large PROCESSED
    progress_values: int  # distinct (settled) values seen while PROCESSING
    llm_calls: int


def large_text(megabytes: float, seed: int) -> str:
    """Paragraphs of the bench corpus's world, repeated up to `megabytes` of text."""
    documents = generate_corpus(200, seed=seed)
    paragraphs = [p for text in documents.values() for p in text.split("\n\n") if p.strip()]
    wanted, parts, size, number = int(megabytes * 1_000_000), [], 0, 0
    while size < wanted:
        paragraph = f"{paragraphs[number % len(paragraphs)]} (part {number})"
        parts.append(paragraph)
        size += len(paragraph) + 2
        number += 1
    return "\n\n".join(parts)


def measure(args: argparse.Namespace, per_round: int, work: Path) -> Result:
    from dataflow.core.documents import DocumentStatus

    folder, data = work / f"docs-{per_round}", work / f"data-{per_round}"
    folder.mkdir()
    log = work / f"kgstream-run-{per_round}.log"
    large, small = (
        large_text(args.megabytes, args.seed),
        ("Carla Diaz leads the Atlas Project at Northwind Labs in Lisbon."),
    )
    with contextlib.ExitStack() as stack:
        llm = stack.enter_context(ServerProcess(args.llm_delay, "extract"))
        env = {
            "KGSTREAM_LLM_BASE_URL": llm.base_url,
            "KGSTREAM_LLM_MODEL": "test-chat-model",
            "KGSTREAM_LLM_API_KEY": "unused",
            "KGSTREAM_MAX_GLEANING": "0",
            "KGSTREAM_EMBEDDING_BASE_URL": llm.base_url,
            "KGSTREAM_EMBEDDING_MODEL": "test-embedding-model",
            "KGSTREAM_DOCUMENT_CHUNKS_PER_ROUND": str(per_round),
            **run_settings(args.run_setting),
        }
        arguments = ["--watch", str(folder), "--data", str(data), "--no-serve"]
        process = stack.enter_context(kgstream_run(arguments, log, env, f"127.0.0.1:{free_port()}"))
        graph = attach_graph(data, process, log)
        large_hash = expected_hash("large.md", large)
        began = time.perf_counter()
        (folder / "large.md").write_text(large, encoding="utf-8")
        first_progress = small_wait = large_done = None
        small_saved = None
        settled_seen: set[int] = set()
        chunks = 0
        deadline = began + TIMEOUT_SECONDS
        while large_done is None or small_wait is None:
            now = time.perf_counter()
            if now > deadline or process.poll() is not None:
                raise RuntimeError(f"kgstream run stopped or timed out; see {log}")
            stored = graph.get_documents(["large.md", "small.md"])
            record = stored["large.md"].record if "large.md" in stored else None
            if record is not None and record.content_hash == large_hash:
                if record.status is DocumentStatus.PROCESSING:
                    chunks = max(chunks, record.chunks_changed)
                    if record.chunks_settled:
                        settled_seen.add(record.chunks_settled)
                        first_progress = first_progress or now - began
                elif record.status is DocumentStatus.PROCESSED and large_done is None:
                    large_done = now - began
                    chunks = chunks or len(record.chunk_ids)
            if small_saved is None and now - began >= args.small_after:
                small_saved = time.perf_counter()
                (folder / "small.md").write_text(small, encoding="utf-8")
            small_done = "small.md" in stored and (
                stored["small.md"].record.status is DocumentStatus.PROCESSED
            )
            if small_saved is not None and small_wait is None and small_done:
                small_wait = now - small_saved
            time.sleep(POLL_SECONDS)
        graph.close()
    return Result(
        per_round,
        chunks,
        first_progress if first_progress is not None else float("nan"),
        small_wait,
        large_done,
        len(settled_seen),
        llm.counts.get("chat", 0),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=2.0, help="the large document")
    parser.add_argument("--llm-delay", type=float, default=0.2, help="seconds per LLM call")
    parser.add_argument("--chunks-per-round", type=int, nargs="+", default=[64, 8, 0])
    parser.add_argument("--small-after", type=float, default=3.0, help="seconds")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--run-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a kgstream setting for every run (repeatable)",
    )
    results.add_results_option(parser)
    run = results.BenchRun.start(__file__, argv)
    args = parser.parse_args(argv)
    measured = []
    with tempfile.TemporaryDirectory(prefix="kgstream-large-") as directory:
        for per_round in args.chunks_per_round:
            print(f"document_chunks_per_round={per_round}: running...", flush=True)
            measured.append(measure(args, per_round, Path(directory)))
    title = (
        f"A {args.megabytes:g} MB document, then a small one saved {args.small_after:g} s "
        f"behind it (LLM {args.llm_delay * 1000:.0f} ms a call, 4 at a time)"
    )
    tables = [
        results.table(
            title,
            (
                "document_chunks_per_round",
                "large: chunks",
                "small waits s",
                "large: first progress s",
                "large: PROCESSED s",
                "progress values seen",
                "LLM calls",
            ),
            [
                (
                    str(r.chunks_per_round) if r.chunks_per_round else "no bound",
                    f"{r.chunks:,}",
                    f"{r.small_wait_seconds:.2f}",
                    f"{r.first_progress_seconds:.2f}",
                    f"{r.large_seconds:.1f}",
                    r.progress_values,
                    f"{r.llm_calls:,}",
                )
                for r in measured
            ],
            text_columns=0,
        )
    ]
    notes = [f"code {code_version()}", *(f"setting {s}" for s in args.run_setting)]
    results.print_tables(tables)
    print("\n".join([*notes, *machine_facts()]), flush=True)
    run.write(args.results, "A large document and a small one behind it", tables, notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
