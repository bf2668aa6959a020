"""A big key's snapshot is the changes packed since its last whole packing, whose bytes
the holder step keeps (dataflow/state/fragment_log.py): a snapshot packs only what changed
and does not hold the base, the key is packed whole again (and the new base handed on) once
the pieces reach the policy's share of the base or its most pieces, and every snapshot
resumes as the state it was taken of, through the real Bytewax recovery too, after a crash
between snapshots, whichever of the two steps resumes first."""

import itertools
import multiprocessing
import pickle
import sqlite3
import time
from contextlib import closing
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import chain

import pytest
from bytewax.testing import TestingSource, run_main
from hypothesis import given, settings
from hypothesis import strategies as st

from dataflow.clock import Clock
from dataflow.core.contributions import EntityFragment
from dataflow.core.documents import DocumentDelete, DocumentStatus, DocumentUpsert, content_hash
from dataflow.core.messages import EntityDrafted, TaggedDelta, Ticket
from dataflow.core.steps import EntityDelta
from dataflow.flow import build_flow
from dataflow.logic.fragments import BaseHolder, EntityLogic
from dataflow.state.codec import SnapshotCodec, is_packed
from dataflow.state.errors import MissingBaseError
from dataflow.state.forms import FragmentRows
from dataflow.state.fragment_log import HeldBase, LogPolicy
from dataflow.state.held_bases import HeldBases
from kgstream.indexer import recovery_partitions
from tests.dataflow.harness import assert_projection_is_of, events, fresh_build, stored
from tests.support.ports import free_ports


def fragment(n: int, said: str = "spoke") -> EntityFragment:
    chunk = f"chunk-{n}"
    return EntityFragment("Ada", "person", f"Ada {said} in note {n}.", chunk, f"{n}.md", f"{n}.md")


def delta(contribution_id: str, value: EntityFragment | None) -> TaggedDelta:
    chunk_id = contribution_id.split("|")[0]
    return TaggedDelta(Ticket("ada.md", "t1"), chunk_id, EntityDelta("ada", contribution_id, value))


CODEC = SnapshotCodec()


def logic_of(resume=None, log_over=8, bases: HeldBases | None = None, **options) -> EntityLogic:
    return EntityLogic(
        resume,
        codec=CODEC,
        bases=bases if bases is not None else HeldBases(),
        tally_over=1_000,
        logs=LogPolicy(over=log_over),
        **options,
    )


def bytewax_copy(value):
    """`value` pickled and loaded, as Bytewax stores a snapshot and resumes it."""
    return pickle.loads(pickle.dumps(value))


class Key:
    """One key of the entity step and of its holder step, driven as Bytewax drives them:
    what the key hands on goes to the holder, and each epoch snapshots the steps touched.
    `bases` is the process's channel between the two steps."""

    def __init__(self, log_over: int = 8) -> None:
        self.log_over = log_over
        self.bases = HeldBases()
        self.logic = logic_of(log_over=log_over, bases=self.bases)
        self.holder: BaseHolder | None = None
        self.held_snapshot: tuple[bytes, bytes] | None = None  # the holder's last
        self.handed: list[HeldBase] = []

    def fold(self, values: list[TaggedDelta]) -> list[object]:
        emitted, _ = self.logic.on_batch(values)
        return self.take(emitted)

    def take(self, emitted) -> list[object]:
        emitted = list(emitted)
        bases = [item for item in emitted if isinstance(item, HeldBase)]
        if bases:
            self.handed += bases
            holder = self.holder or BaseHolder(None, self.bases)
            _, discarded = holder.on_batch(bases)
            self.holder = None if discarded else holder
            self.held_snapshot = None if discarded else bytewax_copy(holder.snapshot())
        return [item for item in emitted if not isinstance(item, HeldBase)]

    def snapshot(self) -> bytes:
        return bytewax_copy(self.logic.snapshot())

    def resumed(self, snapshot: bytes) -> "Key":
        """The key resumed (in a new process) from `snapshot` and its holder's last
        snapshot, holder first."""
        key = Key(self.log_over)
        if self.held_snapshot is not None:
            key.holder = BaseHolder(self.held_snapshot, key.bases)
            key.held_snapshot = self.held_snapshot
        key.logic = logic_of(snapshot, log_over=self.log_over, bases=key.bases)
        key.logic.on_notify()  # a resumed key claims its base when it is next woken
        assert key.logic.state.unresolved is None, "the holder left no base for the key"
        return key


def held(snapshot: bytes) -> tuple[bytes, tuple[bytes, ...]]:
    """The base id and pieces of a snapshot that names its base in the holder."""
    assert not is_packed(snapshot), "packed whole, not as a log"
    state = pickle.loads(snapshot)
    assert len(state) == 8, "the base is in the snapshot, not in the holder"
    _key, base_id, _size, pieces, *_ = state
    return base_id, pieces


def test_a_snapshot_of_a_big_key_packs_only_what_changed_and_not_its_base():
    key = Key()
    key.fold([delta(f"c{n}", fragment(n)) for n in range(20)])
    (handed,) = key.handed
    base_id, pieces = held(key.snapshot())
    assert base_id == handed.base_id and pieces == ()

    key.fold([delta("c3", fragment(3, "wrote")), delta("c4", None), delta("c20", fragment(20))])
    snapshot = key.snapshot()

    assert len(key.handed) == 1  # the base is not handed on again
    next_id, (piece,) = held(snapshot)
    assert next_id == base_id
    assert handed.base is not None and handed.base not in snapshot
    added, removed = CODEC.unpack(piece)
    assert set(added) == {"c3", "c20"} and removed == ("c4",)
    assert FragmentRows(EntityFragment, added).restore()["c3"] == fragment(3, "wrote")
    assert key.resumed(snapshot).logic.state == key.logic.state


def test_a_big_key_is_packed_whole_again_once_its_pieces_reach_half_its_base():
    key = Key()
    key.fold([delta(f"c{n}", fragment(n)) for n in range(40)])
    key.snapshot()
    (first,) = key.handed
    assert first.base is not None
    pieces: tuple[bytes, ...] = ()
    for n in range(40):
        key.fold([delta(f"c{n}", fragment(n, "wrote"))])
        if len(key.handed) > 1:
            break
        snapshot = key.snapshot()
        assert key.resumed(snapshot).logic.state == key.logic.state
        pieces = held(snapshot)[1]
    else:
        pytest.fail("40 changes of a 40-fragment key never packed it whole again")
    snapshot = key.snapshot()
    assert held(snapshot) == (key.handed[-1].base_id, ())
    rebase = LogPolicy().rebase
    assert sum(map(len, pieces)) >= rebase * len(first.base)  # when due, not before
    assert sum(map(len, pieces[:-1])) < rebase * len(first.base)
    assert key.resumed(snapshot).logic.state == key.logic.state


def test_a_huge_key_is_packed_whole_again_once_its_pieces_reach_a_fixed_size():
    """So a key's row stays small whatever its size: here a tenth of the base."""
    key = Key()
    key.fold([delta(f"c{n}", fragment(n)) for n in range(400)])
    key.snapshot()
    (first,) = key.handed
    assert first.base is not None
    key.logic.logs = LogPolicy(over=key.log_over, most_pieces=len(first.base) // 10)
    sizes = []
    for n in range(400):
        key.fold([delta(f"c{n}", fragment(n, "wrote"))])
        sizes.append(len(key.snapshot()))
        if len(key.handed) > 1:
            break
    else:
        pytest.fail("a key whose pieces passed MOST_PIECES was never packed whole again")
    assert max(sizes) < len(first.base) // 5


def test_a_key_that_shrinks_under_half_the_threshold_is_packed_whole_and_its_base_dropped():
    key = Key()
    key.fold([delta(f"c{n}", fragment(n)) for n in range(8)])
    held(key.snapshot())
    assert key.holder is not None
    key.fold([delta(f"c{n}", None) for n in range(5)])
    snapshot = key.snapshot()
    assert is_packed(snapshot)
    assert key.holder is None and key.held_snapshot is None  # told the key holds none
    assert logic_of(snapshot).state == key.logic.state


def test_the_snapshot_after_the_end_of_the_input_is_whole_and_the_holder_lets_go():
    """So a stopped index's recovery database holds each big key as one packing, once."""
    key = Key()
    key.fold([delta(f"c{n}", fragment(n)) for n in range(20)])
    held(key.snapshot())
    key.fold([delta("c1", None)])
    assert len(held(key.snapshot())[1]) == 1
    key.fold([delta("c2", None)])
    key.take(key.logic.on_eof()[0])
    snapshot = key.snapshot()
    _key, _base, pieces, *_ = pickle.loads(snapshot)
    assert pieces == ()
    assert key.holder is None
    assert logic_of(snapshot).state == key.logic.state


def test_a_key_resumed_before_its_holder_waits_for_its_base_and_keeps_what_came_meanwhile():
    """Bytewax builds one step's resumed keys before it runs them, but not before another
    step's: a delta may reach a resumed key before its holder has left the base."""
    key = Key()
    key.fold([delta(f"c{n}", fragment(n)) for n in range(12)])
    key.snapshot()
    key.fold([delta("c1", fragment(1, "wrote"))])
    snapshot, holder_snapshot = key.snapshot(), key.held_snapshot
    assert holder_snapshot is not None

    bases = HeldBases()  # the resumed process's
    early = logic_of(snapshot, bases=bases)  # its holder not resumed yet
    emitted, complete = early.on_batch([delta("c2", None), delta("c12", fragment(12))])
    assert list(emitted) == [] and not complete
    retry = early.notify_at()
    assert retry is not None and retry <= datetime.now(UTC) + timedelta(seconds=1)
    assert list(early.on_notify()[0]) == []  # still no base: nothing folded, nothing lost
    waiting = bytewax_copy(early.snapshot())  # a crash here keeps the waiting deltas
    early = logic_of(waiting, bases=bases)

    BaseHolder(holder_snapshot, bases)  # the holder resumes: its base is left for the key
    emitted, _ = early.on_notify()
    (drafted,) = [item for item in emitted if isinstance(item, EntityDrafted)]
    key.fold([delta("c2", None), delta("c12", fragment(12))])
    assert early.state == key.logic.state
    assert drafted.draft is not None
    cited = drafted.draft.source_chunk_ids
    assert "chunk-12" in cited and "chunk-2" not in cited and len(cited) == 12
    assert early.notify_at() is None


def test_a_key_whose_base_never_comes_stops_the_run_with_the_reason():
    key = Key()
    key.fold([delta(f"c{n}", fragment(n)) for n in range(12)])
    seconds = itertools.count(0.0, 60.0)  # a minute passes between two looks
    clock = Clock(monotonic=lambda: next(seconds))
    orphan = logic_of(key.snapshot(), bases=HeldBases(wait_seconds=90.0), clock=clock)
    orphan.on_batch([delta("c1", None)])
    orphan.on_batch([delta("c2", None)])
    with pytest.raises(MissingBaseError, match="recovery database is damaged"):
        orphan.on_batch([delta("c3", None)])


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
    snapshot resumes as the state it was taken of, whatever the form it took, with the
    holder's last snapshot."""
    key = Key(log_over=6)
    for batch, resume in zip(batches, resume_after, strict=False):
        key.fold(
            [delta(f"c{n}", fragment(n, said) if said is not None else None) for n, said in batch]
        )
        if not key.logic.state.fragments:
            assert key.holder is None  # told the key holds none
            key = Key(log_over=6)  # Bytewax discards an empty key
            continue
        resumed = key.resumed(key.snapshot())
        assert resumed.logic.state == key.logic.state
        if resume:
            key = resumed


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
    components, tmp_path
):
    """The harness snapshots keys of four fragments or more as logs (and here never packs
    one whole again, so every piece stays). A run aborted after edits and deletes, each in
    epochs of its own, leaves the hub's last committed snapshot pieces that name its base in
    the holder step; the next run resumes it from both and ends equal to a fresh build."""
    components.snapshot_logs = replace(components.snapshot_logs, rebase=1_000.0)
    before = [note(n) for n in range(8)]
    before += [note(1, " Twice."), DocumentDelete("note-2.md"), note(8), note(3, " Again.")]
    after = [note(4, " Later."), DocumentDelete("note-5.md"), note(9)]
    data = tmp_path / "data"

    def run(source: TestingSource) -> None:
        flow = build_flow(source, components)
        recovery = recovery_partitions(data).config()
        run_main(flow, epoch_interval=timedelta(0), recovery_config=recovery)

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
        bases = connection.execute(
            "SELECT state_key FROM snaps WHERE step_id LIKE '%entity_base%'"
            " AND ser_change IS NOT NULL"
        ).fetchall()
    snapshots = [pickle.loads(change) for (change,) in rows]
    hub = [pickle.loads(s) for s in snapshots if not is_packed(s) and b"baltic line" in s]
    assert [key for key, *_ in hub] == ["baltic line"]
    assert len(hub[0]) == 8, "the hub's last snapshot holds its base"
    assert len(hub[0][3]) >= 3, "the hub's last snapshot holds fewer pieces than its edits"
    assert ("baltic line",) in bases

    run(TestingSource([*events(before), *events(after, start=100.0)]))  # resumes at after[0]

    assert stored(components).graph == fresh_build([*before, *after])


def resume_in_a_cluster(proc_id, addresses, redis_url, llm_url, workspace, work, out, changes):
    """One process of a two-process cluster resuming from `work`/data/recovery (a fresh
    interpreter): each big key's base must be on its key's worker, or the key waits for it
    and the run stops; puts how many keys claimed their base here on `out`."""
    from bytewax.recovery import RecoveryConfig
    from bytewax.testing import cluster_main

    from connectors.redis.projection_control import ProjectionMode
    from tests.dataflow.harness import new_components

    components = new_components(
        redis_url, llm_url, work / f"vectors-{proc_id}", workspace, ProjectionMode.ON
    )
    bases = HeldBases(wait_seconds=20.0)  # a base in the other process: fail in this test's time
    dataflow = build_flow(TestingSource(changes), components, bases=bases)
    recovery = RecoveryConfig(str(work / "data" / "recovery"))
    cluster_main(
        dataflow, addresses, proc_id, epoch_interval=timedelta(0), recovery_config=recovery
    )
    components.stores.vectors.close()
    out.put((proc_id, bases.claimed))


def test_a_crash_resumed_by_a_cluster_of_another_shape_finds_each_base_beside_its_key(
    components, falkordb_server, llm_server, tmp_path
):
    """Bytewax routes a key to the same worker in every step, so after a crash in one
    process, two processes resume it and each big key claims its base from the holder step
    in its own process (keys of both processes claim one here), and the stores equal a
    fresh build."""
    components.snapshot_logs = replace(components.snapshot_logs, rebase=1_000.0)
    before = [note(n) for n in range(8)]
    before += [note(1, " Twice."), DocumentDelete("note-2.md"), note(8), note(3, " Again.")]
    after = [note(4, " Later."), DocumentDelete("note-5.md"), note(9)]
    first = chain(one_at_a_time(components.stores.graph, events(before)), [TestingSource.ABORT()])
    config = recovery_partitions(tmp_path / "data").config()
    run_main(
        build_flow(TestingSource(first), components),
        epoch_interval=timedelta(0),
        recovery_config=config,
    )

    # Fresh interpreters: a process forked after a Bytewax run may not run a cluster.
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    addresses = [f"127.0.0.1:{port}" for port in free_ports(2)]
    workspace = components.stores.graph.workspace
    # The Redis of `components` (with the graph module: the resumed processes write the
    # projection as the first run did).
    shared = (falkordb_server.url, llm_server.base_url, workspace, tmp_path, results)
    changes = [*events(before), *events(after, start=100.0)]
    processes = [
        context.Process(
            target=resume_in_a_cluster, args=(i, addresses, *shared), kwargs={"changes": changes}
        )
        for i in (0, 1)
    ]
    for process in processes:
        process.start()
    reported = dict(results.get(timeout=120) for _ in processes)
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0

    assert all(reported.values()), reported  # keys of each process claimed their base there
    expected = fresh_build([*before, *after])
    assert stored(components).graph == expected
    assert_projection_is_of(components, expected)
