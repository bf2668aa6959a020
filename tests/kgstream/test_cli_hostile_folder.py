"""`kgstream run --watch` and `kgstream index` on hostile folders, as processes: odd file
names, the watched root vanishing and coming back. After each step the stores equal a
from-scratch build of the folder (tests/kgstream/test_cli_watch.py's oracle)."""

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.redis.graph_store import GraphStore
from tests.kgstream.processes import clean_environment, finish, kgstream, wait_until
from tests.kgstream.test_cli_watch import fresh_build, stored_graph
from tests.kgstream.test_store_outages import Run, metric, stored
from tests.support.redis import RedisTestServer

HOSTILE_NAMES = {
    os.fsdecode(b"caf\xe9.txt"): "Zoe\u0308 Quist opened a cafe in Lyon.",  # Latin-1, old zip
    "back\\slash.md": "Alice Moreau founded Northwind Labs in Lisbon.",
    "line\nbreak.md": "Bob Tanaka joined Helios Corp in Geneva.",
}


@pytest.fixture
def env(llm_server) -> dict[str, str]:
    return {**clean_environment(llm_server.base_url), "RUST_BACKTRACE": "1"}


@pytest.fixture
def redis_server() -> Iterator[RedisTestServer]:
    server = RedisTestServer().start()
    yield server
    server.stop()


def write_hostile_folder(folder: Path) -> None:
    folder.mkdir()
    for name, text in HOSTILE_NAMES.items():
        (folder / name).write_text(text)
    (folder / "plain.md").write_text("Carla Diaz leads the Atlas Project at Northwind Labs.")


def test_index_indexes_names_with_non_utf8_bytes_backslashes_and_newlines(
    env, tmp_path, redis_server
):
    folder, data = tmp_path / "docs", tmp_path / "data"
    write_hostile_folder(folder)
    env = {**env, "KGSTREAM_REDIS_URL": redis_server.url}

    output = finish(kgstream("index", str(folder), "--data", str(data), env=env))
    assert "PROCESSED 4, FAILED 0" in output, output
    graph = stored(redis_server)
    assert graph == fresh_build(folder)
    assert set(graph.documents) == {"caf\\xe9.txt", "back\\slash.md", "line\nbreak.md", "plain.md"}
    assert "zo\u00eb quist" in graph.entities  # decomposed text is composed: one entity
    output = finish(kgstream("index", str(folder), "--data", str(data), env=env))
    assert "PROCESSED 4, FAILED 0" in output and "Traceback" not in output, output


def test_watching_names_with_non_utf8_bytes_survives_edits_deletes_and_restarts(env, tmp_path):
    folder, data = tmp_path / "docs", tmp_path / "data"
    write_hostile_folder(folder)
    arguments = ["run", "--watch", str(folder), "--data", str(data), "--grpc", "127.0.0.1:0"]

    running = kgstream(*arguments, env=env)
    try:
        wait_until(lambda: stored_graph(data) == fresh_build(folder), 60, "the first index")
        (folder / os.fsdecode(b"caf\xe9.txt")).write_text("Zoe Quist sold the cafe to Helios.")
        (folder / "back\\slash.md").unlink()
        (folder / os.fsdecode(b"na\xefve.md")).write_text("Dora Lind joined Helios Corp.")
        wait_until(lambda: stored_graph(data) == fresh_build(folder), 60, "the edits")
    finally:
        running.send_signal(signal.SIGTERM)
        output, _ = running.communicate(timeout=60)
    assert running.returncode == 0 and "Traceback" not in output, output

    (folder / os.fsdecode(b"caf\xe9.txt")).unlink()
    running = kgstream(*arguments, env=env)  # the start-up scan meets the same names again
    try:
        wait_until(lambda: stored_graph(data) == fresh_build(folder), 60, "the resumed index")
    finally:
        running.send_signal(signal.SIGTERM)
        output, _ = running.communicate(timeout=60)
    assert running.returncode == 0 and "Traceback" not in output, output


def source_hold(server: RedisTestServer) -> str | None:
    with GraphStore.from_url(server.url) as graph:
        return graph.source_hold()


@pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")
def test_a_vanished_root_keeps_the_index_is_reported_and_is_reconciled_when_back(
    env, tmp_path, redis_server
):
    folder, data = tmp_path / "docs", tmp_path / "data"
    folder.mkdir()
    (folder / "alice.md").write_text("Alice Moreau founded Northwind Labs in Lisbon.")
    (folder / "bob.md").write_text("Bob Tanaka joined Helios Corp in Geneva.")
    (folder / "carla.md").write_text("Carla Diaz leads the Atlas Project in Porto.")
    run = Run(env, folder, data, redis_server)
    try:
        wait_until(lambda: stored(redis_server) == fresh_build(folder), 60, "the first index")
        before = stored(redis_server)

        away = tmp_path / "moved-away"
        folder.rename(away)  # an unmounted share or a `mv` looks the same from inside
        wait_until(lambda: metric(run.metrics_port, "source_holding") == 1.0, 30, "the gauge")
        hold = source_hold(redis_server)
        assert hold is not None and "missing" in hold
        assert stored(redis_server) == before
        status_env = {**env, "KGSTREAM_REDIS_URL": redis_server.url}
        status = finish(kgstream("status", "--data", str(data), "--json", env=status_env))
        assert '"source_hold": "watched folder' in status, status

        (away / "bob.md").unlink()
        (away / "carla.md").write_text("Carla Diaz leads the Atlas Project in Faro.")
        away.rename(folder)
        wait_until(lambda: stored(redis_server) == fresh_build(folder), 10, "the reconciled index")
        wait_until(lambda: metric(run.metrics_port, "source_holding") == 0.0, 10, "the gauge")
        assert source_hold(redis_server) is None
        assert len(run.said("is missing")) == 1, run.lines  # one warning, not one per look
        assert len(run.said("is back: rescanning it")) == 1, run.lines
    finally:
        output = run.stop()
    assert run.process.returncode == 0 and "Traceback" not in output, output
