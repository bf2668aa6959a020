"""What the entity and relation steps' snapshots hold (dataflow/flow.py): a state's snapshot is
one packed blob of its fragments' rows (dataflow/core/snapshots.py), or for a key with many,
that blob without them and its segments' blobs (dataflow/core/segments.py), packed again only
where an epoch changed them; and snapshots of earlier versions still resume: the state object
packed with its fragments' kind, its fields with the fragments as `FragmentRows`, or before
rows, as fragments."""

import copyreg
import io
import pickle
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta

import bytewax.operators as op
import zstandard
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, cluster_main

from dataflow.core import snapshots
from dataflow.core.contributions import (
    EntityContribution,
    EntityFragment,
    FragmentRows,
    RelationFragment,
    entity_draft,
)
from dataflow.core.messages import TaggedDelta, Ticket
from dataflow.core.segments import SegmentedFragments
from dataflow.core.steps import ContributionDelta
from dataflow.flow import (
    _EntityLogic,
    _FragmentsLogicState,
    _RelationLogic,
    _unpack_fragments_state,
)
from tests.core.hubs import hub_fragments


def entity_state() -> _FragmentsLogicState[str, EntityFragment]:
    fragments = {
        "c1": EntityFragment("Ada", "person", "Ada wrote it.", "c1", "a.md", "a.md", ("ada l",)),
        "c1|bob": EntityFragment("Ada", None, "Ada met Bob.", "c1", "a.md", "a.md"),
    }
    return _FragmentsLogicState("ada", fragments, Counter({("a.md", "t1"): 2}))


def resumed(snapshot: bytes, logic=_EntityLogic) -> _FragmentsLogicState:
    """The state a step resumes with from `snapshot`, pickled and loaded as Bytewax does."""
    return logic(pickle.loads(pickle.dumps(snapshot)), timedelta(0)).state


def pickled_as_packed_object(state: _FragmentsLogicState) -> bytes:
    """`state` pickled as the version before snapshots were bytes pickled it: the object,
    as `_unpack_fragments_state` applied to a packed blob holding the fragments' kind."""
    rows = FragmentRows.of(state.fragments) if state.fragments else None
    plain = (
        state.key,
        (rows.kind, rows.rows) if rows is not None else None,
        tuple(state.acks.items()),
        state.due,
        state.released,
    )
    return pickle.dumps(PackedObject(snapshots.pack(plain)))


class PackedObject:
    def __init__(self, blob: bytes) -> None:
        self.blob = blob

    def __reduce__(self):
        return _unpack_fragments_state, (self.blob,)


def pickled_as_before_rows(state: object) -> bytes:
    """`state` pickled as the code before rows pickled it: the dataclass's own fields."""
    return pickled_as_fields(state, rows=False)


def pickled_as_before_packing(state: object) -> bytes:
    """`state` pickled as the code before packing pickled it: its fields, the fragments as
    `FragmentRows`."""
    return pickled_as_fields(state, rows=True)


def pickled_as_fields(state: object, rows: bool) -> bytes:
    class Before(pickle.Pickler):
        def reducer_override(self, obj):
            if isinstance(obj, _FragmentsLogicState):
                fields = dict(vars(obj))
                if rows and obj.fragments:
                    fields["fragments"] = FragmentRows.of(obj.fragments)
                return copyreg.__newobj__, (type(obj),), fields
            return NotImplemented

    buffer = io.BytesIO()
    Before(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(state)
    return buffer.getvalue()


def relation_state() -> _FragmentsLogicState[tuple[str, str], RelationFragment]:
    return _FragmentsLogicState(
        ("ada", "bob"),
        {"c1": RelationFragment("Ada", "Bob", ("met",), "d", 1.0, "c1", "a.md", "a.md")},
    )


def test_a_state_round_trips_through_its_steps_snapshot():
    state = entity_state()
    logic = _EntityLogic(None, timedelta(0))
    logic.state = state
    snapshot = logic.snapshot()
    assert isinstance(snapshot, bytes)
    restored = resumed(snapshot)
    assert restored == state
    assert all(type(f) is EntityFragment for f in restored.fragments.values())
    relation = resumed(relation_state().pack(), _RelationLogic)
    assert relation == relation_state()
    assert all(type(f) is RelationFragment for f in relation.fragments.values())
    assert resumed(_FragmentsLogicState().pack()) == _FragmentsLogicState()
    held = _FragmentsLogicState("ada", None, Counter(), datetime.now(UTC), datetime.now(UTC))
    assert resumed(held.pack()) == held


def said(chunk: int, about: str = "") -> TaggedDelta:
    """Chunk `chunk`'s fragment of "ada" (or its mention of `about`), added."""
    contribution_id = f"c{chunk}|{about}" if about else f"c{chunk}"
    text = f"Ada met {about}." if about else f"Ada wrote part {chunk}."
    fragment = EntityFragment("Ada", "person", text, f"c{chunk}", f"{chunk}.md", f"{chunk}.md")
    contribution = EntityContribution("ada", contribution_id, fragment)
    return TaggedDelta(Ticket(f"{chunk}.md", "t1"), f"c{chunk}", ContributionDelta(contribution))


def retracted(delta: TaggedDelta) -> TaggedDelta:
    return TaggedDelta(
        delta.ticket, delta.chunk_id, ContributionDelta(delta.delta.contribution, True)
    )


def test_a_key_with_many_fragments_snapshots_in_segments_and_resumes_equal():
    logic = _EntityLogic(None, timedelta(0), segment_size=2)
    logic.on_batch([said(n) for n in range(3)])
    assert isinstance(logic.snapshot(), bytes)  # under twice the segment size: one blob

    logic.on_batch([said(3), said(3, "bob"), said(4)])
    snapshot = logic.snapshot()
    assert isinstance(snapshot, tuple) and len(snapshot) == 1 + 4  # 6 fragments: 4 segments
    assert isinstance(logic.state.fragments, SegmentedFragments)

    state = _EntityLogic(pickle.loads(pickle.dumps(snapshot)), timedelta(0), segment_size=2).state
    assert state == logic.state
    assert isinstance(state.fragments, SegmentedFragments)
    assert entity_draft("ada", state.fragments) == entity_draft("ada", logic.state.fragments)


def test_a_snapshot_of_a_big_key_packs_again_only_the_segments_its_epoch_changed():
    logic = _EntityLogic(None, timedelta(0), segment_size=4)
    logic.on_batch([said(n) for n in range(32)])
    before = logic.snapshot()

    logic.on_batch([said(7, "bob"), retracted(said(7))])  # one chunk's fragments
    after = logic.snapshot()

    assert len(before) == len(after) == 1 + 8
    changed = [n for n, (old, new) in enumerate(zip(before, after, strict=True)) if old is not new]
    assert len(changed) == 2 and changed[0] == 0  # the head and one segment
    assert resumed(after) == logic.state


def test_a_key_under_the_segment_size_again_is_one_blob_again():
    logic = _EntityLogic(None, timedelta(0), segment_size=2)
    logic.on_batch([said(n) for n in range(5)])
    assert isinstance(logic.snapshot(), tuple)

    logic.on_batch([retracted(said(n)) for n in range(4)])

    assert type(logic.state.fragments) is dict
    snapshot = logic.snapshot()
    assert isinstance(snapshot, bytes)
    assert resumed(snapshot).fragments == {"c4": said(4).delta.contribution.fragment}


def test_a_snapshot_holds_no_class_and_is_smaller_than_the_packed_object_before():
    """A relation of one fragment, as most are: the object form pickled its restore
    function and the fragments' class, a sixth of the bytes."""
    state = relation_state()
    snapshot = pickle.dumps(state.pack())
    assert b"RelationFragment" not in zstandard.ZstdDecompressor().decompress(state.pack())
    assert len(snapshot) < len(pickled_as_packed_object(state)) - 40


def test_a_snapshot_of_the_packed_object_form_resumes_with_the_same_fragments():
    for state, logic in ((entity_state(), _EntityLogic), (relation_state(), _RelationLogic)):
        old = pickled_as_packed_object(state)
        assert b"_unpack_fragments_state" in old
        assert logic(pickle.loads(old), timedelta(0)).state == state


def test_a_snapshot_taken_before_rows_resumes_with_the_same_fragments():
    state = entity_state()
    old = pickled_as_before_rows(state)
    assert b"EntityFragment" in old and b"FragmentRows" not in old
    assert _EntityLogic(pickle.loads(old), timedelta(0)).state == state


def test_a_snapshot_taken_before_packing_resumes_with_the_same_fragments():
    state = entity_state()
    old = pickled_as_before_packing(state)
    assert b"FragmentRows" in old
    assert _EntityLogic(pickle.loads(old), timedelta(0)).state == state


def test_a_hub_packs_to_a_fraction_of_its_rows():
    """A hub as the scale bench's corpus makes one: a fragment per citing chunk (chunk ids
    are sha256 hex), its descriptions drawn from the phrases its chunks share. Its snapshot
    was 5 MB of rows at 16,000 documents; packed, about a fifth."""
    fragments = hub_fragments(2_000)
    state = _FragmentsLogicState("david melwood", fragments)

    packed, rows = len(pickle.dumps(state.pack())), len(pickled_as_before_packing(state))

    assert resumed(state.pack()) == state
    assert packed * 3 < rows, (packed, rows)


def test_each_bytewax_worker_thread_keeps_one_compressor(monkeypatch):
    """Bytewax's worker threads lose threading.local data at every activation, and a new
    zstandard compressor costs 20 times the packing of a small state (snapshots.py)."""
    made: list[int] = []
    make = zstandard.ZstdCompressor

    def counted(*args, **kwargs) -> zstandard.ZstdCompressor:
        made.append(threading.get_ident())
        return make(*args, **kwargs)

    monkeypatch.setattr(snapshots.zstandard, "ZstdCompressor", counted)
    threads: set[int] = set()

    def packed(n: int) -> bytes:
        threads.add(threading.get_ident())
        return snapshots.pack(("state", n))

    flow = Dataflow("packing")
    stream = op.map("pack", op.input("in", flow, TestingSource(range(2_000), batch_size=5)), packed)
    op.inspect("out", stream, lambda *_: None)
    cluster_main(flow, [], 0, worker_count_per_proc=2)

    assert threads and set(made) <= threads and len(made) <= len(threads), len(made)
