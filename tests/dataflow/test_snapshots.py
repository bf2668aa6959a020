"""What the entity and relation steps' snapshots hold (dataflow/flow.py): a state pickles
its fragments as rows (`FragmentRows`), and a snapshot taken before that still resumes."""

import copyreg
import io
import pickle
from collections import Counter

from dataflow.core.contributions import EntityFragment, RelationFragment
from dataflow.flow import _FragmentsLogicState


def entity_state() -> _FragmentsLogicState[str, EntityFragment]:
    fragments = {
        "c1": EntityFragment("Ada", "person", "Ada wrote it.", "c1", "a.md", "a.md", ("ada l",)),
        "c1|bob": EntityFragment("Ada", None, "Ada met Bob.", "c1", "a.md", "a.md"),
    }
    return _FragmentsLogicState("ada", fragments, Counter({("a.md", "t1"): 2}))


def pickled_as_before_rows(state: object) -> bytes:
    """`state` pickled as the code before rows pickled it: the dataclass's own fields."""

    class Before(pickle.Pickler):
        def reducer_override(self, obj):
            if isinstance(obj, _FragmentsLogicState):
                return copyreg.__newobj__, (type(obj),), dict(vars(obj))
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


def test_a_snapshot_taken_before_rows_resumes_with_the_same_fragments():
    state = entity_state()
    old = pickled_as_before_rows(state)
    assert old != pickle.dumps(state)  # the two forms differ: the old one is really old
    assert pickle.loads(old) == state
