"""The real Bytewax dataflow, end to end into real Redis and Qdrant Edge."""

import math
import threading
import time
from datetime import timedelta

import pytest
from bytewax.testing import TestingSource

from connectors.folder.source import FolderSource, FolderSourceOptions
from connectors.redis.written_lists import SIDE
from connectors.vectors.port import VectorKind
from dataflow.core.documents import DocumentChange, DocumentDelete, DocumentStatus, DocumentUpsert
from dataflow.core.naming import relation_id
from dataflow.logic.extract import HOLD_SECONDS
from tests.dataflow.harness import (
    assert_projection_is_of,
    entry_point_for,
    events,
    fresh_build,
    run_flow,
    stored,
)

ALICE = (
    "Alice Moreau founded Northwind Labs in Lisbon.\n\nNorthwind Labs partnered with Helios Corp."
)
BOB = (
    "Bob Tanaka joined Helios Corp after the Geneva Summit.\n\n"
    "Alice Moreau met Bob Tanaka in Lisbon."
)
CARLA = "Carla Diaz leads the Atlas Project at Northwind Labs."


def assert_stores_equal_fresh_build(components, final_documents, embed):
    index = stored(components)
    expected = fresh_build(final_documents)
    assert index.graph == expected
    assert_projection_is_of(components, expected)
    assert set(index.vectors[VectorKind.ENTITY]) == set(expected.entities)
    assert set(index.vectors[VectorKind.RELATION]) == {
        relation_id(pair) for pair in expected.relations
    }
    assert set(index.vectors[VectorKind.CHUNK]) == set(expected.chunks)
    for key, entity in expected.entities.items():
        vector, payload = index.vectors[VectorKind.ENTITY][key]
        assert vector == pytest.approx(embed(entity.embedding_text), abs=1e-6)
        assert payload == {"entity": key, "name": entity.name}
    for chunk_id, chunk in expected.chunks.items():
        vector, payload = index.vectors[VectorKind.CHUNK][chunk_id]
        assert vector == pytest.approx(embed(chunk.text), abs=1e-6)
        assert payload["doc_id"] == chunk.doc_id
        # What the chunk mentions, after every edit and delete, as a fresh build has it.
        assert payload["entities"] == sorted(
            key for key, e in expected.entities.items() if chunk_id in e.source_chunk_ids
        )
        assert payload["relations"] == sorted(
            relation_id(pair)
            for pair, r in expected.relations.items()
            if chunk_id in r.source_chunk_ids
        )


@pytest.mark.parametrize("workers", [1, 2])
def test_stream_of_upserts_edits_and_deletes_equals_fresh_build(components, workers):
    changes = [
        DocumentUpsert("a.md", ALICE, "a.md"),
        DocumentUpsert("b.md", BOB, "b.md"),
        DocumentUpsert("c.md", CARLA, "c.md"),
        DocumentUpsert("a.md", ALICE.replace("Lisbon", "Porto"), "a.md"),
        DocumentDelete("c.md"),
        DocumentUpsert("b.md", BOB, "b.md"),
    ]
    run_flow(components, events(changes), entry_point_for(workers))
    final = [changes[3], changes[5]]
    embed = lambda text: components.embed([text])[0]  # noqa: E731
    assert_stores_equal_fresh_build(components, final, embed)
    documents = stored(components).graph.documents
    assert {d.status for d in documents.values()} == {DocumentStatus.PROCESSED}
    assert "c.md" not in documents


def test_deleting_a_document_keeps_shared_entities_and_drops_its_relations(components, entry_point):
    changes = [
        DocumentUpsert("a.md", ALICE, "a.md"),
        DocumentUpsert("c.md", CARLA, "c.md"),
        DocumentDelete("a.md"),
    ]
    run_flow(components, events(changes), entry_point)
    graph = stored(components).graph
    assert graph == fresh_build([changes[1]])
    assert graph.entities["northwind labs"].file_paths == ("c.md",)
    assert not any("alice moreau" in pair for pair in graph.relations)
    assert "alice moreau" not in stored(components).vectors[VectorKind.ENTITY]


def test_a_hubs_long_lists_follow_edits_and_deletes_as_a_fresh_build(components, entry_point):
    """A hub cited by more chunks than a record keeps in its hash: its lists live in sorted
    sets, written by the changes its running totals report (`ListChanges`), and end as a
    fresh build has them after edits and deletes."""
    cited = SIDE + 20
    changes: list[DocumentChange] = [
        DocumentUpsert(f"n{n:03}.md", f"Alice Moreau reviewed ledger {n} in Lisbon.", f"n{n:03}.md")
        for n in range(cited)
    ]
    changes += [
        DocumentUpsert(f"n{n:03}.md", f"Carla Diaz reviewed ledger {n} in Porto.", f"n{n:03}.md")
        for n in range(0, 10)
    ]
    changes += [DocumentDelete(f"n{n:03}.md") for n in range(10, 15)]
    changes += [
        DocumentUpsert(f"n{n:03}.md", f"Alice Moreau audited ledger {n} in Lisbon.", f"n{n:03}.md")
        for n in range(12, 14)
    ]
    run_flow(components, events(changes), entry_point)
    final = {change.doc_id: change for change in changes}
    live = [change for change in final.values() if isinstance(change, DocumentUpsert)]
    graph = stored(components).graph
    assert graph == fresh_build(live)
    assert_projection_is_of(components, fresh_build(live))  # the hub's MENTIONS by changes
    alice = graph.entities["alice moreau"]
    assert len(alice.doc_ids) == cited - 13 >= SIDE
    side = components.stores.graph.keys.side_list(
        components.stores.graph.keys.entity("alice moreau"), "doc_ids"
    )
    assert components.stores.graph.client.zcard(side) == len(alice.doc_ids)


CHAT = """\
AdamSmith: The Harbour Board meets on Monday.
BellaJones: Thanks, Adam. I will bring the lease.
AdamSmith: Good. Bella, bring the keys too.
"""
BOARD = "Adam Smith chairs the Harbour Board. Adam signed the lease in March."


ALIAS_CHANGES = [
    DocumentUpsert("chat.md", CHAT, "chat.md"),
    DocumentUpsert("board.md", BOARD, "board.md"),
    DocumentUpsert("chat.md", CHAT.replace("Bella, bring", "Bring"), "chat.md"),
    DocumentUpsert("board.md", BOARD.replace("Adam signed", "He signed"), "board.md"),
]


def test_aliases_follow_edits_exactly_as_a_fresh_build(components, entry_point):
    run_flow(components, events(ALIAS_CHANGES), entry_point)
    graph = stored(components).graph
    assert graph == fresh_build(ALIAS_CHANGES[2:])  # entities' aliases and the index
    assert_projection_is_of(components, fresh_build(ALIAS_CHANGES[2:]))
    assert graph.aliases == {
        "adam": ("adam smith",),
        "adamsmith": ("adam smith",),
        "bellajones": ("bella jones",),
    }


def test_deleting_the_last_document_with_a_short_form_drops_its_aliases(components, entry_point):
    run_flow(components, events([*ALIAS_CHANGES, DocumentDelete("chat.md")]), entry_point)
    graph = stored(components).graph
    assert graph == fresh_build(ALIAS_CHANGES[3:])
    assert_projection_is_of(components, fresh_build(ALIAS_CHANGES[3:]))
    assert graph.aliases == {}
    assert graph.entities["adam smith"].aliases == ()


def test_bad_document_fails_alone_with_its_reason(components, entry_point):
    changes = [
        DocumentUpsert("bad.md", b"\xff\xfe\x00broken", "bad.md"),
        DocumentUpsert("a.md", ALICE, "a.md"),
    ]
    run_flow(components, events(changes), entry_point)
    documents = stored(components).graph.documents
    assert documents["bad.md"].status is DocumentStatus.FAILED
    assert documents["bad.md"].reason
    assert documents["a.md"].status is DocumentStatus.PROCESSED


def test_an_initial_load_commits_as_it_goes_not_all_at_the_end(components, tmp_path):
    """Extracted documents are passed on (and committed) once `chunks_per_round` of their
    chunks are done, while the rest are still being extracted: a one-shot load commits in
    many steps, never all at its end."""
    root = tmp_path / "docs"
    root.mkdir()
    for n in range(40):
        (root / f"doc-{n:02}.md").write_text(
            f"Person{n} Moreau founded Company{n} Labs in City{n}."
        )
    completed: list[int] = []
    committed = threading.Condition()

    def on_commit(batch) -> None:
        with committed:
            completed.append(len(batch.completed))
            committed.notify_all()

    components.on_commit = on_commit
    components.chunks_per_round = 5
    # Extraction is paced by the commits, so the load cannot outrun the dataflow's thread
    # however busy the machine is: the 10n-th document is extracted only once n steps
    # have completed documents. A load that committed only at its end would never get past
    # the tenth document.
    extract, extracted = components.extract_many, []

    def paced(texts):
        with committed:
            steps_needed = len(extracted) // 10
            done = committed.wait_for(lambda: len([c for c in completed if c]) >= steps_needed, 60)
            assert done, f"no commit for {len(extracted)} extracted documents: {completed}"
            extracted.extend(texts)
        return extract(texts)

    components.extract_many = paced
    options = FolderSourceOptions(root, stop_after_scan=True, watch=False, max_batch=5)
    source = FolderSource(options, components.codec)
    run_flow(components, source)
    steps = [count for count in completed if count]
    assert sum(steps) == 40
    assert len(steps) >= 4 and max(steps) <= 20, steps


def open_until(condition, source_events, deadline_seconds: float = 120.0) -> TestingSource:
    """A source that hands on `source_events`, then stays open (ending nothing, as a live
    one does) until `condition()` holds."""

    def items():
        yield from source_events
        deadline = time.monotonic() + deadline_seconds
        while not condition():
            assert time.monotonic() < deadline, "the condition never held"
            yield TestingSource.PAUSE(timedelta(milliseconds=5))

    return TestingSource(items())


def large_document(chunks: int) -> str:
    """A document of about `chunks` chunks (the harness's 60-token chunks, split on blank
    lines), every paragraph naming other people so each chunk has its own entities."""
    return "\n\n".join(
        f"Person{n} Moreau met Person{n + 1} Tanaka at the Atlas Summit in City{n}. "
        f"They agreed that Company{n} Labs would fund Project{n} for three more years."
        for n in range(chunks)
    )


def with_latency(components, seconds: float, at_once: int = 4) -> list[str]:
    """Make extraction take as long as an LLM taking `at_once` calls at a time, `seconds`
    each; returns the texts whose extraction has begun."""
    extract, started = components.extract_many, []

    def slow(texts):
        started.extend(texts)
        time.sleep(seconds * math.ceil(len(texts) / at_once))  # the LLM's latency
        return extract(texts)

    components.extract_many = slow
    return started


def large_then_small(big, small, started, completed, deadline_seconds: float = 60.0):
    """Source events: `big`, then `small` once `big`'s extraction has begun, then open (as
    a live source) until `big` has completed."""
    (big_event,) = events([big])
    yield big_event
    deadline = time.monotonic() + deadline_seconds
    while not started:
        assert time.monotonic() < deadline, "the large document's extraction never began"
        yield TestingSource.PAUSE(timedelta(milliseconds=5))
    (small_event,) = events([small], start=2.0)
    yield small_event
    while "big.md" not in completed:
        assert time.monotonic() < deadline, "the large document never completed"
        yield TestingSource.PAUSE(timedelta(milliseconds=5))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_small_document_overtakes_a_large_one_being_extracted(components, workers):
    """Extraction runs off the dataflow's thread, fairly by document: a one-chunk document
    saved while a large one (one piece: no bound per round) is being extracted completes
    before any of the large one has settled."""
    big, small = (
        DocumentUpsert("big.md", large_document(48), "big.md"),
        DocumentUpsert("small.md", CARLA, "small.md"),
    )
    completed: list[str] = []
    big_settled: list[int] = []
    big_settled_at_small: list[int] = []

    def on_commit(batch) -> None:
        big_settled.extend(
            record.chunks_settled for record in batch.document_upserts if record.doc_id == "big.md"
        )
        completed.extend(done.ticket.doc_id for done in batch.completed)
        if "small.md" in completed and not big_settled_at_small:
            big_settled_at_small.append(max(big_settled, default=0))

    components.on_commit = on_commit
    components.chunks_per_round = 0
    # 48 chunks, 4 at a time: 2.4 s, longer than a finished document waits for a batch
    started = with_latency(components, 0.2)
    assert HOLD_SECONDS < 2
    source = TestingSource(large_then_small(big, small, started, completed))
    run_flow(components, source, entry_point_for(workers))
    assert completed.index("small.md") < completed.index("big.md"), completed
    assert big_settled_at_small == [0], big_settled_at_small
    assert stored(components).graph == fresh_build([big, small])


@pytest.mark.parametrize("workers", [1, 2])
def test_a_large_document_streams_through_in_pieces_showing_its_progress(components, workers):
    """A large document is passed on in pieces of `chunks_per_round` extracted chunks, so
    each write says how many of its changed chunks are done."""
    big, small = (
        DocumentUpsert("big.md", large_document(48), "big.md"),
        DocumentUpsert("small.md", CARLA, "small.md"),
    )
    completed: list[str] = []
    progress: list[tuple[int, int]] = []

    def on_commit(batch) -> None:
        progress.extend(
            (record.chunks_settled, record.chunks_changed)
            for record in batch.document_upserts
            if record.doc_id == "big.md" and record.status is DocumentStatus.PROCESSING
        )
        completed.extend(done.ticket.doc_id for done in batch.completed)

    components.on_commit = on_commit
    components.chunks_per_round = 4
    started = with_latency(components, 0.04)
    source = TestingSource(large_then_small(big, small, started, completed))
    run_flow(components, source, entry_point_for(workers))
    assert completed.index("small.md") < completed.index("big.md"), (completed, progress)
    changed = {total for _, total in progress}
    assert len(changed) == 1 and changed.pop() >= 40, progress
    settled = [done for done, _ in progress]
    assert settled == sorted(settled), progress
    assert len({done for done in settled if 0 < done < 40}) >= 3, progress
    index = stored(components)
    assert index.graph == fresh_build([big, small])  # PROCESSED records carry no progress
