"""Retrieval quality per query mode, through the real indexer and the gateway's Retrieve RPC.

Run from the repository root:

    .venv/bin/python bench/retrieval_eval.py --set ../shared/evaldata/dev --data /tmp/kg-dev
    .venv/bin/python bench/retrieval_eval.py --set sample            # examples/ + its questions

A question set is a folder in the format of the team's dev set (HotpotQA dev):
`corpus/<doc_id>.txt` (one document per file) and `questions.jsonl` (one JSON object per
line: `id`, `question`, `gold_doc_ids`, optional `type`). `--set sample` is the sample
corpus in `examples/` with `bench/sample_questions.jsonl` (the gold files of
docs/sample-questions.md).

What it does:

1. `kgstream index CORPUS --data DATA` with the default embedded settings (offline
   extractor, local embedding model, embedded redis + Qdrant Edge), as a user would.
   An index already in DATA is reused as it is (`--reindex` rebuilds it).
2. `kgstream serve --data DATA --grpc 127.0.0.1:0`, then one Retrieve call per question
   and mode over the real gRPC wire. A document's rank is the position of its first
   chunk in `RetrievalResult.chunks` (the order the context gives them), as the dev set's
   scorer defines it.
3. BM25 in the same run (rank-bm25's BM25Okapi over whole documents, lowercased
   `[a-z0-9]+` tokens minus a small stopword list: the dev set README's baseline).

Printed: per mode and question type, recall@5/@10, all_gold@2/@5/@10 and MRR (first gold
document within the top 100), and Retrieve p50/p95 per mode. `--rankings DIR` also writes
one rankings file per mode in the dev set's format (`{"id", "ranked"}` lines) for its own
`retrieval_eval.py`. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import results  # noqa: E402
from bench.harness import build_index, has_index, kgstream_serve, percentile, progress  # noqa: E402
from bench.queries import MODES, open_channel, retrieve_stub  # noqa: E402
from bench.results import load_average, machine_facts  # noqa: E402

SAMPLE_QUESTIONS = REPO_ROOT / "bench" / "sample_questions.jsonl"
CUTOFFS = (5, 10)
ALL_GOLD_CUTOFFS = (2, 5, 10)
MRR_DEPTH = 100
CALL_TIMEOUT_SECONDS = 60.0
BM25 = "bm25"
# The dev set README's BM25 baseline: lowercased [a-z0-9]+ words minus these (its list).
_BM25_STOPWORD_TEXT = """
    a an the of to in on at for from by with and or but if then than that this these those is
    are was were be been being do does did has have had it its as into about over after before
    during between which who whom whose what when where why how not no yes any all both each
    either neither other such own same so too very can will would should could may might must
    shall he she they them his her their him i you we us our your me my mine ours"""
_BM25_STOPWORDS = frozenset(_BM25_STOPWORD_TEXT.split())
_BM25_TOKEN = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    gold: frozenset[str]
    type: str


@dataclass
class ModeRun:
    rankings: dict[str, list[str]] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)


def read_questions(path: Path) -> list[Question]:
    questions = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        try:
            questions.append(
                Question(
                    id=str(row["id"]),
                    text=str(row["question"]),
                    gold=frozenset(str(d) for d in row["gold_doc_ids"]),
                    type=str(row.get("type") or "all"),
                )
            )
        except KeyError as missing:
            raise SystemExit(f"{path}:{number}: question has no {missing} field") from None
    if not questions:
        raise SystemExit(f"{path} holds no questions")
    return questions


def document_id(file_path: str) -> str:
    """The set's doc id of an indexed file: its folder-relative path without the suffix
    for a `corpus/` set (`Shirley_Temple__fcc3127c.txt` -> `Shirley_Temple__fcc3127c`),
    the relative path itself for the sample corpus (`org/tidewater-battery-lab.md`)."""
    path = PurePosixPath(file_path)
    return str(path.with_suffix("")) if path.suffix == ".txt" else str(path)


# -- metrics ---------------------------------------------------------------------


def first_ranks(ranked: Sequence[str]) -> dict[str, int]:
    ranks: dict[str, int] = {}
    for doc_id in ranked:
        ranks.setdefault(doc_id, len(ranks) + 1)
    return ranks


def score(questions: Sequence[Question], rankings: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """Macro-averaged recall@k, all_gold@k and MRR over `questions`."""
    totals: dict[str, float] = {}
    for question in questions:
        ranks = first_ranks(rankings.get(question.id, ()))
        gold_ranks = [ranks[d] for d in question.gold if d in ranks]
        for k in CUTOFFS:
            found = sum(1 for r in gold_ranks if r <= k)
            totals[f"recall@{k}"] = totals.get(f"recall@{k}", 0.0) + found / len(question.gold)
        for k in ALL_GOLD_CUTOFFS:
            complete = sum(1 for r in gold_ranks if r <= k) == len(question.gold)
            totals[f"all_gold@{k}"] = totals.get(f"all_gold@{k}", 0.0) + float(complete)
        best = min((r for r in gold_ranks if r <= MRR_DEPTH), default=None)
        totals["MRR"] = totals.get("MRR", 0.0) + (1.0 / best if best else 0.0)
    return {name: value / len(questions) for name, value in totals.items()}


METRICS = (
    *(f"recall@{k}" for k in CUTOFFS),
    *(f"all_gold@{k}" for k in ALL_GOLD_CUTOFFS),
    "MRR",
)


# -- BM25 baseline ---------------------------------------------------------------


def bm25_tokens(text: str) -> list[str]:
    return [t for t in _BM25_TOKEN.findall(text.lower()) if t not in _BM25_STOPWORDS]


def bm25_rankings(documents: Mapping[str, str], questions: Sequence[Question]) -> ModeRun:
    from rank_bm25 import BM25Okapi

    ids = sorted(documents)
    model = BM25Okapi([bm25_tokens(documents[d]) for d in ids])
    run = ModeRun()
    for question in questions:
        began = time.perf_counter()
        scores = model.get_scores(bm25_tokens(question.text))
        order = sorted(range(len(ids)), key=lambda i: -scores[i])[:MRR_DEPTH]
        run.seconds.append(time.perf_counter() - began)
        run.rankings[question.id] = [ids[i] for i in order]
    return run


# -- the gateway ------------------------------------------------------------------


def retrieve_rankings(address: str, mode: str, questions: Sequence[Question]) -> ModeRun:
    from gateway.types import parse_mode
    from kgstream.query_command import build_request

    channel = open_channel(address)
    stub = retrieve_stub(channel)
    run = ModeRun()
    try:
        stub.Retrieve(build_request(questions[0].text, parse_mode(mode), None))  # warm-up
        for question in questions:
            request = build_request(question.text, parse_mode(mode), None)
            began = time.perf_counter()
            result = stub.Retrieve(request, timeout=CALL_TIMEOUT_SECONDS)
            run.seconds.append(time.perf_counter() - began)
            run.rankings[question.id] = [document_id(c.file_path) for c in result.chunks]
    finally:
        channel.close()
    return run


# -- report ----------------------------------------------------------------------


def report_tables(
    questions: Sequence[Question], runs: Mapping[str, ModeRun]
) -> list[results.Table]:
    """A table of the metrics per question type (one, ALL, when the set has one type), then
    the gateway's latency per mode."""
    groups: dict[str, list[Question]] = {"ALL": list(questions)}
    for question in questions:
        groups.setdefault(question.type, []).append(question)
    if len(groups) == 2:  # one type only: the ALL table says it all
        groups = {"ALL": list(questions)}
    tables = []
    for group, members in groups.items():
        rows = []
        for mode, run in runs.items():
            figures = score(members, run.rankings)
            rows.append((mode, len(members), *(f"{figures[m]:.3f}" for m in METRICS)))
        title = "All questions" if group == "ALL" else f"Questions of type {group}"
        tables.append(results.table(title, ("mode", "n", *METRICS), rows))
    latency_rows = []
    for mode, run in runs.items():
        if mode == BM25:
            continue
        ms = [s * 1000 for s in run.seconds]
        latency_rows.append(
            (mode, f"{percentile(ms, 50):.1f}", f"{percentile(ms, 95):.1f}", f"{max(ms):.1f}")
        )
    tables.append(
        results.table(
            "Retrieve latency (ms, one client, sequential)",
            ("mode", "p50", "p95", "max"),
            latency_rows,
        )
    )
    return tables


def set_description(root: Path) -> str:
    """What a question set is, from the first heading of its README (after a colon)."""
    readme = root / "README.md"
    if readme.exists():
        for line in readme.read_text(encoding="utf-8").splitlines():
            if line.startswith("# "):
                return line[2:].split(": ", 1)[-1].strip()
    return f"{root.name} (corpus/ + questions.jsonl)"


# -- main ------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--set", required=True, help="a question-set folder (corpus/ + questions.jsonl) or 'sample'"
    )
    parser.add_argument("--data", type=Path, help="index directory (reused when it holds one)")
    parser.add_argument("--reindex", action="store_true", help="rebuild the index in --data")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated modes")
    parser.add_argument("--limit", type=int, default=0, help="only the first N questions")
    parser.add_argument("--rankings", type=Path, help="write <mode>.jsonl rankings here")
    parser.add_argument("--index-timeout", type=float, default=3600.0)
    results.add_results_option(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    run = results.BenchRun.start(__file__, argv)
    args = build_parser().parse_args(argv)
    if args.set == "sample":
        corpus, questions_path = REPO_ROOT / "examples", SAMPLE_QUESTIONS
        title = "the sample corpus: examples/, bench/sample_questions.jsonl"
    else:
        root = Path(args.set)
        corpus, questions_path = root / "corpus", root / "questions.jsonl"
        title = f"{root.name}: {set_description(root)}"
    questions = read_questions(questions_path)
    if args.limit:
        questions = questions[: args.limit]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise SystemExit(f"--modes: unknown mode(s) {unknown}; choose from {list(MODES)}")
    documents = {
        document_id(str(p.relative_to(corpus))): p.read_text(encoding="utf-8")
        for p in sorted(corpus.rglob("*"))
        if p.is_file() and p.suffix in (".txt", ".md")
    }
    work = Path(tempfile.mkdtemp(prefix="kgstream-retrieval-"))
    data_dir = args.data or work / "data"
    if args.reindex and data_dir.exists():
        import shutil

        shutil.rmtree(data_dir)
    if has_index(data_dir):
        index_note = f"index reused from {data_dir}"
    else:
        seconds, status = build_index(corpus, data_dir, work / "index.log", args.index_timeout)
        index_note = f"indexed {len(documents)} documents in {seconds:.0f} s ({status})"
    progress(index_note)
    runs: dict[str, ModeRun] = {BM25: bm25_rankings(documents, questions)}
    with kgstream_serve(data_dir, work / "serve.log") as (_, address):
        for mode in modes:
            progress(f"mode {mode}: {len(questions)} Retrieve calls")
            runs[mode] = retrieve_rankings(address, mode, questions)
    if args.rankings:
        args.rankings.mkdir(parents=True, exist_ok=True)
        for mode, run in runs.items():
            with (args.rankings / f"{mode}.jsonl").open("w", encoding="utf-8") as out:
                for question in questions:
                    ranked: Any = run.rankings.get(question.id, [])
                    out.write(json.dumps({"id": question.id, "ranked": ranked}) + "\n")
    tables = report_tables(questions, runs)
    print(f"## Retrieval on {title} ({len(questions)} questions)\n\n{index_note}")
    results.print_tables(tables)
    print("\n".join([*machine_facts(), f"load average at end: {load_average()}"]), flush=True)
    notes = [
        index_note,
        "a document's rank is its first chunk's position in RetrievalResult.chunks; bm25 is "
        "rank-bm25's BM25Okapi over whole documents in the same run",
    ]
    run.write(args.results, f"Retrieval quality on {title}", tables, notes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
