"""The retrieval lanes: what each of LightRAG's modes reads from the stores.

- `local_lane`: entity vectors searched with the low-level keywords, the entities with
  their degrees (vector order), then their one-hop relations ranked by (edge degree,
  weight) descending (LightRAG's ``_get_node_data``).
- `global_lane`: relation vectors searched with the high-level keywords, relations in
  score order (ties: edge degree, then weight), then their endpoint entities in relation
  order (LightRAG's ``_get_edge_data``).
- `vector_chunks`: chunk vectors searched with the question (naive and mix).
- `graph_chunks`: the source chunks of the entities and relations kept in the context,
  most-cited first (LightRAG's related-text-unit ordering).

A `Scope` (the request's doc_ids / file_path_prefix) filters every vector search and
drops graph-expanded entities, relations and chunks from other documents. Each lane is a
handful of Redis round trips (one pipeline each), whatever `top_k` is.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from connectors.stores import Stores
from connectors.vectors.base import VectorFilter, VectorKind
from dataflow.core.chunking import Chunk
from dataflow.core.contributions import RelationPair
from dataflow.core.naming import relation_pair
from gateway.types import RetrievedChunk, RetrievedEntity, RetrievedRelation


@dataclass(frozen=True)
class Scope:
    """Which documents a request may see: none given means all of them.

    Matches the vector store's filter semantics (`VectorFilter`): an item is in scope
    when one of its doc ids is among `doc_ids`, and one of its file paths equals the
    prefix or lies under it as a directory (whole path components).
    """

    doc_ids: tuple[str, ...] = ()
    file_path_prefix: str | None = None

    @property
    def is_everything(self) -> bool:
        return not self.doc_ids and self.file_path_prefix is None

    def vector_filter(self) -> VectorFilter | None:
        if self.is_everything:
            return None
        return VectorFilter(doc_ids=self.doc_ids, file_path_prefix=self.file_path_prefix)

    def admits(self, doc_ids: Iterable[str], file_paths: Iterable[str]) -> bool:
        if self.doc_ids and not set(doc_ids) & set(self.doc_ids):
            return False
        if self.file_path_prefix is not None:
            stem = self.file_path_prefix.rstrip("/")
            return any(path == stem or path.startswith(stem + "/") for path in file_paths)
        return True

    def admits_chunk(self, chunk: Chunk) -> bool:
        return self.admits((chunk.doc_id,), (chunk.file_path,))


@dataclass(frozen=True)
class GraphLane:
    """What one keyword lane (local or global) found, in rank order."""

    entities: tuple[RetrievedEntity, ...] = ()
    relations: tuple[RetrievedRelation, ...] = ()
    more_relations: bool = False  # `relation_limit` left lower-ranked relations unread


def local_lane(
    stores: Stores,
    vector: Sequence[float],
    top_k: int,
    scope: Scope,
    relation_limit: int | None = None,
) -> GraphLane:
    """Entities by vector, then their one-hop relations ranked by (edge degree, weight).

    Hub entities can have thousands of relations, most of which the token budget
    will cut. Ranking needs only degrees (cheap integers), so with a
    `relation_limit` only the top relations by degree (ties at the boundary
    included, so the (degree, weight) order stays exact) are read in full, and
    `more_relations` says whether the caller should ask again for more.
    """
    hits = stores.vectors.search(VectorKind.ENTITY, vector, top_k, scope.vector_filter())
    if not hits:
        return GraphLane()
    graph = stores.graph
    keys = [hit.key for hit in hits]
    records = graph.get_entities(keys)
    degrees = graph.node_degrees(keys)
    entities = tuple(
        RetrievedEntity(record=records[hit.key], score=hit.score, degree=degrees[hit.key])
        for hit in hits
        if hit.key in records
        and scope.admits(records[hit.key].doc_ids, records[hit.key].file_paths)
    )
    edges = graph.edges_of(entity.record.key for entity in entities)
    pairs = list(
        dict.fromkeys(pair for entity in entities for pair in edges.get(entity.record.key, []))
    )
    edge_degrees = graph.edge_degrees(pairs)
    pairs.sort(key=lambda pair: edge_degrees[pair], reverse=True)  # stable: ties keep order
    more = relation_limit is not None and len(pairs) > relation_limit
    if relation_limit is not None and more:
        boundary = edge_degrees[pairs[relation_limit - 1]]
        pairs = [pair for pair in pairs if edge_degrees[pair] >= boundary]
        more = len(pairs) < len(edge_degrees)
    relations = graph.get_relations(pairs)
    found = [
        RetrievedRelation(record=relations[pair], score=0.0, degree=edge_degrees[pair])
        for pair in pairs
        if pair in relations and scope.admits(relations[pair].doc_ids, relations[pair].file_paths)
    ]
    found.sort(key=lambda r: (r.degree, r.record.weight), reverse=True)  # stable: ties keep order
    return GraphLane(entities=entities, relations=tuple(found), more_relations=more)


def global_lane(stores: Stores, vector: Sequence[float], top_k: int, scope: Scope) -> GraphLane:
    hits = stores.vectors.search(VectorKind.RELATION, vector, top_k, scope.vector_filter())
    scores: dict[RelationPair, float] = {}
    for hit in hits:
        source, target = hit.payload.get("source"), hit.payload.get("target")
        if isinstance(source, str) and isinstance(target, str) and source and source != target:
            scores.setdefault(relation_pair(source, target), hit.score)
    if not scores:
        return GraphLane()
    graph = stores.graph
    records, endpoints = graph.get_relations_with_endpoints(scores)
    edge_degrees = graph.edge_degrees(records)
    found = [
        RetrievedRelation(record=record, score=scores[pair], degree=edge_degrees[pair])
        for pair, record in records.items()
        if scope.admits(record.doc_ids, record.file_paths)
    ]
    found.sort(key=lambda r: (-r.score, -r.degree, -r.record.weight))
    keys = list(dict.fromkeys(key for relation in found for key in relation.record.pair))
    degrees = graph.node_degrees(keys)
    entities = tuple(
        RetrievedEntity(record=endpoints[key], score=0.0, degree=degrees[key])
        for key in keys
        if key in endpoints and scope.admits(endpoints[key].doc_ids, endpoints[key].file_paths)
    )
    return GraphLane(entities=entities, relations=tuple(found))


def vector_chunks(
    stores: Stores, vector: Sequence[float], chunk_top_k: int, scope: Scope
) -> list[RetrievedChunk]:
    hits = stores.vectors.search(VectorKind.CHUNK, vector, chunk_top_k, scope.vector_filter())
    chunks = stores.graph.get_chunks(hit.key for hit in hits)
    return [
        _retrieved(chunks[hit.key], hit.score)
        for hit in hits
        if hit.key in chunks and scope.admits_chunk(chunks[hit.key])
    ]


def rank_cited_chunks(citing: Sequence[Sequence[str]], counts: dict[str, int]) -> list[str]:
    """Chunk ids in order of first citation, then stably by citation count, highest first."""
    order = list(dict.fromkeys(chunk_id for ids in citing for chunk_id in ids))
    order.sort(key=lambda chunk_id: counts[chunk_id], reverse=True)
    return order


def graph_chunks(
    stores: Stores,
    entities: Sequence[RetrievedEntity],
    relations: Sequence[RetrievedRelation],
    chunk_top_k: int,
    scope: Scope,
) -> tuple[list[RetrievedChunk], list[RetrievedChunk]]:
    """(entity chunks, relation chunks), each ranked by how many of the given entities and
    relations cite the chunk (first citation breaks ties) and cut to `chunk_top_k`.

    As in LightRAG, relation chunks skip the chunks already picked for the entities, so
    the relation source brings new evidence to the round-robin instead of repeats.

    Graph chunks carry score 0: they were reached through the graph, not by similarity.
    """
    entity_ids = [entity.record.source_chunk_ids for entity in entities]
    relation_ids = [relation.record.source_chunk_ids for relation in relations]
    counts: dict[str, int] = {}
    for ids in (*entity_ids, *relation_ids):
        for chunk_id in set(ids):
            counts[chunk_id] = counts.get(chunk_id, 0) + 1
    if not counts:
        return [], []
    fetched = stores.graph.get_chunks(counts)

    def pick(citing: Sequence[Sequence[str]], taken: set[str]) -> list[RetrievedChunk]:
        kept: list[RetrievedChunk] = []
        for chunk_id in rank_cited_chunks(citing, counts):
            chunk = fetched.get(chunk_id)
            if chunk_id not in taken and chunk is not None and scope.admits_chunk(chunk):
                kept.append(_retrieved(chunk, 0.0))
                if len(kept) >= chunk_top_k:
                    break
        return kept

    from_entities = pick(entity_ids, set())
    return from_entities, pick(relation_ids, {chunk.chunk_id for chunk in from_entities})


def _retrieved(chunk: Chunk, score: float) -> RetrievedChunk:
    return RetrievedChunk(
        chunk_id=chunk.chunk_id,
        doc_id=chunk.doc_id,
        file_path=chunk.file_path,
        text=chunk.text,
        score=score,
    )
