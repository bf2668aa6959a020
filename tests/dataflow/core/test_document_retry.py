"""`retry_document`: a retry re-extracts the failed chunks of the current version only."""

from dataclasses import replace

from dataflow.core.chunking import Chunk
from dataflow.core.documents import DocumentRecord, DocumentStatus
from dataflow.core.steps import ChunkAdded, DocumentRetry, DocumentState, retry_document

CHUNKS = (
    Chunk("chunk-a", "doc.md", 0, "Alpha text.", 3, "doc.md"),
    Chunk("chunk-b", "doc.md", 1, "Beta text.", 3, "doc.md"),
)
STATE = DocumentState("hash-1", "doc.md", ("chunk-a", "chunk-b"))
FAILED = DocumentRecord(
    "doc.md",
    DocumentStatus.FAILED,
    "doc.md",
    "hash-1",
    ("chunk-a", "chunk-b"),
    reason="extraction failed for 1 chunk(s): HTTP 500",
    failed_chunk_ids=("chunk-b",),
)


def test_a_retry_of_the_current_version_re_extracts_only_its_failed_chunks():
    state, outcome = retry_document(STATE, DocumentRetry("doc.md", FAILED, CHUNKS))

    assert state == STATE
    assert outcome.changes == (ChunkAdded(CHUNKS[1]),)
    assert outcome.chunks == CHUNKS
    assert outcome.record == replace(
        FAILED, status=DocumentStatus.PROCESSED, reason="", failed_chunk_ids=()
    )


def test_a_retry_of_a_version_that_is_no_longer_current_changes_nothing():
    retry = DocumentRetry("doc.md", FAILED, CHUNKS)
    edited = replace(STATE, content_hash="hash-2")
    moved = replace(STATE, file_path="old/doc.md")

    for state in (None, edited, moved):
        assert retry_document(state, retry) == (state, retry_document(None, retry)[1])
        assert retry_document(state, retry)[1].record is None
        assert retry_document(state, retry)[1].changes == ()


def test_a_retry_without_failed_chunks_or_with_missing_chunks_changes_nothing():
    processed = replace(FAILED, status=DocumentStatus.PROCESSED, reason="", failed_chunk_ids=())

    for retry in (
        DocumentRetry("doc.md", processed, CHUNKS),
        DocumentRetry("doc.md", FAILED, CHUNKS[:1]),
    ):
        _, outcome = retry_document(STATE, retry)
        assert outcome.record is None and outcome.changes == ()
