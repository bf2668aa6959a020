"""A big key's snapshot as the changes packed since its last whole packing, which a step of
its own holds.

Bytewax snapshots every key a step touched in an epoch, and the entity and relation steps'
snapshot is the key's fragments packed (dataflow/state/fragments.py). Packed whole, a hub
costs its whole size in every epoch that touches it, and a hub grows with the corpus (tens
of thousands of fragments; docs/decisions/0007-big-key-logs-and-a-holder-step.md).

So a key of at least `LogPolicy.over` fragments keeps its snapshot as a log: the packed rows
of its fragments when it was last packed whole (the base), and one packed piece per snapshot
since, holding what changed in the epoch before it: the rows added or replaced and the
contribution ids removed. A snapshot packs only its epoch's changes. The base is not in the
key's snapshot: the step hands it (`HeldBase`) to a step of its own keyed alike
(dataflow/logic/fragments.py, `BaseHolder`: "entity_base" and "relation_base"), whose
snapshot it is, written once when it is made; the key's snapshot names it by a random id.
Once the pieces add up to `LogPolicy.rebase` of the base's bytes, or to
`LogPolicy.most_pieces`, a fold packs the key whole again and hands the new base on, so a
key's row is at most about `most_pieces` plus one epoch's changes whatever its size, and the
whole key is written once per that much change. A resumed key reads its pieces from its own
row and its base from the holder, which leaves it for the key to claim
(dataflow/state/held_bases.py; both steps route a key to the same worker).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar, cast

from dataflow.core.contributions import EntityFragment, RelationFragment
from dataflow.state.codec import SnapshotCodec
from dataflow.state.forms import FragmentRows, Rows

F = TypeVar("F", EntityFragment, RelationFragment)

Piece = tuple[Rows, tuple[str, ...]]
"""One snapshot's changes: the rows added or replaced, and the contribution ids removed."""


@dataclass(frozen=True)
class LogPolicy:
    """When a key's snapshot is a log, and when a fold packs it whole again."""

    over: int = 256
    """Fragments from which a key's snapshot is a log; under half of it, it is packed whole
    again (a key that shrank has no use for one). Packing 256 fragments whole takes well
    under a millisecond."""
    rebase: float = 0.5
    """The pieces' bytes, as a share of the base's, at which a fold packs the key whole
    again. At half, a large load's biggest keys pack in about a fifth of the time they take
    packed whole every epoch, for about a tenth more bytes; a quarter costs half as much
    again in time for a few percent fewer bytes."""
    most_pieces: int = 64 * 1024
    """The pieces' bytes at which a fold packs the key whole again whatever its size: the
    bound on what a big key's snapshot writes per epoch beyond the epoch's own changes."""


@dataclass(frozen=True)
class HeldBase:
    """A key's new base for the holder step (`base` None: the key holds none any more)."""

    base_id: bytes
    base: bytes | None


@dataclass
class FragmentLog(Generic[F]):
    """The packed form of a key's fragments between snapshots: `pieces` are what the last
    snapshot held beside its base, `changes` what was folded since (contribution id ->
    fragment, or None for a retraction). The base is `base` until it is handed to the
    holder (`hand_off`), then `base_id` names it there."""

    base: bytes | None
    base_size: int
    pieces: list[bytes] = field(default_factory=list)
    changes: dict[str, F | None] = field(default_factory=dict)
    base_id: bytes | None = None
    pieces_size: int = field(init=False)  # the pieces' bytes, summed as they come

    def __post_init__(self) -> None:
        self.pieces_size = sum(map(len, self.pieces))

    @staticmethod
    def of(fragments: Mapping[str, F], codec: SnapshotCodec) -> FragmentLog[F]:
        """A log whose base is `fragments`, packed now."""
        base = _packed_whole(fragments, codec)
        return FragmentLog(base, len(base))

    def note(self, changes: Iterable[tuple[str, F | None]]) -> None:
        """Record folded changes, in the order they were folded."""
        for contribution_id, fragment in changes:
            self.changes[contribution_id] = fragment

    def rebase_due(self, policy: LogPolicy) -> bool:
        """Whether the pieces reached the policy's share of the base, or its most pieces."""
        return self.pieces_size >= min(policy.rebase * self.base_size, policy.most_pieces)

    def rebase(self, fragments: Mapping[str, F], codec: SnapshotCodec) -> None:
        """Make `fragments`, packed now, the base, with no pieces or changes since."""
        self.base = _packed_whole(fragments, codec)
        self.base_size, self.base_id = len(self.base), None
        self.pieces, self.pieces_size, self.changes = [], 0, {}

    def hand_off(self) -> HeldBase | None:
        """The base for the holder, if it is not there yet; from then on the snapshots name
        it (`base_id`, random: a key's bases never share one) instead of holding it."""
        if self.base is None:
            return None
        self.base_id, base, self.base = os.urandom(16), self.base, None
        return HeldBase(self.base_id, base)

    def packed(self, codec: SnapshotCodec) -> tuple[bytes | None, bytes | None, tuple[bytes, ...]]:
        """(base or None, base id or None, pieces) of a snapshot of the state the changes
        noted since the last one made: the changes packed as a piece."""
        if self.changes:
            self.pieces.append(codec.pack(_piece(self.changes)))
            self.pieces_size += len(self.pieces[-1])
            self.changes = {}
        return self.base, self.base_id, tuple(self.pieces)


def restore_log(
    kind: type[F], base: bytes, pieces: Sequence[bytes], codec: SnapshotCodec
) -> dict[str, F]:
    """The fragments of `kind` a snapshot's base and pieces hold."""
    rows = cast(Rows, codec.unpack(base))
    for blob in pieces:
        added, removed = cast(Piece, codec.unpack(blob))
        for contribution_id in removed:
            rows.pop(contribution_id, None)
        rows.update(added)
    return FragmentRows(kind, rows).restore()


def _packed_whole(fragments: Mapping[str, F], codec: SnapshotCodec) -> bytes:
    return codec.pack(FragmentRows.of(fragments).rows)


def _piece(changes: Mapping[str, F | None]) -> Piece:
    kept = {cid: fragment for cid, fragment in changes.items() if fragment is not None}
    removed = tuple(cid for cid, fragment in changes.items() if fragment is None)
    return (FragmentRows.of(kept).rows if kept else {}), removed
