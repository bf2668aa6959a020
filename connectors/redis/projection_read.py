"""The projection's read side: what the graph holds, and what it must hold for given records.

`read_projection` reads the whole graph (for tests, checks and a rebuild's comparison, not for
queries: it is O(graph)); `project_records` is the projection of a set of records, computed in
Python by the rules of connectors/redis/projection.py. Both give a `ProjectedGraph`, so
"the projection is exact" is one equality.

FalkorDB replies with doubles printed to 15 significant digits, so both sides hold a
double as it reads back (`readable`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from connectors.redis.clients import RedisClient
from connectors.redis.cypher import COMPACT, READ_ONLY_QUERY, rows
from connectors.redis.ports import StoredDocument
from connectors.redis.projection import (
    CHUNK,
    DOCUMENT,
    ENTITY,
    INDEX_VERSION,
    MENTIONS,
    NODE_KEYS,
    PART_OF,
    PLACEHOLDER,
    RELATED,
    chunk_properties,
    document_properties,
    entity_properties,
    relation_properties,
)
from dataflow.core.chunking import Chunk
from dataflow.core.contributions import EntityRecord, RelationRecord

NodeId = tuple[str, str]
"""A node by its label and key: ("Entity", key), ("Chunk", chunk id), ("Document", doc id)."""

Properties = tuple[tuple[str, Any], ...]
"""A node's or edge's properties, sorted by name, lists as tuples (hashable, comparable)."""


@dataclass(frozen=True)
class ProjectedGraph:
    """A projection's whole content: nodes with their labels and properties (key included),
    edges as (type, from, to) with their properties, and the version it is at (None where not
    known: a projection computed from records)."""

    nodes: Mapping[NodeId, tuple[frozenset[str], Properties]]
    edges: Mapping[tuple[str, NodeId, NodeId], Properties]
    version: int | None = None

    def without_write_times(self) -> ProjectedGraph:
        """The graph without the documents' `created_at` and `updated_at` and without the
        version: what a fresh build of the same documents must equal."""
        dropped = {"created_at", "updated_at"}
        nodes = {
            node: (labels, tuple(item for item in props if item[0] not in dropped))
            for node, (labels, props) in self.nodes.items()
        }
        return ProjectedGraph(nodes, self.edges)


def readable(value: Any) -> Any:
    """`value` as the projection gives it back: doubles to 15 significant digits, lists as
    tuples."""
    if isinstance(value, float):
        return float(f"{value:.15g}")
    if isinstance(value, list | tuple):
        return tuple(readable(item) for item in value)
    return value


def _properties(properties: Mapping[str, Any]) -> Properties:
    return tuple(sorted((k, readable(v)) for k, v in properties.items() if v is not None))


def read_projection(client: RedisClient, key: str) -> ProjectedGraph:
    """Everything in the projection at `key`, read in one transaction (two read-only
    queries and nothing between them)."""
    pipe = client.pipeline(transaction=True)
    pipe.execute_command(READ_ONLY_QUERY, key, "MATCH (n) RETURN labels(n), properties(n)", COMPACT)
    pipe.execute_command(
        READ_ONLY_QUERY,
        key,
        "MATCH (a)-[r]->(b) RETURN type(r), labels(a), properties(a), labels(b), "
        "properties(b), properties(r)",
        COMPACT,
    )
    node_reply, edge_reply = pipe.execute()
    nodes: dict[NodeId, tuple[frozenset[str], Properties]] = {}
    version = None
    for labels, properties in rows(node_reply):
        if INDEX_VERSION in labels:
            version = properties.get("version")
            continue
        nodes[_node_id(labels, properties)] = (frozenset(labels), _properties(properties))
    edges = {
        (kind, _node_id(a_labels, a), _node_id(b_labels, b)): _properties(properties)
        for kind, a_labels, a, b_labels, b, properties in rows(edge_reply)
    }
    return ProjectedGraph(nodes, edges, version)


def _node_id(labels: list[str], properties: Mapping[str, Any]) -> NodeId:
    label = next(label for label in labels if label in NODE_KEYS)
    return label, properties[NODE_KEYS[label]]


def project_records(
    entities: Iterable[EntityRecord],
    relations: Iterable[RelationRecord],
    chunks: Iterable[Chunk],
    documents: Iterable[StoredDocument],
) -> ProjectedGraph:
    """The projection of these records: what the graph must hold when they are the store's."""
    nodes: dict[NodeId, tuple[frozenset[str], Properties]] = {}
    edges: dict[tuple[str, NodeId, NodeId], Properties] = {}

    def record(node: NodeId, properties: Mapping[str, Any]) -> None:
        keyed = {NODE_KEYS[node[0]]: node[1], **properties}
        nodes[node] = (frozenset({node[0]}), _properties(keyed))

    def edge(kind: str, a: NodeId, b: NodeId, properties: Mapping[str, Any]) -> None:
        edges[(kind, a, b)] = _properties(properties)

    for entity in entities:
        record((ENTITY, entity.key), entity_properties(entity))
        for chunk_id in entity.source_chunk_ids:
            edge(MENTIONS, (CHUNK, chunk_id), (ENTITY, entity.key), {})
    for relation in relations:
        edge(
            RELATED,
            (ENTITY, relation.source),
            (ENTITY, relation.target),
            relation_properties(relation),
        )
    for chunk in chunks:
        record((CHUNK, chunk.chunk_id), chunk_properties(chunk))
        edge(PART_OF, (CHUNK, chunk.chunk_id), (DOCUMENT, chunk.doc_id), {})
    for stored in documents:
        times = {"created_at": stored.created_at, "updated_at": stored.updated_at}
        record((DOCUMENT, stored.record.doc_id), {**document_properties(stored.record), **times})
    for _, a, b in edges:  # an edge's end without a record is a placeholder
        for node in (a, b):
            if node not in nodes:
                keyed = {NODE_KEYS[node[0]]: node[1]}
                nodes[node] = (frozenset({node[0], PLACEHOLDER}), _properties(keyed))
    return ProjectedGraph(nodes, edges)
