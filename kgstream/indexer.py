"""Running the dataflow: recovery in the data directory, workers, cluster processes.

Bytewax keeps the keyed states (which fragments each entity holds, which chunks
each document has) and the sources' positions in its recovery partitions under
`DATA/recovery`; the stores hold what was rendered from them. The two travel
together: a data directory is one index, or, in a cluster, one process's share of
it (dataflow/state/partitions.py).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bytewax.errors import BytewaxRuntimeError
from bytewax.inputs import FixedPartitionedSource, Source, StatefulSourcePartition
from bytewax.run import cli_main
from typing_extensions import override

from connectors.errors import StoreUnavailable, store_outages
from connectors.redis.ports import IndexControl
from dataflow.components import Components
from dataflow.core.commit import CommitBatch
from dataflow.core.messages import SourceEvent
from dataflow.flow import build_flow
from dataflow.state.partitions import RecoveryPartitions, prepare_recovery, resuming
from kgstream.errors import RunCannotGoOn
from kgstream.recovery import partitions_hint, recovery_errors
from kgstream.settings import Settings

_LOGGER = logging.getLogger("kgstream.indexer")


@dataclass(frozen=True)
class RunOptions:
    workers: int = 1
    process_id: int | None = None
    addresses: tuple[str, ...] = ()
    epoch_seconds: float = Settings.epoch_seconds
    recovery: bool = True

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1 (got {self.workers})")
        if self.epoch_seconds <= 0:
            raise ValueError(f"epoch_seconds must be > 0 (got {self.epoch_seconds})")
        if self.addresses and not 0 <= (self.process_id or 0) < len(self.addresses):
            raise ValueError(
                f"process_id must be an index into the {len(self.addresses)} addresses "
                f"(0 to {len(self.addresses) - 1}; got {self.process_id})"
            )

    @property
    def processes(self) -> int:
        return max(1, len(self.addresses))


def recovery_partitions(
    data_dir: Path, options: RunOptions = RunOptions(), index_exists: bool = False
) -> RecoveryPartitions:
    """The recovery partitions under the data directory (this process's share in a
    cluster), made on first use; refused, untouched, when another kgstream version made
    them."""
    with recovery_errors():
        partitions = prepare_recovery(
            data_dir / "recovery",
            options.process_id or 0,
            options.processes,
            options.workers,
            index_exists,
        )
    return partitions


def run_indexer(
    components: Components,
    source: Source[SourceEvent],
    data_dir: Path,
    options: RunOptions = RunOptions(),
    on_commit: Callable[[CommitBatch], None] | None = None,
    retries: Source[SourceEvent] | None = None,
) -> None:
    """Run the dataflow until its sources end (one-shot), or until SIGINT/SIGTERM.

    `retries` is the retry-request input (`connectors/redis/retry_requests.py`), read
    beside `source`.

    The first signal asks the sources to end: what is in flight is committed, the
    dataflow completes as a one-shot run does, and the recovery database holds a final
    snapshot the next run resumes from (one line is printed, no traceback). A second
    signal stops at once; the next run then resumes from the last completed epoch.
    A run that completes tidies its recovery partitions (`RecoveryPartitions.tidy`): the
    snapshots of keys that are gone are dropped, the small ones are packed with the index's
    snapshot dictionary (trained and kept in the graph store at the first run's end that has
    enough of them; `components.codec` packs with it), and each file is written again from
    its live rows.
    """
    if on_commit is not None:
        components.on_commit = on_commit
    stop = _Stop(lambda: components.outages.outage)
    components.outages = replace(
        components.outages, stop=stop.requested, when_stopped=stop.during_outage
    )
    components.cannot_go_on = stop.cannot_go_on
    if isinstance(source, FixedPartitionedSource):
        source = StoppableSource(source, stop.requested)
    if isinstance(retries, FixedPartitionedSource):
        retries = StoppableSource(retries, stop.requested)
    partitions: RecoveryPartitions | None = None
    if options.recovery:
        partitions = recovery_partitions(data_dir, options, components.stores.graph.version() > 0)
        components.codec.use_dictionary(components.stores.control.snapshot_dictionary())
        if options.processes > 1:
            print(f"kgstream: process {options.process_id}: {partitions.describe()}", flush=True)
    lanes = options.workers * options.processes
    flow = build_flow(source, components, retries=retries, lanes=lanes)
    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    completed = False
    try:
        with recovery_errors(), resuming(partitions):
            cli_main(  # type: ignore[no-untyped-call]
                flow,
                workers_per_process=options.workers,
                process_id=options.process_id,
                addresses=list(options.addresses) or None,
                epoch_interval=timedelta(seconds=options.epoch_seconds),
                recovery_config=partitions.config() if partitions is not None else None,
            )
    except KeyboardInterrupt:
        pass
    except BytewaxRuntimeError as error:
        if not _interrupted(error):
            raise
    except BaseException as error:
        if options.processes == 1 or type(error).__name__ != "PanicException":
            raise
        _cluster_stopped(error, partitions)
    else:
        completed = True
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if stop.cannot_go_on_reason is not None:
        raise RunCannotGoOn(stop.cannot_go_on_reason)
    if completed and partitions is not None:
        keep = _keeper(components.stores.control)
        with recovery_errors():
            partitions.tidy(rewrite=True, codec=components.codec, keep_dictionary=keep)


def _keeper(control: IndexControl) -> Callable[[bytes], bytes | None]:
    """Keep a new snapshot dictionary in the control plane (`RecoveryPartitions.tidy`); when
    the store cannot be reached at the end of a run, it is kept at a later run's end."""

    def keep(dictionary: bytes) -> bytes | None:
        try:
            with store_outages(control.workspace):
                return control.keep_snapshot_dictionary(dictionary)
        except StoreUnavailable as error:
            _LOGGER.warning("%s; the snapshot dictionary is made at a later run's end", error)
            return None

    return keep


def _cluster_stopped(error: BaseException, partitions: RecoveryPartitions | None) -> None:
    """A cluster process whose peer failed or cannot be reached gets a panic from Bytewax,
    whose real reason (the peer's, or a missing recovery partition) was printed where it
    happened: say what to do in one line, and exit non-zero so a supervisor restarts it."""
    held = partitions.describe() if partitions is not None else "no recovery partition"
    print(
        f"kgstream: the Bytewax cluster stopped ({error}): a process of it failed or cannot "
        "be reached; start every process again and they resume from the last snapshot. If "
        f"this happens at start: {partitions_hint(held)}",
        file=sys.stderr,
        flush=True,
    )
    raise RunCannotGoOn(str(error))


class _Stop:
    """The SIGINT/SIGTERM handler of a run: the first signal sets `requested`, a second
    stops at once, and so does the first while `outage()` names a store the indexer is
    waiting for (what is in flight cannot be committed then)."""

    def __init__(self, outage: Callable[[], str | None] = lambda: None) -> None:
        self.requested = threading.Event()
        self._outage = outage
        self.cannot_go_on_reason: str | None = None

    def __call__(self, signum: int, frame: object) -> None:
        name = signal.Signals(signum).name
        reason = self._outage()
        if reason is not None:
            self.requested.set()
            self.during_outage(reason)
        if not self.requested.is_set():
            self.requested.set()
            print(
                f"kgstream: {name}: stopping once the documents in flight are committed "
                "(send it again to stop at once)",
                file=sys.stderr,
                flush=True,
            )
            return
        _stop_now(f"{name} again: stopping now; the next run resumes from the last snapshot")

    def during_outage(self, reason: str) -> None:
        """`OutageWait.when_stopped`: the documents in flight cannot be committed while a
        store is unreachable, so a stop asked for meanwhile stops at once."""
        _stop_now(
            f"stopping now, while a store is unreachable ({reason}); "
            "the next run resumes from the last snapshot"
        )

    def cannot_go_on(self, reason: str) -> None:
        """`Components.cannot_go_on`: stop at once, with the reason as the one line."""
        self.cannot_go_on_reason = reason
        self.requested.set()
        _stop_now(
            f"stopping: {reason}; fix the setting and run again (the next run resumes from "
            "the last snapshot)"
        )


def _interrupted(error: BaseException) -> bool:
    """Whether a Bytewax error is a stop: a step's error wraps the KeyboardInterrupt of
    `_stop_now`, and the run's error wraps the step's."""
    cause = error.__cause__
    while cause is not None and not isinstance(cause, KeyboardInterrupt):
        cause = cause.__cause__
    return cause is not None


def _stop_now(message: str) -> None:
    print(f"kgstream: {message}", file=sys.stderr, flush=True)
    # Bytewax reports an interrupt as a Rust panic with a backtrace (RUST_BACKTRACE is
    # often set): the line above is all there is to say.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stderr.fileno())
    raise KeyboardInterrupt(message)


_STOP_POLL = timedelta(seconds=0.2)


class StoppableSource(FixedPartitionedSource[SourceEvent, Any]):
    """`inner`, whose partitions end (as at the end of a one-shot run) once `stop` is set.

    A partition that would sleep longer is woken every `_STOP_POLL` to look at `stop`; it
    then reads nothing from `inner` before `inner`'s own time. Its snapshots are
    `inner`'s, so a run stopped this way resumes exactly where it ended."""

    def __init__(self, inner: FixedPartitionedSource[SourceEvent, Any], stop: threading.Event):
        self._inner, self._stop = inner, stop

    @override
    def list_parts(self) -> list[str]:
        return self._inner.list_parts()

    @override
    def build_part(
        self, step_id: str, for_part: str, resume_state: Any | None
    ) -> StatefulSourcePartition[SourceEvent, Any]:
        return _StoppablePartition(
            self._inner.build_part(step_id, for_part, resume_state), self._stop
        )


class _StoppablePartition(StatefulSourcePartition[SourceEvent, Any]):
    def __init__(self, inner: StatefulSourcePartition[SourceEvent, Any], stop: threading.Event):
        self._inner, self._stop = inner, stop
        self._inner_awake: datetime | None = None

    @override
    def next_batch(self) -> Iterable[SourceEvent]:
        if self._stop.is_set():
            raise StopIteration
        if self._inner_awake is not None and datetime.now(UTC) < self._inner_awake:
            return []  # woken early to look at `stop`
        return self._inner.next_batch()

    @override
    def next_awake(self) -> datetime | None:
        self._inner_awake = self._inner.next_awake()
        if self._inner_awake is None:
            return None
        return min(self._inner_awake, datetime.now(UTC) + _STOP_POLL)

    @override
    def snapshot(self) -> Any:
        return self._inner.snapshot()

    @override
    def close(self) -> None:
        self._inner.close()
