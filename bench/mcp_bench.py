"""What MCP costs on top of gRPC: the same retrieval asked as an MCP tool call and as a gRPC
call, p50/p95 and the difference.

Run from the repository root:

    .venv/bin/python bench/mcp_bench.py                 # 200 documents, 200 calls per row
    .venv/bin/python bench/mcp_bench.py --data DIR      # reuse (or build once into) DIR

What it does, through the user's own commands and the real wires:

1. Writes the seeded corpus of bench/corpus.py and indexes it with `kgstream index` (the
   default embedded settings), unless `--data` holds an index already.
2. Starts `kgstream serve --data DATA`, which serves gRPC and, on its HTTP port, MCP at
   /mcp; and `kgstream mcp --grpc ADDRESS`, the stdio server a desktop agent starts, in
   front of that gateway.
3. Asks, call after call in turn: gRPC `Retrieve`; MCP `retrieve` over Streamable HTTP;
   MCP `retrieve` over stdio; gRPC `Query`; MCP `query` over Streamable HTTP (no LLM is
   configured, so an answer is the extractive one: the same work on both sides). Each
   call asks a question of its own (the gateway caches query embeddings), all from one
   seeded pool, in mode mix. The clock runs around the client's call: for MCP, the SDK's
   `call_tool` in the client's event loop, one session per transport kept open.

The MCP calls do the gRPC call's work plus their own: JSON-RPC over HTTP (or stdio and a
gRPC hop), the reply as JSON and as text. Figures are printed, never asserted; the target
is MCP's p50 at most 5 ms over gRPC's. The client shares the machine with the server.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import results  # noqa: E402
from bench.corpus import DEFAULT_SEED, build_world, generate_corpus, write_corpus  # noqa: E402
from bench.harness import (  # noqa: E402
    build_index,
    clean_environment,
    has_index,
    kgstream_serve,
    ms,
    percentile,
    progress,
)
from bench.queries import CALL_TIMEOUT_SECONDS, build_questions, open_channel  # noqa: E402
from bench.results import load_average, machine_facts  # noqa: E402

MODE = "mix"
TARGET_MS = 5.0  # MCP p50 at most this much over gRPC's
_WEB_LINE = re.compile(r"web:\s+(http://\S+?)/ ")


@dataclass(frozen=True)
class Row:
    name: str
    latencies: tuple[float, ...]
    errors: int


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=200, help="documents in the corpus")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--calls", type=int, default=200, help="timed calls per row")
    parser.add_argument("--warmup", type=int, default=20, help="untimed calls per row first")
    parser.add_argument("--data", type=Path, default=None, help="the index (built if absent)")
    parser.add_argument("--index-timeout", type=float, default=3600.0)
    results.add_results_option(parser)
    return parser


def http_url(log_path: Path) -> str:
    """The HTTP base URL of `kgstream serve`'s "web:" line (printed with the gateway's)."""
    match = _WEB_LINE.search(log_path.read_text(encoding="utf-8", errors="replace"))
    if match is None:
        raise RuntimeError(f"kgstream serve printed no 'web:' line; see {log_path}")
    return match.group(1)


def measure(address: str, url: str, questions: Sequence[str], calls: int, warmup: int) -> list[Row]:
    """Each round asks every row once, in turn, each with a question of its own."""
    import grpc
    from anyio.from_thread import start_blocking_portal
    from mcp import Client, StdioServerParameters

    from kgstream.query_command import build_request
    from kgstream_protos.v1 import query_pb2_grpc

    stdio = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kgstream.cli", "mcp", "--grpc", address],
        cwd=REPO_ROOT,
        env=clean_environment(),
    )

    def timed_grpc(stub: Any, method: str) -> Callable[[str], float]:
        def ask(question: str) -> float:
            request = build_request(question, _mode(), None)
            began = time.perf_counter()
            getattr(stub, method)(request, timeout=CALL_TIMEOUT_SECONDS)
            return time.perf_counter() - began

        return ask

    async def timed_tool(client: Any, tool: str, question: str) -> float:
        began = time.perf_counter()
        result = await client.call_tool(tool, {"question": question, "mode": MODE})
        elapsed = time.perf_counter() - began
        if result.is_error:
            raise RuntimeError(f"{tool}: {result.content[0].text}")
        return elapsed

    with (
        open_channel(address) as channel,
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(Client(url + "/mcp")) as over_http,
        portal.wrap_async_context_manager(Client(stdio)) as over_stdio,
    ):
        stub = query_pb2_grpc.KnowledgeGraphStub(channel)  # type: ignore[no-untyped-call]

        def tool(client: Any, name: str) -> Callable[[str], float]:
            return lambda question: portal.call(timed_tool, client, name, question)

        rows: list[tuple[str, Callable[[str], float]]] = [
            ("gRPC Retrieve", timed_grpc(stub, "Retrieve")),
            ("MCP retrieve, Streamable HTTP", tool(over_http, "retrieve")),
            ("MCP retrieve, stdio (kgstream mcp --grpc)", tool(over_stdio, "retrieve")),
            ("gRPC Query (no LLM)", timed_grpc(stub, "Query")),
            ("MCP query, Streamable HTTP (no LLM)", tool(over_http, "query")),
        ]
        latencies: list[list[float]] = [[] for _ in rows]
        errors = [0 for _ in rows]
        pool = iter(questions)
        for number in range(warmup + calls):
            for index, (name, ask) in enumerate(rows):
                try:
                    elapsed = ask(next(pool))
                except (grpc.RpcError, RuntimeError) as error:
                    errors[index] += 1
                    progress(f"{name}: {error}")
                    continue
                if number >= warmup:
                    latencies[index].append(elapsed)
            if number and number % 50 == 0:
                progress(f"{number} rounds of {warmup + calls}")
    return [
        Row(name, tuple(latencies[index]), errors[index]) for index, (name, _) in enumerate(rows)
    ]


def _mode() -> Any:
    from gateway.types import parse_mode

    return parse_mode(MODE)


def report(rows: Sequence[Row]) -> list[results.Table]:
    by_name = {row.name: row for row in rows}
    baselines = {"retrieve": by_name["gRPC Retrieve"], "query": by_name["gRPC Query (no LLM)"]}

    def over(row: Row, q: float) -> str:
        baseline = baselines["query" if "query" in row.name.lower() else "retrieve"]
        if row is baseline or not row.latencies or not baseline.latencies:
            return "-"
        extra = percentile(row.latencies, q) - percentile(baseline.latencies, q)
        return f"{extra * 1000:+.1f}"

    def verdict(row: Row) -> str:
        if row.name.startswith("gRPC") or not row.latencies:
            return "-"
        baseline = baselines["query" if "query" in row.name.lower() else "retrieve"]
        extra = percentile(row.latencies, 50) - percentile(baseline.latencies, 50)
        return "yes" if extra * 1000 <= TARGET_MS else "NO"

    latency = results.table(
        f"MCP against gRPC, mode {MODE}, the same call in turn (ms)",
        ("call", "calls", "errors", "p50", "p95", "p50 over gRPC", "p95 over gRPC", "target"),
        [
            (
                row.name,
                len(row.latencies),
                row.errors,
                ms(row.latencies, 50),
                ms(row.latencies, 95),
                over(row, 50),
                over(row, 95),
                verdict(row),
            )
            for row in rows
        ],
    )
    return [latency]


def main(argv: Sequence[str] | None = None) -> int:
    run = results.BenchRun.start(__file__, argv)
    args = build_parser().parse_args(argv)
    loads = [("at start", load_average())]
    with contextlib.ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kgmcp-")))
        data_dir: Path = args.data if args.data is not None else work / "data"
        corpus = generate_corpus(args.docs, args.seed)
        if has_index(data_dir):
            progress(f"reusing the index in {data_dir} (assumed: {args.docs} docs)")
        else:
            folder = work / "corpus"
            write_corpus(folder, args.docs, args.seed)
            build_index(folder, data_dir, work / "kgstream-index.log", args.index_timeout)
        rows_of_calls = 5
        questions = build_questions(
            build_world(args.seed),
            corpus,
            rows_of_calls * (args.warmup + args.calls),
            args.seed,
            distinct=True,
        )
        log = work / "kgstream-serve.log"
        with kgstream_serve(data_dir, log) as (process, address):
            url = http_url(log)
            progress(f"gateway on {address}, MCP at {url}/mcp (pid {process.pid})")
            loads.append(("before the calls", load_average()))
            rows = measure(address, url, questions, args.calls, args.warmup)
            loads.append(("after the calls", load_average()))
    tables = report(rows)
    notes = [
        f"{args.docs} documents (seed {args.seed}), {args.calls} timed calls per row after "
        f"{args.warmup} warm-up calls; target: MCP p50 at most {TARGET_MS:g} ms over gRPC",
        *(f"load average {when}: {value}" for when, value in loads),
    ]
    results.print_tables(tables)
    print("\n".join([*notes, *machine_facts()]))
    run.write(args.results, "MCP against gRPC", tables, notes=notes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
