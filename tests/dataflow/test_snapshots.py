"""What the keyed steps' snapshots hold (dataflow/flow.py): an entity's or relation's
snapshot is one packed blob of its fragments' rows (dataflow/core/snapshots.py), smaller
than the state pickled as objects; a document's or chunk's snapshot is its state's packed
bytes."""

import hashlib
import pickle
import sqlite3
import threading
from collections import Counter
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import bytewax.operators as op
import zstandard
from bytewax.dataflow import Dataflow
from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.testing import TestingSource, cluster_main, run_main

from dataflow.core import snapshots
from dataflow.core.contributions import EntityFragment, FragmentRows, RelationFragment
from dataflow.core.steps import DocumentState
from dataflow.flow import _EntityLogic, _FragmentsLogicState, _RelationLogic, packed_flat_map


def entity_state() -> _FragmentsLogicState[str, EntityFragment]:
    fragments = {
        "c1": EntityFragment("Ada", "person", "Ada wrote it.", "c1", "a.md", "a.md", ("ada l",)),
        "c1|bob": EntityFragment("Ada", None, "Ada met Bob.", "c1", "a.md", "a.md"),
    }
    return _FragmentsLogicState("ada", fragments, Counter({("a.md", "t1"): 2}))


def resumed(snapshot: bytes, logic=_EntityLogic) -> _FragmentsLogicState:
    """The state a step resumes with from `snapshot`, pickled and loaded as Bytewax does."""
    return logic(pickle.loads(pickle.dumps(snapshot)), timedelta(0)).state


def pickled_as_rows(state: _FragmentsLogicState) -> bytes:
    """`state` pickled as an object, its fragments as `FragmentRows`."""
    return pickle.dumps((state.key, FragmentRows.of(state.fragments)), protocol=5)


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


def test_a_snapshot_holds_no_class_and_is_smaller_than_the_state_pickled_as_objects():
    """A relation of one fragment, as most are: pickled as objects, the fragments' class
    and field names are most of the bytes."""
    state = relation_state()
    snapshot = pickle.dumps(state.pack())
    assert b"RelationFragment" not in zstandard.ZstdDecompressor().decompress(state.pack())
    assert len(snapshot) * 2 < len(pickle.dumps((state.key, state.fragments), protocol=5))


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

    packed, rows = len(pickle.dumps(state.pack())), len(pickled_as_rows(state))

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


# --- the document and chunk steps: states that pack themselves (`packed_flat_map`) ---


def counted_paths(state: DocumentState | None, path: str) -> tuple[DocumentState, list[int]]:
    """A document step stand-in: the state counts the item's arrivals in its chunk ids."""
    seen = state.chunk_ids if state is not None else ()
    new = DocumentState(f"sha256:{len(seen) + 1}", path, (*seen, f"chunk-{len(seen)}"))
    return new, [len(new.chunk_ids)]


def run_counting(run: int, paths: list[str], recovery: Path) -> list[tuple[str, int]]:
    flow = Dataflow("kgstream")
    # An input of each run's own, since the testing source resumes at its offset.
    items = op.input(f"in_{run}", flow, TestingSource(paths))
    keyed = op.key_on("key", items, lambda path: path)
    counts = packed_flat_map("document", keyed, counted_paths, DocumentState.unpacked)
    out: list[tuple[str, int]] = []
    op.inspect("out", counts, lambda _step, item: out.append(item))
    run_main(flow, recovery_config=RecoveryConfig(str(recovery)))
    return out


def test_a_step_of_states_that_pack_themselves_snapshots_their_bytes_and_resumes_from_them(
    tmp_path,
):
    """`packed_flat_map` snapshots `packed()` as bytes (no restore function named in each
    row) and resumes each key from them."""
    init_db_dir(tmp_path, 1)
    assert run_counting(1, ["a.md", "b.md", "a.md"], tmp_path) == [
        ("a.md", 1),
        ("b.md", 1),
        ("a.md", 2),
    ]
    step = "kgstream.document.stateful.stateful_batch"
    with closing(sqlite3.connect(tmp_path / "part-0.sqlite3")) as connection:
        rows = dict(
            connection.execute(
                "SELECT state_key, ser_change FROM snaps WHERE step_id = ? ORDER BY snap_epoch",
                (step,),
            ).fetchall()
        )
    assert set(rows) == {"a.md", "b.md"}
    snapshot = pickle.loads(rows["a.md"])
    assert isinstance(snapshot, bytes)
    assert DocumentState.unpacked(snapshot).chunk_ids == ("chunk-0", "chunk-1")

    assert run_counting(2, ["a.md", "b.md"], tmp_path) == [("a.md", 3), ("b.md", 2)]
