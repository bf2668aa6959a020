"""Every SQL statement kgstream runs on a Bytewax recovery partition.

A partition is a SQLite file of Bytewax's tables: `parts` (its index and the set's size),
`snaps` (each step's snapshot of each key, by epoch: `ser_change`, the pickled snapshot, or
NULL for a key that was discarded), `commits` (the epoch each partition has committed),
`exs` (each execution: its worker count and the epoch it resumed from) and `fronts` (each
worker's frontier). kgstream adds one table, `kgstream_format`, stamped when the partition
is made (dataflow/state/partitions.py, `RECOVERY_FORMAT`). Everything here runs while
Bytewax does not have the file open (the data directory's lock is held).
"""

from __future__ import annotations

import pickle
import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import closing
from pathlib import Path

FORMAT_TABLE = "kgstream_format"
"""The table of a partition that holds its format's version, beside Bytewax's own tables: a
stamp in each file travels with it when partitions move to another process's directory."""

_INCREMENTAL = 2  # PRAGMA auto_vacuum's value for INCREMENTAL


def stamp_format(partition: Path, version: int) -> None:
    """Write the format `version` into a new partition."""
    with closing(sqlite3.connect(partition)) as connection, connection:
        connection.execute(f"CREATE TABLE {FORMAT_TABLE} (version INTEGER NOT NULL) STRICT")
        connection.execute(f"INSERT INTO {FORMAT_TABLE} (version) VALUES (?)", (version,))


def read_part(partition: Path) -> tuple[list[tuple[int, int]], int | None]:
    """(index, count) rows of `partition`'s `parts` table, and the format it was stamped
    with (None: none). Read without a trace: Bytewax's partitions are in WAL mode, and a
    connection to one makes its -wal and -shm files. Without a write-ahead log the file
    holds every committed row, so it is opened as immutable (no lock, no side file); with
    one (a run killed), read-only, beside the log and index already there. Raises
    sqlite3.DatabaseError for a file that is no partition."""
    log = partition.with_name(partition.name + "-wal")
    mode = "mode=ro" if log.exists() else "immutable=1"
    with closing(sqlite3.connect(f"file:{partition}?{mode}", uri=True)) as connection:
        rows = connection.execute("SELECT part_index, part_count FROM parts").fetchall()
        try:
            stamped = connection.execute(f"SELECT version FROM {FORMAT_TABLE}").fetchone()
        except sqlite3.OperationalError:  # no such table: made without a format
            stamped = None
    version = int(stamped[0]) if stamped is not None else None
    return [(int(index), int(count)) for index, count in rows], version


def make_reclaimable(partition: Path) -> None:
    """Let `partition` give its free pages back to the filesystem (`give_back_free_pages`):
    SQLite's `auto_vacuum = INCREMENTAL`, a property of the file (set, then VACUUM).

    Bytewax writes each epoch's snapshots, then deletes the ones they supersede; SQLite
    keeps the freed pages in the file for reuse, so a partition keeps the size of its
    busiest moment (after a large load, about half of it is free pages). FULL mode, which
    gives them back at every commit, would move pages inside Bytewax's commit and slow every
    hub edit; in INCREMENTAL mode nothing happens until asked."""
    with closing(sqlite3.connect(partition, isolation_level=None)) as connection:
        connection.execute("PRAGMA auto_vacuum = INCREMENTAL")
        connection.execute("VACUUM")


def give_back_free_pages(partition: Path) -> None:
    """Truncate `partition`'s free pages away, when it was made reclaimable and has any."""
    with closing(sqlite3.connect(partition, isolation_level=None)) as connection:
        mode = connection.execute("PRAGMA auto_vacuum").fetchone()[0]
        free = connection.execute("PRAGMA freelist_count").fetchone()[0]
        if mode == _INCREMENTAL and free:
            # executescript steps the pragma to its end; execute() would free one page
            connection.executescript("PRAGMA incremental_vacuum;")
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def rewrite_partition(partition: Path) -> None:
    """Write `partition` again from its live rows (VACUUM, keeping it reclaimable) and empty
    its write-ahead log."""
    with closing(sqlite3.connect(partition, isolation_level=None)) as connection:
        connection.execute("PRAGMA auto_vacuum = INCREMENTAL")  # set by the VACUUM
        connection.execute("VACUUM")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def drop_unfinished_epochs(partitions: Sequence[Path]) -> None:
    """Delete every snapshot of an epoch at or after the one a resume starts from.

    A process killed while its workers close an epoch leaves that epoch's snapshots in the
    partitions that got them before the kill, while the workers' frontiers (the `fronts`
    rows) still name the epoch: the resume starts at it and loads only older snapshots, so
    those rows are of a run that never happened. Bytewax 0.21 leaves them in place; the run
    after the resume writes its own snapshots of that epoch over them only for the keys it
    touches in it. Any other key's row stays, newer than its real state, and the next
    resume loads it instead: a document's commit state replaced by a deletion would stay
    PROCESSING for good (a 2-worker flow killed at random points leaves such rows after
    about half the kills). `partitions` must be the whole set: the last execution's rows
    (`exs`, `fronts`) are in one partition of it."""
    resume = resume_epoch(partitions)
    if resume is None:
        return
    for path in partitions:
        with closing(sqlite3.connect(path, isolation_level=None)) as connection:
            connection.execute("DELETE FROM snaps WHERE snap_epoch >= ?", (resume,))


def resume_epoch(partitions: Sequence[Path]) -> int | None:
    """The epoch Bytewax resumes the set `partitions` from: the oldest frontier among the
    workers of the last execution, each at least the epoch that execution resumed from
    (Bytewax 0.21's resume query, read from its library). None before the first run, or when
    the last execution's own row is missing (the set is not whole: nothing can be said)."""
    executions: list[tuple[int, int, int]] = []
    frontiers: list[tuple[int, int, int]] = []
    for path in partitions:
        with closing(sqlite3.connect(path)) as connection:
            executions += connection.execute("SELECT ex_num, worker_count, resume_epoch FROM exs")
            frontiers += connection.execute(
                "SELECT ex_num, worker_index, worker_frontier FROM fronts"
            )
    if not executions:
        return None
    last, workers, resumed_from = max(executions)
    if any(execution > last for execution, _, _ in frontiers):
        return None  # a later execution's own row is missing
    reached = dict.fromkeys(range(workers), resumed_from)
    for execution, worker, frontier in frontiers:
        if execution == last and worker in reached:
            reached[worker] = max(reached[worker], frontier)
    return min(reached.values())


def drop_discarded(partitions: Sequence[Path]) -> None:
    """Delete every snapshot of each key whose last committed snapshot says it is gone.

    Bytewax keeps a key's last snapshot even when that is a deletion (a NULL change, which
    still names the key), so every key ever discarded would keep a row: every chunk an edit
    replaced, every document's finished commit, every entity and relation that lost its
    last fragment (after a large load, over a tenth of the rows). Such a key resumes with no
    state with or without its rows, unless another partition holds an older snapshot of it
    (a key moves to another worker's partition when the number of workers changes): so a
    key is dropped only when no other partition names it, and `partitions` must be the
    whole set. Only snapshots every partition has committed are touched, so a resume loads
    what it loaded before."""
    committed = min(committed_epoch(path) for path in partitions)
    named: Counter[tuple[str, str]] = Counter()
    if len(partitions) > 1:
        for path in partitions:
            with closing(sqlite3.connect(path)) as connection:
                named.update(connection.execute("SELECT DISTINCT step_id, state_key FROM snaps"))
    for path in partitions:
        with closing(sqlite3.connect(path, isolation_level=None)) as connection, connection:
            connection.execute("BEGIN")
            gone = connection.execute(_DISCARDED, {"committed": committed}).fetchall()
            connection.executemany(
                "DELETE FROM snaps WHERE step_id = ? AND state_key = ? AND snap_epoch <= ?",
                [(step, key, epoch) for step, key, epoch in gone if named[step, key] <= 1],
            )


# The keys whose last snapshot in a partition is a committed deletion, with its epoch.
_DISCARDED = """
    SELECT step_id, state_key, snap_epoch FROM snaps
    WHERE ser_change IS NULL AND snap_epoch <= :committed
    AND NOT EXISTS (SELECT 1 FROM snaps AS later WHERE later.step_id = snaps.step_id
                    AND later.state_key = snaps.state_key
                    AND later.snap_epoch > snaps.snap_epoch)
"""


def drop_superseded(partitions: Sequence[Path]) -> None:
    """Delete every snapshot a later committed one of the same key supersedes, overwriting
    the deleted bytes (`secure_delete`). Bytewax applies this rule as it goes; a run stopped
    at once may leave some. Only snapshots up to the epoch every partition has committed are
    dropped, so a resume loads what it loaded before."""
    committed = min(committed_epoch(path) for path in partitions)
    for path in partitions:
        with closing(sqlite3.connect(path, isolation_level=None)) as connection:
            connection.execute("PRAGMA secure_delete = ON")
            with connection:
                connection.execute("BEGIN")
                connection.execute(_SUPERSEDED, {"committed": committed})


_SUPERSEDED = """
    DELETE FROM snaps WHERE (step_id, state_key, snap_epoch) IN (
        SELECT older.step_id, older.state_key, older.snap_epoch
        FROM snaps AS older
        JOIN (SELECT step_id, state_key, MAX(snap_epoch) AS snap_epoch FROM snaps
              WHERE snap_epoch <= :committed GROUP BY step_id, state_key) AS latest
        USING (step_id, state_key)
        WHERE older.snap_epoch < latest.snap_epoch)
"""


def committed_epoch(partition: Path) -> int:
    """The epoch `partition` has committed (-1 before its first commit)."""
    with closing(sqlite3.connect(partition)) as connection:
        row = connection.execute("SELECT MIN(commit_epoch) FROM commits").fetchone()
    return int(row[0]) if row and row[0] is not None else -1


def sample_small_snapshots(partitions: Sequence[Path], small: int, most: int) -> list[bytes]:
    """The snapshots of at most `most` random keys in `partitions`, each under `small`
    bytes, as pickled."""
    samples: list[bytes] = []
    for path in partitions:
        with closing(sqlite3.connect(path)) as connection:
            rows = connection.execute(
                _SMALL_SNAPSHOTS + " ORDER BY random() LIMIT ?", (small, most)
            )
            samples += [change for *_, change in rows]
    return samples


def rewrite_small_snapshots(
    partitions: Sequence[Path], small: int, rewrite: Callable[[object], bytes | None]
) -> None:
    """Write each snapshot under `small` bytes again as `rewrite` of what it pickles (None:
    leave it)."""
    for path in partitions:
        with closing(sqlite3.connect(path, isolation_level=None)) as connection, connection:
            connection.execute("BEGIN")
            rows = connection.execute(_SMALL_SNAPSHOTS, (small,)).fetchall()
            rewritten = []
            for step, key, epoch, change in rows:
                value = rewrite(pickle.loads(change))
                if value is not None:
                    snapshot = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
                    rewritten.append((snapshot, step, key, epoch))
            connection.executemany(
                "UPDATE snaps SET ser_change = ? "
                "WHERE step_id = ? AND state_key = ? AND snap_epoch = ?",
                rewritten,
            )


_SMALL_SNAPSHOTS = """
    SELECT step_id, state_key, snap_epoch, ser_change FROM snaps
    WHERE ser_change IS NOT NULL AND length(ser_change) < ?
"""
