"""The entity and relation steps' snapshots (dataflow/state/fragments.py): a key without a
log is one packed blob of its fragments' rows, with no class in it and smaller than the
state pickled as objects, and every form resumes as the state it was taken of through the
step's own snapshot and resume."""

import hashlib
import pickle
from collections import Counter
from datetime import UTC, datetime

import zstandard

from dataflow.core.contributions import EntityFragment, RelationFragment
from dataflow.logic.fragments import EntityLogic, RelationLogic
from dataflow.state.codec import SnapshotCodec
from dataflow.state.forms import FragmentRows
from dataflow.state.fragments import FragmentsState, pack_fragments
from dataflow.state.held_bases import HeldBases

CODEC = SnapshotCodec()


def entity_state() -> FragmentsState[str, EntityFragment]:
    fragments = {
        "c1": EntityFragment("Ada", "person", "Ada wrote it.", "c1", "a.md", "a.md", ("ada l",)),
        "c1|bob": EntityFragment("Ada", None, "Ada met Bob.", "c1", "a.md", "a.md"),
    }
    return FragmentsState("ada", fragments, Counter({("a.md", "t1"): 2}))


def relation_state() -> FragmentsState[tuple[str, str], RelationFragment]:
    return FragmentsState(
        ("ada", "bob"),
        {"c1": RelationFragment("Ada", "Bob", ("met",), "d", 1.0, "c1", "a.md", "a.md")},
    )


def resumed(snapshot: bytes, logic=EntityLogic) -> FragmentsState:
    """The state a step resumes with from `snapshot`, pickled and loaded as Bytewax does."""
    return logic(pickle.loads(pickle.dumps(snapshot)), codec=CODEC, bases=HeldBases()).state


def test_a_state_round_trips_through_its_steps_snapshot():
    state = entity_state()
    logic = EntityLogic(None, codec=CODEC, bases=HeldBases())
    logic.state = state
    snapshot = logic.snapshot()
    assert isinstance(snapshot, bytes)
    restored = resumed(snapshot)
    assert restored == state
    assert all(type(f) is EntityFragment for f in restored.fragments.values())
    relation = resumed(pack_fragments(CODEC, relation_state()), RelationLogic)
    assert relation == relation_state()
    assert all(type(f) is RelationFragment for f in relation.fragments.values())
    assert resumed(pack_fragments(CODEC, FragmentsState())) == FragmentsState()
    held = FragmentsState("ada", None, Counter(), datetime.now(UTC), datetime.now(UTC))
    assert resumed(pack_fragments(CODEC, held)) == held


def test_a_snapshot_holds_no_class_and_is_smaller_than_the_state_pickled_as_objects():
    """A relation of one fragment, as most are: pickled as objects, the fragments' class
    and field names are most of the bytes."""
    state = relation_state()
    packed = pack_fragments(CODEC, state)
    assert b"RelationFragment" not in zstandard.ZstdDecompressor().decompress(packed)
    assert len(pickle.dumps(packed)) * 2 < len(pickle.dumps((state.key, state.fragments)))


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
    state = FragmentsState("david melwood", fragments)

    packed = pack_fragments(CODEC, state)
    rows = pickle.dumps((state.key, FragmentRows.of(fragments)), protocol=5)

    assert resumed(packed) == state
    assert len(pickle.dumps(packed)) * 3 < len(rows), (len(packed), len(rows))
