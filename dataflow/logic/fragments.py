"""The entity and relation steps: each folds its key's deltas into the key's fragments and
emits the key's draft with the acknowledgements of what it folded; and the holder steps of
their big keys' bases ("entity_base", "relation_base")."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Generic, Self, TypeVar, cast

from bytewax.operators import StatefulBatchLogic
from typing_extensions import override

from dataflow.clock import Clock
from dataflow.components import Components
from dataflow.core.commit import count_deltas, release_acks
from dataflow.core.contributions import (
    Draft,
    EntityDraft,
    EntityFragment,
    RelationDraft,
    RelationFragment,
    RelationPair,
    entity_draft,
    relation_draft,
)
from dataflow.core.messages import Ack, EntityDrafted, RelationDrafted, TaggedDelta
from dataflow.core.steps import ContributionDelta, EntityDelta, RelationDelta, fold_fragments
from dataflow.core.tally import EntityTally, FragmentTally, RelationTally
from dataflow.state.codec import SnapshotCodec
from dataflow.state.errors import MissingBaseError
from dataflow.state.fragment_log import FragmentLog, HeldBase, LogPolicy, restore_log
from dataflow.state.fragments import FragmentsState, pack_fragments, unpack_fragments
from dataflow.state.held_bases import HeldBases

K = TypeVar("K")
F = TypeVar("F", EntityFragment, RelationFragment)
D = TypeVar("D", EntityDraft, RelationDraft)
Out = TypeVar("Out", EntityDrafted, RelationDrafted)


def _never(draft: Draft | None) -> bool:
    return False


class FragmentsLogic(StatefulBatchLogic[TaggedDelta, Out | HeldBase, bytes], Generic[K, F, D, Out]):
    """Folds a key's deltas and emits its draft (with acknowledgements) for rendering.

    The draft is made from the fragments, or, for a key with at least `tally_over` of them,
    from running totals kept beside them (`FragmentTally`), which cost what a fold changes
    rather than the key's size. They are made when a key reaches `tally_over` fragments, and
    dropped when it falls under half of that.

    Without delay, once per batch. With a delay (an LLM summarises descriptions), a key
    whose render is due a summary call (`summary_due`) is rendered at most once per `delay`:
    at once when its last render is at least `delay` old (a lone edit waits for nothing),
    else held until `delay` after that render, so a burst of edits to one entity costs two
    summary calls at most (its first edit's and the rest's), not one per edit. A key whose
    render calls no LLM is released at once.

    A big key (`logs.over` fragments or more) snapshots as a log, whose base it hands to the
    holder step (`BaseHolder`, dataflow/state/fragment_log.py); resumed, it claims its base
    from `bases`, the dataflow's channel (dataflow/state/held_bases.py).
    """

    kind: type[F]
    """The kind of fragment the step folds: its snapshots' rows are of this kind."""

    def __init__(
        self,
        resume: bytes | None,
        *,
        codec: SnapshotCodec,
        bases: HeldBases,
        delay: timedelta = timedelta(0),
        summary_due: Callable[[Draft | None], bool] | None = None,
        tally_over: int = 64,
        logs: LogPolicy = LogPolicy(),
        clock: Clock = Clock(),
    ) -> None:
        self.codec, self.bases, self.clock = codec, bases, clock
        self.state: FragmentsState[K, F] = (
            cast(FragmentsState[K, F], unpack_fragments(codec, resume, self.kind))
            if resume is not None
            else FragmentsState()
        )
        self.delay = delay
        self.summary_due: Callable[[Draft | None], bool] = summary_due or _never
        self.tally_over = tally_over
        self.logs = logs
        self._waiting_since: float | None = None  # since when a resumed key waits for its base

    @classmethod
    def builder(cls, components: Components, bases: HeldBases) -> Callable[[bytes | None], Self]:
        """The step's builder (Bytewax calls it with a key's resume snapshot): a key's logic
        with the components' codec, clock and settings, and the dataflow's `bases`."""
        delay = timedelta(seconds=components.coalesce_seconds)

        def build(resume: bytes | None) -> Self:
            return cls(
                resume,
                codec=components.codec,
                bases=bases,
                delay=delay,
                summary_due=components.renderer.summary_due,
                tally_over=components.tally_over_fragments,
                logs=components.snapshot_logs,
                clock=components.clock,
            )

        return build

    @override
    def on_batch(self, values: list[TaggedDelta]) -> tuple[Iterable[Out | HeldBase], bool]:
        if self.state.unresolved is not None and not self._resolve():
            self.state.waiting.extend(values)
            return [], StatefulBatchLogic.RETAIN
        return self._fold([*self._take_waiting(), *values])

    @override
    def on_notify(self) -> tuple[Iterable[Out | HeldBase], bool]:
        if self.state.unresolved is not None and not self._resolve():
            return [], StatefulBatchLogic.RETAIN
        emitted: list[Out | HeldBase] = []
        if waiting := self._take_waiting():
            folded, complete = self._fold(waiting)
            if complete or self.state.due is None:  # released by the fold, or gone
                return folded, complete
            emitted += folded
        if self.state.due is None or self.state.due > self.clock.now():
            return emitted, StatefulBatchLogic.RETAIN
        return self._release(emitted)

    @override
    def on_eof(self) -> tuple[Iterable[Out | HeldBase], bool]:
        if self.state.unresolved is not None and not self._resolve():
            return [], StatefulBatchLogic.RETAIN  # its snapshot still names its base
        emitted: list[Out | HeldBase] = []
        if waiting := self._take_waiting():
            folded, complete = self._fold(waiting)
            if complete:
                return folded, complete
            emitted += folded
        # A stopped index's snapshot holds its base, packed whole now, and no pieces: they
        # would be more bytes, and the holder's base more again. A resumed key hands it on.
        log, fragments = self.state.log, self.state.fragments
        if log is not None and log.base_id is not None:
            emitted.append(HeldBase(log.base_id, None))
        self.state.log = (
            FragmentLog.of(fragments, self.codec) if log is not None and fragments else None
        )
        if self.state.due is None:
            return emitted, StatefulBatchLogic.RETAIN
        return self._release(emitted)

    @override
    def notify_at(self) -> datetime | None:
        due = self.state.due
        if self.state.unresolved is not None and (self.state.waiting or due is not None):
            retry = self.clock.now() + _BASE_RETRY
            return retry if due is None else min(due, retry)
        return due

    def _fold(self, values: list[TaggedDelta]) -> tuple[list[Out | HeldBase], bool]:
        updates = [self.update(tagged.delta) for tagged in values]
        count_deltas(self.state.acks, values)
        self.state.key = updates[0][0]
        fragments = self.state.fragments if self.state.fragments is not None else {}
        folded = ((contribution_id, fragment) for _, contribution_id, fragment in updates)
        fold_fragments(fragments, folded, self.state.tally)
        if self.state.log is not None:
            self.state.log.note(
                (contribution_id, fragment) for _, contribution_id, fragment in updates
            )
        self.state.fragments = fragments or None
        self._keep_tally()
        handed: list[Out | HeldBase] = list(self._keep_log())
        if not self.delay or not self.summary_due(self._draft()):
            return self._release(handed)
        if self.state.due is None:
            now, last = self.clock.now(), self.state.released
            if last is None or now - last >= self.delay:
                return self._release(handed)
            self.state.due = last + self.delay
        return handed, StatefulBatchLogic.RETAIN

    def _take_waiting(self) -> list[TaggedDelta]:
        waiting, self.state.waiting = self.state.waiting, []
        return waiting

    def _resolve(self) -> bool:
        """Restore a resumed key's fragments from its base, if the holder step has left it
        in `bases` (dataflow/state/held_bases.py); else wait for it, `bases.wait_seconds` at
        most."""
        if self.state.unresolved is None:
            raise RuntimeError(f"{type(self).__name__}: {self.state.key!r} has its fragments")
        base_id, base_size, pieces = self.state.unresolved
        base = self.bases.claim(base_id)
        if base is None:
            now = self.clock.monotonic()
            if self._waiting_since is None:
                self._waiting_since = now
            if now - self._waiting_since > self.bases.wait_seconds:
                raise MissingBaseError(
                    f"{type(self).__name__}: the snapshot of {self.state.key!r} names a base "
                    f"the recovery database does not hold after {self.bases.wait_seconds} s: "
                    "the recovery database is damaged (rebuild the index: `kgstream index "
                    "DIR --data NEW`, or `kgstream replay ... --data NEW`)"
                )
            return False
        fragments = restore_log(self.kind, base, pieces, self.codec)
        self.state.fragments = fragments or None
        self.state.log = FragmentLog(None, base_size, list(pieces), base_id=base_id)
        self.state.unresolved, self._waiting_since = None, None
        return True

    def _release(
        self, before: list[Out | HeldBase] | None = None
    ) -> tuple[list[Out | HeldBase], bool]:
        """The key's draft, after `before` (what the step emits ahead of it)."""
        key = self.state.key
        if key is None:
            raise RuntimeError(f"{type(self).__name__} released before any delta arrived")
        draft, tally = self._draft(), self.state.tally
        if draft is not None and tally is not None:  # a hub's: what its lists changed
            draft = replace(draft, list_changes=tally.list_changes())
        emitted = self.emit(key, draft, release_acks(self.state.acks))
        self.state.acks, self.state.due = Counter(), None
        if self.delay:  # read only to hold a render (on_batch); no clock on the hot path
            self.state.released = self.clock.now()
        released = before if before is not None else []
        released.append(emitted)
        return released, self.state.fragments is None

    def _keep_tally(self) -> None:
        """Make or drop the key's running totals as its size crosses `tally_over` or half
        of it (`fold_fragments` keeps them up to date in between)."""
        state = self.state
        size = len(state.fragments) if state.fragments else 0
        if state.tally is not None and (not size or size * 2 < self.tally_over):
            state.tally = None
        elif state.tally is None and size and size >= self.tally_over:
            state.tally = self.new_tally(state.fragments or {})

    def _draft(self) -> D | None:
        state = self.state
        if state.key is None or not state.fragments:
            return None
        if state.tally is not None:
            return self.tally_draft(state.key, state.tally)
        return self.draft(state.key, state.fragments)

    def update(self, delta: ContributionDelta) -> tuple[K, str, F | None]:
        """(key, contribution id, fragment or None for a retraction) of one delta."""
        raise NotImplementedError

    def new_tally(self, fragments: dict[str, F]) -> FragmentTally[F]:
        raise NotImplementedError

    def draft(self, key: K, fragments: dict[str, F]) -> D | None:
        raise NotImplementedError

    def tally_draft(self, key: K, tally: FragmentTally[F]) -> D | None:
        raise NotImplementedError

    def emit(self, key: K, draft: D | None, acks: tuple[Ack, ...]) -> Out:
        raise NotImplementedError

    @override
    def snapshot(self) -> bytes:
        # Packed now, so the folds after it (in place, `fold_fragments`) cannot reach it.
        return pack_fragments(self.codec, self.state)

    def _keep_log(self) -> Iterable[HeldBase]:
        """Make or drop the key's snapshot log as its size crosses `logs.over` or half of it,
        pack it whole again when its pieces are due (dataflow/state/fragment_log.py), and
        hand a new base to the holder step, or tell it the key holds none any more; the
        folds note their changes in between."""
        state, log = self.state, self.state.log
        size = len(state.fragments) if state.fragments else 0
        if log is not None and size * 2 < self.logs.over:
            state.log = None
            if log.base_id is not None:
                yield HeldBase(log.base_id, None)
            return
        if log is None and size >= self.logs.over and state.fragments:
            state.log = log = FragmentLog.of(state.fragments, self.codec)
        if log is not None and state.fragments:
            if log.rebase_due(self.logs):
                log.rebase(state.fragments, self.codec)
            if handed := log.hand_off():
                yield handed


_BASE_RETRY = timedelta(milliseconds=5)  # how soon a resumed key looks for its base again


class BaseHolder(StatefulBatchLogic[HeldBase, None, tuple[bytes, bytes]]):
    """The "entity_base" and "relation_base" steps: a big key's base, the last its step
    handed on (dataflow/state/fragment_log.py), snapshotted only when a new one comes. A
    resumed one leaves its base in `bases` for the key to claim."""

    def __init__(self, resume: tuple[bytes, bytes] | None, bases: HeldBases) -> None:
        self.held, self.bases = resume, bases
        if resume is not None:
            self.bases.leave(*resume)

    @override
    def on_batch(self, values: list[HeldBase]) -> tuple[Iterable[None], bool]:
        if self.held is not None:
            self.bases.withdraw(self.held[0])  # unclaimed: replaced before its key came
        last = values[-1]
        self.held = (last.base_id, last.base) if last.base is not None else None
        return [], self.held is None

    @override
    def snapshot(self) -> tuple[bytes, bytes]:
        if self.held is None:
            raise RuntimeError("BaseHolder snapshotted after it was discarded")
        return self.held


class EntityLogic(FragmentsLogic[str, EntityFragment, EntityDraft, EntityDrafted]):
    kind = EntityFragment

    @override
    def update(self, delta: ContributionDelta) -> tuple[str, str, EntityFragment | None]:
        if not isinstance(delta, EntityDelta):
            raise TypeError(f"step 'entity' got a relation delta for {delta.key!r}")
        return delta.key, delta.contribution_id, delta.fragment

    @override
    def new_tally(self, fragments: dict[str, EntityFragment]) -> EntityTally:
        return EntityTally(fragments.values())

    @override
    def draft(self, key: str, fragments: dict[str, EntityFragment]) -> EntityDraft | None:
        return entity_draft(key, fragments)

    @override
    def tally_draft(self, key: str, tally: FragmentTally[EntityFragment]) -> EntityDraft | None:
        return cast(EntityTally, tally).draft(key)

    @override
    def emit(self, key: str, draft: EntityDraft | None, acks: tuple[Ack, ...]) -> EntityDrafted:
        return EntityDrafted(key, draft, acks)


class RelationLogic(FragmentsLogic[RelationPair, RelationFragment, RelationDraft, RelationDrafted]):
    kind = RelationFragment

    @override
    def update(self, delta: ContributionDelta) -> tuple[RelationPair, str, RelationFragment | None]:
        if not isinstance(delta, RelationDelta):
            raise TypeError(f"step 'relation' got an entity delta for {delta.key!r}")
        return delta.key, delta.contribution_id, delta.fragment

    @override
    def new_tally(self, fragments: dict[str, RelationFragment]) -> RelationTally:
        return RelationTally(fragments.values())

    @override
    def draft(
        self, key: RelationPair, fragments: dict[str, RelationFragment]
    ) -> RelationDraft | None:
        return relation_draft(key, fragments)

    @override
    def tally_draft(
        self, key: RelationPair, tally: FragmentTally[RelationFragment]
    ) -> RelationDraft | None:
        return cast(RelationTally, tally).draft(key)

    @override
    def emit(
        self, key: RelationPair, draft: RelationDraft | None, acks: tuple[Ack, ...]
    ) -> RelationDrafted:
        return RelationDrafted(key, draft, acks)
