"""A commit batch as store writes: the Redis graph batch and the vector points.

The commit step (dataflow/core/commit.py) says what the stores must hold in
core types; this module is where those become our storage formats, so the
point payloads are built in one place (the indexer and `rebuild-vectors` share
them).
"""

from __future__ import annotations

from dataclasses import dataclass

from connectors.vectors.port import VectorKind, VectorPoint
from dataflow.core.chunking import Chunk
from dataflow.core.commit import CommitBatch, GraphBatch
from dataflow.core.contributions import EntityRecord, RelationRecord
from dataflow.core.messages import ChunkMentions, Vector
from dataflow.core.naming import relation_id


@dataclass(frozen=True)
class StoreWrite:
    """One batch for the stores: vectors first, then the graph (which bumps the version)."""

    graph: GraphBatch
    vector_upserts: tuple[VectorPoint, ...]
    vector_deletes: tuple[tuple[VectorKind, str], ...]


def store_write(batch: CommitBatch) -> StoreWrite:
    upserts = (
        *(entity_point(record, vector) for record, vector in batch.entity_vectors),
        *(relation_point(record, vector) for record, vector in batch.relation_vectors),
        *(chunk_point(chunk, vector, mentions) for chunk, vector, mentions in batch.chunk_vectors),
    )
    deletes = (
        *((VectorKind.ENTITY, key) for key in batch.entity_vector_deletes),
        *((VectorKind.RELATION, relation_id(pair)) for pair in batch.relation_vector_deletes),
        *((VectorKind.CHUNK, chunk_id) for chunk_id in batch.chunk_vector_deletes),
    )
    return StoreWrite(batch, upserts, deletes)  # a commit batch is its graph batch, extended


# Entity and relation points carry no citation lists (chunk ids, doc ids, paths): a hub's
# would make every write of its point O(hub), where the same question, "what do these
# chunks mention", is answered by a chunk point's `mentions`
# (docs/decisions/0014-points-that-cite-nothing.md).


def entity_point(record: EntityRecord, vector: Vector) -> VectorPoint:
    payload = {"entity": record.key, "name": record.name}
    return VectorPoint(VectorKind.ENTITY, record.key, vector, payload, record.embedding_text)


def relation_point(record: RelationRecord, vector: Vector) -> VectorPoint:
    payload = {"source": record.source, "target": record.target}
    key = relation_id(record.pair)
    return VectorPoint(VectorKind.RELATION, key, vector, payload, record.embedding_text)


MENTIONED_ENTITIES = "entities"  # chunk payload: the entity keys the chunk contributes
MENTIONED_RELATIONS = "relations"  # chunk payload: the relation ids (`relation_id`) it does


def chunk_point(chunk: Chunk, vector: Vector, mentions: ChunkMentions) -> VectorPoint:
    payload = {
        "chunk_id": chunk.chunk_id,
        "doc_id": chunk.doc_id,
        "file_path": chunk.file_path,
        MENTIONED_ENTITIES: list(mentions.entities),
        MENTIONED_RELATIONS: [relation_id(pair) for pair in mentions.relations],
    }
    return VectorPoint(VectorKind.CHUNK, chunk.chunk_id, vector, payload, chunk.text)
