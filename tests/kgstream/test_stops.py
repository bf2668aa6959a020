"""Stopping `kgstream run` while it extracts through a slow LLM: a stop is one line and exit
0, whatever the dataflow is doing, the embedded redis-server goes with it, and the next run
(a one-shot index) finishes the documents the stopped one left."""

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.kgstream.processes import finish, kgstream, llm_environment
from tests.kgstream.test_cli_kafka import export
from tests.support.llm_server import offline_extraction_reply
from tests.support.wait import wait_until

DOCUMENTS = 6


@pytest.fixture
def slow_llm(llm_server):
    llm_server.responder = offline_extraction_reply
    llm_server.delay_seconds = 1.0  # each extraction takes a second: a stop lands mid-call
    yield llm_server
    llm_server.delay_seconds = 0.0


@pytest.fixture
def folder(tmp_path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for n in range(DOCUMENTS):
        (folder / f"note-{n}.md").write_text(f"Person{n} Quist founded Company{n} in Lisbon.")
    return folder


def read_until(running: subprocess.Popen[str], start: str) -> str:
    """The output up to and including the first line that starts with `start`."""
    assert running.stdout is not None
    seen = []
    for line in running.stdout:  # ends when the process does: communicate() has the rest
        seen.append(line)
        if line.startswith(start):
            break
    return "".join(seen)


def redis_pid(data: Path) -> int:
    return int((data / "redis" / "redis.pid").read_text().strip())


def is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize(
    ("stop_signal", "signals"),
    [(signal.SIGTERM, 1), (signal.SIGINT, 2)],
    ids=["docker-stop", "ctrl-c-twice"],
)
def test_a_stop_during_extraction_is_one_line_exit_0_and_takes_redis_along(
    slow_llm, folder, tmp_path, stop_signal, signals
):
    data = tmp_path / "data"
    env = {**llm_environment(slow_llm.base_url), "RUST_BACKTRACE": "1"}
    arguments = ["run", "--watch", str(folder), "--data", str(data), "--no-serve"]
    running = kgstream(*arguments, env=env)
    try:
        wait_until(lambda: slow_llm.chat_calls >= 1, 60, "the first extraction to start")
        pid = redis_pid(data)
        name = signal.Signals(stop_signal).name
        running.send_signal(stop_signal)
        seen = read_until(running, f"kgstream: {name}: stopping once")
        if signals == 2:  # once the first is handled: two at once would be one signal
            running.send_signal(stop_signal)
        output = seen + running.communicate(timeout=60)[0]
    finally:
        running.kill()
    assert running.returncode == 0, output
    lines = [line for line in output.splitlines() if name in line]
    assert len(lines) == signals, output
    if signals == 2:
        assert lines[1].startswith(f"kgstream: {name} again: stopping now"), output
    assert not any(word in output for word in ("panicked", "backtrace", "Traceback")), output
    wait_until(lambda: not is_running(pid), 10, f"the embedded redis-server {pid} to exit")

    slow_llm.delay_seconds = 0.0
    finish(kgstream("index", str(folder), "--data", str(data), env=env))
    documents = export(data, env)["documents"]
    assert [d["status"] for d in documents] == ["PROCESSED"] * DOCUMENTS, documents


def test_a_terminals_ctrl_c_to_the_whole_group_leaves_redis_up_until_kgstream_is_done(
    slow_llm, folder, tmp_path
):
    """A terminal's Ctrl-C signals the foreground job's whole process group: the embedded
    redis-server must not take it, or the documents in flight could not be committed and
    the run's end could not keep what it keeps in the graph store; kgstream stops it last."""
    data = tmp_path / "data"
    env = llm_environment(slow_llm.base_url)
    arguments = ["run", "--watch", str(folder), "--data", str(data), "--no-serve"]
    running = kgstream(*arguments, env=env, own_group=True)
    try:
        wait_until(lambda: slow_llm.chat_calls >= 1, 60, "the first extraction to start")
        pid = redis_pid(data)
        os.killpg(running.pid, signal.SIGINT)
        output = running.communicate(timeout=60)[0]
    finally:
        running.kill()
    assert running.returncode == 0, output
    assert [line for line in output.splitlines() if "SIGINT" in line] == [
        "kgstream: SIGINT: stopping once the documents in flight are committed (send it "
        "again to stop at once)"
    ], output
    assert "unreachable" not in output and "cannot reach" not in output, output
    wait_until(lambda: not is_running(pid), 10, f"the embedded redis-server {pid} to exit")
