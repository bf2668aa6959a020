"""Running totals of a key's live fragments, so that drafting a hub's record costs what changed.

`entity_draft` and `relation_draft` (dataflow/core/contributions.py) read every fragment: a
hub entity of a large index has tens of thousands of them, read on every touch
(docs/decisions/0008-running-totals.md).
A tally is kept up to date one fragment at a time, `add` and `remove`, in O(log n) plus a
move of pointers; its `draft` is the same draft the fragments give (`EntityTally(state.values())
.draft(key) == entity_draft(key, state)`, property tests), made by copying sorted lists.

A tally takes about half the memory of its fragments, so the dataflow keeps one only for a key
with many fragments (dataflow/logic/fragments.py, `Components.tally_over_fragments`).
"""

from __future__ import annotations

import itertools
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Callable, Iterable
from fractions import Fraction
from itertools import chain
from operator import attrgetter, itemgetter
from typing import Generic, TypeVar

from dataflow.core.contributions import (
    EntityDraft,
    EntityFragment,
    ListChanges,
    RelationDraft,
    RelationFragment,
    RelationPair,
)
from dataflow.core.extraction import UNKNOWN_TYPE

F = TypeVar("F", EntityFragment, RelationFragment)
_TEXT = itemgetter(3)
_SAID = attrgetter("description", "file_path", "chunk_id")
_NAME, _TYPE, _ALIASES = attrgetter("name"), attrgetter("type"), attrgetter("aliases")
_SOURCE_NAME, _TARGET_NAME = attrgetter("source_name"), attrgetter("target_name")
_KEYWORDS, _STRENGTH = attrgetter("keywords"), attrgetter("strength")
_CHUNK_ID, _FILE_PATH = attrgetter("chunk_id"), attrgetter("file_path")
_DOC_ID = attrgetter("doc_id")


_STAMPS = itertools.count(1)
"""The stamps of drafts with list changes: unique within the process (`ListChanges`)."""


class _Counted:
    """Distinct values with how many fragments carry each, the values kept sorted; with
    `track`, also the values that came in (True) or went (False) since `take_changes`."""

    __slots__ = ("changed", "counts", "ordered")

    def __init__(self, values: Iterable[str] = (), track: bool = False) -> None:
        self.counts: dict[str, int] = Counter(values)
        self.ordered: list[str] = sorted(self.counts)
        self.changed: dict[str, bool] | None = {} if track else None

    def add(self, value: str) -> None:
        count = self.counts.get(value, 0)
        if not count:
            insort(self.ordered, value)
            if self.changed is not None:
                self.changed[value] = True
        self.counts[value] = count + 1

    def remove(self, value: str) -> None:
        count = self.counts[value]
        if count > 1:
            self.counts[value] = count - 1
            return
        del self.counts[value]
        del self.ordered[bisect_left(self.ordered, value)]
        if self.changed is not None:
            self.changed[value] = False

    def take_changes(self, without: str | None = None) -> dict[str, bool]:
        """The values that came in or went since the last call, without `without`."""
        changed, self.changed = self.changed or {}, {}
        if without is not None:
            changed.pop(without, None)
        return changed

    def values(self, without: str | None = None) -> tuple[str, ...]:
        """The distinct values in order, without `without`."""
        if without is None or without not in self.counts:
            return tuple(self.ordered)
        index = bisect_left(self.ordered, without)
        return (*self.ordered[:index], *self.ordered[index + 1 :])

    def vote(self) -> str | None:
        """The most frequent value; ties go to the smallest (`_vote`). A key's names and
        types are few, so this reads them all."""
        if not self.counts:
            return None
        return min(self.counts.items(), key=lambda item: (-item[1], item[0]))[0]


_Place = tuple[str, str]  # (file path, chunk id)
_OrderKey = tuple[int, str, str, str]  # (-support, file path, chunk id, text) of the first place


class _Descriptions:
    """Distinct non-empty descriptions in `_ordered_descriptions`' order: most supported first,
    then by the first (file path, chunk id) that says it, then by text."""

    __slots__ = ("keys", "order", "places")

    def __init__(self, said: Iterable[tuple[str, str, str]] = ()) -> None:
        """`said`: (text, file path, chunk id) of each fragment."""
        self.places: dict[str, dict[_Place, int]] = {}  # text -> how often each place says it
        for (text, path, chunk_id), count in Counter(said).items():
            if text:
                self.places.setdefault(text, {})[(path, chunk_id)] = count
        self.keys: dict[str, _OrderKey] = {  # text -> its key in `order`
            text: (-sum(places.values()), *min(places), text)
            for text, places in self.places.items()
        }
        self.order: list[_OrderKey] = sorted(self.keys.values())

    def add(self, text: str, place: _Place) -> None:
        if not text:
            return
        places = self.places.setdefault(text, {})
        places[place] = places.get(place, 0) + 1
        old = self.keys.get(text)
        first = place if old is None else min((old[1], old[2]), place)
        self._move(text, old, (-1 if old is None else old[0] - 1, *first, text))

    def remove(self, text: str, place: _Place) -> None:
        if not text:
            return
        places = self.places[text]
        if places[place] > 1:
            places[place] -= 1
        else:
            del places[place]
        old = self.keys[text]
        if not places:
            del self.places[text]
            self._move(text, old, None)
            return
        first = (old[1], old[2])
        if first == place and place not in places:
            first = min(places)
        self._move(text, old, (old[0] + 1, *first, text))

    def _move(self, text: str, old: _OrderKey | None, new: _OrderKey | None) -> None:
        if old is not None:
            del self.order[bisect_left(self.order, old)]
        if new is None:
            del self.keys[text]
            return
        self.keys[text] = new
        insort(self.order, new)

    def __bool__(self) -> bool:
        return bool(self.order)

    def texts(self) -> tuple[str, ...]:
        return tuple(map(_TEXT, self.order))


_CountOp = Callable[[_Counted, str], None]  # _Counted.add or .remove
_DescribeOp = Callable[[_Descriptions, str, _Place], None]  # _Descriptions.add or .remove


class FragmentTally(Generic[F]):
    """What both tallies do: count fragments in and out (`fold_fragments` in
    dataflow/core/steps.py folds deltas into fragments and their tally alike), and keep the
    citations, whose changes each draft passed on carries (`list_changes`)."""

    __slots__ = ("chunks", "docs", "fragments", "paths", "stamp")

    def __init__(self, fragments: list[F]) -> None:
        self.fragments = len(fragments)  # how many are added and not removed
        self.chunks = _Counted(map(_CHUNK_ID, fragments), track=True)
        self.paths = _Counted(map(_FILE_PATH, fragments), track=True)
        self.docs = _Counted(map(_DOC_ID, fragments), track=True)
        self.stamp: int | None = None  # the last `list_changes`'

    def list_changes(self) -> ListChanges:
        """How the citation lists changed since the last call: for the draft passed on now."""
        stamp = next(_STAMPS)
        changed = {
            "source_chunk_ids": self.chunks.take_changes(),
            "file_paths": self.paths.take_changes(without=""),  # not in the draft's list
            "doc_ids": self.docs.take_changes(),
        }
        changes = ListChanges(self.stamp, stamp, changed)
        self.stamp = stamp
        return changes

    def add(self, fragment: F) -> None:
        raise NotImplementedError

    def remove(self, fragment: F) -> None:
        """Retract `fragment`, which must have been added."""
        raise NotImplementedError


class EntityTally(FragmentTally[EntityFragment]):
    """Running totals of one entity's live fragments (see the module's docstring)."""

    __slots__ = ("aliases", "mentions", "names", "typed", "types")

    def __init__(self, fragments: Iterable[EntityFragment] = ()) -> None:
        """The totals of `fragments`, counted in bulk: mostly C loops, more than twice as fast
        as adding them one by one."""
        every = list(fragments)
        typed = [f for f in every if f.type is not None]
        super().__init__(every)
        self.names = _Counted(map(_NAME, every))
        self.types = _Counted(map(_TYPE, typed))  # of the typed fragments
        self.typed = _Descriptions(map(_SAID, typed))  # what typed fragments say
        # what endpoint mentions (type None) say
        self.mentions = _Descriptions(map(_SAID, (f for f in every if f.type is None)))
        self.aliases = _Counted(chain.from_iterable(map(_ALIASES, every)))

    def add(self, fragment: EntityFragment) -> None:
        self._count(fragment, _Counted.add, _Descriptions.add)
        self.fragments += 1

    def remove(self, fragment: EntityFragment) -> None:
        self._count(fragment, _Counted.remove, _Descriptions.remove)
        self.fragments -= 1

    def _count(self, fragment: EntityFragment, count: _CountOp, describe: _DescribeOp) -> None:
        count(self.names, fragment.name)
        place = (fragment.file_path, fragment.chunk_id)
        if fragment.type is None:
            describe(self.mentions, fragment.description, place)
        else:
            count(self.types, fragment.type)
            describe(self.typed, fragment.description, place)
        count(self.chunks, fragment.chunk_id)
        count(self.paths, fragment.file_path)
        count(self.docs, fragment.doc_id)
        for alias in fragment.aliases:
            count(self.aliases, alias)

    def draft(self, key: str) -> EntityDraft | None:
        """`entity_draft` of the fragments added and not removed."""
        if not self.fragments:
            return None
        # The typed fragments' descriptions when any has one, else every fragment's: the
        # typed ones then say nothing, so those are the mentions' (`_entity_descriptions`).
        descriptions = self.typed if self.typed else self.mentions
        return EntityDraft(
            key=key,
            name=self.names.vote() or key,
            type=self.types.vote() or UNKNOWN_TYPE,
            descriptions=descriptions.texts(),
            source_chunk_ids=self.chunks.values(),
            file_paths=self.paths.values(without=""),
            doc_ids=self.docs.values(),
            aliases=self.aliases.values(without=key),
        )


class RelationTally(FragmentTally[RelationFragment]):
    """Running totals of one relation's live fragments (see the module's docstring)."""

    __slots__ = ("keywords", "said", "sources", "targets", "weight")

    def __init__(self, fragments: Iterable[RelationFragment] = ()) -> None:
        """The totals of `fragments`, counted in bulk."""
        every = list(fragments)
        super().__init__(every)
        self.sources = _Counted(map(_SOURCE_NAME, every))
        self.targets = _Counted(map(_TARGET_NAME, every))
        self.keywords = _Counted(chain.from_iterable(map(_KEYWORDS, every)))
        self.said = _Descriptions(map(_SAID, every))
        # Exact, so that removing a strength leaves no rounding behind: its float is the
        # correctly rounded sum, as `math.fsum`'s is.
        strengths = Counter(map(_STRENGTH, every))
        self.weight = sum((Fraction(s) * n for s, n in strengths.items()), Fraction(0))

    def add(self, fragment: RelationFragment) -> None:
        self._count(fragment, _Counted.add, _Descriptions.add)
        self.weight += Fraction(fragment.strength)
        self.fragments += 1

    def remove(self, fragment: RelationFragment) -> None:
        self._count(fragment, _Counted.remove, _Descriptions.remove)
        self.weight -= Fraction(fragment.strength)
        self.fragments -= 1

    def _count(self, fragment: RelationFragment, count: _CountOp, describe: _DescribeOp) -> None:
        count(self.sources, fragment.source_name)
        count(self.targets, fragment.target_name)
        for keyword in fragment.keywords:
            count(self.keywords, keyword)
        describe(self.said, fragment.description, (fragment.file_path, fragment.chunk_id))
        count(self.chunks, fragment.chunk_id)
        count(self.paths, fragment.file_path)
        count(self.docs, fragment.doc_id)

    def draft(self, pair: RelationPair) -> RelationDraft | None:
        """`relation_draft` of the fragments added and not removed."""
        if not self.fragments:
            return None
        return RelationDraft(
            pair=pair,
            source_name=self.sources.vote() or pair[0],
            target_name=self.targets.vote() or pair[1],
            keywords=self.keywords.values(),
            descriptions=self.said.texts(),
            weight=float(self.weight),
            source_chunk_ids=self.chunks.values(),
            file_paths=self.paths.values(without=""),
            doc_ids=self.docs.values(),
        )


Tally = EntityTally | RelationTally
