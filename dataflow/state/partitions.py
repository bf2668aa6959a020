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

Each partition is stamped with `RECOVERY_FORMAT` when it is made, in a table of its own
(dataflow/state/tables.py): the stamp travels with the file when partitions move between
processes' directories, is read where each partition is opened anyway, and survives the
rewrites of compaction. A partition of any other format is refused before anything in its
directory is touched.
"""

from __future__ import annotations

import pickle
import shutil
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bytewax.recovery import (
    InconsistentPartitionsError,
    MissingPartitionsError,
    NoPartitionsError,
    RecoveryConfig,
    init_db_dir,
)

from dataflow.state import tables
from dataflow.state.codec import (
    DICTIONARY_SAMPLES,
    SMALL_STATE,
    SnapshotCodec,
    is_packed,
    packed_with,
    train_dictionary,
)
from dataflow.state.errors import (
    MixedPartitionSetsError,
    NotAPartitionError,
    RecoveryFormatError,
    ResumeRefusedError,
)

RECOVERY_FORMAT = 1
"""The version of what kgstream keeps in its recovery partitions: its steps' ids and the
forms of their snapshots (dataflow/state/forms.py, fragments.py, fragment_log.py). A change
that a partition written before it cannot resume from takes the next number; partitions of
any other number are refused, never read, and the index is rebuilt instead."""


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

    def config(self) -> RecoveryConfig:
        """Bytewax's recovery configuration for this directory."""
        return RecoveryConfig(self.directory)  # type: ignore[no-untyped-call]

    def tidy(
        self,
        *,
        rewrite: bool = False,
        codec: SnapshotCodec | None = None,
        keep_dictionary: Callable[[bytes], bytes | None] | None = None,
    ) -> None:
        """Before Bytewax opens this process's partitions (at start) and after a run that
        ended (Bytewax has closed them), when this process holds the whole set: drop the
        snapshots of the epochs the resume runs again (`tables.drop_unfinished_epochs`), then
        those of the keys that are gone (`tables.drop_discarded`); with `codec` and
        `keep_dictionary`, when the index has no snapshot dictionary yet, train one and pack
        the small snapshots with it (`pack_with_a_dictionary`); then give the free pages
        back (`tables.give_back_free_pages`), or with `rewrite` write each file again from
        its live rows (`tables.rewrite_partition`). A run's end snapshots every key again
        (Bytewax does at the end of the input), which leaves half of a partition free pages
        until the next start; the rewrite also packs the rows that Bytewax's churn leaves
        scattered over half-empty pages."""
        paths = self.paths()
        if paths and len(paths) == self.count:
            tables.drop_unfinished_epochs(paths)
            tables.drop_discarded(paths)
        if paths and codec is not None and keep_dictionary is not None:
            pack_with_a_dictionary(paths, codec, keep_dictionary)
        for path in paths:
            (tables.rewrite_partition if rewrite else tables.give_back_free_pages)(path)


def share(process_id: int, processes: int, count: int) -> tuple[int, ...]:
    """The partitions process `process_id` of `processes` makes at a cluster's first run."""
    return tuple(index for index in range(count) if index % processes == process_id)


def prepare_recovery(
    directory: Path, process_id: int, processes: int, workers: int, index_exists: bool
) -> RecoveryPartitions:
    """This process's recovery partitions: those in `directory` (refused unless they are of
    `RECOVERY_FORMAT`, and tidied), or, when it does not exist, its share of a new set of
    `processes` x `workers` partitions. A process of a cluster whose stores already hold an
    index (`index_exists`) makes none: the set was made by the cluster's first run, and new
    partitions would not match it."""
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
        tables.stamp_format(staging / f"part-{index}.sqlite3", RECOVERY_FORMAT)
        tables.make_reclaimable(staging / f"part-{index}.sqlite3")
    staging.rename(directory)
    return RecoveryPartitions(directory, held, count)


def read_partitions(directory: Path) -> RecoveryPartitions:
    """The partitions in `directory`; they must all be of `RECOVERY_FORMAT` and belong to
    one set. Nothing in `directory` changes when they are refused."""
    found: dict[int, int] = {}
    for path in sorted(directory.glob("*.sqlite3")):
        try:
            rows, version = tables.read_part(path)
        except sqlite3.DatabaseError as error:
            raise NotAPartitionError(path, str(error)) from None
        if version != RECOVERY_FORMAT:
            raise RecoveryFormatError(path, version, RECOVERY_FORMAT)
        found.update(rows)
    counts = set(found.values())
    if len(counts) > 1:
        raise MixedPartitionSetsError(directory, found)
    return RecoveryPartitions(directory, tuple(sorted(found)), counts.pop() if counts else None)


@contextmanager
def resuming(partitions: RecoveryPartitions | None) -> Iterator[None]:
    """Bytewax's refusals to resume from `partitions` (some of the set missing, or of two
    sets), raised as `ResumeRefusedError`."""
    try:
        yield
    except (MissingPartitionsError, InconsistentPartitionsError, NoPartitionsError) as error:
        held = partitions.describe() if partitions is not None else "no recovery partition"
        raise ResumeRefusedError(str(error), held) from None


def pack_with_a_dictionary(
    partitions: Sequence[Path],
    codec: SnapshotCodec,
    keep_dictionary: Callable[[bytes], bytes | None],
) -> None:
    """Train a dictionary on a sample of the small packed snapshots in `partitions`, keep it
    (`keep_dictionary` returns the one to use, since another process may have kept one
    first, or None when it cannot keep one now), have `codec` use it from now on, and pack
    every small snapshot in `partitions` again with it. Does nothing when the codec has a
    dictionary already (an index trains one, once), or while there are too few small
    snapshots to train on (`codec.train_dictionary`)."""
    if codec.dictionary is not None:
        return
    samples = tables.sample_small_snapshots(partitions, SMALL_STATE, 2 * DICTIONARY_SAMPLES)
    trained = train_dictionary(
        [codec.raw(blob) for change in samples if (blob := _packed_blob(change))]
    )
    kept = keep_dictionary(trained) if trained is not None else None
    if kept is None:
        return
    codec.use_dictionary(kept)
    repack_small_snapshots(partitions, codec)


def repack_small_snapshots(partitions: Sequence[Path], codec: SnapshotCodec) -> None:
    """Pack every small snapshot in `partitions` again with `codec`'s dictionary."""

    def repacked(value: object) -> bytes | None:
        if not isinstance(value, bytes) or not is_packed(value):
            return None
        if packed_with(value) == codec.dictionary:
            return None
        return codec.compress(codec.raw(value))

    tables.rewrite_small_snapshots(partitions, SMALL_STATE, repacked)


def _packed_blob(change: bytes) -> bytes | None:
    """The packed blob a snapshot is (the document, chunk, entity and relation steps'), if
    it is one."""
    value = pickle.loads(change)
    return value if isinstance(value, bytes) and is_packed(value) else None


def compact_recovery(directory: Path, codec: SnapshotCodec) -> None:
    """Drop superseded snapshots from every recovery partition in `directory`, pack every
    small snapshot with the index's dictionary (`codec`'s), then tidy them as a run's end
    does (`RecoveryPartitions.tidy`): the snapshots of keys that are gone are dropped and
    each file is written again from its live rows, its write-ahead log emptied.

    Only snapshots up to the epoch every partition has committed are dropped, and a
    repacked one reads back as the same state, so a resume loads exactly the state it
    loaded before."""
    partitions = read_partitions(directory)
    paths = partitions.paths()
    if not paths:
        return
    tables.drop_superseded(paths)
    repack_small_snapshots(paths, codec)
    partitions.tidy(rewrite=True)
