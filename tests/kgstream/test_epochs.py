"""The dataflow's epoch is the `epoch_seconds` setting: Bytewax snapshots the keyed state a
step touched once per epoch and commits it to the recovery database
(docs/decisions/0005-epochs-of-ten-seconds.md). Kill tests snapshot every second instead
(`SNAPSHOT_EVERY_SECOND`)."""

import argparse
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from kgstream.commands.common import run_options
from kgstream.settings import SettingsError, load_settings
from tests.kgstream.processes import clean_environment, finish, kgstream
from tests.support.wait import wait_until

EPOCH_SECONDS = 0.25
EPOCHS_TIMED = 8


def committed_epoch(data: Path) -> int:
    """The newest epoch the run's recovery partition has committed (-1: none yet)."""
    partitions = sorted((data / "recovery").glob("part-*.sqlite3"))
    if not partitions:
        return -1
    connection = sqlite3.connect(f"file:{partitions[0]}?mode=ro", uri=True)
    try:
        row = connection.execute("SELECT MAX(commit_epoch) FROM commits").fetchone()
    except sqlite3.OperationalError:  # the tables are being created
        return -1
    finally:
        connection.close()
    return -1 if row[0] is None else int(row[0])


def test_the_default_epoch_is_ten_seconds_and_reaches_the_run_options():
    settings = load_settings({})
    assert settings.epoch_seconds == 10.0
    args = argparse.Namespace(workers=1, process_id=None, addresses=None)
    assert run_options(args, settings).epoch_seconds == 10.0
    shorter = load_settings({"KGSTREAM_EPOCH_SECONDS": "0.5"})
    assert run_options(args, shorter).epoch_seconds == 0.5
    with pytest.raises(SettingsError, match="epoch_seconds must be > 0"):
        load_settings({"KGSTREAM_EPOCH_SECONDS": "0"})


def test_a_run_commits_one_snapshot_per_epoch_of_the_setting(llm_server, tmp_path):
    folder, data = tmp_path / "docs", tmp_path / "data"
    folder.mkdir()
    (folder / "note.md").write_text("Ada Quist founded Quistco in Lisbon.", encoding="utf-8")
    env = {**clean_environment(llm_server.base_url), "KGSTREAM_EPOCH_SECONDS": str(EPOCH_SECONDS)}
    running = kgstream("run", "--watch", str(folder), "--data", str(data), "--no-serve", env=env)
    try:
        wait_until(lambda: committed_epoch(data) >= 1, 60, "the first committed epoch")
        first, began = committed_epoch(data), time.monotonic()
        wait_until(
            lambda: committed_epoch(data) >= first + EPOCHS_TIMED, 30, f"{EPOCHS_TIMED} epochs"
        )
        per_epoch = (time.monotonic() - began) / (committed_epoch(data) - first)
    finally:
        running.send_signal(signal.SIGINT)
    finish(running)
    # Idle epochs close on the clock: never faster than the setting, and far from the
    # 10 s default the run would use if the setting did not reach Bytewax.
    assert EPOCH_SECONDS * 0.75 <= per_epoch < 2.0, per_epoch
