"""The long lists of the records this process wrote last, so that writing a record again leaves
out the lists that did not change.

A hub's record carries thousands of chunk ids, document ids and file paths, encoded as JSON and
sent whole on every render: 2.4 ms to encode for the biggest hub at 16,000 documents. An edit of
one document changes the hub's chunk ids (the edited chunk's id) but neither its documents nor
its paths, so two of the three lists need not be encoded or sent (HSET of the other fields
keeps them). Only lists of at least `LONG` entries are remembered, so the memory is the hubs'.

What is remembered is what a write that succeeded sent, so a write that failed is retried
whole. When the embedded redis-server is restarted (`Stores.revive`), `clear` forgets
everything and every record's next write is whole again, trusting the server only with what it
reloads; a new process starts with nothing remembered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

Lists = Mapping[str, tuple[str, ...]]
"""A record's list fields by field name."""

LONG = 64


@dataclass
class ListPlan:
    """One batch's record writes: the list fields each record's HSET leaves out (by Redis key),
    and what to remember once the batch is written."""

    leave_out: dict[str, frozenset[str]] = field(default_factory=dict)
    sent: dict[str, Lists] = field(default_factory=dict)

    def fields_left_out(self, redis_key: str) -> frozenset[str]:
        return self.leave_out.get(redis_key, frozenset())


class WrittenLists:
    """The long list fields of the records this process wrote last, by Redis key."""

    def __init__(self) -> None:
        self._lists: dict[str, dict[str, tuple[str, ...]]] = {}

    def plan(self, records: Iterable[tuple[str, Lists]]) -> ListPlan:
        """Which lists each of `records` ((Redis key, its lists), in write order) can leave
        out: those equal to the lists last written, or planned earlier in the same batch."""
        plan = ListPlan()
        for redis_key, lists in records:
            last = plan.sent.get(redis_key) or self._lists.get(redis_key, {})
            same = frozenset(name for name, values in lists.items() if last.get(name) == values)
            if same:
                plan.leave_out[redis_key] = same
            plan.sent[redis_key] = lists
        return plan

    def written(self, plan: ListPlan, deleted: Iterable[str]) -> None:
        """`plan`'s batch is written, with the records of `deleted` (Redis keys) deleted."""
        for redis_key, lists in plan.sent.items():
            long = {name: values for name, values in lists.items() if len(values) >= LONG}
            if long:
                self._lists[redis_key] = long
            else:
                self._lists.pop(redis_key, None)
        for redis_key in deleted:
            self._lists.pop(redis_key, None)

    def clear(self) -> None:
        self._lists.clear()
