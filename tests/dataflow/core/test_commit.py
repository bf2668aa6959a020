"""A document's commit when messages overtake each other (as they do across workers), and
the write batches of the partitioned commit (tests/connectors/test_writes.py turns them into
store writes)."""

import dataclasses
from collections import Counter

from dataflow.core.chunking import Chunk
from dataflow.core.commit import DocumentCommit, merge_batches, records_batch, written_acks
from dataflow.core.contributions import EntityRecord, ListChanges
from dataflow.core.documents import DocumentRecord, DocumentStatus
from dataflow.core.messages import (
    Ack,
    ChunkSettled,
    DocumentPending,
    EntityRendered,
    Ticket,
)

KEPT = Chunk("chunk-kept", "a.md", 1, "unchanged paragraph", 3, "a.md")
OLD = Chunk("chunk-old", "a.md", 0, "old paragraph", 2, "a.md")
NEW = Chunk("chunk-new", "a.md", 0, "new paragraph", 2, "a.md")


def pending(token: str, chunks, removed=(), awaiting=()) -> DocumentPending:
    record = DocumentRecord(
        "a.md", DocumentStatus.PROCESSED, "a.md", token, tuple(c.chunk_id for c in chunks)
    )
    return DocumentPending(Ticket("a.md", token), record, tuple(chunks), removed, awaiting, 1.0)


def settled(token: str, chunk: Chunk, deltas: int = 0) -> ChunkSettled:
    return ChunkSettled(Ticket("a.md", token), chunk.chunk_id, deltas, (1.0, 0.0), chunk)


def ack(token: str, chunk: Chunk, count: int) -> Ack:
    return Ack(Ticket("a.md", token), chunk.chunk_id, count)


def chunk_vectors(commit: DocumentCommit) -> tuple[set[str], set[str]]:
    """The chunks whose vectors the next batch upserts, and those whose vectors it deletes."""
    batch = commit.flush()
    return {chunk.chunk_id for chunk, _, _ in batch.chunk_vectors}, set(batch.chunk_vector_deletes)


def test_a_kept_chunk_keeps_its_vector_when_the_next_version_overtakes_its_settle():
    commit = DocumentCommit()
    commit.add(pending("v1", [OLD, KEPT], awaiting=("chunk-old", "chunk-kept")))
    commit.add(
        pending("v2", [NEW, KEPT], removed=("chunk-old",), awaiting=("chunk-old", "chunk-new"))
    )
    commit.add(settled("v1", KEPT))  # v1 is superseded by now, its chunk is still current
    commit.add(settled("v1", OLD))  # ... and this one is gone: no resurrection
    commit.add(settled("v2", NEW))
    upserts, deletes = chunk_vectors(commit)
    assert upserts == {"chunk-kept", "chunk-new"}
    assert deletes == {"chunk-old"}


def test_a_settle_arriving_before_its_document_is_applied_when_the_document_arrives():
    commit = DocumentCommit()
    commit.add(settled("v1", KEPT))
    commit.add(pending("v1", [KEPT], awaiting=("chunk-kept",)))
    upserts, _ = chunk_vectors(commit)
    assert upserts == {"chunk-kept"}
    assert commit.idle()  # the document completed, and that write is flushed


def test_a_document_completes_only_with_the_acknowledgement_of_its_last_delta():
    commit = DocumentCommit()
    commit.add(ack("v1", OLD, 2))  # written renders can overtake the settle and the pending
    commit.add(settled("v1", OLD, deltas=3))
    commit.add(pending("v1", [OLD], awaiting=("chunk-old",)))
    first = commit.flush()
    assert first.document_upserts[0].status is DocumentStatus.PROCESSING and not first.completed
    commit.add(ack("v1", OLD, 1))
    done = commit.flush()
    assert [d.ticket.token for d in done.completed] == ["v1"]
    assert done.document_upserts[0].status is DocumentStatus.PROCESSED
    assert commit.idle()


def test_a_version_in_flight_shows_how_many_of_its_changed_chunks_have_settled():
    """Each flush while the current version is in flight writes its PROCESSING record with
    its progress; a settle of a superseded version counts for nothing, and the completed
    record carries no progress."""
    commit = DocumentCommit()
    commit.add(pending("v1", [OLD], awaiting=("chunk-old",)))
    commit.add(pending("v2", [NEW, KEPT], awaiting=("chunk-new", "chunk-kept")))
    first = commit.flush().document_upserts[0]
    assert (first.status, first.chunks_settled, first.chunks_changed) == (
        DocumentStatus.PROCESSING,
        0,
        2,
    )
    commit.add(settled("v1", OLD))
    assert commit.flush().document_upserts == ()
    commit.add(settled("v2", NEW))
    second = commit.flush().document_upserts[0]
    assert (second.status, second.chunks_settled, second.chunks_changed) == (
        DocumentStatus.PROCESSING,
        1,
        2,
    )
    commit.add(settled("v2", KEPT))
    done = commit.flush()
    assert [d.ticket.token for d in done.completed] == ["v2"]
    final = done.document_upserts[0]
    assert (final.status, final.chunks_settled, final.chunks_changed) == (
        DocumentStatus.PROCESSED,
        0,
        0,
    )


def test_a_superseded_version_never_completes_and_the_current_one_waits_for_it_to_drain():
    """v2 is drained first, but v1's renders are still to be written (and they withdraw
    the document from PROCESSED when they are): v2 completes only after them."""
    commit = DocumentCommit()
    commit.add(pending("v1", [OLD], awaiting=("chunk-old",)))
    commit.add(pending("v2", [NEW], removed=("chunk-old",), awaiting=("chunk-old", "chunk-new")))
    commit.add(settled("v2", OLD))
    commit.add(settled("v2", NEW, deltas=1))
    commit.add(ack("v2", NEW, 1))
    assert commit.flush().completed == ()
    commit.add(settled("v1", OLD, deltas=2))
    commit.add(ack("v1", OLD, 1))
    assert commit.flush().completed == ()  # one of v1's two deltas is still unwritten
    commit.add(ack("v1", OLD, 1))
    assert [d.ticket.token for d in commit.flush().completed] == ["v2"]
    assert commit.idle()


def test_an_edit_that_arrives_before_a_kept_chunk_s_failure_still_fails():
    """v2 keeps chunk X without extracting it again; v1's extraction of X failed, but its
    settle comes after v2 started (extraction runs beside the dataflow): v2 is FAILED."""
    commit = DocumentCommit()
    commit.add(pending("v1", [OLD, KEPT], awaiting=("chunk-old", "chunk-kept")))
    commit.add(pending("v2", [NEW, KEPT], removed=("chunk-old",), awaiting=("chunk-new",)))
    commit.add(settled("v1", OLD))
    failure = dataclasses.replace(settled("v1", KEPT), failure="HTTP 500")
    commit.add(failure)
    commit.add(settled("v2", NEW))
    (done,) = commit.flush().completed
    assert done.ticket.token == "v2"
    assert done.record is not None and done.record.status is DocumentStatus.FAILED
    assert done.record.failed_chunk_ids == ("chunk-kept",)
    assert "HTTP 500" in done.record.reason


def test_renders_are_written_last_one_per_key_and_acknowledged_once_per_chunk():
    older = EntityRecord("alice", "Alice", "person", "x", ("chunk-old",), ("a.md",), ("a.md",))
    newer = EntityRecord("alice", "Alice", "person", "y", ("chunk-new",), ("a.md",), ("a.md",))
    rendered = [
        EntityRendered("alice", older, (1.0,), (ack("v1", OLD, 1), ack("v1", NEW, 1))),
        EntityRendered("alice", newer, (2.0,), (ack("v1", OLD, 2),)),
        EntityRendered("bob", None, None, (ack("v1", NEW, 1),)),
    ]
    batch = records_batch(rendered)
    assert batch.entity_upserts == (newer,) and batch.entity_deletes == ("bob",)
    assert batch.entity_vectors == ((newer, (2.0,)),) and batch.entity_vector_deletes == ("bob",)
    assert batch.withdrawn_documents == ("a.md",)  # the document whose deltas they fold
    assert {a.chunk_id: a.count for a in written_acks(rendered)} == {
        "chunk-old": 3,
        "chunk-new": 2,
    }
    both = merge_batches([batch, DocumentCommit().flush()])
    assert both == batch
    assert both.size() == Counter(entity=2, relation=0, chunk=0, document=0)


def test_the_render_written_for_a_key_carries_the_list_changes_of_those_it_replaces():
    """Only a key's last render in a write is written, so its list changes (a hub's,
    `ListChanges`) must lead from the draft the store wrote before: those of the renders it
    replaces come with it, when they chain."""
    record = EntityRecord("alice", "Alice", "person", "x", ("c1", "c2"), ("a.md",), ("a.md",))
    one = ListChanges(7, 8, {"source_chunk_ids": {"c1": True, "c0": False}})
    two = ListChanges(8, 9, {"source_chunk_ids": {"c2": True, "c1": True}})
    rendered = [
        EntityRendered("alice", dataclasses.replace(record, list_changes=one), None, ()),
        EntityRendered("alice", dataclasses.replace(record, list_changes=two), None, ()),
    ]
    [written] = records_batch(rendered).entity_upserts
    assert written.list_changes == ListChanges(
        7, 9, {"source_chunk_ids": {"c0": False, "c1": True, "c2": True}}
    )
    # Changes that do not follow (the tally was made again in between) go as they are.
    again = ListChanges(None, 10, {})
    rendered.append(
        EntityRendered("alice", dataclasses.replace(record, list_changes=again), None, ())
    )
    assert records_batch(rendered).entity_upserts[0].list_changes == again
