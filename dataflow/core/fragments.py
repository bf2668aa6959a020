"""A key's fragments in segments: what an entity's or relation's state is held as.

A hub entity is cited by tens of thousands of chunks (25,082 fragments for the biggest at
16,000 documents), and each change of it used to cost as much: the fold copied every
fragment, the render read every one, and the snapshot pickled every one, in each epoch the
hub was touched. So a big state (`SPLIT_AT` fragments or more) is split into `SEGMENTS`
segments by a hash of the contribution id, each an immutable value: a fold copies only the
segments its deltas fall in (`Fragments.updated_from`), and a segment pickles its rows
(`FragmentRows`) once per version and keeps the bytes, so an epoch that changed one segment of
a hub pickles that one and copies the others' bytes as they are. A small state is one segment,
pickled with the state as before. Rendering still reads every fragment (docs/design.md, "A
big state is held in segments", says why no aggregates are kept).

The split is invisible: a `Fragments` is a read-only mapping {contribution id -> fragment},
equal to the dict of the same fragments (tests/core/test_fragments.py).
"""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Callable, ItemsView, Iterable, Iterator, Mapping, ValuesView
from dataclasses import dataclass, fields
from itertools import chain
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from dataflow.core.contributions import EntityFragment, RelationFragment

F = TypeVar("F", "EntityFragment", "RelationFragment")

SEGMENTS = 16
"""Segments a big state is split into: the biggest hub's 25,082 fragments become about 1,600
a segment."""

SPLIT_AT = 1024
"""A state is split into segments once it has this many fragments, and held whole again
below `JOIN_AT` (two thresholds, so that a state near one is not split and joined by turns).
A smaller state costs little to copy and pickle whole, and keeping pickled bytes for each of
the many small keys (most relations have one or two fragments) would cost memory and snapshot
bytes for nothing (segments pickled apart repeat the strings they share)."""

JOIN_AT = 512


def segment_of(contribution_id: str) -> int:
    """The segment a contribution belongs to in a split state: a stable hash, the same in
    every process."""
    return zlib.crc32(contribution_id.encode("utf-8", "surrogatepass")) % SEGMENTS


@dataclass(frozen=True)
class FragmentRows(Generic[F]):
    """Fragments as rows of field values: the form a segment pickles.

    pickle spends most of its time on each dataclass's class and field names: 52-75 ms for
    the biggest hub as fragments, 31 ms as rows, conversion included (docs/design.md, "Epochs
    of 10 s"). `restore` gives back equal fragments.
    """

    kind: type[F]
    rows: dict[str, tuple[object, ...]]

    @staticmethod
    def of(fragments: Mapping[str, F]) -> FragmentRows[F]:
        """The rows of `fragments`, one kind of fragment, at least one."""
        if not fragments:
            raise ValueError("FragmentRows.of needs at least one fragment")
        kind = type(next(iter(fragments.values())))
        values = attrgetter(*_field_names(kind))
        return FragmentRows(kind, {cid: values(f) for cid, f in fragments.items()})

    def restore(self) -> dict[str, F]:
        kind, names, new = self.kind, _field_names(self.kind), object.__new__
        restored: dict[str, F] = {}
        for contribution_id, row in self.rows.items():
            fragment = new(kind)  # as pickle builds a dataclass: no __init__, fields set
            fragment.__dict__.update(zip(names, row, strict=True))
            restored[contribution_id] = fragment
        return restored


def _field_names(kind: type[Any]) -> tuple[str, ...]:
    return tuple(f.name for f in fields(kind))


class Segment(Generic[F]):
    """Some of a key's fragments (never none). Immutable. A segment of a split state
    (`cached`) keeps the bytes a snapshot holds, pickled once; a whole state's single segment
    is pickled with the state, as rows."""

    __slots__ = ("_pickled", "cached", "fragments")
    fragments: dict[str, F]
    cached: bool
    _pickled: bytes | None

    def __init__(self, fragments: dict[str, F], cached: bool, pickled: bytes | None = None):
        self.fragments = fragments
        self.cached = cached
        self._pickled = pickled

    def __reduce__(self) -> tuple[Callable[..., Segment[F]], tuple[object]]:
        if not self.cached:
            return _unpickle_rows, (FragmentRows.of(self.fragments),)
        if self._pickled is None:
            self._pickled = pickle.dumps(FragmentRows.of(self.fragments), pickle.HIGHEST_PROTOCOL)
        return _unpickle_segment, (self._pickled,)


def _unpickle_segment(pickled: bytes) -> Segment[Any]:
    return Segment(pickle.loads(pickled).restore(), cached=True, pickled=pickled)


def _unpickle_rows(rows: FragmentRows[Any]) -> Segment[Any]:
    return Segment(rows.restore(), cached=False)


class Fragments(Mapping[str, F]):
    """A key's fragments {contribution id -> fragment} (module docstring): one segment while
    the state is small, `SEGMENTS` once it is big.

    Immutable: `updated_from` returns a new value that shares the segments the deltas left
    alone. Never empty (a key with no fragment left is None)."""

    __slots__ = ("_length", "segments")
    segments: tuple[Segment[F] | None, ...]
    _length: int

    def __init__(self, segments: tuple[Segment[F] | None, ...]) -> None:
        if len(segments) not in (1, SEGMENTS):
            raise ValueError(f"Fragments needs 1 or {SEGMENTS} segments; got {len(segments)}")
        self.segments = segments
        self._length = sum(len(s.fragments) for s in segments if s is not None)

    @property
    def split(self) -> bool:
        return len(self.segments) == SEGMENTS

    @staticmethod
    def of(fragments: Mapping[str, F]) -> Fragments[F] | None:
        """`fragments` as a state; None when there are none."""
        return Fragments.updated_from(None, fragments.items())

    @staticmethod
    def updated_from(
        state: Mapping[str, F] | None, deltas: Iterable[tuple[str, F | None]]
    ) -> Fragments[F] | None:
        """`state` (a `Fragments` or a plain mapping) with (contribution id, fragment, or None
        to retract) folded in; None when no fragment is left. Copies only the segments the
        deltas fall in, except when the state crosses `SPLIT_AT` or `JOIN_AT`."""
        segments: list[Segment[F] | None] = [None]
        if isinstance(state, Fragments):
            segments = list(state.segments)
        elif state is not None:  # a state pickled before segments, or built by hand
            deltas = chain(state.items(), deltas)
        split = len(segments) == SEGMENTS
        touched: dict[int, dict[str, F]] = {}
        for contribution_id, fragment in deltas:
            number = segment_of(contribution_id) if split else 0
            current = touched.get(number)
            if current is None:
                segment = segments[number]
                current = touched[number] = dict(segment.fragments) if segment else {}
            if fragment is None:
                current.pop(contribution_id, None)
            else:
                current[contribution_id] = fragment
        for number, current in touched.items():
            segments[number] = Segment(current, cached=split) if current else None
        length = sum(len(s.fragments) for s in segments if s is not None)
        if not length:
            return None
        if split != (length >= (JOIN_AT if split else SPLIT_AT)):
            return Fragments(_resegmented(segments, not split))
        return Fragments(tuple(segments))

    def __getitem__(self, contribution_id: str) -> F:
        segment = self.segments[segment_of(contribution_id) if self.split else 0]
        if segment is None:
            raise KeyError(contribution_id)
        fragment: F = segment.fragments[contribution_id]
        return fragment

    def __iter__(self) -> Iterator[str]:
        return chain.from_iterable(s.fragments for s in self.segments if s is not None)

    def values(self) -> ValuesView[F]:
        return _Values(self)  # Mapping's own looks each key up again, hashing it

    def items(self) -> ItemsView[str, F]:
        return _Items(self)

    def __len__(self) -> int:
        return self._length

    def __reduce__(self) -> tuple[type[Fragments[F]], tuple[tuple[Segment[F] | None, ...]]]:
        return Fragments, (self.segments,)

    def __deepcopy__(self, memo: dict[int, object]) -> Fragments[F]:
        return self  # immutable

    def __repr__(self) -> str:
        return f"Fragments({dict(self)!r})"


class _Values(ValuesView[F]):
    _mapping: Fragments[F]

    def __iter__(self) -> Iterator[F]:
        segments = self._mapping.segments
        return chain.from_iterable(s.fragments.values() for s in segments if s is not None)


class _Items(ItemsView[str, F]):
    _mapping: Fragments[F]

    def __iter__(self) -> Iterator[tuple[str, F]]:
        segments = self._mapping.segments
        return chain.from_iterable(s.fragments.items() for s in segments if s is not None)


def _resegmented(segments: list[Segment[F] | None], split: bool) -> tuple[Segment[F] | None, ...]:
    everything = chain.from_iterable(s.fragments.items() for s in segments if s is not None)
    if not split:
        return (Segment(dict(everything), cached=False),)
    parts: list[dict[str, F]] = [{} for _ in range(SEGMENTS)]
    for contribution_id, fragment in everything:
        parts[segment_of(contribution_id)][contribution_id] = fragment
    return tuple(Segment(part, cached=True) if part else None for part in parts)
