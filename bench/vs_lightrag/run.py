"""kgstream side by side with LightRAG 1.5.7: same corpus, same test LLM, same embeddings.

Run from the repository root (kgstream's venv; LightRAG gets its own, made here):

    .venv/bin/python bench/vs_lightrag/run.py --setup-only   # LightRAG's venv (~1 min, once)
    flock /tmp/kg-bench.lock .venv/bin/python bench/vs_lightrag/run.py   # both, 0 and 200 ms
    .venv/bin/python bench/vs_lightrag/run.py --docs 50 --delays 0       # a small smoke run

What it does, for each LLM latency in `--delays` (default 0 and 0.2 s per chat call):

1. Starts the test server (bench/vs_lightrag/llm_server.py, in a child process): the same
   deterministic extraction records, summaries and query keywords for both systems, in
   LightRAG's own record format, and the same embeddings (a bag of words hashed into 384
   dimensions, `--embeddings hash` for the test server's whole-text hash vectors). Chat calls
   wait the latency; embeddings answer at once. It counts every call by kind.
2. kgstream through its own commands (bench/vs_lightrag/kgstream_side.py): `kgstream index`,
   then `kgstream run --watch` for Retrieve over gRPC, the edits and the deletes.
3. LightRAG 1.5.7 in its own venv (bench/vs_lightrag/lightrag_side.py, lightrag_driver.py):
   `ainsert`, `aquery(only_need_context=True)`, delete + insert per edit, `adelete_by_doc_id`.
   Both with their default settings (LLM concurrency 4 in both; LightRAG also processes at
   most 3 documents at once, its `max_parallel_insert`), gleaning on (one extra call a chunk).
4. Prints, per latency, each figure for both and the ratio kgstream / LightRAG, then the
   targets and the machine's facts.

The corpus is bench/corpus.py's (seed 7, `--docs` documents, 1,000 by default); the questions
are bench/vs_lightrag/questions.py's (their gold documents known by construction); edits
rewrite a document's last paragraph (bench.corpus.revise_document) and deletes remove whole
documents, the same ones in the same order for both systems. Figures are printed, never
asserted.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import results  # noqa: E402
from bench.corpus import DEFAULT_SEED, build_world, corpus_words  # noqa: E402
from bench.harness import percentile, progress, run_settings  # noqa: E402
from bench.queries import build_questions as build_warmup_questions  # noqa: E402
from bench.results import Table, machine_facts  # noqa: E402
from bench.retrieval_eval import score  # noqa: E402
from bench.vs_lightrag.kgstream_side import run_kgstream  # noqa: E402
from bench.vs_lightrag.lightrag_side import run_lightrag  # noqa: E402
from bench.vs_lightrag.measure import MODES, LLMServer, Operation, SystemRun  # noqa: E402
from bench.vs_lightrag.workload import Workload, build_workload  # noqa: E402

HERE = Path(__file__).resolve().parent
VENV = HERE / ".venv"
REQUIREMENTS = HERE / "requirements.txt"
LLM_CONCURRENCY = 4  # kgstream's llm_max_concurrency and LightRAG's llm_model_max_async
MB = 2**20


# -- LightRAG's virtual environment ----------------------------------------------------


def ensure_lightrag_venv() -> Path:
    """bench/vs_lightrag/.venv with requirements.txt installed (again only when it changed);
    returns its python."""
    python = VENV / "bin" / "python"
    stamp = VENV / ".installed"
    wanted = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    progress(f"LightRAG: installing {REQUIREMENTS.name} into {VENV} (log: {VENV}/install.log)")
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    log = VENV / "install.log"
    with log.open("wb") as output:
        installed = subprocess.run(
            [str(python), "-m", "pip", "install", "-r", str(REQUIREMENTS)],
            stdout=output,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if installed.returncode != 0:
        raise SystemExit(f"installing LightRAG failed; the log is {log}")
    stamp.write_text(wanted)
    return python


# -- the report --------------------------------------------------------------------------


def seconds_summary(operations: Sequence[Operation]) -> tuple[float, float]:
    """(p50, mean) seconds of `operations`."""
    values = [op.seconds for op in operations]
    return percentile(values, 50), sum(values) / len(values)


def ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.3g}" if theirs else "-"


def calls_at_index(run: SystemRun) -> str:
    kinds = run.index_calls.by_kind
    parts = " + ".join(f"{kinds[kind]:,}" for kind in ("extract", "glean", "summary"))
    return f"{run.index_calls.chat:,} ({parts})"


def counts(residue: dict[str, int]) -> str:
    parts = ("documents", "chunks", "entities", "relations", "vectors")
    return " / ".join(f"{residue[part]:,}" if part in residue else "?" for part in parts)


def mean_calls(operations: Sequence[Operation]) -> float:
    return sum(op.calls.chat for op in operations) / len(operations)


Figure = tuple[str, float | str, str]  # label, value (a str is shown as is), format


def figures(run: SystemRun, workload: Workload, delay: float) -> list[Figure]:
    """One system's figures at one latency, in the table's order."""
    rows: list[Figure] = [
        (
            f"initial index of {len(workload.corpus):,} docs, s (start-up included)",
            run.index_seconds,
            "{:,.1f}",
        ),
        ("LLM calls at index", run.index_calls.chat, "{:,.0f}"),
        ("  of which extract + glean + summary", calls_at_index(run), ""),
        ("texts embedded at index", run.index_calls.embedded_texts, "{:,.0f}"),
    ]
    if delay:
        bound = run.index_calls.chat * delay / LLM_CONCURRENCY
        rows.append((f"LLM calls x {delay * 1000:.0f} ms / {LLM_CONCURRENCY}, s", bound, "{:,.1f}"))
        in_flight = run.index_calls.chat * delay / run.index_seconds
        rows.append(("LLM calls in flight while indexing (mean)", in_flight, "{:.2f}"))
    for label, operations in (("edit", run.edits), ("delete", run.deletes)):
        p50, mean = seconds_summary(operations)
        rows.append((f"{label} p50 s ({len(operations)} {label}s)", p50, "{:.3f}"))
        rows.append((f"{label} mean s", mean, "{:.3f}"))
        rows.append((f"LLM calls per {label} (mean)", mean_calls(operations), "{:.1f}"))
    parts = ("documents", "chunks", "entities", "relations", "vectors")
    rows.append((f"residue after the changes ({' / '.join(parts)})", counts(run.residue), ""))
    rows.append(
        ("the same check before the changes (it sees them)", counts(run.residue_before), "")
    )
    for mode in MODES:
        queries = run.queries[mode]
        rows.append((f"{mode}: query p50 ms", percentile(queries.seconds, 50) * 1000, "{:,.1f}"))
        rows.append(
            (f"{mode}: LLM calls per question", queries.calls.chat / len(queries.seconds), "{:.2f}")
        )
    for mode in MODES:
        recall = score(workload.questions, run.queries[mode].files)["recall@10"]
        rows.append((f"{mode}: recall@10", recall, "{:.3f}"))
    rows += [
        ("peak RSS while indexing, MB", run.peak_rss_index / MB, "{:,.0f}"),
        (
            "peak RSS while serving (queries, edits, deletes), MB",
            run.peak_rss_serving / MB,
            "{:,.0f}",
        ),
        ("disk after index, MB (allocated)", run.disk_bytes / MB, "{:,.1f}"),
        ("entities after index", run.graph.entities, "{:,.0f}"),
        ("relations after index", run.graph.relations, "{:,.0f}"),
        ("chunks after index", run.graph.chunks, "{:,.0f}"),
    ]
    return rows


def latency_table(delay: float, runs: Sequence[SystemRun], workload: Workload) -> Table:
    """The figures at one latency: a column per system that ran, and the ratio of the two."""
    both = len(runs) == 2
    columns = ["figure", *(run.name for run in runs)] + (["kgstream / LightRAG"] if both else [])
    rows = []
    for row in zip(*(figures(run, workload, delay) for run in runs), strict=True):
        label, fmt = row[0][0], row[0][2]
        values = [value for _, value, _ in row]
        cells = [value if isinstance(value, str) else fmt.format(value) for value in values]
        if both:
            ours, theirs = values
            numeric = not isinstance(ours, str) and not isinstance(theirs, str)
            cells.append(ratio(float(ours), float(theirs)) if numeric else "")
        rows.append((label, *cells))
    return results.table(f"LLM at {delay * 1000:.0f} ms per call", columns, rows)


def latency_notes(delay: float, runs: Sequence[SystemRun]) -> list[str]:
    both = len(runs) == 2
    return [*(targets(delay, *runs) if both else []), *(note for run in runs for note in run.notes)]


def targets(delay: float, k: SystemRun, light: SystemRun) -> list[str]:
    lines = []
    for label, ours_done, theirs_done in (
        ("edit", k.edits, light.edits),
        ("delete", k.deletes, light.deletes),
    ):
        ours, theirs = seconds_summary(ours_done)[0], seconds_summary(theirs_done)[0]
        speedup = theirs / ours
        verdict = "met" if speedup >= 10 else "NOT met"
        lines.append(
            f"target: {label} >= 10x faster than LightRAG (p50): {speedup:.1f}x, {verdict}"
        )
    if delay:
        bound = k.index_calls.chat * delay / LLM_CONCURRENCY
        share = k.index_seconds / bound
        verdict = "met" if share <= 1.15 else "NOT met"
        lines.append(
            f"target: kgstream indexing within 1.15x of calls x latency / concurrency: "
            f"{k.index_seconds:.1f} s / {bound:.1f} s = {share:.2f}x, {verdict}"
        )
    return lines


# -- command line --------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=1000, help="corpus size (default 1000)")
    parser.add_argument("--questions", type=int, default=40, help="questions (default 40)")
    parser.add_argument("--edits", type=int, default=10, help="timed edits (default 10)")
    parser.add_argument("--deletes", type=int, default=10, help="timed deletes (default 10)")
    parser.add_argument(
        "--delays",
        type=float,
        nargs="+",
        default=[0.0, 0.2],
        help="seconds per LLM call, one full run each (default 0 0.2)",
    )
    parser.add_argument("--embeddings", choices=("words", "hash"), default="words")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--workdir", type=Path, default=None, help="kept (default: a temp dir)")
    parser.add_argument(
        "--only", choices=("kgstream", "lightrag"), default=None, help="run one system only"
    )
    parser.add_argument(
        "--lightrag-client",
        choices=("binding", "shared"),
        default="binding",
        help="LightRAG's OpenAI binding (a client per call; default) or one shared client",
    )
    parser.add_argument(
        "--kgstream-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a kgstream setting for its index and run, e.g. summary_coalesce_seconds=0 "
        "(repeatable)",
    )
    results.add_results_option(parser)
    parser.add_argument(
        "--setup-only", action="store_true", help="create LightRAG's venv, then stop"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    bench_run = results.BenchRun.start(__file__, argv)
    args = build_parser().parse_args(argv)
    # LightRAG's virtual environment only where LightRAG runs (making it takes a minute).
    python = ensure_lightrag_venv() if args.setup_only or args.only != "kgstream" else None
    if args.setup_only:
        return 0
    load_before = " ".join(f"{v:.2f}" for v in os.getloadavg())
    workload = build_workload(args.docs, args.questions, args.edits, args.deletes, args.seed)
    warmup = build_warmup_questions(build_world(args.seed), dict(workload.corpus), 2, args.seed)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="kgstream-vs-lightrag-"))
    corpus_note = (
        f"corpus: bench/corpus.py seed {args.seed}, {len(workload.corpus):,} documents, "
        f"{corpus_words(dict(workload.corpus)):,} words; {len(workload.questions)} questions; "
        f"{len(workload.edits)} edits and {len(workload.deletes)} deletes; embeddings: "
        f"{args.embeddings}"
    )
    report = ["## kgstream vs LightRAG 1.5.7", "", f"- {corpus_note}", ""]
    tables: list[Table] = []
    notes = [corpus_note]
    for delay in args.delays:
        folder = work / f"delay-{delay * 1000:.0f}ms"
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        loads = [" ".join(f"{v:.2f}" for v in os.getloadavg())]
        with LLMServer(delay, args.embeddings) as server:
            runs: dict[str, SystemRun] = {}
            if args.only in (None, "kgstream"):
                progress(f"{delay * 1000:.0f} ms per call: kgstream")
                runs["kgstream"] = run_kgstream(
                    server,
                    workload,
                    folder,
                    warmup,
                    run_settings(args.kgstream_setting, "--kgstream-setting"),
                )
                loads.append(" ".join(f"{v:.2f}" for v in os.getloadavg()))
            if python is not None:
                progress(f"{delay * 1000:.0f} ms per call: LightRAG")
                runs["lightrag"] = run_lightrag(
                    server, workload, folder, python, warmup, args.lightrag_client
                )
                loads.append(" ".join(f"{v:.2f}" for v in os.getloadavg()))
        shown = latency_table(delay, list(runs.values()), workload)
        delay_notes = [
            *latency_notes(delay, list(runs.values())),
            f"load average (1, 5, 15 min) at start and after each system: {' | '.join(loads)}",
        ]
        report += [f"### {shown.title}", "", *shown.markdown(), ""]
        report += [f"- {note}" for note in delay_notes]
        report.append("")
        tables.append(shown)
        notes += [f"at {delay * 1000:.0f} ms: {note}" for note in delay_notes]
    report += [f"- {fact}" for fact in machine_facts()]
    report.append(f"- load average before the run: {load_before}")
    command = " ".join(
        shlex.quote(a) for a in [".venv/bin/python", "bench/vs_lightrag/run.py", *sys.argv[1:]]
    )
    report.append(f"- command: `{command}`; files in {work}")
    print("\n".join(report), flush=True)
    title = "kgstream side by side with LightRAG 1.5.7"
    if args.only:
        title += f" ({args.only} only)"
    bench_run.write(args.results, title, tables, notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
