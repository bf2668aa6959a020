"""A big key's snapshot as its last whole packing and the changes packed since (issue 11).

Bytewax snapshots every key a step touched in an epoch, and the entity and relation steps'
snapshot is the key's fragments packed (dataflow/core/snapshots.py). Packed whole, a hub cost
its whole size in every epoch that touched it: at 16,000 documents the biggest entity holds
25,082 fragments (31 ms to pack), and py-spy over the load put packing at 0.13 of the 1.41
samples a document took, against 0.03 of 1.21 at 1,000 documents, the largest cost that grew
with the corpus.

So a key of at least `LOG_OVER` fragments keeps its snapshot as a log: the packed rows of
its fragments when it was last packed whole (`base`), and one packed piece per snapshot
since, holding what changed in the epoch before it: the rows added or replaced and the
contribution ids removed. A snapshot packs only its epoch's changes and hands Bytewax the
base and the pieces, which are bytes already. Once the pieces add up to `REBASE` of the
base's bytes, the snapshot packs the key whole again, so packing costs about
1 / `REBASE` times what changed, and a resumed key reads a base and at most that share
more. The bytes written per epoch are still the whole key's (a Bytewax snapshot is one row
a key); what is no longer whole is the work of making them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar, cast

from dataflow.core.contributions import EntityFragment, FragmentRows, RelationFragment
from dataflow.core.snapshots import pack, unpack

F = TypeVar("F", EntityFragment, RelationFragment)

LOG_OVER = 256
"""Fragments from which a key's snapshot is a log; under half of it, it is packed whole
again (a key that shrank has no use for one). Packing 256 fragments whole takes about
0.3 ms."""

REBASE = 0.5
"""The pieces' bytes, as a share of the base's, at which a snapshot packs the key whole
again. Replaying the 16,000-document load's folds into its 120 biggest keys, a snapshot every
302 chunks: 14.3 s of packing whole, 2.8 s as a log at 0.5 and 4.2 s at 0.25, for 11% and
6% more bytes."""

Piece = tuple[dict[str, tuple[object, ...]], tuple[str, ...]]
"""One snapshot's changes: the rows added or replaced, and the contribution ids removed."""


@dataclass
class FragmentLog(Generic[F]):
    """The packed form of a key's fragments between snapshots: `base` and `pieces` are
    what the last snapshot held, `changes` what was folded since (contribution id ->
    fragment, or None for a retraction)."""

    base: bytes
    pieces: list[bytes] = field(default_factory=list)
    changes: dict[str, F | None] = field(default_factory=dict)

    @staticmethod
    def of(fragments: Mapping[str, F]) -> FragmentLog[F]:
        """A log whose base is `fragments`, packed now."""
        return FragmentLog(_packed_whole(fragments))

    def note(self, changes: Iterable[tuple[str, F | None]]) -> None:
        """Record folded changes, in the order they were folded."""
        for contribution_id, fragment in changes:
            self.changes[contribution_id] = fragment

    def packed(self, fragments: Mapping[str, F]) -> tuple[bytes, tuple[bytes, ...]]:
        """The base and pieces of a snapshot of `fragments`, the state the changes noted
        since the last one made: the changes packed as a piece, or `fragments` packed whole
        when the pieces reach `REBASE` of the base."""
        if self.changes:
            self.pieces.append(pack(_piece(self.changes)))
            self.changes = {}
        if sum(map(len, self.pieces)) >= REBASE * len(self.base):
            self.base, self.pieces = _packed_whole(fragments), []
        return self.base, tuple(self.pieces)


def restore_log(kind: type[F], base: bytes, pieces: Sequence[bytes]) -> dict[str, F]:
    """The fragments of `kind` a snapshot's base and pieces hold."""
    rows = cast(dict[str, tuple[object, ...]], unpack(base))
    for blob in pieces:
        added, removed = cast(Piece, unpack(blob))
        for contribution_id in removed:
            rows.pop(contribution_id, None)
        rows.update(added)
    return FragmentRows(kind, rows).restore()


def _packed_whole(fragments: Mapping[str, F]) -> bytes:
    return pack(FragmentRows.of(fragments).rows)


def _piece(changes: Mapping[str, F | None]) -> Piece:
    kept = {cid: fragment for cid, fragment in changes.items() if fragment is not None}
    removed = tuple(cid for cid, fragment in changes.items() if fragment is None)
    return (FragmentRows.of(kept).rows if kept else {}), removed
