"""Bytewax recovery partitions under each process's data directory.

Bytewax keeps a dataflow's snapshots in a fixed set of recovery partitions (SQLite files
`part-N.sqlite3`, each recording its index and the set's size) made once, before the first
run. Each partition is written by one worker, and a run can resume only when its processes
together see every partition (else it stops: "missing recovery partitions"); which process
holds which does not matter, nor does the number of workers: resuming routes every key's
snapshot to the worker that owns it now. So a cluster needs no shared volume: process I of
P keeps the partitions N with N % P == I in its own `DATA/recovery`, made by its first run
(P x workers partitions in all, one per worker of that first cluster). A process that joins
a cluster whose stores already hold an index makes none (the cluster's partitions exist
already); the partitions of a process that leaves must move to one that stays.
"""

from __future__ import annotations

import pickle
import shutil
import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

from bytewax.recovery import init_db_dir

from dataflow.core.snapshots import (
    DICTIONARY_SAMPLES,
    SMALL_STATE,
    compress,
    current_dictionary,
    is_packed,
    packed_with,
    raw,
    train_dictionary,
    use_dictionary,
)
from kgstream.errors import UserError


@dataclass(frozen=True)
class RecoveryPartitions:
    """The recovery partitions in one process's directory: their indexes, and how many the
    cluster's whole set holds (None when this process holds none)."""

    directory: Path
    held: tuple[int, ...]
    count: int | None

    def describe(self) -> str:
        if self.count is None:
            return f"no recovery partition in {self.directory}"
        held = ", ".join(f"part-{index}" for index in self.held)
        return f"recovery partitions {held} of {self.count} in {self.directory}"

    def paths(self) -> list[Path]:
        return [self.directory / f"part-{index}.sqlite3" for index in self.held]

    def tidy(
        self,
        *,
        rewrite: bool = False,
        keep_dictionary: Callable[[bytes], bytes | None] | None = None,
    ) -> None:
        """Before Bytewax opens this process's partitions (at start) and after a run that
        ended (Bytewax has closed them), when this process holds the whole set: drop the
        snapshots of the epochs the resume runs again (`drop_unfinished_epochs`), then those
        of the keys that are gone (`drop_discarded`); with `keep_dictionary`, when
        the index has no snapshot dictionary yet, train one and pack the small snapshots
        with it (`pack_with_a_dictionary`); then give the free pages back
        (`give_back_free_pages`), or with `rewrite` write each file again from its live rows
        (`rewrite_partition`). A run's end snapshots every key again (Bytewax does at the
        end of the input), which left half of a partition free pages until the next start;
        the rewrite also packs the rows that Bytewax's churn left scattered over half-empty
        pages (at 16,000 documents: 115.7 MB of pages for 106.4 MB rewritten)."""
        paths = self.paths()
        if paths and len(paths) == self.count:
            drop_unfinished_epochs(paths)
            drop_discarded(paths)
        if paths and keep_dictionary is not None and current_dictionary() is None:
            pack_with_a_dictionary(paths, keep_dictionary)
        for path in paths:
            (rewrite_partition if rewrite else give_back_free_pages)(path)


def share(process_id: int, processes: int, count: int) -> tuple[int, ...]:
    """The partitions process `process_id` of `processes` makes at a cluster's first run."""
    return tuple(index for index in range(count) if index % processes == process_id)


def prepare_recovery(
    directory: Path, process_id: int, processes: int, workers: int, index_exists: bool
) -> RecoveryPartitions:
    """This process's recovery partitions: those in `directory`, or, when it does not exist,
    its share of a new set of `processes` x `workers` partitions. A process of a cluster
    whose stores already hold an index (`index_exists`) makes none: the set was made by the
    cluster's first run, and new partitions would not match it."""
    if directory.is_dir():
        partitions = read_partitions(directory)
        partitions.tidy()
        return partitions
    if processes > 1 and index_exists:
        directory.mkdir(parents=True)
        return RecoveryPartitions(directory, (), None)
    count = processes * workers
    staging = directory.with_name(directory.name + ".new")  # a crash leaves no partial set
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    init_db_dir(staging, count)  # type: ignore[no-untyped-call]
    held = share(process_id, processes, count)
    for index in set(range(count)) - set(held):
        (staging / f"part-{index}.sqlite3").unlink()
    for index in held:
        stamp_format(staging / f"part-{index}.sqlite3")
        make_reclaimable(staging / f"part-{index}.sqlite3")
    staging.rename(directory)
    return RecoveryPartitions(directory, held, count)


RECOVERY_FORMAT = 1
"""The version of what kgstream keeps in its recovery partitions: its steps' ids and the
forms of their snapshots. A partition of another version (or one made before partitions
carried a version) is refused, never read: the index is rebuilt instead."""

_FORMAT_TABLE = "kgstream_format"
"""The table of a partition that holds its format's version, beside Bytewax's own tables: a
stamp in each file travels with it when partitions move to another process's directory."""


def stamp_format(partition: Path) -> None:
    """Write `RECOVERY_FORMAT` into a new partition."""
    with closing(sqlite3.connect(partition)) as connection, connection:
        connection.execute(f"CREATE TABLE {_FORMAT_TABLE} (version INTEGER NOT NULL) STRICT")
        connection.execute(f"INSERT INTO {_FORMAT_TABLE} (version) VALUES (?)", (RECOVERY_FORMAT,))


def format_of(connection: sqlite3.Connection) -> int | None:
    """The format a partition was stamped with, or None when it carries none."""
    try:
        row = connection.execute(f"SELECT version FROM {_FORMAT_TABLE}").fetchone()
    except sqlite3.OperationalError:  # no such table
        return None
    return int(row[0]) if row is not None else None


def make_reclaimable(partition: Path) -> None:
    """Let `partition` give its free pages back to the filesystem (`give_back_free_pages`):
    SQLite's `auto_vacuum = INCREMENTAL`, a property of the file (set, then VACUUM).

    Bytewax writes each epoch's snapshots, then deletes the ones they supersede; SQLite
    keeps the freed pages in the file for reuse, so a partition keeps the size of its
    busiest moment (after a 16,000-document load, half of it was free pages). FULL mode,
    which gives them back at every commit, moved pages in Bytewax's commit and cost hub
    edits 6-20% at p50 and 15-29% at p95 (docs/design.md, "Compact snapshots"); in
    INCREMENTAL mode nothing happens until asked."""
    connection = sqlite3.connect(partition, isolation_level=None)
    try:
        connection.execute("PRAGMA auto_vacuum = INCREMENTAL")
        connection.execute("VACUUM")
    finally:
        connection.close()


def give_back_free_pages(partition: Path) -> None:
    """Truncate `partition`'s free pages away, when it was made reclaimable and has any.
    Run while Bytewax does not have it open (the data directory's lock is held)."""
    connection = sqlite3.connect(partition, isolation_level=None)
    try:
        mode = connection.execute("PRAGMA auto_vacuum").fetchone()[0]
        free = connection.execute("PRAGMA freelist_count").fetchone()[0]
        if mode == _INCREMENTAL and free:
            # executescript steps the pragma to its end; execute() would free one page
            connection.executescript("PRAGMA incremental_vacuum;")
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()


def rewrite_partition(partition: Path) -> None:
    """Write `partition` again from its live rows (VACUUM, keeping it reclaimable) and empty
    its write-ahead log. Run while Bytewax does not have it open."""
    connection = sqlite3.connect(partition, isolation_level=None)
    try:
        connection.execute("PRAGMA auto_vacuum = INCREMENTAL")  # set by the VACUUM
        connection.execute("VACUUM")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()


def drop_unfinished_epochs(partitions: Sequence[Path]) -> None:
    """Delete every snapshot of an epoch at or after the one a resume starts from.

    A process killed while its workers close an epoch leaves that epoch's snapshots in the
    partitions that got them before the kill, while the workers' frontiers (the `fronts`
    rows) still name the epoch: the resume starts at it and loads only older snapshots, so
    those rows are of a run that never happened. Bytewax 0.21 leaves them in place; the run
    after the resume writes its own snapshots of that epoch over them only for the keys it
    touches in it. Any other key's row stays, newer than its real state, and the next
    resume loads it instead: a document's commit state replaced by a deletion left it
    PROCESSING for good (found by the kill -9 test, one run in many; a 2-worker flow killed
    at random left such rows after 6 of 12 kills). `partitions` must be the whole set: the
    last execution's rows (`exs`, `fronts`) are in one partition of it."""
    resume = resume_epoch(partitions)
    if resume is None:
        return
    for path in partitions:
        connection = sqlite3.connect(path, isolation_level=None)
        try:
            connection.execute("DELETE FROM snaps WHERE snap_epoch >= ?", (resume,))
        finally:
            connection.close()


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
    still names the key), so every key ever discarded kept a row: every chunk an edit
    replaced, every document's finished commit, every entity and relation that lost its
    last fragment (at 16,000 documents, 16,066 of 124,000 rows). Such a key resumes with no
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
        connection = sqlite3.connect(path, isolation_level=None)
        try:
            with connection:
                connection.execute("BEGIN")
                gone = connection.execute(_DISCARDED, {"committed": committed}).fetchall()
                connection.executemany(
                    "DELETE FROM snaps WHERE step_id = ? AND state_key = ? AND snap_epoch <= ?",
                    [(step, key, epoch) for step, key, epoch in gone if named[step, key] <= 1],
                )
        finally:
            connection.close()


def pack_with_a_dictionary(
    partitions: Sequence[Path], keep_dictionary: Callable[[bytes], bytes | None]
) -> None:
    """Train a dictionary on a sample of the small packed snapshots in `partitions`, keep it
    (`keep_dictionary` returns the one to use, since another process may have kept one
    first, or None when it cannot keep one now), use it from now on, and pack every small
    snapshot in `partitions` again with it. Does nothing while there are too few small
    snapshots to train on (`snapshots.train_dictionary`)."""
    samples: list[bytes] = []
    for path in partitions:
        with closing(sqlite3.connect(path)) as connection:
            rows = connection.execute(
                _SMALL_SNAPSHOTS + " ORDER BY random() LIMIT ?",
                (SMALL_STATE, 2 * DICTIONARY_SAMPLES),
            )
            samples += [raw(blob) for *_, change in rows if (blob := _packed_blob(change))]
    trained = train_dictionary(samples)
    kept = keep_dictionary(trained) if trained is not None else None
    if kept is None:
        return
    use_dictionary(kept)
    repack_small_snapshots(partitions)


def repack_small_snapshots(partitions: Sequence[Path]) -> None:
    """Pack every small snapshot in `partitions` again with the current dictionary. Run
    while Bytewax does not have them open."""
    for path in partitions:
        connection = sqlite3.connect(path, isolation_level=None)
        try:
            with connection:
                connection.execute("BEGIN")
                small = connection.execute(_SMALL_SNAPSHOTS, (SMALL_STATE,)).fetchall()
                connection.executemany(
                    "UPDATE snaps SET ser_change = ? "
                    "WHERE step_id = ? AND state_key = ? AND snap_epoch = ?",
                    [
                        (_repacked(value), step, key, epoch)
                        for step, key, epoch, value in map(_unpickled, small)
                        if _repackable(value)
                    ],
                )
        finally:
            connection.close()


_SMALL_SNAPSHOTS = """
    SELECT step_id, state_key, snap_epoch, ser_change FROM snaps
    WHERE ser_change IS NOT NULL AND length(ser_change) < ?
"""


def _unpickled(row: tuple[str, str, int, bytes]) -> tuple[str, str, int, object]:
    step, key, epoch, change = row
    return step, key, epoch, pickle.loads(change)


def _packed_blob(change: bytes) -> bytes | None:
    """The packed blob a snapshot is (the document, chunk, entity and relation steps'),
    if it is one."""
    value = pickle.loads(change)
    return value if isinstance(value, bytes) and is_packed(value) else None


def _repackable(value: object) -> TypeGuard[bytes]:
    """Whether `value` is a packed snapshot packed with another than the current dictionary."""
    return (
        isinstance(value, bytes) and is_packed(value) and packed_with(value) != current_dictionary()
    )


def _repacked(value: bytes) -> bytes:
    """The packed snapshot `value` packed again with the current dictionary."""
    return pickle.dumps(compress(raw(value)), protocol=pickle.HIGHEST_PROTOCOL)


# The keys whose last snapshot in a partition is a committed deletion, with its epoch.
_DISCARDED = """
    SELECT step_id, state_key, snap_epoch FROM snaps
    WHERE ser_change IS NULL AND snap_epoch <= :committed
    AND NOT EXISTS (SELECT 1 FROM snaps AS later WHERE later.step_id = snaps.step_id
                    AND later.state_key = snaps.state_key
                    AND later.snap_epoch > snaps.snap_epoch)
"""


def committed_epoch(partition: Path) -> int:
    """The epoch `partition` has committed (-1 before its first commit)."""
    with closing(sqlite3.connect(partition)) as connection:
        row = connection.execute("SELECT MIN(commit_epoch) FROM commits").fetchone()
    return int(row[0]) if row and row[0] is not None else -1


_INCREMENTAL = 2  # PRAGMA auto_vacuum's value for INCREMENTAL


def read_partitions(directory: Path) -> RecoveryPartitions:
    """The partitions in `directory`; they must all belong to one set, of this format
    (`RECOVERY_FORMAT`). Read without a trace (`_open_to_read`): a directory refused is
    left as it was."""
    found: dict[int, int] = {}
    for path in sorted(directory.glob("*.sqlite3")):
        connection = _open_to_read(path)
        try:
            rows = connection.execute("SELECT part_index, part_count FROM parts").fetchall()
            version = format_of(connection)
        except sqlite3.DatabaseError as error:
            raise UserError(
                f"{path} is not a Bytewax recovery partition ({error})",
                f"move it out of {directory}",
            ) from None
        finally:
            connection.close()
        if version != RECOVERY_FORMAT:
            made = "without a format version" if version is None else f"in format {version}"
            raise UserError(
                f"{path} was made by another kgstream version ({made}; this one reads "
                f"format {RECOVERY_FORMAT}), so the index cannot resume from it",
                REBUILD_HINT,
            )
        for index, count in rows:
            found[int(index)] = int(count)
    counts = set(found.values())
    if len(counts) > 1:
        raise UserError(
            f"{directory} holds recovery partitions of different sets "
            f"({', '.join(f'part-{i} of {n}' for i, n in sorted(found.items()))})",
            "keep only the partitions of this cluster's set (docs/design.md, Recovery)",
        )
    return RecoveryPartitions(directory, tuple(sorted(found)), counts.pop() if counts else None)


def _open_to_read(partition: Path) -> sqlite3.Connection:
    """`partition` opened to read, leaving no file behind: Bytewax's partitions are in WAL
    mode, and a connection to one makes its -wal and -shm files. Without a write-ahead log
    the file holds every committed row, so it is opened as immutable (no lock, no side
    file); with one (a run killed), read-only, beside the log and index already there."""
    log = partition.with_name(partition.name + "-wal")
    mode = "mode=ro" if log.exists() else "immutable=1"
    return sqlite3.connect(f"file:{partition}?{mode}", uri=True)


REBUILD_HINT = (
    "rebuild the index into a new data directory: `kgstream index DIR --data NEW` for a "
    "folder, or `kgstream replay --kafka HOST:PORT --topic T --data NEW` for a Kafka topic"
)
