"""A big key's snapshot is its last whole packing and the changes packed since
(dataflow/core/fragment_log.py): a snapshot packs only what changed, the key is packed whole
again once the pieces reach `REBASE` of the base, and every snapshot resumes as the state it
was taken of, through the real Bytewax recovery too, after a crash between snapshots."""

import pickle
import sqlite3
import time
from contextlib import closing
from datetime import timedelta
from itertools import chain

import pytest
from bytewax.testing import TestingSource, run_main
from hypothesis import given, settings
from hypothesis import strategies as st

from dataflow.core import fragment_log
from dataflow.core.contributions import EntityFragment, FragmentRows
from dataflow.core.documents import DocumentDelete, DocumentStatus, DocumentUpsert, content_hash
from dataflow.core.messages import TaggedDelta, Ticket
from dataflow.core.snapshots import is_packed, unpack
from dataflow.core.steps import EntityDelta
from dataflow.flow import _EntityLogic, build_flow
from kgstream.indexer import recovery_config
from tests.dataflow.harness import events, fresh_build, stored


def fragment(n: int, said: str = "spoke") -> EntityFragment:
    chunk = f"chunk-{n}"
    return EntityFragment("Ada", "person", f"Ada {said} in note {n}.", chunk, f"{n}.md", f"{n}.md")


def delta(contribution_id: str, value: EntityFragment | None) -> TaggedDelta:
    chunk_id = contribution_id.split("|")[0]
    return TaggedDelta(Ticket("ada.md", "t1"), chunk_id, EntityDelta("ada", contribution_id, value))


def logic_of(resume=None, log_over=8) -> _EntityLogic:
    return _EntityLogic(resume, timedelta(0), tally_over=1_000, log_over=log_over)


def snapshotted(logic: _EntityLogic) -> bytes:
    """The logic's snapshot, pickled and loaded as Bytewax does."""
    return pickle.loads(pickle.dumps(logic.snapshot()))


def logged(snapshot: bytes) -> tuple[bytes, tuple[bytes, ...]]:
    """The base and pieces of a snapshot in the log form."""
    assert not is_packed(snapshot), "packed whole, not as a log"
    _key, base, pieces, *_ = pickle.loads(snapshot)
    return base, pieces


def test_a_snapshot_of_a_big_key_packs_only_what_changed_since_the_last():
    logic = logic_of()
    logic.on_batch([delta(f"c{n}", fragment(n)) for n in range(20)])
    base, pieces = logged(snapshotted(logic))
    assert pieces == ()

    logic.on_batch(
        [delta("c3", fragment(3, "wrote")), delta("c4", None), delta("c20", fragment(20))]
    )
    snapshot = snapshotted(logic)

    next_base, (piece,) = logged(snapshot)
    assert next_base == base  # not packed again
    added, removed = unpack(piece)
    assert set(added) == {"c3", "c20"} and removed == ("c4",)
    assert FragmentRows(EntityFragment, added).restore()["c3"] == fragment(3, "wrote")
    assert logic_of(snapshot).state == logic.state


def test_a_big_key_is_packed_whole_again_once_its_pieces_reach_half_its_base():
    logic = logic_of()
    logic.on_batch([delta(f"c{n}", fragment(n)) for n in range(40)])
    base, _ = logged(snapshotted(logic))
    pieces: tuple[bytes, ...] = ()
    for n in range(40):
        logic.on_batch([delta(f"c{n}", fragment(n, "wrote"))])
        snapshot = snapshotted(logic)
        assert logic_of(snapshot).state == logic.state
        new_base, new_pieces = logged(snapshot)
        if new_base != base:
            break
        pieces = new_pieces
    else:
        pytest.fail("40 changes of a 40-fragment key never packed it whole again")
    assert new_pieces == ()
    assert sum(map(len, pieces)) < fragment_log.REBASE * len(base)  # not before it was due
    assert pieces  # the snapshots before it packed only their changes


def test_a_key_that_shrinks_under_half_the_threshold_is_packed_whole_again():
    logic = logic_of()
    logic.on_batch([delta(f"c{n}", fragment(n)) for n in range(8)])
    logged(snapshotted(logic))
    logic.on_batch([delta(f"c{n}", None) for n in range(5)])
    snapshot = snapshotted(logic)
    assert is_packed(snapshot)
    assert logic_of(snapshot).state == logic.state


def test_the_snapshot_after_the_end_of_the_input_holds_no_pieces():
    """So a stopped index's recovery database holds each big key as one packing."""
    logic = logic_of()
    logic.on_batch([delta(f"c{n}", fragment(n)) for n in range(20)])
    logged(snapshotted(logic))
    logic.on_batch([delta("c1", None)])
    assert len(logged(snapshotted(logic))[1]) == 1
    logic.on_batch([delta("c2", None)])
    logic.on_eof()
    snapshot = snapshotted(logic)
    assert logged(snapshot)[1] == ()
    assert logic_of(snapshot).state == logic.state


changes = st.lists(
    st.lists(
        st.tuples(st.integers(0, 24), st.one_of(st.none(), st.sampled_from(["spoke", "wrote"]))),
        min_size=1,
        max_size=12,
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(batches=changes, resume_after=st.lists(st.booleans(), min_size=40, max_size=40))
def test_every_snapshot_resumes_as_the_state_it_was_taken_of(batches, resume_after):
    """Folds, snapshots after each batch, and resumes from some of them and goes on: each
    snapshot resumes as the state it was taken of, whatever the form it took."""
    logic = logic_of(log_over=6)
    for batch, resume in zip(batches, resume_after, strict=False):
        logic.on_batch(
            [delta(f"c{n}", fragment(n, said) if said is not None else None) for n, said in batch]
        )
        if not logic.state.fragments:
            logic = logic_of(log_over=6)  # Bytewax discards an empty key
            continue
        snapshot = snapshotted(logic)
        resumed = logic_of(snapshot, log_over=6)
        assert resumed.state == logic.state
        if resume:
            logic = resumed


# --- through the real dataflow and Bytewax recovery --------------------------------------

HUB = "Baltic Line"


def note(n: int, edit: str = "") -> DocumentUpsert:
    text = f"Port Authority {n} signed with {HUB} in Riga.{edit}\n\n{HUB} sails from Harbour {n}."
    return DocumentUpsert(f"note-{n}.md", text, f"note-{n}.md")


def committed(graph, change) -> bool:
    """Whether the stores show `change`'s whole effect."""
    stored_document = graph.get_documents([change.doc_id]).get(change.doc_id)
    if isinstance(change, DocumentDelete):
        return stored_document is None
    return (
        stored_document is not None
        and stored_document.record.status is DocumentStatus.PROCESSED
        and stored_document.record.content_hash == content_hash(change.content)
    )


def one_at_a_time(graph, source_events, deadline_seconds: float = 120.0):
    """`source_events`, each handed on once the one before it is committed, so that each
    lands in epochs of its own."""
    for event in source_events:
        yield event
        deadline = time.monotonic() + deadline_seconds
        while not committed(graph, event.change):
            assert time.monotonic() < deadline, f"{event.change.doc_id} was never committed"
            yield TestingSource.PAUSE(timedelta(milliseconds=5))


def test_a_run_that_crashes_between_snapshots_resumes_from_a_log_and_equals_a_fresh_build(
    components, tmp_path, monkeypatch
):
    """The harness snapshots keys of four fragments or more as logs (and here never packs
    one whole again, so every piece stays). A run aborted after edits and deletes, each in
    epochs of its own, leaves the hub's last committed snapshot a base and pieces; the next
    run resumes it from them and ends equal to a fresh build."""
    monkeypatch.setattr(fragment_log, "REBASE", 1_000.0)
    before = [note(n) for n in range(8)]
    before += [note(1, " Twice."), DocumentDelete("note-2.md"), note(8), note(3, " Again.")]
    after = [note(4, " Later."), DocumentDelete("note-5.md"), note(9)]
    data = tmp_path / "data"

    def run(source: TestingSource) -> None:
        flow = build_flow(source, components)
        run_main(flow, epoch_interval=timedelta(0), recovery_config=recovery_config(data)[0])

    graph = components.stores.graph
    first = chain(one_at_a_time(graph, events(before)), [TestingSource.ABORT()])
    run(TestingSource(first))  # ends at the abort as a crash would: no final snapshot
    assert "note-9.md" not in stored(components).graph.documents
    (partition,) = (data / "recovery").glob("part-*.sqlite3")
    with closing(sqlite3.connect(partition)) as connection:
        rows = connection.execute(
            "SELECT ser_change FROM snaps WHERE step_id LIKE '%entity%' AND ser_change IS NOT NULL"
            " AND snap_epoch = (SELECT MAX(snap_epoch) FROM snaps AS s"
            "  WHERE s.step_id = snaps.step_id AND s.state_key = snaps.state_key)"
        ).fetchall()
    snapshots = [pickle.loads(change) for (change,) in rows]
    hub = [pickle.loads(s) for s in snapshots if not is_packed(s) and b"baltic line" in s]
    assert [key for key, *_ in hub] == ["baltic line"]
    assert len(hub[0][2]) >= 3, "the hub's last snapshot holds fewer pieces than its edits"

    run(TestingSource([*events(before), *events(after, start=100.0)]))  # resumes at after[0]

    assert stored(components).graph == fresh_build([*before, *after])
