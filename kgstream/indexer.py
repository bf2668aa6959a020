"""Running the dataflow: recovery in the data directory, workers, progress.

Bytewax keeps the keyed states (which fragments each entity holds, which chunks
each document has) and the sources' positions in its recovery database under
`DATA/recovery`; the stores hold what was rendered from them. The two travel
together: a data directory is one index.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from bytewax.errors import BytewaxRuntimeError
from bytewax.inputs import Source
from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.run import cli_main

from dataflow.components import Components
from dataflow.core.commit import CommitBatch
from dataflow.core.messages import SourceEvent
from dataflow.flow import build_flow

RECOVERY_PARTITIONS = 1


@dataclass(frozen=True)
class RunOptions:
    workers: int = 1
    process_id: int | None = None
    addresses: tuple[str, ...] = ()
    epoch_seconds: float = 1.0
    recovery: bool = True

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1 (got {self.workers})")
        if self.epoch_seconds <= 0:
            raise ValueError(f"epoch_seconds must be > 0 (got {self.epoch_seconds})")


def recovery_config(data_dir: Path) -> RecoveryConfig:
    """The recovery database under the data directory, created on first use."""
    directory = data_dir / "recovery"
    if not directory.is_dir():
        directory.mkdir(parents=True)
        init_db_dir(directory, RECOVERY_PARTITIONS)  # type: ignore[no-untyped-call]
    return RecoveryConfig(directory)  # type: ignore[no-untyped-call]


def run_indexer(
    components: Components,
    source: Source[SourceEvent],
    data_dir: Path,
    options: RunOptions = RunOptions(),
    on_commit: Callable[[CommitBatch], None] | None = None,
) -> None:
    """Run the dataflow until its source ends (one-shot), or until SIGINT/SIGTERM.

    A stop by signal returns normally: the recovery database holds the last
    completed epoch, and the next run resumes from there.
    """
    if on_commit is not None:
        components.on_commit = on_commit
    flow = build_flow(source, components)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        cli_main(  # type: ignore[no-untyped-call]
            flow,
            workers_per_process=options.workers,
            process_id=options.process_id,
            addresses=list(options.addresses) or None,
            epoch_interval=timedelta(seconds=options.epoch_seconds),
            recovery_config=recovery_config(data_dir) if options.recovery else None,
        )
    except KeyboardInterrupt:
        return
    except BytewaxRuntimeError as error:
        if not isinstance(error.__cause__, KeyboardInterrupt):
            raise
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
