"""Maintenance of a stopped index: `kgstream rebuild-vectors` and `kgstream compact`.

rebuild-vectors: vectors are a projection of Redis (chunk texts, rendered entity and
relation texts), so a model change needs no re-extraction: drop the workspace's
collections (whatever model made them), create them for the new model's space, and
embed again in batches.

compact: every store under the data directory keeps what was deleted in its files
until it rewrites them (Redis's append-only log, Qdrant Edge's segments and
write-ahead log, the Bytewax recovery database's superseded snapshots and free
pages). Compaction rewrites all three from their live content, so a deleted
document's text and ids are gone from every file (the recovery database's part:
dataflow/state/partitions.py, `compact_recovery`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from itertools import islice
from pathlib import Path
from typing import TypeVar

from connectors.embeddings.base import Embedder, embedding_space_name
from connectors.redis.embedded import EmbeddedRedis
from connectors.redis.ports import GraphRecords
from connectors.vectors.edge import EdgeVectorStore
from connectors.vectors.port import VectorPoint, VectorStore
from connectors.writes import chunk_point, entity_point, relation_point
from dataflow.core.contributions import RelationPair
from dataflow.core.messages import NO_MENTIONS, ChunkMentions
from dataflow.state.codec import SnapshotCodec
from dataflow.state.partitions import compact_recovery
from kgstream.recovery import recovery_errors

T = TypeVar("T")


def rebuild_vectors(
    graph: GraphRecords, vectors: VectorStore, embedder: Embedder, batch_size: int = 256
) -> dict[str, int]:
    """Replace every vector of the workspace; returns how many of each kind were written."""
    vectors.clear()
    vectors.ensure_collections(embedding_space_name(embedder), embedder.dimension)

    def rebuild(
        records: Iterable[T],
        text_of: Callable[[T], str],
        to_point: Callable[[T, tuple[float, ...]], VectorPoint],
    ) -> int:
        written = 0
        iterator = iter(records)
        while batch := list(islice(iterator, batch_size)):
            embedded = embedder.embed([text_of(item) for item in batch])
            vectors.upsert(
                to_point(item, tuple(v)) for item, v in zip(batch, embedded, strict=True)
            )
            written += len(batch)
        return written

    mentions = chunk_mentions(graph)
    return {
        "chunks": rebuild(
            graph.iter_chunks(),
            lambda c: c.text,
            lambda c, vector: chunk_point(c, vector, mentions.get(c.chunk_id, NO_MENTIONS)),
        ),
        "entities": rebuild(graph.iter_entities(), lambda e: e.embedding_text, entity_point),
        "relations": rebuild(graph.iter_relations(), lambda r: r.embedding_text, relation_point),
    }


def chunk_mentions(graph: GraphRecords) -> dict[str, ChunkMentions]:
    """What each chunk contributes, from the records that cite it (the inverse of their
    `source_chunk_ids`, as the chunk step has it)."""
    entities: dict[str, list[str]] = defaultdict(list)
    relations: dict[str, list[RelationPair]] = defaultdict(list)
    for entity in graph.iter_entities():
        for chunk_id in entity.source_chunk_ids:
            entities[chunk_id].append(entity.key)
    for relation in graph.iter_relations():
        for chunk_id in relation.source_chunk_ids:
            relations[chunk_id].append(relation.pair)
    return {
        chunk_id: ChunkMentions(
            tuple(sorted(entities.get(chunk_id, ()))), tuple(sorted(relations.get(chunk_id, ())))
        )
        for chunk_id in entities.keys() | relations.keys()
    }


def compact(
    redis: EmbeddedRedis, vectors: EdgeVectorStore, recovery_dir: Path, dictionary: bytes | None
) -> None:
    """Rewrite the embedded stores' files and the recovery database from their live
    content (the indexer must be stopped: the caller holds the data directory's lock);
    `dictionary` is the index's snapshot dictionary (`IndexControl.snapshot_dictionary`). The
    recovery database goes first: one of another kgstream version is refused before any
    file is touched."""
    with recovery_errors():
        compact_recovery(recovery_dir, SnapshotCodec(dictionary))
    redis.rewrite_files()
    vectors.compact()
