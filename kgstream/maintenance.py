"""Maintenance of a stopped index: `kgstream rebuild-vectors` and `kgstream compact`.

rebuild-vectors: vectors are a projection of Redis (chunk texts, rendered entity and
relation texts), so a model change needs no re-extraction: drop the workspace's
collections (whatever model made them), create them for the new model's space, and
embed again in batches.

compact: every store under the data directory keeps what was deleted in its files
until it rewrites them (Redis's append-only log, Qdrant Edge's segments and
write-ahead log, the Bytewax recovery database's superseded snapshots and free
pages). Compaction rewrites all three from their live content, so a deleted
document's text and ids are gone from every file.
"""

from __future__ import annotations

import sqlite3
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
from dataflow.core.snapshots import use_dictionary
from kgstream.recovery import committed_epoch, read_partitions, repack_small_snapshots

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
    `dictionary` is the index's snapshot dictionary (`IndexControl.snapshot_dictionary`)."""
    redis.rewrite_files()
    vectors.compact()
    compact_recovery(recovery_dir, dictionary)


# Bytewax's own garbage rule: a snapshot is garbage once a later one of the same key is
# committed. Bytewax applies it as it goes; a run stopped at once may leave some.
_SUPERSEDED = """
    DELETE FROM snaps WHERE (step_id, state_key, snap_epoch) IN (
        SELECT older.step_id, older.state_key, older.snap_epoch
        FROM snaps AS older
        JOIN (SELECT step_id, state_key, MAX(snap_epoch) AS snap_epoch FROM snaps
              WHERE snap_epoch <= :committed GROUP BY step_id, state_key) AS latest
        USING (step_id, state_key)
        WHERE older.snap_epoch < latest.snap_epoch)
"""


def compact_recovery(recovery_dir: Path, dictionary: bytes | None = None) -> None:
    """Drop superseded snapshots from every recovery partition, pack every small snapshot
    in the current form (with the index's `dictionary`, the rows of an older version's
    document and chunk states as bytes: `recovery.repack_small_snapshots`), then tidy them
    as a run's end does (`RecoveryPartitions.tidy`): the snapshots of keys that are gone
    are dropped and each file is written again from its live rows, its write-ahead log
    emptied.

    Only snapshots up to the epoch every partition has committed are dropped, and a
    repacked one reads back as the same state, so a resume loads exactly the state it
    loaded before."""
    partitions = read_partitions(recovery_dir)
    paths = partitions.paths()
    if not paths:
        return
    committed = min(committed_epoch(path) for path in paths)
    for path in paths:
        connection = sqlite3.connect(path, isolation_level=None)
        try:
            connection.execute("PRAGMA secure_delete = ON")
            with connection:
                connection.execute("BEGIN")
                connection.execute(_SUPERSEDED, {"committed": committed})
        finally:
            connection.close()
    use_dictionary(dictionary)
    repack_small_snapshots(paths)
    partitions.tidy(rewrite=True)
