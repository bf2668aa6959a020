"""What the entity and relation steps' snapshots hold (dataflow/flow.py): a state pickles as
one packed blob of its fragments' rows (dataflow/core/snapshots.py), and snapshots taken before
that (fields with the fragments as `FragmentRows`, or before rows, as fragments) still resume."""

import copyreg
import hashlib
import io
import pickle
import threading
from collections import Counter
from datetime import UTC, datetime

import bytewax.operators as op
import zstandard
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, cluster_main

from dataflow.core import snapshots
from dataflow.core.contributions import EntityFragment, FragmentRows, RelationFragment
from dataflow.flow import _FragmentsLogicState


def entity_state() -> _FragmentsLogicState[str, EntityFragment]:
    fragments = {
        "c1": EntityFragment("Ada", "person", "Ada wrote it.", "c1", "a.md", "a.md", ("ada l",)),
        "c1|bob": EntityFragment("Ada", None, "Ada met Bob.", "c1", "a.md", "a.md"),
    }
    return _FragmentsLogicState("ada", fragments, Counter({("a.md", "t1"): 2}))


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


def test_a_state_round_trips_through_its_row_snapshot():
    state = entity_state()
    restored = pickle.loads(pickle.dumps(state))
    assert restored == state
    assert all(type(f) is EntityFragment for f in restored.fragments.values())
    relation = _FragmentsLogicState(
        ("ada", "bob"),
        {"c1": RelationFragment("Ada", "Bob", ("met",), "d", 1.0, "c1", "a.md", "a.md")},
    )
    assert pickle.loads(pickle.dumps(relation)) == relation
    assert pickle.loads(pickle.dumps(_FragmentsLogicState())) == _FragmentsLogicState()
    held = _FragmentsLogicState("ada", None, Counter(), datetime.now(UTC), datetime.now(UTC))
    assert pickle.loads(pickle.dumps(held)) == held


def test_a_snapshot_taken_before_rows_resumes_with_the_same_fragments():
    state = entity_state()
    old = pickled_as_before_rows(state)
    assert old != pickle.dumps(state)  # the two forms differ: the old one is really old
    assert pickle.loads(old) == state


def test_a_snapshot_taken_before_packing_resumes_with_the_same_fragments():
    state = entity_state()
    old = pickled_as_before_packing(state)
    assert b"FragmentRows" in old and b"FragmentRows" not in pickle.dumps(state)
    assert pickle.loads(old) == state


def test_a_hub_packs_to_a_fraction_of_its_rows():
    """A hub as the scale bench's corpus makes one: a fragment per citing chunk (chunk ids
    are sha256 hex), its descriptions drawn from the phrases its chunks share. Its snapshot
    was 5 MB of rows at 16,000 documents; packed, about a fifth."""
    fragments = {}
    for n in range(2_000):
        chunk_id = "chunk-" + hashlib.sha256(str(n).encode()).hexdigest()
        path = f"news/{2000 + n % 20}/report-{n}.md"
        place = ("Lind", "Elskholm", "Dray")[n % 3]
        said = f"David Melwood spoke for Silverline Labs at the forum in {place}."
        fragments[chunk_id] = EntityFragment("David Melwood", "person", said, chunk_id, path, path)
        mention = f"{chunk_id}|{place.lower()}"
        met = f"David Melwood met the delegates from {place}."
        fragments[mention] = EntityFragment("David Melwood", None, met, chunk_id, path, path)
    state = _FragmentsLogicState("david melwood", fragments)

    packed, rows = len(pickle.dumps(state)), len(pickled_as_before_packing(state))

    assert pickle.loads(pickle.dumps(state)) == state
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
