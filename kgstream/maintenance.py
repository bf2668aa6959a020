"""`kgstream rebuild-vectors`: re-embed everything the graph store holds, for a new model.

Vectors are a projection of Redis (chunk texts, rendered entity and relation
texts), so a model change needs no re-extraction: drop the workspace's
collections (whatever model made them), create them for the new model's space,
and embed again in batches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import islice
from typing import TypeVar

from connectors.embeddings.base import Embedder, embedding_space_name
from connectors.redis.graph_store import GraphStore
from connectors.vectors.base import VectorPoint, VectorStore
from connectors.writes import chunk_point, entity_point, relation_point

T = TypeVar("T")


def rebuild_vectors(
    graph: GraphStore, vectors: VectorStore, embedder: Embedder, batch_size: int = 256
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

    return {
        "chunks": rebuild(graph.iter_chunks(), lambda c: c.text, chunk_point),
        "entities": rebuild(graph.iter_entities(), lambda e: e.embedding_text, entity_point),
        "relations": rebuild(graph.iter_relations(), lambda r: r.embedding_text, relation_point),
    }
