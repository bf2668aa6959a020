"""Retrieve latency of two versions of kgstream side by side, in lockstep.

Run from the repository root, on an index `bench/gateway_bench.py --data DIR` built:

    .venv/bin/python bench/gateway_ab.py --base REF --data DIR          # all five modes
    .venv/bin/python bench/gateway_ab.py --base REF --data DIR --modes local mix --calls 400

Why: on a shared 2-core VM the same code's p50 moves by up to 2x within an hour, more than
most changes to the query path, so two gateway_bench runs minutes
apart cannot tell a 5% change from the machine. Here both versions serve at once and every
question goes to one and then the other (the order alternating), so a slow minute slows
both alike.

What it does, through the user's own commands and the real gRPC wire:

1. Checks `REF` out into a temporary git worktree (removed at the end) and copies the data
   directory twice (one writer per data directory: each gateway gets its own embedded
   stores).
2. Starts `kgstream serve --no-http` from each checkout: the base (REF) and the head (this
   working tree, uncommitted changes included).
3. Per mode: untimed warm-up calls, then for each seeded question (gateway_bench's) one
   Retrieve on each gateway, timed around the stub call. Prints p50/p95 per version, the
   ratio head/base, each gateway's server CPU per call (its process group: the gateway and
   its redis-server), and for how many questions both returned the same chunk ids in the
   same order (a change meant to be exact should show all of them).

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import results  # noqa: E402
from bench.corpus import DEFAULT_SEED, build_world, generate_corpus  # noqa: E402
from bench.harness import (  # noqa: E402
    assignments_of,
    group_cpu_seconds,
    has_index,
    kgstream_gateway,
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


@dataclass
class Side:
    """One version's gateway: its stub, its process group and what it measured."""

    name: str
    stub: Any
    pgid: int
    latencies: list[float] = field(default_factory=list)
    answers: list[tuple[str, ...]] = field(default_factory=list)
    cpu_seconds: float = 0.0

    def call(self, request: Any) -> None:
        began = time.perf_counter()
        result = self.stub.Retrieve(request, timeout=CALL_TIMEOUT_SECONDS)
        self.latencies.append(time.perf_counter() - began)
        self.answers.append(tuple(chunk.chunk_id for chunk in result.chunks))

    def reset(self) -> None:
        self.latencies, self.answers = [], []


@contextlib.contextmanager
def base_checkout(ref: str, work: Path) -> Iterator[Path]:
    """`ref` checked out in a worktree under `work`, removed afterwards."""
    path = work / "base"
    subprocess.run(
        ["git", "worktree", "add", "--detach", "--quiet", str(path), ref],
        cwd=REPO_ROOT,
        check=True,
    )
    try:
        yield path
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(path)], cwd=REPO_ROOT, check=False
        )


def measure(mode: str, sides: Sequence[Side], questions: Sequence[str], warmup: int) -> None:
    from gateway.types import parse_mode
    from kgstream.query_command import build_request

    for side in sides:
        side.reset()
    for number, question in enumerate(questions):
        request = build_request(question, parse_mode(mode), None)
        if number == warmup:
            for side in sides:
                side.reset()
                side.cpu_seconds = -(group_cpu_seconds(side.pgid) or 0.0)
        for side in sides if number % 2 else reversed(sides):
            side.call(request)
    for side in sides:
        side.cpu_seconds += group_cpu_seconds(side.pgid) or 0.0


def report_mode(mode: str, base: Side, head: Side) -> tuple[str, ...]:
    same = sum(a == b for a, b in zip(base.answers, head.answers, strict=True))
    calls = len(head.latencies)
    ratio = percentile(head.latencies, 50) / percentile(base.latencies, 50)
    return (
        mode,
        ms(base.latencies, 50),
        ms(head.latencies, 50),
        f"{ratio:.3f}",
        ms(base.latencies, 95),
        ms(head.latencies, 95),
        f"{1000 * base.cpu_seconds / calls:.1f}",
        f"{1000 * head.cpu_seconds / calls:.1f}",
        f"{same}/{calls}",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Retrieve latency of REF and of this working tree, in lockstep "
        "(see the module docstring)."
    )
    parser.add_argument("--base", required=True, help="git ref of the base version")
    parser.add_argument(
        "--data", type=Path, required=True, help="an index built by gateway_bench.py --data"
    )
    for side in ("base", "head"):
        parser.add_argument(
            f"--{side}-env",
            action="append",
            default=[],
            metavar="KGSTREAM_X=VALUE",
            help=f"a setting for the {side} gateway only (repeatable); with --base HEAD this "
            "compares settings rather than code",
        )
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--calls", type=int, default=200, help="timed questions per mode")
    parser.add_argument("--warmup", type=int, default=20, help="untimed questions per mode")
    parser.add_argument("--docs", type=int, default=1000, help="the index's corpus size")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    results.add_results_option(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    run = results.BenchRun.start(__file__, argv)
    args = build_parser().parse_args(argv)
    if not has_index(args.data):
        raise SystemExit(f"{args.data} holds no index: build one with gateway_bench.py --data")
    if args.calls < 1 or args.warmup < 0:
        raise SystemExit("--calls must be >= 1 and --warmup >= 0")
    loads = [load_average()]
    # Each mode its own questions: each gateway caches query embeddings (gateway_bench.py).
    per_mode = args.warmup + args.calls
    questions = build_questions(
        build_world(args.seed),
        generate_corpus(args.docs, args.seed),
        len(args.modes) * per_mode,
        args.seed,
        distinct=True,
    )
    with tempfile.TemporaryDirectory(prefix="kgstream-ab-") as temp:
        work = Path(temp)
        with contextlib.ExitStack() as stack:
            code = stack.enter_context(base_checkout(args.base, work))
            sides: list[Side] = []
            envs = {
                "base": assignments_of(args.base_env, "--base-env"),
                "head": assignments_of(args.head_env, "--head-env"),
            }
            for name, checkout in (("base", code), ("head", REPO_ROOT)):
                data = work / f"data-{name}"
                progress(f"{name}: copying {args.data} to {data}")
                shutil.copytree(args.data, data, symlinks=True)
                arguments = ("serve", "--no-http", "--data", str(data))
                process, address = stack.enter_context(
                    kgstream_gateway(
                        work / f"{name}.log", *arguments, env=envs[name], code=checkout
                    )
                )
                channel = stack.enter_context(open_channel(address))
                sides.append(Side(name, retrieve_stub(channel), process.pid))
                progress(f"{name}: gateway on {address}")
            rows = []
            for number, mode in enumerate(args.modes):
                progress(f"{mode}: {args.warmup} warm-up + {args.calls} timed questions, each")
                asked = questions[number * per_mode : (number + 1) * per_mode]
                measure(mode, sides, asked, args.warmup)
                rows.append(report_mode(mode, *sides))
    loads.append(load_average())
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True
    ).stdout.strip()
    title = f"Retrieve, base {args.base} against head {head} (working tree), in lockstep"
    tables = [
        results.table(
            title,
            (
                "mode",
                "base p50 ms",
                "head p50 ms",
                "head / base",
                "base p95 ms",
                "head p95 ms",
                "base CPU ms/call",
                "head CPU ms/call",
                "same chunks",
            ),
            rows,
        )
    ]
    notes = [
        f"{side} settings: {' '.join(pairs)}"
        for side, pairs in (("base", args.base_env), ("head", args.head_env))
        if pairs
    ]
    results.print_tables(tables)
    lines = [*notes, *machine_facts(), f"load average at start / end: {loads[0]} / {loads[1]}"]
    print("\n".join(f"- {line}" for line in lines))
    print(f"- command: `{shlex.join(run.argv)}`", flush=True)
    run.write(args.results, title, tables, notes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
