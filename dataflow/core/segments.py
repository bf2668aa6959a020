"""A big key's fragments held in segments, each packed on its own, so that a snapshot packs
again only the segments that changed since the last one.

Bytewax snapshots every key an epoch touched, whole. The entity and relation steps hold one
fragment per citing chunk, so a hub's state grows with the corpus (25,082 fragments for the
biggest entity at 16,000 documents), and packing it (rows, pickle, zstandard) was a fifth of
the worker's time in hub edits there: an edit that changes one fragment paid for all of
them (29 ms for the biggest). Here a key's fragments are split by a stable hash into a
power-of-two number of segments of about `segment_size` fragments; a segment's packed blob is
kept until a fold changes it, and the snapshot is the tuple of blobs. Packing then costs what
changed (1 ms for one fragment of the biggest hub); the bytes Bytewax writes are still the
whole key's, a memory copy per blob.

The hash is of the chunk id that begins each contribution id (a chunk's own, or `C|other`
for its mentions, dataflow/core/contributions.py), so that the fragments one chunk gives a
key share a segment: they repeat its chunk id, path and document id, which compress only
beside each other. Split by whole contribution ids, the biggest hub packed to 2.9 times its
single blob's bytes in 128 segments; split by chunk, 1.3 times, and 1.14 times in 32.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from typing import TypeVar

from dataflow.core.contributions import EntityFragment, FragmentRows, RelationFragment
from dataflow.core.snapshots import pack, unpack

F = TypeVar("F", EntityFragment, RelationFragment)


class SegmentedFragments(MutableMapping[str, F]):
    """One key's fragments by contribution id, in segments packed apart (`packed`).

    A fold marks the segment of each id it sets or deletes; `packed` packs those again and
    reuses the others' blobs. When the key outgrows its segments (more than twice
    `segment_size` a segment on average) they are doubled, each split in two by one more bit
    of the hash, and all are packed again once: amortised over the folds that grew the key.
    """

    def __init__(
        self, kind: type[F], segment_size: int, segments: list[dict[str, F]], blobs: list[bytes]
    ) -> None:
        count = len(segments)
        if count < 1 or count & (count - 1) or len(blobs) not in (0, count):
            raise ValueError(f"need a power-of-two number of segments and of blobs, got {count}")
        self.kind: type[F] = kind
        self.segment_size = segment_size
        self._segments: list[dict[str, F]] = segments
        # A segment's packed rows, or b"" when a fold changed it since it was last packed.
        self._blobs: list[bytes] = blobs or [b""] * count
        self._size = sum(map(len, segments))

    @classmethod
    def of(
        cls, fragments: Mapping[str, F], kind: type[F], segment_size: int
    ) -> SegmentedFragments[F]:
        """`fragments` in the fewest segments of at most `segment_size` on average."""
        count = 1
        while count * segment_size < len(fragments):
            count *= 2
        segments: list[dict[str, F]] = [{} for _ in range(count)]
        for contribution_id, fragment in fragments.items():
            segments[_hash(contribution_id) & (count - 1)][contribution_id] = fragment
        return cls(kind, segment_size, segments, [])

    @classmethod
    def unpacked(
        cls, blobs: Sequence[bytes], kind: type[F], segment_size: int
    ) -> SegmentedFragments[F]:
        """The fragments `packed` gave `blobs` of; the blobs are kept, as packed."""
        segments = [FragmentRows(kind, _rows(blob)).restore() for blob in blobs]
        return cls(kind, segment_size, segments, list(blobs))

    def packed(self) -> tuple[bytes, ...]:
        """Every segment's packed rows (dataflow/core/snapshots.py, `pack`): the segments
        changed since the last call are packed again, the others' blobs reused."""
        blobs = self._blobs
        for number, blob in enumerate(blobs):
            if not blob:
                segment = self._segments[number]
                blobs[number] = pack(FragmentRows.of(segment).rows if segment else {})
        return tuple(blobs)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    def unpacked_segments(self) -> int:
        """How many segments the next `packed` packs again."""
        return self._blobs.count(b"")

    def __getitem__(self, contribution_id: str) -> F:
        return self._segments[self._number(contribution_id)][contribution_id]

    def __setitem__(self, contribution_id: str, fragment: F) -> None:
        number = self._number(contribution_id)
        segment = self._segments[number]
        self._size += contribution_id not in segment
        segment[contribution_id] = fragment
        self._blobs[number] = b""
        if self._size > 2 * self.segment_size * len(self._segments):
            self._double()

    def __delitem__(self, contribution_id: str) -> None:
        number = self._number(contribution_id)
        del self._segments[number][contribution_id]
        self._size -= 1
        self._blobs[number] = b""

    def __iter__(self) -> Iterator[str]:
        for segment in self._segments:
            yield from segment

    def __len__(self) -> int:
        return self._size

    def _number(self, contribution_id: str) -> int:
        return _hash(contribution_id) & (len(self._segments) - 1)

    def _double(self) -> None:
        count = len(self._segments)
        high: list[dict[str, F]] = [{} for _ in range(count)]
        for number, segment in enumerate(self._segments):
            moved = [cid for cid in segment if _hash(cid) & count]
            for contribution_id in moved:
                high[number][contribution_id] = segment.pop(contribution_id)
        self._segments.extend(high)
        self._blobs = [b""] * len(self._segments)


def packed_segments(fragments: object) -> tuple[bytes, ...] | None:
    """`fragments`' packed segments (`SegmentedFragments.packed`), or None when they are not
    held in segments."""
    return fragments.packed() if isinstance(fragments, SegmentedFragments) else None


def _hash(contribution_id: str) -> int:
    """A stable hash of the chunk id `contribution_id` begins with."""
    return zlib.crc32(contribution_id.partition("|")[0].encode())


def _rows(blob: bytes) -> dict[str, tuple[object, ...]]:
    rows = unpack(blob)
    if not isinstance(rows, dict):
        raise TypeError(f"a segment's blob holds {type(rows).__name__}, not rows")
    return rows
