"""What can be wrong with the saved state. Each error says what was found; the composition
root (kgstream/recovery.py) adds what to run about it."""

from __future__ import annotations

from pathlib import Path


class StateError(Exception):
    """The saved state cannot be used as it is."""


class MissingDictionaryError(StateError, LookupError):
    """A snapshot was packed with a dictionary the index's codec was not given."""

    def __init__(self, dictionary: int) -> None:
        super().__init__(
            f"a recovery snapshot was packed with Zstandard dictionary {dictionary}, which the "
            "index's snapshot codec was not given: the recovery partitions and the store that "
            "keeps the index's dictionary are of different indexes (start from an empty data "
            "directory, or from both of one index)"
        )
        self.dictionary = dictionary


class NotAPartitionError(StateError):
    """A file in a recovery directory is not a Bytewax recovery partition."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path} is not a Bytewax recovery partition ({reason})")
        self.path = path


class MixedPartitionSetsError(StateError):
    """A recovery directory holds partitions of different sets (`parts`: index -> count)."""

    def __init__(self, directory: Path, parts: dict[int, int]) -> None:
        named = ", ".join(f"part-{index} of {count}" for index, count in sorted(parts.items()))
        super().__init__(f"{directory} holds recovery partitions of different sets ({named})")
        self.directory = directory


class RecoveryFormatError(StateError):
    """A recovery partition was made in another format than this kgstream's (`found` None:
    with no format at all)."""

    def __init__(self, path: Path, found: int | None, expected: int) -> None:
        made = "without a format version" if found is None else f"in format {found}"
        super().__init__(
            f"{path} was made by another kgstream version ({made}; this one reads format "
            f"{expected}), so the index cannot resume from it"
        )
        self.path, self.found, self.expected = path, found, expected


class ResumeRefusedError(StateError):
    """Bytewax refused to resume from the process's partitions (some of the set missing, or
    of two sets); `held` describes what this process holds."""

    def __init__(self, reason: str, held: str) -> None:
        super().__init__(f"cannot resume: {reason}")
        self.held = held


class MissingBaseError(StateError):
    """A resumed big key's snapshot names a base that no holder step left in time."""
