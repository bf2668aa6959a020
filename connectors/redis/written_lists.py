"""The long lists of the records this process wrote last, so that writing a record again sends
only what changed in them.

A hub's record carries thousands of chunk ids, document ids and file paths. Encoded as JSON in
the record's hash and sent whole on every render, they would be most of what a load sends to
Redis as it grows: most hubs are rewritten in every batch of a load, so the bytes sent, and
the append-only file's rewrites, grow with the square of the corpus
(docs/decisions/0009-citation-lists-by-delta.md).

So a citation list (`SIDE_FIELDS`) of at least `SIDE` entries lives in a sorted set of its own
(score 0, so members read back in byte order, which for UTF-8 is the code point order the
dataflow sorts them in), and the record's field holds `SIDE_MARKER` instead: writing the record
again adds and removes only the entries that changed (`SideWrite`). A shorter list stays JSON
in the hash, left out of the write when it did not change. The sorted set exists exactly while
the field holds the marker: both change in the same MULTI/EXEC on one server
(connectors/redis/graph_store.py), and in the same script call of the record's hash slot on a
Redis Cluster (connectors/redis/slot_writes.py), where the set shares the record's hash tag.

A hub's record is drafted from running totals (dataflow/core/tally.py) that know what changed
in its lists, and its draft says so (`ListChanges`: the values that came in or went since the
key's draft stamped `since`). When that draft is the one this process wrote last, the write is
those changes and nothing is compared: comparing thousands of entries on every hub edit would
cost a tenth of the worker's time in hub edits. Otherwise the lists are compared with the ones
written last, as for any record.

What is remembered is what a write that succeeded sent, so a write that failed is retried
whole. When the embedded redis-server is restarted (`Stores.revive`), `clear` forgets
everything, the sorted sets that exist are read again (`know_side_lists`), and every record's
next write is whole again, trusting the server only with what it reloads; a new process starts
with nothing remembered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from operator import lt

from dataflow.core.contributions import CITATION_LISTS, ListChanges

Lists = Mapping[str, tuple[str, ...]]
"""A record's list fields by field name."""

LONG = 64
"""Lists of at least this many entries are remembered, to leave them out when unchanged."""

SIDE = 64
"""A citation list of at least this many entries is kept in a sorted set of its own. Against
256, 64 makes a large load send Redis about 40% fewer bytes in slightly less time, for about
5% more Redis memory (a sorted set takes about twice the memory of its JSON;
docs/decisions/0009-citation-lists-by-delta.md)."""

SIDE_FIELDS = frozenset(CITATION_LISTS)
"""The lists that grow with a hub (an entity's aliases and a relation's keywords do not)."""

SIDE_MARKER = "@"
"""A record field whose list is in its sorted set (a JSON list starts with "[")."""

SideKey = Callable[[str, str], str]
"""The sorted set of a record's list: (record's Redis key, field name) -> Redis key."""


@dataclass(frozen=True)
class SideWrite:
    """What one write does to a list's sorted set: empty it first (`whole`, whether or not
    this process knows the set to exist: a Bytewax process's workers write from their own
    threads, and one may learn of a set after another wrote it), then remove and add
    entries."""

    key: str
    whole: bool
    removed: tuple[str, ...]
    added: tuple[str, ...]


@dataclass
class ListPlan:
    """One batch's record writes: the list fields each record's HSET leaves out and those it
    writes as `SIDE_MARKER` (by Redis key), the sorted-set writes and deletions, and what to
    remember once the batch is written."""

    leave_out: dict[str, frozenset[str]] = field(default_factory=dict)
    marked: dict[str, frozenset[str]] = field(default_factory=dict)
    side_writes: list[SideWrite] = field(default_factory=list)
    side_deletes: list[str] = field(default_factory=list)
    sent: dict[str, Lists] = field(default_factory=dict)
    sides: dict[str, bool] = field(default_factory=dict)  # sorted set -> exists after the batch
    stamps: dict[str, int | None] = field(default_factory=dict)  # the drafts' (`ListChanges`)

    def fields_left_out(self, redis_key: str) -> frozenset[str]:
        return self.leave_out.get(redis_key, frozenset())

    def fields_marked(self, redis_key: str) -> frozenset[str]:
        return self.marked.get(redis_key, frozenset())


class WrittenLists:
    """The long list fields of the records this process wrote last, by Redis key, and the
    sorted sets that hold the longest."""

    def __init__(self, side_key: SideKey) -> None:
        """`side_key`: where a record's long citation list goes."""
        self._lists: dict[str, dict[str, tuple[str, ...]]] = {}
        self._stamps: dict[str, int] = {}  # the stamp of the draft last written (`ListChanges`)
        self._side_key = side_key
        self._sides: set[str] | None = None

    @property
    def knows_side_lists(self) -> bool:
        """Whether the sorted sets that exist are known (`know_side_lists`)."""
        return self._sides is not None

    def know_side_lists(self, keys: Iterable[str]) -> None:
        """The sorted sets that exist in the store (read at the first write, and again after
        `clear`), unless another thread has told it meanwhile."""
        found = set(keys)
        if self._sides is None:
            self._sides = found

    def plan(self, records: Iterable[tuple[str, Lists, ListChanges | None]]) -> ListPlan:
        """How to write each of `records` ((Redis key, its lists, their changes), in write
        order): the lists it leaves out (equal to the lists last written, or planned earlier in
        the same batch), those in sorted sets, and what changes in those: a hub's changes as its
        draft says (`ListChanges`) when they follow the draft written last, else found by
        comparing the lists."""
        if self._sides is None:
            raise RuntimeError("the sorted sets of long lists are not known yet")
        plan = ListPlan()
        for redis_key, lists, changes in records:
            last = plan.sent.get(redis_key) or self._lists.get(redis_key, {})
            stamp = (
                plan.stamps[redis_key] if redis_key in plan.stamps else self._stamps.get(redis_key)
            )
            # the changes since the draft this process wrote last: nothing else to compare
            follows = changes if changes and stamp is not None and changes.since == stamp else None
            same, marked = set(), set()
            for name, values in lists.items():
                side = self._side_key(redis_key, name) if name in SIDE_FIELDS else None
                exists = side is not None and plan.sides.get(side, side in self._sides)
                if follows and side is not None and exists and len(values) >= SIDE:
                    changed = follows.changed.get(name, {})
                    removed = tuple(value for value, present in changed.items() if not present)
                    added = tuple(value for value, present in changed.items() if present)
                    if removed or added:
                        plan.side_writes.append(SideWrite(side, False, removed, added))
                    same.add(name)
                    plan.sides[side] = True
                    continue
                if side is not None and len(values) >= SIDE and _ordered_set(values):
                    before = last.get(name) if exists else None
                    if before is None:  # whole: the set emptied first, the field marked
                        plan.side_writes.append(SideWrite(side, True, (), values))
                        marked.add(name)
                    else:  # the field is the marker already
                        same.add(name)
                        if before != values:
                            old, new = set(before), set(values)
                            removed, added = tuple(old - new), tuple(new - old)
                            plan.side_writes.append(SideWrite(side, False, removed, added))
                    plan.sides[side] = True
                    continue
                if not exists and last.get(name) == values:
                    same.add(name)
                if exists and side is not None:
                    plan.side_deletes.append(side)
                    plan.sides[side] = False
            if same:
                plan.leave_out[redis_key] = frozenset(same)
            if marked:
                plan.marked[redis_key] = frozenset(marked)
            plan.sent[redis_key] = lists
            plan.stamps[redis_key] = changes.stamp if changes is not None else None
        return plan

    def written(self, plan: ListPlan, deleted: Iterable[str]) -> None:
        """`plan`'s batch is written, with the records of `deleted` (Redis keys) deleted and
        their sorted sets (`side_lists_of`) with them."""
        for redis_key, lists in plan.sent.items():
            long = {name: values for name, values in lists.items() if len(values) >= LONG}
            if long:
                self._lists[redis_key] = long
            else:
                self._lists.pop(redis_key, None)
        for redis_key, stamp in plan.stamps.items():
            if stamp is None:
                self._stamps.pop(redis_key, None)
            else:
                self._stamps[redis_key] = stamp
        sides = self._sides if self._sides is not None else set()
        for side, exists in plan.sides.items():
            (sides.add if exists else sides.discard)(side)
        for redis_key in deleted:
            self._lists.pop(redis_key, None)
            self._stamps.pop(redis_key, None)
            sides.difference_update(self.side_lists_of(redis_key))

    def side_lists_of(self, redis_key: str) -> list[str]:
        """The sorted sets a record's lists may be in."""
        return side_lists(self._side_key, redis_key)

    def clear(self) -> None:
        self._lists.clear()
        self._stamps.clear()
        self._sides = None


def side_lists(side_key: SideKey, redis_key: str) -> list[str]:
    """The sorted sets the lists of the record at `redis_key` may be in."""
    return [side_key(redis_key, name) for name in sorted(SIDE_FIELDS)]


def _ordered_set(values: tuple[str, ...]) -> bool:
    """Whether `values` are sorted and distinct (strictly increasing), so that a sorted set
    gives them back as they were (the dataflow's lists are; a C loop: 0.1 ms for 5,000 chunk
    ids, half of sorting them and counting the distinct ones)."""
    return all(map(lt, values, values[1:]))
