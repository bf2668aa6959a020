"""`store_write` (connectors/writes.py): every field of a commit batch reaches a store, and
chunk vectors become chunk points keyed by their chunk ids, with payloads naming what each
chunk mentions."""

import dataclasses
from dataclasses import fields

from connectors.vectors.port import VectorKind
from connectors.writes import store_write
from dataflow.core.chunking import Chunk
from dataflow.core.commit import CommitBatch, DocumentCommit, GraphBatch
from dataflow.core.contributions import EntityRecord, RelationRecord
from dataflow.core.documents import DocumentRecord, DocumentStatus
from dataflow.core.messages import ChunkMentions
from tests.dataflow.core.test_commit import KEPT, NEW, OLD, pending, settled

VECTOR_WRITES = {
    "entity_vectors",
    "entity_vector_deletes",
    "relation_vectors",
    "relation_vector_deletes",
    "chunk_vectors",
    "chunk_vector_deletes",
}


def test_a_commit_batch_is_its_graph_batch_plus_the_vector_writes_and_the_completions() -> None:
    graph = {f.name for f in fields(GraphBatch)}
    commit = {f.name for f in fields(CommitBatch)}

    assert issubclass(CommitBatch, GraphBatch)
    assert commit - graph == VECTOR_WRITES | {"completed"}  # a new field: write it here


def test_the_graph_write_holds_each_record_field_of_the_commit_batch() -> None:
    ada = EntityRecord("ada", "Ada", "person", "a mathematician", ("c1",), ("a.md",), ("a.md",))
    knows = RelationRecord(
        "ada", "bob", "Ada", "Bob", ("knows",), "friends", 1.0, ("c1",), ("a.md",), ("a.md",)
    )
    chunk = Chunk("c1", "a.md", 0, "Ada knows Bob.", 4, "a.md")
    document = DocumentRecord("a.md", DocumentStatus.PROCESSED, "a.md", chunk_ids=("c1",))
    batch = CommitBatch(
        entity_upserts=(ada,),
        entity_deletes=("carol",),
        relation_upserts=(knows,),
        relation_deletes=(("bob", "carol"),),
        chunk_upserts=(chunk,),
        chunk_deletes=("c0",),
        document_upserts=(document,),
        document_deletes=("gone.md",),
        withdrawn_documents=("b.md",),
    )

    graph = store_write(batch).graph

    for field in fields(GraphBatch):
        assert getattr(graph, field.name), f"the test's batch leaves {field.name} empty"
        assert getattr(graph, field.name) == getattr(batch, field.name), field.name


def test_chunk_vectors_are_written_as_chunk_points_and_chunk_deletes_by_chunk_id():
    commit = DocumentCommit()
    commit.add(pending("v1", [OLD, KEPT], awaiting=("chunk-old", "chunk-kept")))
    commit.add(
        pending("v2", [NEW, KEPT], removed=("chunk-old",), awaiting=("chunk-old", "chunk-new"))
    )
    commit.add(settled("v1", KEPT))
    commit.add(settled("v2", NEW))

    write = store_write(commit.flush())

    assert {(p.kind, p.key) for p in write.vector_upserts} == {
        (VectorKind.CHUNK, "chunk-kept"),
        (VectorKind.CHUNK, "chunk-new"),
    }
    assert set(write.vector_deletes) == {(VectorKind.CHUNK, "chunk-old")}


def test_a_chunk_point_names_what_its_settle_says_the_chunk_mentions():
    mentions = ChunkMentions(("atlas project", "carla diaz"), (("atlas project", "carla diaz"),))
    commit = DocumentCommit()
    commit.add(pending("v1", [NEW], awaiting=[NEW.chunk_id]))
    commit.add(dataclasses.replace(settled("v1", NEW), mentions=mentions))

    (point,) = store_write(commit.flush()).vector_upserts

    assert point.payload["entities"] == ["atlas project", "carla diaz"]
    assert point.payload["relations"] == ["atlas project\x1fcarla diaz"]
