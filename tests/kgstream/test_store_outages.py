"""A store going away while `kgstream run` indexes: the indexer waits (one log line, the
`store_waiting` gauge), loses nothing, and resumes when the store is back; a stop asked
for meanwhile is one line and exit 0. The stores: a real redis-server stopped, a real Qdrant
server killed (tests/support/qdrant.py), and the embedding endpoint."""

import re
import signal
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from connectors.index_export import read_graph
from connectors.redis.graph_store import GraphStore
from tests.kgstream.processes import clean_environment, finish, kgstream
from tests.kgstream.test_cli_kafka import export
from tests.kgstream.test_cli_watch import fresh_build
from tests.support.llm_server import EMBEDDINGS
from tests.support.ports import free_port
from tests.support.qdrant import QdrantTestServer, chunk_points
from tests.support.redis import RedisTestServer
from tests.support.wait import wait_until

WAITING = "the indexer waits for it"


def metric(port: int, name: str) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as reply:
            text = reply.read().decode()
    except OSError:
        return None
    found = re.search(rf"^kgstream_{name} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else None


class Run:
    """`kgstream run --watch` against `server`, its output collected as it comes."""

    def __init__(self, env: dict[str, str], folder: Path, data: Path, server: RedisTestServer):
        self.metrics_port = free_port()
        env = {
            **env,
            "KGSTREAM_REDIS_URL": server.url,
            "KGSTREAM_METRICS_ADDRESS": f"127.0.0.1:{self.metrics_port}",
        }
        self.process = kgstream(
            "run", "--watch", str(folder), "--data", str(data), "--no-serve", env=env
        )
        self.lines: list[str] = []

        def collect() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                self.lines.append(line.rstrip("\n"))

        self._reader = threading.Thread(target=collect, daemon=True)
        self._reader.start()

    def said(self, text: str) -> list[str]:
        return [line for line in self.lines if text in line]

    def stop(self, signum: int = signal.SIGTERM) -> str:
        if self.process.poll() is None:
            self.process.send_signal(signum)
        self.process.wait(timeout=60)
        self._reader.join(timeout=10)
        return "\n".join(self.lines)


def stored(server: RedisTestServer) -> object:
    graph = GraphStore.from_url(server.url)
    try:
        return read_graph(graph)
    except Exception:
        return None
    finally:
        graph.close()


@dataclass
class Outage:
    folder: Path
    data: Path
    server: RedisTestServer
    port: int
    run: Run


@pytest.fixture
def outage(llm_server, tmp_path) -> Iterator[Outage]:
    """A run that indexed alice.md, then lost Redis while bob.md was being indexed."""
    env = {**clean_environment(llm_server.base_url), "RUST_BACKTRACE": "1"}
    folder, data = tmp_path / "docs", tmp_path / "data"
    folder.mkdir()
    (folder / "alice.md").write_text("Alice Moreau founded Northwind Labs in Lisbon.")
    server = RedisTestServer(persistent=True).start()
    run = Run(env, folder, data, server)
    state = Outage(folder, data, server, server.port, run)
    try:
        wait_until(lambda: stored(server) == fresh_build(folder), 60, "the first index")
        server.stop(keep_data=True)
        (folder / "bob.md").write_text("Bob Tanaka joined Helios Corp in Geneva.")
        wait_until(lambda: run.said(WAITING), 60, "the outage to be noticed")
        yield state
    finally:
        state.run.stop(signal.SIGKILL)
        server.stop()


def test_redis_stopped_and_restarted_is_waited_out_and_nothing_is_lost(outage):
    folder, run = outage.folder, outage.run
    wait_until(lambda: metric(run.metrics_port, "store_waiting") == 1.0, 30, "the gauge")
    (folder / "alice.md").unlink()  # more changes while Redis is away
    (folder / "carla.md").write_text("Carla Diaz leads the Atlas Project in Porto.")
    assert run.process.poll() is None, run.lines

    outage.server.start(outage.port)
    wait_until(lambda: stored(outage.server) == fresh_build(folder), 60, "the index to catch up")
    wait_until(lambda: metric(run.metrics_port, "store_waiting") == 0.0, 30, "the gauge")
    assert metric(run.metrics_port, "store_outages_total") == 1.0
    assert len(run.said(WAITING)) == 1, run.lines  # one line per outage, not per retry
    assert len(run.said("the stores are reachable again")) == 1, run.lines
    output = run.stop()
    assert run.process.returncode == 0, output
    assert "Traceback" not in output and "panicked" not in output, output


def test_a_stop_while_redis_is_away_is_one_line_and_exit_zero_and_the_next_run_resumes(
    outage, llm_server
):
    run = outage.run
    output = run.stop(signal.SIGTERM)
    assert run.process.returncode == 0, output
    assert "Traceback" not in output and "panicked" not in output, output
    stop_lines = [line for line in run.said("kgstream: ") if "stopping" in line]
    assert len(stop_lines) == 1, output  # one line, whatever the dataflow was doing
    assert "stopping now, while a store is unreachable" in stop_lines[0]

    outage.server.start(outage.port)
    outage.run = Run(
        clean_environment(llm_server.base_url), outage.folder, outage.data, outage.server
    )  # bob.md was never committed: found again
    wait_until(lambda: stored(outage.server) == fresh_build(outage.folder), 60, "the resumed index")
    outage.run.stop()
    assert outage.run.process.returncode == 0, "\n".join(outage.run.lines)


def test_a_killed_qdrant_server_is_waited_out_and_the_index_resumes_once_it_restarts(
    llm_server, tmp_path
):
    folder, data = tmp_path / "docs", tmp_path / "data"
    folder.mkdir()
    (folder / "alice.md").write_text("Alice Moreau founded Northwind Labs in Lisbon.")
    with RedisTestServer() as server, QdrantTestServer(tmp_path / "qdrant") as qdrant:
        env = {**clean_environment(llm_server.base_url), "KGSTREAM_QDRANT_URL": qdrant.url}
        run = Run(env, folder, data, server)
        try:
            wait_until(lambda: stored(server) == fresh_build(folder), 60, "the first index")
            qdrant.stop(kill=True)  # a crash: only its write-ahead log survives
            (folder / "bob.md").write_text("Bob Tanaka joined Helios Corp in Geneva.")
            wait_until(lambda: run.said(WAITING), 60, "the outage to be noticed")
            assert "vector store (Qdrant)" in run.said(WAITING)[0], run.lines
            wait_until(lambda: metric(run.metrics_port, "store_waiting") == 1.0, 30, "the gauge")
            assert run.process.poll() is None, run.lines

            qdrant.start()  # the same ports and storage
            expected = fresh_build(folder)
            wait_until(lambda: stored(server) == expected, 60, "bob.md indexed")
            assert chunk_points(qdrant.url, "default") == len(expected.chunks)
            wait_until(lambda: metric(run.metrics_port, "store_waiting") == 0.0, 30, "the gauge")
        finally:
            output = run.stop()
    assert run.process.returncode == 0, output
    assert len(run.said(WAITING)) == 1, output
    assert len(run.said("the stores are reachable again")) == 1, output
    assert "Traceback" not in output and "panicked" not in output, output


def test_an_embedding_endpoint_away_is_waited_out_like_a_store_and_nothing_is_lost(
    llm_server, tmp_path
):
    folder, data = tmp_path / "docs", tmp_path / "data"
    folder.mkdir()
    (folder / "alice.md").write_text("Alice Moreau founded Northwind Labs in Lisbon.")
    with RedisTestServer() as server:
        run = Run(clean_environment(llm_server.base_url), folder, data, server)
        try:
            wait_until(lambda: stored(server) == fresh_build(folder), 60, "the first index")
            llm_server.fail_next(503, count=1_000_000, endpoint=EMBEDDINGS)
            (folder / "bob.md").write_text("Bob Tanaka joined Helios Corp in Geneva.")
            wait_until(lambda: run.said("the embedding endpoint is away"), 60, "the wait")
            wait_until(lambda: metric(run.metrics_port, "store_waiting") == 1.0, 30, "the gauge")
            assert run.process.poll() is None, run.lines

            llm_server.reset()  # the endpoint answers again
            wait_until(lambda: stored(server) == fresh_build(folder), 60, "bob.md indexed")
        finally:
            output = run.stop()
    assert run.process.returncode == 0, output
    assert len(run.said(WAITING)) == 1, output
    assert "Traceback" not in output and "panicked" not in output, output


def test_an_embedding_endpoint_that_rejects_the_key_stops_the_run_with_one_line(
    llm_server, tmp_path
):
    folder, data = tmp_path / "docs", tmp_path / "data"
    folder.mkdir()
    (folder / "alice.md").write_text("Alice Moreau founded Northwind Labs in Lisbon.")
    env = {**clean_environment(llm_server.base_url), "RUST_BACKTRACE": "1"}
    llm_server.fail_next(401, count=1_000_000, endpoint=EMBEDDINGS)
    rejected = kgstream("index", str(folder), "--data", str(data), env=env)
    output, _ = rejected.communicate(timeout=120)
    assert rejected.returncode == 1, output
    assert "Traceback" not in output and "panicked" not in output, output
    lines = [line for line in output.splitlines() if line.startswith("kgstream:")]
    assert len(lines) == 1 and "the embedding endpoint rejects requests" in lines[0], output
    assert "401" in lines[0] and "fix the setting and run again" in lines[0]

    llm_server.reset()  # the key fixed
    finish(kgstream("index", str(folder), "--data", str(data), env=env))
    assert export(data, env)["documents"][0]["status"] == "PROCESSED"
