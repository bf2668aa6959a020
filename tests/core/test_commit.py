"""The commit buffer when messages overtake each other (as they do across workers)."""

from collections import Counter

from connectors.vectors.base import VectorKind
from connectors.writes import store_write
from dataflow.core.chunking import Chunk
from dataflow.core.commit import CommitBuffer
from dataflow.core.documents import DocumentRecord, DocumentStatus
from dataflow.core.messages import ChunkSettled, DocumentPending, Ticket

KEPT = Chunk("chunk-kept", "a.md", 1, "unchanged paragraph", 3, "a.md")
OLD = Chunk("chunk-old", "a.md", 0, "old paragraph", 2, "a.md")
NEW = Chunk("chunk-new", "a.md", 0, "new paragraph", 2, "a.md")


def pending(token: str, chunks, removed=(), awaiting=()) -> DocumentPending:
    record = DocumentRecord(
        "a.md", DocumentStatus.PROCESSED, "a.md", token, tuple(c.chunk_id for c in chunks)
    )
    return DocumentPending(Ticket("a.md", token), record, tuple(chunks), removed, awaiting, 1.0)


def settled(token: str, chunk: Chunk) -> ChunkSettled:
    return ChunkSettled(Ticket("a.md", token), chunk.chunk_id, 0, (1.0, 0.0), chunk)


def chunk_vectors(buffer: CommitBuffer) -> tuple[set[str], set[str]]:
    batch = store_write(buffer.flush())
    upserts = {p.key for p in batch.vector_upserts if p.kind is VectorKind.CHUNK}
    deletes = {key for kind, key in batch.vector_deletes if kind is VectorKind.CHUNK}
    return upserts, deletes


def test_a_kept_chunk_keeps_its_vector_when_the_next_version_overtakes_its_settle():
    buffer = CommitBuffer()
    buffer.add(pending("v1", [OLD, KEPT], awaiting=("chunk-old", "chunk-kept")))
    buffer.add(
        pending("v2", [NEW, KEPT], removed=("chunk-old",), awaiting=("chunk-old", "chunk-new"))
    )
    buffer.add(settled("v1", KEPT))  # v1 is retired by now, its chunk is still current
    buffer.add(settled("v1", OLD))  # ... and this one is gone: no resurrection
    buffer.add(settled("v2", NEW))
    upserts, deletes = chunk_vectors(buffer)
    assert upserts == {"chunk-kept", "chunk-new"}
    assert deletes == {"chunk-old"}


def test_a_settle_arriving_before_its_document_is_applied_when_the_document_arrives():
    buffer = CommitBuffer()
    buffer.add(settled("v1", KEPT))
    buffer.add(pending("v1", [KEPT], awaiting=("chunk-kept",)))
    upserts, _ = chunk_vectors(buffer)
    assert upserts == {"chunk-kept"}
    assert buffer.progress == {}  # the document completed


def test_a_snapshot_does_not_change_when_the_buffer_goes_on():
    buffer = CommitBuffer()
    buffer.add(pending("v1", [OLD, KEPT], awaiting=("chunk-old", "chunk-kept")))
    snapshot = buffer.snapshot()
    buffer.add(settled("v1", OLD))
    buffer.add(settled("v1", KEPT))
    assert buffer.progress == {}
    assert snapshot.progress["a.md"].settled == {}
    assert snapshot.in_flight == {"a.md": 2}
    assert set(snapshot.current_chunks) == {"a.md"}


def test_a_document_with_nothing_in_flight_leaves_no_state_behind():
    buffer = CommitBuffer()
    buffer.add(pending("v1", [OLD, KEPT], awaiting=("chunk-old", "chunk-kept")))
    buffer.add(pending("v2", [NEW, KEPT], removed=("chunk-old",), awaiting=("chunk-new",)))
    buffer.add(settled("v2", NEW))
    assert buffer.progress == {}  # v2 is done, but v1's settles are still to come ...
    assert set(buffer.current_chunks) == {"a.md"}
    buffer.add(settled("v1", OLD))
    buffer.add(settled("v1", KEPT))  # ... and the kept chunk's vector is still written
    assert (buffer.current_chunks, +buffer.in_flight) == ({}, Counter())
    upserts, _ = chunk_vectors(buffer)
    assert upserts == {"chunk-kept", "chunk-new"}


def test_a_snapshot_from_before_in_flight_counts_keeps_its_chunk_sets():
    buffer = CommitBuffer()
    buffer.add(pending("v1", [KEPT], awaiting=("chunk-kept",)))
    state = dict(buffer.__dict__)
    del state["in_flight"]
    legacy = CommitBuffer.__new__(CommitBuffer)
    legacy.__setstate__(state)
    legacy.add(settled("v1", KEPT))  # its count is not known, so its chunk set stays
    assert set(legacy.current_chunks) == {"a.md"}
