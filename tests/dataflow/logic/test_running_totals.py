"""The entity and relation steps (dataflow/logic/fragments.py) draft a key with many fragments
from running totals (dataflow/core/tally.py), kept from `tally_over` fragments on and dropped
under half of it, and every draft they emit equals the draft of their fragments."""

import pickle

from dataflow.core.contributions import (
    EntityFragment,
    RelationFragment,
    entity_draft,
    relation_draft,
)
from dataflow.core.messages import TaggedDelta, Ticket
from dataflow.core.steps import EntityDelta, RelationDelta
from dataflow.core.tally import EntityTally, RelationTally
from dataflow.logic.fragments import EntityLogic, RelationLogic
from dataflow.state.codec import SnapshotCodec
from dataflow.state.held_bases import HeldBases

TICKET = Ticket("a.md", "t1")


def entity_logic(resume: bytes | None = None, tally_over: int = 64) -> EntityLogic:
    return EntityLogic(resume, codec=SnapshotCodec(), bases=HeldBases(), tally_over=tally_over)


def said(n: int, text: str = "a mathematician") -> EntityFragment:
    return EntityFragment("Ada", "person", text, f"c{n}", f"doc{n}.md", f"doc{n}.md")


def entity_delta(n: int, fragment: EntityFragment | None = None) -> TaggedDelta:
    """Chunk `n`'s fragment of "ada" added (`fragment`), or retracted (None)."""
    return TaggedDelta(TICKET, f"c{n}", EntityDelta("ada", f"c{n}", fragment))


def emitted(logic, batch):
    out, _ = logic.on_batch(batch)
    [drafted] = out
    return drafted.draft


def test_a_key_keeps_running_totals_from_the_threshold_and_drops_them_under_half():
    logic = entity_logic(tally_over=8)
    draft = emitted(logic, [entity_delta(n, said(n)) for n in range(7)])
    assert logic.state.tally is None
    assert draft == entity_draft("ada", logic.state.fragments)

    draft = emitted(logic, [entity_delta(7, said(7, "a writer"))])
    assert isinstance(logic.state.tally, EntityTally)
    assert draft == entity_draft("ada", logic.state.fragments)
    tally = logic.state.tally

    # Kept and updated while the key has at least half the threshold: the same totals
    draft = emitted(logic, [entity_delta(0), entity_delta(1), entity_delta(2, said(2, "b"))])
    assert logic.state.tally is tally
    assert draft == entity_draft("ada", logic.state.fragments)
    assert draft.descriptions == ("a mathematician", "b", "a writer")  # ties: by path
    assert draft.source_chunk_ids == tuple(f"c{n}" for n in range(2, 8))

    draft = emitted(logic, [entity_delta(n) for n in range(2, 5)])
    assert logic.state.tally is None  # 3 fragments left, under half of 8
    assert draft == entity_draft("ada", logic.state.fragments)

    out, discard = logic.on_batch([entity_delta(n) for n in range(5, 8)])
    assert [d.draft for d in out] == [None] and discard


def test_a_resumed_key_builds_its_totals_again_when_next_touched():
    logic = entity_logic(tally_over=4)
    emitted(logic, [entity_delta(n, said(n)) for n in range(6)])
    logic = entity_logic(pickle.loads(pickle.dumps(logic.snapshot())), tally_over=4)
    assert logic.state.tally is None  # never in a snapshot

    draft = emitted(logic, [entity_delta(0), entity_delta(9, said(9, "a writer"))])
    assert isinstance(logic.state.tally, EntityTally)
    assert draft == entity_draft("ada", logic.state.fragments)


def test_a_relation_keeps_running_totals_too():
    def delta(n: int, strength: float, retracted: bool = False) -> TaggedDelta:
        fragment = RelationFragment("Ada", "Bob", ("met",), "met", strength, f"c{n}", "a", "a")
        return TaggedDelta(
            TICKET, f"c{n}", RelationDelta(("ada", "bob"), f"c{n}", None if retracted else fragment)
        )

    logic = RelationLogic(None, codec=SnapshotCodec(), bases=HeldBases(), tally_over=2)
    draft = emitted(logic, [delta(1, 1e16), delta(2, 1.0)])
    assert isinstance(logic.state.tally, RelationTally)
    draft = emitted(logic, [delta(1, 1e16, retracted=True)])
    assert draft == relation_draft(("ada", "bob"), logic.state.fragments)
    assert draft.weight == 1.0


def test_a_fold_changes_the_fragments_in_place_and_a_snapshot_keeps_its_own():
    """Folds change the key's dict in place (no copy of a hub per touch), so the snapshot
    Bytewax takes at the epoch's end must not see the folds after it."""
    logic = entity_logic(tally_over=4)
    emitted(logic, [entity_delta(n, said(n)) for n in range(6)])
    fragments = logic.state.fragments
    snapshot = logic.snapshot()

    emitted(logic, [entity_delta(0), entity_delta(7, said(7, "a writer"))])

    assert logic.state.fragments is fragments  # the same dict, folded in place
    resumed = entity_logic(pickle.loads(pickle.dumps(snapshot))).state
    assert resumed.fragments == {f"c{n}": said(n) for n in range(6)}
