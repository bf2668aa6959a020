"""What the bench scripts share: kgstream run as the user runs it, the test servers in a child
process, and waits on the stores. It imports no bench script, so every script can import it.

Run as a script it is the test server's child process (`ServerProcess` starts it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.support.ports import free_port  # noqa: E402

POLL_SECONDS = 0.002
VISIBLE_TIMEOUT_SECONDS = 120.0
SERVE_START_TIMEOUT_SECONDS = 180.0
_GATEWAY_LINE = re.compile(r"gateway on (\S+:\d+)")


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100), as numpy's default."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def ms(values: Sequence[float], q: float) -> str:
    """The `q` percentile of `values` (seconds) in ms, as a table cell ("-" for none)."""
    return f"{percentile(values, q) * 1000:.1f}" if values else "-"


# -- the test LLM / embeddings server, in a child process ----------------------------------


def format_extraction(extraction: Any, *, strength: bool = True) -> str:
    """An `Extraction` in the delimited record format the extraction prompt asks for.

    Without `strength`, relation rows have LightRAG 1.5's five fields (it drops a row with a
    sixth), which kgstream reads as strength 1.0.
    """
    from dataflow.core.prompts import COMPLETION_DELIMITER, TUPLE_DELIMITER

    def clean(text: str) -> str:
        return " ".join(text.replace(TUPLE_DELIMITER, " ").split())

    d = TUPLE_DELIMITER
    lines = [
        f"entity{d}{clean(e.name)}{d}{clean(e.type)}{d}{clean(e.description)}"
        for e in extraction.entities
    ]
    lines += [
        f"relation{d}{clean(r.source)}{d}{clean(r.target)}{d}"
        f"{clean(', '.join(r.keywords))}{d}{clean(r.description)}"
        + (f"{d}{min(1.0, r.strength / 3):.2f}" if strength else "")
        for r in extraction.relations
    ]
    lines.append(COMPLETION_DELIMITER)
    return "\n".join(lines)


def extraction_responder(body: dict[str, Any]) -> str:
    """A plausible model: extraction prompts get the offline extractor's records for the
    chunk in the prompt; gleaning turns find nothing new; summaries join the fragments."""
    from dataflow.core.offline.extractor import extract_offline

    messages = body["messages"]
    system, last = str(messages[0]["content"]), str(messages[-1]["content"])
    if system.startswith("You merge descriptions"):
        listing = last.split("Descriptions:\n", 1)[-1]
        fragments = [line[2:] for line in listing.splitlines() if line.startswith("- ")]
        return " ".join(fragments)[:1200]
    match = re.search(r"---Text---\n(`{3,})\n(.*?)\n\1\n", last, re.DOTALL)
    if match is None:
        return "<|COMPLETE|>"  # a gleaning turn: nothing was missed
    return format_extraction(extract_offline(match.group(2)))


def serve(delay_seconds: float, responder: str) -> int:
    """Child-process mode: run one test server until stdin closes, then print its counts."""
    from tests.support.llm_server import EMBEDDINGS, OpenAICompatibleServer

    with OpenAICompatibleServer(embedding_dimension=384) as server:
        server.delay_seconds = delay_seconds
        if responder == "extract":
            server.responder = extraction_responder
        print(server.base_url, flush=True)
        sys.stdin.read()
        counts = {
            "chat": server.chat_calls,
            "embeddings": server.count(EMBEDDINGS),
            "max_in_flight": server.max_in_flight,
        }
        print(json.dumps(counts), flush=True)
    return 0


class ServerProcess:
    """`serve` in a child process (its GIL is not the indexer's); `base_url` while running,
    `counts` after `close`."""

    def __init__(self, delay_seconds: float = 0.0, responder: str = "none") -> None:
        self._process = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "serve",
                "--delay",
                str(delay_seconds),
                "--responder",
                responder,
            ],
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        if self._process.stdout is None:
            raise RuntimeError("internal: the test server child has no stdout pipe")
        line = self._process.stdout.readline().strip()
        if not line.startswith("http"):
            self._process.kill()
            raise RuntimeError(f"the test server child did not print its URL; got {line!r}")
        self.base_url = line
        self.counts: dict[str, int] = {}

    def close(self) -> None:
        process = self._process
        if process.poll() is not None:
            return
        if process.stdin is None or process.stdout is None:
            raise RuntimeError("internal: the test server child has no stdin/stdout pipes")
        process.stdin.close()
        last = process.stdout.read().strip().splitlines()
        process.wait(timeout=30)
        if last:
            self.counts = json.loads(last[-1])

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# -- kgstream as a subprocess ----------------------------------------------------------------


def clean_environment() -> dict[str, str]:
    """This environment without kgstream/OpenAI settings, so the subprocess runs the defaults."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("KGSTREAM_", "OPENAI_"))
    }
    env["PYTHONUNBUFFERED"] = "1"
    env["KGSTREAM_HTTP_ADDRESS"] = "127.0.0.1:0"  # a kgstream already on 9621 does not clash
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


def kgstream_command(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "kgstream.cli", *arguments]


def assignments_of(assignments: Sequence[str], option: str) -> dict[str, str]:
    """`name=value` command-line arguments of `option` as a dict; one without "=" or a
    name stops the bench, naming the option."""
    pairs = {}
    for assignment in assignments:
        name, equals, value = assignment.partition("=")
        if not equals or not name:
            raise SystemExit(f"{option} takes name=value; got {assignment!r}")
        pairs[name] = value
    return pairs


def run_settings(assignments: Sequence[str], option: str = "--run-setting") -> dict[str, str]:
    """`option name=value`s (kgstream setting names) as the environment of `kgstream`."""
    pairs = assignments_of(assignments, option)
    return {f"KGSTREAM_{name.upper()}": value for name, value in pairs.items()}


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """Stop `process` (a session leader) as Ctrl-C would, harder if it does not stop."""
    if process.poll() is not None:
        return
    for sig, wait in ((signal.SIGINT, 30), (signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


@contextlib.contextmanager
def kgstream_process(
    command: Sequence[str], log_path: Path, env: Mapping[str, str] | None, code: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """`command` in its own session, in the checkout `code`, with the default settings plus
    `env` and its output in `log_path`; stopped with SIGINT (as Ctrl-C) on exit."""
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            cwd=code,
            env={**clean_environment(), **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            yield process
        finally:
            stop_process(process)


@contextlib.contextmanager
def kgstream_run(
    arguments: Sequence[str],
    log_path: Path,
    env: dict[str, str] | None = None,
    grpc: str | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """`kgstream run ...` with the default settings plus `env`; stopped with SIGINT (as
    Ctrl-C) on exit. Its gateway serves on `grpc`, by default a free port (not the default
    50051, which another kgstream on this machine may hold)."""
    grpc = grpc or f"127.0.0.1:{free_port()}"
    command = kgstream_command("run", *arguments, "--grpc", grpc)
    with kgstream_process(command, log_path, env, REPO_ROOT) as process:
        yield process


@contextlib.contextmanager
def kgstream_gateway(
    log_path: Path,
    *arguments: str,
    env: Mapping[str, str] | None = None,
    code: Path = REPO_ROOT,
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`kgstream ARGUMENTS --grpc 127.0.0.1:0` (serve, or run): (process, bound address),
    its output in `log_path`, the default settings plus `env`; stopped with SIGINT (as
    Ctrl-C) on exit. `code`: the checkout whose kgstream runs (`python -m` imports from the
    working directory first)."""
    command = kgstream_command(*arguments, "--grpc", "127.0.0.1:0")
    with kgstream_process(command, log_path, env, code) as process:
        yield process, wait_for_address(process, log_path)


@contextlib.contextmanager
def kgstream_serve(data_dir: Path, log_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`kgstream serve --data DATA_DIR --grpc 127.0.0.1:0`: (process, bound address);
    stopped with SIGINT (as Ctrl-C) on exit."""
    with kgstream_gateway(log_path, "serve", "--data", str(data_dir)) as started:
        yield started


def wait_for_address(process: subprocess.Popen[bytes], log_path: Path) -> str:
    """The HOST:PORT of the serve process's "gateway on HOST:PORT" line."""
    deadline = time.monotonic() + SERVE_START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        match = _GATEWAY_LINE.search(log_path.read_text(encoding="utf-8", errors="replace"))
        if match:
            return match.group(1)
        if process.poll() is not None:
            raise RuntimeError(f"kgstream exited with {process.returncode}; see {log_path}")
        time.sleep(0.05)
    raise TimeoutError(
        f"kgstream printed no 'gateway on HOST:PORT' within "
        f"{SERVE_START_TIMEOUT_SECONDS:.0f} s; see {log_path}"
    )


def has_index(data_dir: Path) -> bool:
    return (data_dir / "redis").exists() and (data_dir / "recovery").exists()


def build_index(folder: Path, data_dir: Path, log_path: Path, timeout: float) -> tuple[float, str]:
    """`kgstream index FOLDER --data DATA_DIR` with the default settings: (seconds, status)."""
    command = kgstream_command("index", str(folder), "--data", str(data_dir))
    progress(f"indexing: {' '.join(shlex.quote(c) for c in command)} (log {log_path})")
    began = time.perf_counter()
    with log_path.open("wb") as log:
        process = subprocess.run(
            command,
            cwd=REPO_ROOT,
            env=clean_environment(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            check=False,
        )
    seconds = time.perf_counter() - began
    output = log_path.read_text(encoding="utf-8", errors="replace")
    if process.returncode != 0:
        raise RuntimeError(
            f"kgstream index exited with {process.returncode} after {seconds:.0f} s; "
            f"see {log_path}:\n{output[-2000:]}"
        )
    status = next(
        (line for line in reversed(output.splitlines()) if line.startswith("index version")), ""
    )
    progress(f"indexing: done in {seconds:.1f} s; {status}")
    return seconds, status


def group_cpu_seconds(pgid: int) -> float | None:
    """User + system CPU seconds of every process in group `pgid` (Linux /proc): the
    gateway started in its own session, with the embedded redis-server it spawned."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    found = False
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended while we looked
        if int(fields[2]) == pgid:  # field 5, pgrp
            found = True
            total += int(fields[11]) + int(fields[12])  # fields 14, 15: utime, stime
    return total / ticks if found else None


def allocated_bytes(path: Path) -> int:
    """Bytes of the blocks the files under `path` occupy (sparse files count what they use)."""
    if path.is_file():
        return path.stat().st_blocks * 512
    return sum(
        (Path(folder) / name).lstat().st_blocks * 512
        for folder, _, names in os.walk(path)
        for name in names
    )


# -- the stores of a running kgstream ----------------------------------------------------------


@dataclass(frozen=True)
class IndexCounts:
    documents: int
    failed: int
    chunks: int
    entities: int
    relations: int


def count_index(graph: Any) -> IndexCounts:
    from dataflow.core.documents import DocumentStatus

    statuses = graph.status_counts()
    return IndexCounts(
        documents=sum(statuses.values()),
        failed=statuses.get(DocumentStatus.FAILED, 0),
        chunks=sum(1 for _ in graph.iter_chunks()),
        entities=sum(1 for _ in graph.iter_entities()),
        relations=sum(1 for _ in graph.iter_relations()),
    )


def attach_graph(data_dir: Path, process: subprocess.Popen[bytes], log_path: Path) -> Any:
    """The running indexer's graph store, once its embedded redis answers."""
    import redis

    from connectors.redis.embedded import EmbeddedRedis
    from connectors.redis.graph_store import GraphStore

    embedded = EmbeddedRedis(data_dir / "redis")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"kgstream run exited with {process.returncode}; see {log_path}")
        if embedded.socket_path.exists():
            graph = GraphStore.from_url(embedded.url)
            try:
                graph.version()
                return graph
            except redis.ConnectionError:
                pass
        time.sleep(0.05)
    raise TimeoutError(f"kgstream run's redis did not answer within 120 s; see {log_path}")


def expected_hash(doc_id: str, text: str) -> str:
    from dataflow.core.documents import DocumentUpsert, PreparedDocument, prepare_document

    prepared = prepare_document(DocumentUpsert(doc_id, text.encode(), doc_id))
    if not isinstance(prepared, PreparedDocument):
        raise ValueError(f"the edited {doc_id} would fail: {prepared.reason}")
    return prepared.content_hash


def wait_visible(graph: Any, doc_id: str, content_hash: str, process: Any, log: Path) -> float:
    """perf_counter() at the first poll that sees `doc_id` PROCESSED with `content_hash`."""
    from dataflow.core.documents import DocumentStatus

    deadline = time.perf_counter() + VISIBLE_TIMEOUT_SECONDS
    while True:
        stored = graph.get_documents([doc_id]).get(doc_id)
        now = time.perf_counter()
        if stored is not None and stored.record.content_hash == content_hash:
            if stored.record.status is DocumentStatus.PROCESSED:
                return now
            if stored.record.status is DocumentStatus.FAILED:
                raise RuntimeError(f"{doc_id} FAILED: {stored.record.reason}")
        if now > deadline:
            raise TimeoutError(
                f"{doc_id} not visible with hash {content_hash[:19]}... after "
                f"{VISIBLE_TIMEOUT_SECONDS} s; see {log}"
            )
        if process.poll() is not None:
            raise RuntimeError(f"kgstream run exited with {process.returncode}; see {log}")
        time.sleep(POLL_SECONDS)


def wait_processed(
    graph: Any, count: int, processes: Sequence[Any], log: Path, timeout: float
) -> None:
    """Until `count` documents are PROCESSED or FAILED; fails when one of the `kgstream run`
    `processes` exits first (`log`: where to look)."""
    from dataflow.core.documents import DocumentStatus

    deadline = time.monotonic() + timeout
    while True:
        statuses = graph.status_counts()
        done = statuses.get(DocumentStatus.PROCESSED, 0) + statuses.get(DocumentStatus.FAILED, 0)
        if done >= count:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"only {done} of {count} documents indexed in {timeout} s; see {log}"
            )
        for process in processes:
            if process.poll() is not None:
                raise RuntimeError(f"kgstream run exited with {process.returncode}; see {log}")
        time.sleep(0.05)


def wait_caught_up(graph: Any, corpus: dict[str, str], process: Any, log: Path) -> None:
    """Until every document of `corpus` is PROCESSED with its current content hash."""
    from dataflow.core.documents import DocumentStatus

    wanted = {doc_id: expected_hash(doc_id, text) for doc_id, text in corpus.items()}
    deadline = time.monotonic() + 3600
    while True:
        stored = graph.get_documents(wanted)
        behind = [
            doc_id
            for doc_id, content_hash in wanted.items()
            if doc_id not in stored
            or stored[doc_id].record.content_hash != content_hash
            or stored[doc_id].record.status is not DocumentStatus.PROCESSED
        ]
        if not behind:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(behind)} documents still behind after an hour; see {log}")
        if process.poll() is not None:
            raise RuntimeError(f"kgstream run exited with {process.returncode}; see {log}")
        time.sleep(0.1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the bench's test server, as a child process")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_parser = commands.add_parser("serve")
    serve_parser.add_argument("--delay", type=float, default=0.0)
    serve_parser.add_argument("--responder", choices=("none", "extract"), default="none")
    args = parser.parse_args(argv)
    return serve(args.delay, args.responder)


if __name__ == "__main__":
    sys.exit(main())
