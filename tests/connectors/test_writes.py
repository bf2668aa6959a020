"""`store_write` (connectors/writes.py): every field of a commit batch reaches a store."""

from dataclasses import fields

from connectors.writes import store_write
from dataflow.core.chunking import Chunk
from dataflow.core.commit import CommitBatch, GraphBatch
from dataflow.core.contributions import EntityRecord, RelationRecord
from dataflow.core.documents import DocumentRecord, DocumentStatus

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
