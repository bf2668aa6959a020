"""What the user is told when the saved state in the data directory cannot be used: the
errors of dataflow/state (dataflow/state/errors.py) as user errors, each with what to run."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from dataflow.state.errors import (
    MissingDictionaryError,
    MixedPartitionSetsError,
    NotAPartitionError,
    RecoveryFormatError,
    ResumeRefusedError,
)
from kgstream.errors import UserError

REBUILD_HINT = (
    "rebuild the index into a new data directory: `kgstream index DIR --data NEW` for a "
    "folder, or `kgstream replay --kafka HOST:PORT --topic T --data NEW` for a Kafka topic"
)


def partitions_hint(held: str) -> str:
    """What to do when the processes of a cluster do not hold the whole set of partitions
    (this one holds `held`)."""
    return (
        f"the processes of a cluster must together hold every recovery partition (this one "
        f"holds {held}); move the part-N.sqlite3 files of a process that left to one that "
        "stays (docs/operations.md#more-workers-and-processes)"
    )


@contextmanager
def recovery_errors() -> Iterator[None]:
    """The saved state's errors raised inside, as `UserError`s with their hint."""
    try:
        yield
    except RecoveryFormatError as error:
        raise UserError(str(error), REBUILD_HINT) from None
    except NotAPartitionError as error:
        raise UserError(str(error), f"move it out of {error.path.parent}") from None
    except MixedPartitionSetsError as error:
        raise UserError(
            str(error),
            "keep only the partitions of this cluster's set "
            "(docs/operations.md#more-workers-and-processes)",
        ) from None
    except ResumeRefusedError as error:
        raise UserError(str(error), partitions_hint(error.held)) from None
    except MissingDictionaryError as error:
        raise UserError(str(error), REBUILD_HINT) from None
