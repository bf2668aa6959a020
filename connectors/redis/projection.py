"""The graph records as a property graph in FalkorDB, written with the records they project.

The schema (docs/graph.md; why it is this one: docs/decisions/0030-a-cypher-projection.md):

    (:Document {id, status, file_path, content_hash, length, reason, failure_kind,
                created_at, updated_at})
    (:Chunk {id, doc_id, order, text, tokens, file_path})-[:PART_OF]->(:Document)
    (:Chunk)-[:MENTIONS]->(:Entity {key, name, type, description, aliases})
    (:Entity)-[:RELATED {id, keywords, description, weight}]->(:Entity)
    (:IndexVersion {version})

A relation is one RELATED edge, from the end whose key sorts first (the records' pair order);
a chunk MENTIONS each entity whose `source_chunk_ids` cite it. A chunk's PART_OF edge is
written with it once and never moved: its document is part of its id (`chunk_id`).

The projection is a function of the records at every version, not only once the index is
quiet: each kind of record writes only what it owns (an entity its node's properties and its
MENTIONS edges, a relation its edge, a chunk its node and its PART_OF edge, a document its
node), and an edge whose far end has no record yet (another worker writes it, later) MERGEs
that end as a node with its key alone and the label `Placeholder`. A record's upsert takes the
label off; its delete empties the node back to a placeholder; the batch's last query deletes
every placeholder that no edge touches any more. A fresh build holds no placeholder, since
there every edge's ends have records.

Work per batch follows what the batch changes. A hub's MENTIONS change by the chunk ids that
came or went (`mention_changes`, from the long-list plan that writes its record); an entity
whose list is written whole (a short list, or a process's first write of a hub) has its
MENTIONS dropped and written again. No query reads or writes every edge of a node.

`GraphProjection.queue` adds the batch's queries to the transaction that writes the records,
before the version's INCR; the graph key shares the version's hash slot
(`projection_key`), so on a Redis Cluster that transaction is still one MULTI/EXEC on one node
(connectors/redis/graph_store.py). Queries take their values as parameters (connectors/redis/
cypher.py), never in their text.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from connectors.redis.cypher import QUERY, with_parameters
from connectors.redis.keys import KeyLayout
from connectors.redis.written_lists import ListPlan
from dataflow.core.chunking import Chunk
from dataflow.core.commit import GraphBatch
from dataflow.core.contributions import EntityRecord, RelationRecord
from dataflow.core.documents import DocumentRecord, DocumentStatus
from dataflow.core.naming import relation_id, relation_pair

ENTITY, CHUNK, DOCUMENT = "Entity", "Chunk", "Document"
PLACEHOLDER = "Placeholder"
INDEX_VERSION = "IndexVersion"
RELATED, MENTIONS, PART_OF = "RELATED", "MENTIONS", "PART_OF"

NODE_KEYS = {ENTITY: "key", CHUNK: "id", DOCUMENT: "id"}
"""The property that identifies a node of each label (unique, indexed)."""

CHUNK_LIST = "source_chunk_ids"


def projection_key(keys: KeyLayout) -> str:
    """The graph's Redis key: the version key in braces, so both share one hash slot."""
    return f"{{{keys.version}}}:graph"


# -- properties of each record ------------------------------------------------


def entity_properties(record: EntityRecord) -> dict[str, object]:
    return {
        "name": record.name,
        "type": record.type,
        "description": record.description,
        "aliases": list(record.aliases),
    }


def relation_properties(record: RelationRecord) -> dict[str, object]:
    return {
        "id": relation_id(record.pair),
        "keywords": list(record.keywords),
        "description": record.description,
        "weight": float(record.weight),
    }


def chunk_properties(chunk: Chunk) -> dict[str, object]:
    return {
        "doc_id": chunk.doc_id,
        "order": chunk.order,
        "text": chunk.text,
        "tokens": chunk.tokens,
        "file_path": chunk.file_path,
    }


def document_properties(record: DocumentRecord) -> dict[str, object]:
    """Without `created_at` and `updated_at`, which the write sets (the store's clock).
    None removes a property (a document no longer FAILED has no failure kind)."""
    return {
        "status": record.status.value,
        "file_path": record.file_path,
        "content_hash": record.content_hash,
        "length": record.length,
        "reason": record.reason or None,
        "failure_kind": None if record.failure_kind is None else record.failure_kind.value,
    }


# -- the queries (each takes its batch's items as `$rows`) ----------------------

_SCHEMA = tuple(f"CREATE INDEX FOR (n:{label}) ON (n.{key})" for label, key in NODE_KEYS.items())

_WITHDRAW = f"""UNWIND $rows AS id
MATCH (d:{DOCUMENT} {{id: id}}) WHERE d.status = $processed
SET d.status = $processing"""

_DOCUMENT_UPSERT = f"""UNWIND $rows AS row
MERGE (d:{DOCUMENT} {{id: row.id}})
SET d += row.properties, d.updated_at = $stamp, d.created_at = coalesce(d.created_at, $stamp)
REMOVE d:{PLACEHOLDER}"""

_DOCUMENT_DELETE = f"""UNWIND $rows AS id
MATCH (d:{DOCUMENT} {{id: id}})
SET d = {{id: id}}, d:{PLACEHOLDER}"""

_CHUNK_DELETE = f"""UNWIND $rows AS id
MATCH (c:{CHUNK} {{id: id}})
SET c = {{id: id}}, c:{PLACEHOLDER}"""

_CHUNK_UNLINK = f"""UNWIND $rows AS id
MATCH (c:{CHUNK} {{id: id}})-[p:{PART_OF}]->(:{DOCUMENT})
DELETE p"""

_CHUNK_UPSERT = f"""UNWIND $rows AS row
MERGE (c:{CHUNK} {{id: row.id}})
SET c += row.properties
REMOVE c:{PLACEHOLDER}
MERGE (d:{DOCUMENT} {{id: row.properties.doc_id}})
ON CREATE SET d:{PLACEHOLDER}
MERGE (c)-[:{PART_OF}]->(d)"""

_ENTITY_DELETE = f"""UNWIND $rows AS key
MATCH (e:{ENTITY} {{key: key}})
SET e = {{key: key}}, e:{PLACEHOLDER}"""

_ENTITY_UPSERT = f"""UNWIND $rows AS row
MERGE (e:{ENTITY} {{key: row.key}})
SET e += row.properties
REMOVE e:{PLACEHOLDER}"""

# Every MENTIONS edge of the entities named: for a deleted entity, or one whose list is
# written whole (the edges it keeps are MERGEd again by `_MENTIONS_ADD`).
_MENTIONS_DROP = f"""UNWIND $rows AS key
MATCH (:{CHUNK})-[m:{MENTIONS}]->(:{ENTITY} {{key: key}})
DELETE m"""

# Both ends found by their index, then the edge between them: never a walk of the hub's edges.
_MENTIONS_REMOVE = f"""UNWIND $rows AS row
MATCH (c:{CHUNK} {{id: row.chunk}})
MATCH (e:{ENTITY} {{key: row.key}})
MATCH (c)-[m:{MENTIONS}]->(e)
DELETE m"""

_MENTIONS_ADD = f"""UNWIND $rows AS row
MATCH (e:{ENTITY} {{key: row.key}})
MERGE (c:{CHUNK} {{id: row.chunk}})
ON CREATE SET c:{PLACEHOLDER}
MERGE (c)-[:{MENTIONS}]->(e)"""

_RELATION_DELETE = f"""UNWIND $rows AS row
MATCH (a:{ENTITY} {{key: row.source}})
MATCH (b:{ENTITY} {{key: row.target}})
MATCH (a)-[r:{RELATED}]->(b)
DELETE r"""

_RELATION_UPSERT = f"""UNWIND $rows AS row
MERGE (a:{ENTITY} {{key: row.source}})
ON CREATE SET a:{PLACEHOLDER}
MERGE (b:{ENTITY} {{key: row.target}})
ON CREATE SET b:{PLACEHOLDER}
MERGE (a)-[r:{RELATED}]->(b)
SET r += row.properties"""

# Placeholders exist only while an edge holds them: the ones left without any go.
_SWEEP = f"""MATCH (n:{PLACEHOLDER})
WHERE NOT (n)--()
DELETE n"""

_BUMP_VERSION = f"""MERGE (v:{INDEX_VERSION})
SET v.version = coalesce(v.version, 0) + 1"""


@dataclass
class MentionChanges:
    """How a batch changes MENTIONS edges: entities whose edges are written whole (dropped,
    then `added`), and single edges (chunk id, entity key) removed and added."""

    whole: list[str] = field(default_factory=list)
    removed: list[tuple[str, str]] = field(default_factory=list)
    added: list[tuple[str, str]] = field(default_factory=list)


def mention_changes(keys: KeyLayout, batch: GraphBatch, lists: ListPlan) -> MentionChanges:
    """The MENTIONS edges `batch` changes, from how `lists` writes each entity's chunk list:
    only the chunk ids that came or went when the plan writes that list by its changes,
    nothing when it leaves the list out (unchanged), every edge otherwise."""
    changes = MentionChanges()
    written = Counter(entity.key for entity in batch.entity_upserts)
    side_writes = {write.key: write for write in lists.side_writes}
    for entity in batch.entity_upserts:
        redis_key = keys.entity(entity.key)
        write = side_writes.get(keys.side_list(redis_key, CHUNK_LIST))
        if written[entity.key] == 1 and write is not None and not write.whole:
            changes.removed += [(chunk_id, entity.key) for chunk_id in write.removed]
            changes.added += [(chunk_id, entity.key) for chunk_id in write.added]
        elif (
            written[entity.key] == 1
            and write is None
            and (CHUNK_LIST in lists.fields_left_out(redis_key))
        ):
            continue
        else:
            changes.whole.append(entity.key)
    changes.whole = list(dict.fromkeys(changes.whole))  # a key written twice, once
    last = {entity.key: entity for entity in batch.entity_upserts}
    for key in changes.whole:
        changes.added += [(chunk_id, key) for chunk_id in last[key].source_chunk_ids]
    return changes


class GraphProjection:
    """The projection of one workspace's records (the module docstring): its key, its
    schema, and the queries that carry a batch into it."""

    def __init__(self, keys: KeyLayout) -> None:
        self.keys = keys
        self.key = projection_key(keys)

    def schema_queries(self) -> tuple[str, ...]:
        """The indexes on each label's key (each refused once it exists)."""
        return _SCHEMA

    def batch_queries(self, batch: GraphBatch, lists: ListPlan, stamp: float) -> list[str]:
        """GRAPH.QUERY texts that carry `batch` into the projection, in order, the version's
        step last. `stamp` (seconds since the epoch) is the documents' `updated_at`, and
        their `created_at` when first written."""
        documents = {d.doc_id: d for d in batch.document_upserts}
        mentions = mention_changes(self.keys, batch, lists)
        statuses = {
            "processed": DocumentStatus.PROCESSED.value,
            "processing": DocumentStatus.PROCESSING.value,
        }
        steps: list[tuple[str, Mapping[str, object], Sequence[object]]] = [
            (_WITHDRAW, statuses, batch.withdrawn_documents),
            (_DOCUMENT_DELETE, {}, batch.document_deletes),
            (_CHUNK_UNLINK, {}, batch.chunk_deletes),
            (_CHUNK_DELETE, {}, batch.chunk_deletes),
            (_RELATION_DELETE, {}, _pairs(batch.relation_deletes)),
            (_MENTIONS_DROP, {}, [*batch.entity_deletes, *mentions.whole]),
            (_ENTITY_DELETE, {}, batch.entity_deletes),
            (_ENTITY_UPSERT, {}, [_entity_row(e) for e in batch.entity_upserts]),
            (_MENTIONS_REMOVE, {}, _mention_rows(mentions.removed)),
            (_MENTIONS_ADD, {}, _mention_rows(mentions.added)),
            (_RELATION_UPSERT, {}, [_relation_row(r) for r in batch.relation_upserts]),
            (_CHUNK_UPSERT, {}, [_chunk_row(c) for c in batch.chunk_upserts]),
            (_DOCUMENT_UPSERT, {"stamp": stamp}, [_document_row(d) for d in documents.values()]),
        ]
        queries = [
            with_parameters(query, {**parameters, "rows": list(rows)})
            for query, parameters, rows in steps
            if rows
        ]
        if queries:
            queries.append(_SWEEP)
        queries.append(_BUMP_VERSION)
        return queries

    def commands(self, queries: Iterable[str]) -> list[tuple[str, str, str]]:
        """The Redis commands that run `queries` on the projection."""
        return [(QUERY, self.key, query) for query in queries]


def _entity_row(record: EntityRecord) -> dict[str, object]:
    return {"key": record.key, "properties": entity_properties(record)}


def _relation_row(record: RelationRecord) -> dict[str, object]:
    return {
        "source": record.source,
        "target": record.target,
        "properties": relation_properties(record),
    }


def _chunk_row(chunk: Chunk) -> dict[str, object]:
    return {"id": chunk.chunk_id, "properties": chunk_properties(chunk)}


def _document_row(record: DocumentRecord) -> dict[str, object]:
    return {"id": record.doc_id, "properties": document_properties(record)}


def _pairs(pairs: Iterable[tuple[str, str]]) -> list[dict[str, str]]:
    return [
        {"source": source, "target": target}
        for source, target in dict.fromkeys(relation_pair(*pair) for pair in pairs)
    ]


def _mention_rows(edges: Iterable[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"chunk": chunk_id, "key": key} for chunk_id, key in dict.fromkeys(edges)]
