"""Which Bytewax recovery partitions each process of a cluster keeps (kgstream/recovery.py),
and the cluster flags a user can get wrong. Bytewax's own behaviour with these layouts
(kill, resume, rescale) is tested end to end in test_cluster_recovery.py."""

import base64
import random
import sqlite3
import subprocess
import sys
import time
import zlib
from contextlib import closing
from pickle import dumps, loads

import pytest
import zstandard

from dataflow.core.snapshots import (
    DICTIONARY_SAMPLES,
    packed_with,
    raw,
    train_dictionary,
    use_dictionary,
)
from dataflow.core.steps import DocumentState
from kgstream.cli import main
from kgstream.commands.common import UserError
from kgstream.maintenance import compact_recovery
from kgstream.recovery import (
    legacy_commit_in_flight,
    pack_with_a_dictionary,
    prepare_recovery,
    read_partitions,
    resume_epoch,
)
from tests.core.test_snapshots import pickled_as_a_restore_call
from tests.kgstream import counting_flow
from tests.kgstream.processes import ROOT, wait_until

# The snapshot of the single "commit" step that versions before partitioned commits took
# (pickled by that version's code): document a.md in flight, its chunk settled, unacknowledged.
LEGACY_COMMIT_SNAPSHOT = zlib.decompress(
    base64.b64decode(
        "eJxlU8tuEzEUjUoyk0BTHqooiE0WCLVFDc2iQmJDIa26CI8o6RaNnJk7sZWZceRHAotKsKArb1DNF/IDfALX"
        "njwaMYoi+/r6nHPPvf5e/f3nTsV/ZjchiqQZn7djLgD/8pwpa7a7fvFepykIe2MPftgru2/qU8HHAqTEnamS"
        "dp5YWjGNqL8MrzLDKRQJK8bWPN5kyDGNjEFac/+MxzqHQvUXqavLgWLxBJSlTRNclsv1WcLjiCFvaGqKT6BA"
        "oAlJJ+SNenV8enLaaR9bPTKBAKRLrNnbpE8WnMi/s+QflKlLCrqH2IFURGlp6bN13rAM3VjT6A8+d8+Hw/Mz"
        "+9MOcJ+yDKIpUdTp2o55oTA/okRSa7ZoBzNiqosJCkfi0K+POngXfRIwYzC3pmJNkEExRoxexeknkheWHpkH"
        "KUH0JFojHLgC/Vb+568Pe+NrXbe81bwlgKWHvsYaVo3dRbaqgq/Y9efvMhZD6yPiEN1KuS4SSFqfuFB0zoqk"
        "9YGMZBtlet+l7QX0BQ31CMt4KCDns02Rpk7mhCmnhb40d2HmLFEsB3vx9m85flhHKEEpLA8loqwmTp5DGC6C"
        "q548orvr7tAn9Kke0df0EMcBMkVQy5YJZhArLtboF5XFd41meGGWnpjQ2akFoLV6JPFndmIthBO3sBSVhPso"
        "Jry2v6w0DVZEacbGFB26F/MsQxrGC9fILlqk/ANxd3oV6aehSmJEoZdX5XA0gYjsW1TW6V9OKEAx4Ws2dSRG"
        "k8qDhoCMlOAI2MFIszS0LK3MWY+w2+GLnWagEOwLZt8eFXeuR+1/qf+FSA=="
    )
)


def test_each_process_of_a_new_cluster_makes_its_share_of_one_partition_per_worker(tmp_path):
    made = [
        prepare_recovery(tmp_path / f"p{i}" / "recovery", i, 3, 2, index_exists=False)
        for i in range(3)
    ]
    assert [(m.held, m.count) for m in made] == [((0, 3), 6), ((1, 4), 6), ((2, 5), 6)]
    for i, m in enumerate(made):
        files = sorted(path.name for path in m.directory.iterdir())
        assert files == [f"part-{n}.sqlite3" for n in m.held]
        assert read_partitions(m.directory) == m
        assert not (tmp_path / f"p{i}" / "recovery.new").exists()


def test_a_single_process_makes_one_partition_per_worker_even_over_an_existing_index(tmp_path):
    made = prepare_recovery(tmp_path / "recovery", 0, 1, 2, index_exists=True)
    assert (made.held, made.count) == ((0, 1), 2)


def test_a_process_joining_a_cluster_with_an_index_makes_no_partition(tmp_path):
    joined = prepare_recovery(tmp_path / "recovery", 2, 3, 1, index_exists=True)
    assert (joined.held, joined.count) == ((), None)
    assert joined.directory.is_dir() and not any(joined.directory.iterdir())
    assert "no recovery partition" in joined.describe()


def test_existing_partitions_are_kept_whatever_the_flags_say_now(tmp_path):
    first = prepare_recovery(tmp_path / "recovery", 1, 2, 1, index_exists=False)
    again = prepare_recovery(tmp_path / "recovery", 0, 4, 3, index_exists=True)
    assert again == first and (again.held, again.count) == ((1,), 2)


def test_partitions_of_two_sets_in_one_directory_are_refused_with_their_names(tmp_path):
    prepare_recovery(tmp_path / "a", 0, 2, 1, index_exists=False)  # part-0 of 2
    prepare_recovery(tmp_path / "b", 0, 1, 3, index_exists=False)  # part-0..2 of 3
    (tmp_path / "b" / "part-1.sqlite3").rename(tmp_path / "a" / "part-1.sqlite3")
    with pytest.raises(UserError, match=r"different sets \(part-0 of 2, part-1 of 3\)"):
        read_partitions(tmp_path / "a")


def test_documents_in_flight_in_a_snapshot_of_the_former_single_commit_step_are_named(tmp_path):
    made = prepare_recovery(tmp_path / "recovery", 0, 1, 1, index_exists=False)
    assert legacy_commit_in_flight(made.directory) == []
    with sqlite3.connect(made.directory / "part-0.sqlite3") as connection:
        connection.execute(
            "INSERT INTO snaps (step_id, state_key, snap_epoch, ser_change) VALUES (?, ?, ?, ?)",
            ("kgstream.commit", "commit", 3, LEGACY_COMMIT_SNAPSHOT),
        )
    assert legacy_commit_in_flight(made.directory) == ["a.md"]
    with sqlite3.connect(made.directory / "part-0.sqlite3") as connection:  # then a clean stop
        connection.execute(
            "INSERT INTO snaps (step_id, state_key, snap_epoch, ser_change) VALUES (?, ?, ?, ?)",
            ("kgstream.commit", "commit", 4, None),
        )
    assert legacy_commit_in_flight(made.directory) == []


def churn(path, epochs=(1, 2), keys=40) -> None:
    """What Bytewax does to a partition every epoch: write snapshots, then delete the ones
    they supersede."""
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode = WAL")  # Bytewax's mode
    for epoch in epochs:
        with connection:
            connection.execute("BEGIN")
            connection.executemany(
                "INSERT INTO snaps (step_id, state_key, snap_epoch, ser_change) VALUES (?,?,?,?)",
                [("kgstream.entity", f"hub-{n}", epoch, bytes(50_000)) for n in range(keys)],
            )
            connection.execute("DELETE FROM snaps WHERE snap_epoch < ?", (epoch,))
    with connection:
        connection.execute("BEGIN")
        connection.execute("DELETE FROM snaps WHERE state_key != 'hub-0'")
    connection.close()


def pages(path) -> tuple[int, int]:
    """(pages in the file, free pages among them)."""
    connection = sqlite3.connect(path)
    try:
        count = connection.execute("PRAGMA page_count").fetchone()[0]
        return count, connection.execute("PRAGMA freelist_count").fetchone()[0]
    finally:
        connection.close()


def test_a_partition_gives_back_its_free_pages_when_the_next_run_starts(tmp_path):
    made = prepare_recovery(tmp_path / "recovery", 0, 1, 1, index_exists=False)
    path = made.directory / "part-0.sqlite3"
    churn(path)
    count, free = pages(path)
    assert free > count // 2  # deleted snapshots leave free pages: the file does not shrink

    again = prepare_recovery(tmp_path / "recovery", 0, 1, 1, index_exists=True)

    assert again == made
    left, none = pages(path)
    assert none == 0 and left <= count - free
    assert path.stat().st_size == left * 4096
    with sqlite3.connect(path) as connection:  # what was live is still there
        assert connection.execute("SELECT state_key FROM snaps").fetchall() == [("hub-0",)]


def record(path, epoch: int, *snapshots: tuple[str, int, bytes | None]) -> None:
    """Write `snapshots` (state key, epoch, change) of one step into a partition, which has
    committed `epoch`."""
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.executemany(
            "INSERT INTO snaps (step_id, state_key, snap_epoch, ser_change) VALUES (?,?,?,?)",
            [("kgstream.chunk", key, at, change) for key, at, change in snapshots],
        )
        connection.execute(
            "INSERT INTO commits (part_index, commit_epoch) SELECT part_index, ? FROM parts",
            (epoch,),
        )


def snapshots(path) -> list[tuple[str, int]]:
    with closing(sqlite3.connect(path)) as connection:
        rows = connection.execute("SELECT state_key, snap_epoch FROM snaps ORDER BY 1, 2")
        return rows.fetchall()


def test_a_tidy_drops_the_keys_that_are_gone_unless_another_partition_names_them(tmp_path):
    made = prepare_recovery(tmp_path / "recovery", 0, 1, 2, index_exists=False)
    first, second = made.paths()
    record(
        first,
        6,
        ("alive", 3, b"a"),
        ("gone", 2, b"before"),  # not yet collected by Bytewax
        ("gone", 4, None),
        ("moved", 2, b"m"),  # resumes as this: the other partition's deletion is not its last
        ("uncommitted", 6, None),  # deleted in an epoch the other partition has not committed
    )
    record(second, 5, ("moved", 1, None), ("deleted-twice", 3, None), ("deleted-twice", 4, None))

    made.tidy()

    assert snapshots(first) == [("alive", 3), ("moved", 2), ("uncommitted", 6)]
    assert snapshots(second) == [("moved", 1)]


def test_a_process_that_holds_part_of_the_set_keeps_every_deletion(tmp_path):
    made = prepare_recovery(tmp_path / "recovery", 0, 2, 1, index_exists=False)
    (path,) = made.paths()
    record(path, 5, ("gone", 2, None))  # another process's partition may hold "gone" too
    made.tidy(rewrite=True)
    assert snapshots(path) == [("gone", 2)]


def test_packing_with_a_new_dictionary_rewrites_an_older_rows_state_as_its_bytes(tmp_path):
    """A document's state from a row written before its step snapshotted bytes (a call of
    its restore function) is packed again as the bytes the step snapshots now, with the new
    dictionary, and reads back as the same state."""
    made = prepare_recovery(tmp_path / "recovery", 0, 1, 1, index_exists=False)
    (path,) = made.paths()
    states = {
        f"notes/{n}.md": DocumentState(f"sha256:{n:064x}", f"notes/{n}.md", (f"chunk-{n:064x}",))
        for n in range(DICTIONARY_SAMPLES)
    }
    older = {"notes/0.md", "notes/1.md"}
    record(
        path,
        1,
        *(
            (doc, 1, pickled_as_a_restore_call(state) if doc in older else dumps(state.packed()))
            for doc, state in states.items()
        ),
    )
    kept: list[bytes] = []

    pack_with_a_dictionary(made.paths(), lambda trained: kept.append(trained) or trained)

    assert len(kept) == 1
    dictionary = zstandard.ZstdCompressionDict(kept[0]).dict_id()
    with closing(sqlite3.connect(path)) as connection:
        rows = dict(connection.execute("SELECT state_key, ser_change FROM snaps"))
    for doc, state in states.items():
        blob = loads(rows[doc])
        assert isinstance(blob, bytes) and packed_with(blob) == dictionary, doc
        assert DocumentState.unpacked(blob) == state


def test_compaction_packs_an_older_rows_state_as_bytes_with_the_index_dictionary(tmp_path):
    """An index from before the document and chunk steps snapshotted bytes keeps those
    rows until their keys are touched again; `kgstream compact` (`compact_recovery`, in a
    process that knows the dictionary only from the graph store) writes them as bytes."""
    states = [
        DocumentState(f"sha256:{n:064x}", f"notes/{n}.md", (f"chunk-{n:064x}",))
        for n in range(DICTIONARY_SAMPLES)
    ]
    dictionary = train_dictionary([raw(state.packed()) for state in states])
    assert dictionary is not None
    use_dictionary(dictionary)
    made = prepare_recovery(tmp_path / "recovery", 0, 1, 1, index_exists=False)
    (path,) = made.paths()
    record(path, 1, *((state.file_path, 1, pickled_as_a_restore_call(state)) for state in states))
    use_dictionary(None)  # a new process

    compact_recovery(tmp_path / "recovery", dictionary)

    with closing(sqlite3.connect(path)) as connection:
        rows = dict(connection.execute("SELECT state_key, ser_change FROM snaps"))
    kept = zstandard.ZstdCompressionDict(dictionary).dict_id()
    for state in states:
        blob = loads(rows[state.file_path])
        assert isinstance(blob, bytes) and packed_with(blob) == kept
        assert DocumentState.unpacked(blob) == state


def executions(path, *rows: tuple[int, int, int], fronts: tuple[tuple[int, int, int], ...] = ()):
    """Write Bytewax's record of executions (ex_num, worker_count, resume_epoch) and of
    their workers' frontiers (ex_num, worker_index, worker_frontier) into a partition."""
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.executemany(
            "INSERT INTO exs (ex_num, worker_count, resume_epoch) VALUES (?,?,?)", rows
        )
        connection.executemany(
            "INSERT INTO fronts (ex_num, worker_index, worker_frontier) VALUES (?,?,?)", fronts
        )


def test_the_resume_epoch_is_the_oldest_frontier_among_the_last_executions_workers(tmp_path):
    made = prepare_recovery(tmp_path / "recovery", 0, 1, 2, index_exists=False)
    first, second = made.paths()
    assert resume_epoch(made.paths()) is None  # never run
    executions(first, (0, 2, 1), fronts=((0, 0, 9), (0, 1, 7)))
    assert resume_epoch(made.paths()) == 7
    # The next execution resumed at 7; worker 1 has written no frontier yet (it counts as 7).
    executions(second, (1, 2, 7), fronts=((1, 0, 12),))
    assert resume_epoch(made.paths()) == 7
    executions(first, fronts=((1, 1, 10),))
    assert resume_epoch(made.paths()) == 10
    executions(first, fronts=((2, 0, 14),))  # an execution whose own row is not here
    assert resume_epoch(made.paths()) is None


def test_a_tidy_drops_every_snapshot_of_the_epochs_a_resume_runs_again(tmp_path):
    made = prepare_recovery(tmp_path / "recovery", 0, 1, 2, index_exists=False)
    first, second = made.paths()
    executions(first, (0, 2, 1), fronts=((0, 0, 6), (0, 1, 5)))  # resumes at 5
    record(first, 4, ("kept", 4, b"k"), ("cut-short", 4, b"before"), ("cut-short", 5, None))
    record(second, 4, ("also-cut-short", 3, b"before"), ("also-cut-short", 5, b"after"))

    made.tidy()

    assert snapshots(first) == [("cut-short", 4), ("kept", 4)]
    assert snapshots(second) == [("also-cut-short", 3)]


COUNT_STEP = "counting.count.stateful_flat_map.stateful.stateful_batch"


def start_counting(directory, *args: str) -> subprocess.Popen[str]:
    """tests/kgstream/counting_flow.py in its own process, its partitions prepared (and
    tidied) first as `kgstream run` does."""
    prepare_recovery(directory, 0, 1, counting_flow.WORKERS, index_exists=False)
    command = [sys.executable, "-m", "tests.kgstream.counting_flow", str(directory), *args]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)


def kill_after(running: subprocess.Popen[str], lines: int) -> None:
    """Kill `running` with -9 once it has printed `lines` counts."""
    assert running.stdout is not None
    for _ in range(lines):
        assert running.stdout.readline(), "the flow stopped before it was killed"
    running.kill()
    running.communicate(timeout=30)


def all_snapshots(directory) -> list[tuple[str, str, int, bytes | None]]:
    rows = []
    for path in read_partitions(directory).paths():
        with closing(sqlite3.connect(path)) as connection:
            rows += connection.execute(
                "SELECT step_id, state_key, snap_epoch, ser_change FROM snaps"
            )
    return sorted(rows)


@pytest.mark.services
def test_a_kill_can_leave_snapshots_of_the_epoch_the_resume_runs_again_and_a_start_drops_them(
    tmp_path,
):
    """Real Bytewax killed with -9 at random points until a kill leaves snapshots of an epoch
    the workers' frontiers still name (one kill in four here, mostly an input partition's
    offset): the next start deletes exactly those and leaves every older row as it was."""
    directory, chance = tmp_path / "recovery", random.Random()
    deadline = time.monotonic() + 120
    while True:
        kill_after(start_counting(directory, "b"), chance.randrange(20, 200))
        resume = resume_epoch(read_partitions(directory).paths())
        assert resume is not None
        rows = all_snapshots(directory)
        if any(epoch >= resume for _, _, epoch, _ in rows):
            break
        assert time.monotonic() < deadline, "no kill left a snapshot of an unfinished epoch"

    prepare_recovery(directory, 0, 1, counting_flow.WORKERS, index_exists=True)

    assert all_snapshots(directory) == [row for row in rows if row[2] < resume]


@pytest.mark.services
def test_a_key_the_resumed_run_leaves_alone_keeps_its_state_not_the_killed_runs(tmp_path):
    """Real Bytewax, killed with -9. A kill while the workers close an epoch can leave that
    epoch's snapshot of a key in its partition while the frontiers still name the epoch (the
    test above), so the resume starts at it and loads the key's older snapshot. If the
    resumed run does not touch the key in that epoch, the killed run's row stays, newer than
    the key's state, and the resume after the next kill loads it instead (Bytewax's own
    clean-up then deletes the right one): a document's commit state replaced so was left
    PROCESSING for good. Here "b" is counted, the run killed, and such a row of "b" written
    as that kill can leave it; a run counting only "a" is killed once past that epoch; a last
    run counts one more "b" and must count on from what the first resume held."""
    directory, chance = tmp_path / "recovery", random.Random()
    counting_b = start_counting(directory, "b")
    paths = read_partitions(directory).paths()
    wait_until(lambda: (resume_epoch(paths) or 0) > 2, 60, "the run counting b to snapshot")
    kill_after(counting_b, chance.randrange(1, 100))
    resume = resume_epoch(paths)
    assert resume is not None
    (held,) = [
        loads(change)
        for step, key, epoch, change in all_snapshots(directory)
        if (step, key) == (COUNT_STEP, "b") and epoch < resume
    ][-1:]
    for path in paths:  # "b" is in one partition; the other never names it
        with closing(sqlite3.connect(path)) as connection, connection:
            connection.execute(
                "INSERT OR REPLACE INTO snaps (step_id, state_key, snap_epoch, ser_change) "
                "SELECT ?, 'b', ?, ? FROM snaps WHERE step_id = ? AND state_key = 'b' LIMIT 1",
                (COUNT_STEP, resume, dumps(held + 1000), COUNT_STEP),
            )

    counting_a = start_counting(directory, "a")
    wait_until(
        lambda: (resume_epoch(paths) or 0) > resume + 2,
        60,
        "the run counting a to finish the epochs after the resume",
    )
    kill_after(counting_a, 1)
    last = start_counting(directory, "b", "1")
    out, _ = last.communicate(timeout=60)

    assert last.returncode == 0
    assert out.split() == ["b", str(held + 1)]


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["-i", "0", "-a", "h1:1;h2:2"], "needs one Redis server"),
        (["-a", "h1:1;h2:2"], "--addresses needs --process-id"),
    ],
)
def test_cluster_flags_a_cluster_cannot_run_with_are_refused_before_anything_starts(
    flags, says, tmp_path, capsys, monkeypatch
):
    monkeypatch.delenv("KGSTREAM_REDIS_URL", raising=False)
    args = ["run", "--kafka", "127.0.0.1:1", "--data", str(tmp_path / "data"), "--no-serve"]
    assert main([*args, *flags]) == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


def test_a_process_id_outside_the_addresses_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KGSTREAM_REDIS_URL", "redis://127.0.0.1:1/0")
    args = ["run", "--kafka", "127.0.0.1:1", "--data", str(tmp_path / "data"), "--no-serve"]
    assert main([*args, "-i", "2", "-a", "h1:1;h2:2"]) == 2
    assert "process_id must be an index into the 2 addresses (0 to 1; got 2)" in (
        capsys.readouterr().err
    )
