"""The recovery partitions (dataflow/state/partitions.py, tables.py): which each process of a
cluster keeps, the format they are stamped with and the refusal of any other, and what a
tidy, the dictionary's training and compaction do to their rows. Bytewax's own behaviour with
these layouts (kill, resume, rescale) is tested end to end in
tests/kgstream/test_cluster_recovery.py."""

import random
import sqlite3
import subprocess
import sys
from contextlib import closing
from pickle import dumps, loads

import pytest
import zstandard
from bytewax.recovery import init_db_dir

from dataflow.core.steps import DocumentState
from dataflow.state.codec import DICTIONARY_SAMPLES, SnapshotCodec, packed_with, train_dictionary
from dataflow.state.errors import MixedPartitionSetsError, RecoveryFormatError
from dataflow.state.forms import pack_document, unpack_document
from dataflow.state.partitions import (
    RECOVERY_FORMAT,
    compact_recovery,
    pack_with_a_dictionary,
    prepare_recovery,
    read_partitions,
)
from dataflow.state.tables import resume_epoch
from tests.kgstream import counting_flow
from tests.kgstream.processes import ROOT
from tests.support.wait import wait_until


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
    with pytest.raises(
        MixedPartitionSetsError, match=r"different sets \(part-0 of 2, part-1 of 3\)"
    ):
        read_partitions(tmp_path / "a")


def files_of(directory) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


def test_a_new_set_of_partitions_carries_the_recovery_format(tmp_path):
    made = prepare_recovery(tmp_path / "recovery", 0, 1, 2, index_exists=False)
    for path in made.paths():
        with closing(sqlite3.connect(path)) as connection:
            assert connection.execute("SELECT version FROM kgstream_format").fetchall() == [
                (RECOVERY_FORMAT,)
            ]


def unstamped(directory, count: int = 1):
    """A recovery directory as Bytewax makes one, without the format: every index made
    before partitions carried it."""
    directory.mkdir(parents=True)
    init_db_dir(directory, count)
    return directory


def restamped(directory, version: int):
    """A recovery directory stamped with another format than this kgstream's."""
    prepare_recovery(directory, 0, 1, 1, index_exists=False)
    with closing(sqlite3.connect(directory / "part-0.sqlite3")) as connection, connection:
        connection.execute("UPDATE kgstream_format SET version = ?", (version,))
    return directory


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (unstamped, "without a format version"),
        (lambda directory: restamped(directory, RECOVERY_FORMAT + 1), "in format 2"),
    ],
    ids=["unstamped", "another-format"],
)
def test_partitions_of_another_format_are_refused_and_left_untouched(make, says, tmp_path):
    directory = make(tmp_path / "recovery")
    before = files_of(directory)

    with pytest.raises(RecoveryFormatError, match=says):
        prepare_recovery(directory, 0, 1, 1, index_exists=True)
    with pytest.raises(RecoveryFormatError, match=says):
        compact_recovery(directory, SnapshotCodec())

    assert files_of(directory) == before


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


def document(n: int) -> DocumentState:
    return DocumentState(f"sha256:{n:064x}", f"notes/{n}.md", (f"chunk-{n:064x}",))


def test_packing_with_a_new_dictionary_packs_every_small_snapshot_with_it(tmp_path):
    """Each small snapshot is packed again with the new dictionary and reads back as the
    same state."""
    made = prepare_recovery(tmp_path / "recovery", 0, 1, 1, index_exists=False)
    (path,) = made.paths()
    states = {state.file_path: state for state in map(document, range(DICTIONARY_SAMPLES))}
    codec = SnapshotCodec()
    record(path, 1, *((doc, 1, dumps(pack_document(codec, s))) for doc, s in states.items()))
    kept: list[bytes] = []

    pack_with_a_dictionary(made.paths(), codec, lambda trained: kept.append(trained) or trained)

    assert len(kept) == 1
    dictionary = zstandard.ZstdCompressionDict(kept[0]).dict_id()
    assert codec.dictionary == dictionary  # the codec packs with it from now on
    with closing(sqlite3.connect(path)) as connection:
        rows = dict(connection.execute("SELECT state_key, ser_change FROM snaps"))
    for doc, state in states.items():
        blob = loads(rows[doc])
        assert isinstance(blob, bytes) and packed_with(blob) == dictionary, doc
        assert unpack_document(codec, blob) == state


def test_compaction_packs_the_small_snapshots_with_the_index_dictionary(tmp_path):
    """Snapshots packed without the dictionary (before the index had one) keep that form
    until their keys are touched again; `kgstream compact` (`compact_recovery`, in a process
    that knows the dictionary only from the graph store) packs them with it."""
    plain = SnapshotCodec()  # the index's codec before it had a dictionary
    states = [document(n) for n in range(DICTIONARY_SAMPLES)]
    dictionary = train_dictionary([plain.raw(pack_document(plain, state)) for state in states])
    assert dictionary is not None
    made = prepare_recovery(tmp_path / "recovery", 0, 1, 1, index_exists=False)
    (path,) = made.paths()
    record(path, 1, *((s.file_path, 1, dumps(pack_document(plain, s))) for s in states))
    codec = SnapshotCodec(dictionary)  # `kgstream compact`'s, from the graph store's

    compact_recovery(tmp_path / "recovery", codec)

    with closing(sqlite3.connect(path)) as connection:
        rows = dict(connection.execute("SELECT state_key, ser_change FROM snaps"))
    kept = zstandard.ZstdCompressionDict(dictionary).dict_id()
    for state in states:
        blob = loads(rows[state.file_path])
        assert isinstance(blob, bytes) and packed_with(blob) == kept
        assert unpack_document(codec, blob) == state


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

    def killed_within_an_epoch() -> tuple[int, list[tuple[str, str, int, bytes | None]]] | None:
        kill_after(start_counting(directory, "b"), chance.randrange(20, 200))
        resume = resume_epoch(read_partitions(directory).paths())
        assert resume is not None
        rows = all_snapshots(directory)
        return (resume, rows) if any(epoch >= resume for _, _, epoch, _ in rows) else None

    resume, rows = wait_until(
        killed_within_an_epoch, 120, "a kill that leaves a snapshot of an unfinished epoch"
    )

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
