"""The entity and relation steps' state (`FragmentsState`), and its snapshot in one of three
forms (`pack_fragments`, read back by `unpack_fragments`):

- a key without a log: one packed blob (dataflow/state/codec.py) of plain values, the
  fragments as rows without their kind, which the step knows (most relations hold one or
  two fragments, where an object's pickled class and restore function would be a sixth of
  the bytes);
- a big key whose base is not handed on yet (dataflow/state/fragment_log.py): the plain
  values pickled with its base and pieces, which are packed already (a pickle, so never
  taken for a Zstandard frame);
- a big key whose base is in the holder step: the base's id and size in its place, and the
  deltas waiting for a resumed key's base.
"""

from __future__ import annotations

import pickle
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar, cast

from dataflow.core.commit import AckCounts
from dataflow.core.contributions import EntityFragment, RelationFragment
from dataflow.core.messages import TaggedDelta, Ticket
from dataflow.core.tally import FragmentTally
from dataflow.state.codec import SnapshotCodec, is_packed
from dataflow.state.forms import FragmentRows, Rows
from dataflow.state.fragment_log import FragmentLog, restore_log

K = TypeVar("K")
F = TypeVar("F", EntityFragment, RelationFragment)


@dataclass
class FragmentsState(Generic[K, F]):
    """One entity or relation key as its step keeps it (dataflow/logic/fragments.py)."""

    key: K | None = None
    fragments: dict[str, F] | None = None
    acks: AckCounts = field(default_factory=Counter)
    due: datetime | None = None  # when the coalesced render is released
    released: datetime | None = None  # when the key's last render was released
    # Running totals of `fragments` for a key with many. Never in a snapshot: built again
    # from the fragments when a resumed key is next touched.
    tally: FragmentTally[F] | None = field(default=None, compare=False, repr=False)
    # A big key's fragments as its snapshots hold them: packed whole when last packed, and
    # the changes since (dataflow/state/fragment_log.py).
    log: FragmentLog[F] | None = field(default=None, compare=False, repr=False)
    # A key resumed from a snapshot that names its base in the holder step, until the base
    # is claimed: (base id, its size in bytes, pieces); `fragments` is None meanwhile, and
    # the deltas that come wait in `waiting`.
    unresolved: tuple[bytes, int, tuple[bytes, ...]] | None = None
    waiting: list[TaggedDelta] = field(default_factory=list)


Acks = tuple[tuple[tuple[Ticket, str], int], ...]

_PackedState = tuple[object, Rows | None, Acks, datetime | None, datetime | None]
"""A key without a log: (key, the fragments' rows, acks, due, released), packed."""

_LoggedState = tuple[object, bytes, tuple[bytes, ...], Acks, datetime | None, datetime | None]
"""A big key holding its base: (key, the base, the pieces since, acks, due, released)."""

_HeldState = tuple[
    object,  # the key
    bytes,  # the id of its base, which the holder step keeps
    int,  # the base's size in bytes
    tuple[bytes, ...],  # the pieces: the changes since the base, packed
    tuple[TaggedDelta, ...],  # the deltas of a resumed key waiting for its base
    Acks,
    datetime | None,
    datetime | None,
]

_HELD_FIELDS = 8  # a `_HeldState`'s; a `_LoggedState` has 6


def pack_fragments(codec: SnapshotCodec, state: FragmentsState[K, F]) -> bytes:
    """The entity or relation step's snapshot of `state` (its log packs the changes noted
    since the last snapshot as a piece)."""
    acks = tuple(state.acks.items())
    held: _HeldState | None = None
    if state.unresolved is not None:
        base_id, base_size, pieces = state.unresolved
        waiting = tuple(state.waiting)
        held = (state.key, base_id, base_size, pieces, waiting, acks, state.due, state.released)
    elif state.log is not None and state.fragments:
        inline, named, logged_pieces = state.log.packed(codec)
        if inline is not None:
            logged: _LoggedState = (
                state.key,
                inline,
                logged_pieces,
                acks,
                state.due,
                state.released,
            )
            return pickle.dumps(logged, protocol=pickle.HIGHEST_PROTOCOL)
        if named is None:
            raise RuntimeError(f"the log of {state.key!r} neither holds its base nor names it")
        size = state.log.base_size
        held = (state.key, named, size, logged_pieces, (), acks, state.due, state.released)
    if held is not None:
        return pickle.dumps(held, protocol=pickle.HIGHEST_PROTOCOL)
    rows = FragmentRows.of(state.fragments).rows if state.fragments else None
    packed: _PackedState = (state.key, rows, acks, state.due, state.released)
    return codec.pack(packed)


def unpack_fragments(codec: SnapshotCodec, blob: bytes, kind: type[F]) -> FragmentsState[object, F]:
    """The state `pack_fragments` made `blob` of, its fragments of `kind`."""
    if is_packed(blob):
        key, rows, acks, due, released = cast(_PackedState, codec.unpack(blob))
        fragments = FragmentRows(kind, rows).restore() if rows is not None else None
        return FragmentsState(key, fragments, Counter(dict(acks)), due, released)
    state = pickle.loads(blob)
    if len(state) == _HELD_FIELDS:
        key, base_id, size, pieces, waiting, acks, due, released = cast(_HeldState, state)
        return FragmentsState(
            key,
            None,
            Counter(dict(acks)),
            due,
            released,
            unresolved=(base_id, size, pieces),
            waiting=list(waiting),
        )
    key, base, pieces, acks, due, released = cast(_LoggedState, state)
    log = FragmentLog[F](base, len(base), list(pieces))
    logged = restore_log(kind, base, pieces, codec)
    return FragmentsState(key, logged, Counter(dict(acks)), due, released, log=log)
