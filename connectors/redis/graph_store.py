"""Graph state in Redis: entities, relations, adjacency, chunks and document status.

Plain Redis data structures only (hashes, sets, sorted sets, one counter), so
the same code runs on the embedded redis-server, Redis 7+, Valkey or a managed
Redis. Every write is an idempotent upsert or delete by a deterministic id,
and one `GraphBatch` is applied as one MULTI/EXEC together with the increment
of the index version: a reader sees all of a batch or none of it, so never an
edge without its endpoints, and a replayed batch leaves the data as they were.

Key layout (``<ws>`` is the workspace; ``E(x)`` escapes ``%``, ``{`` and ``}``
in ``x`` as ``%25``, ``%7B`` and ``%7D``, so a brace inside an entity key can
never end or open a hash tag)::

    kg:<ws>:version                   string   index version (INCR once per batch)
    kg:<ws>:ent:{E(key)}              hash     EntityRecord
    kg:<ws>:adj:{E(key)}              set      neighbour entity keys (degree = SCARD)
    kg:<ws>:alias:{E(alias)}          set      keys of the entities whose aliases hold it
    kg:<ws>:rel:{E(source)}:E(target) hash     RelationRecord (source < target)
    kg:<ws>:chunk:{E(chunk_id)}       hash     Chunk
    kg:<ws>:doc:{E(doc_id)}           hash     DocumentRecord + created_at, updated_at
    kg:<ws>:docstatus:<STATUS>        zset     doc ids with that status (score 0: id order)

List fields (source chunk ids, file paths, keywords, chunk ids, aliases) are JSON
arrays; floats are stored as `repr` so they read back exactly.

The alias index is kept exact the way adjacency is: in the same MULTI/EXEC as the
records it follows. Adjacency needs no read, since a relation upsert or delete says
which edge to add or drop; an entity upsert only says its new aliases, so a script
in the transaction reads the aliases stored in the entity's hash, removes the entity
from the alias sets it no longer has, and adds it to the rest (a delete is an upsert
to no aliases). An entity hash written before aliases existed has no `aliases` field
and counts as none.

Cluster caveat: the hash tags put an entity, its adjacency set and the relations
it is the source of in one slot, which is what a Redis Cluster needs to spread
the graph over nodes. But MULTI/EXEC (and the neighbour and alias scripts) may only span
one slot there, so `apply` and `get_neighbours` as written need a single Redis
node (standalone or a primary with replicas). On a cluster, batches would have
to be split into per-slot groups, losing cross-slot atomicity: future work.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from redis.client import Pipeline
from redis.typing import EncodableT, FieldT

from dataflow.core.chunking import Chunk
from dataflow.core.contributions import EntityRecord, RelationRecord
from dataflow.core.documents import DocumentRecord, DocumentStatus
from dataflow.core.naming import relation_pair

Pair = tuple[str, str]
# What redis-py's HSET takes (its Mapping is invariant in the key type).
HashFields = dict[FieldT, EncodableT]

_WORKSPACE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_ESCAPES = str.maketrans({"%": "%25", "{": "%7B", "}": "%7D"})
_UNESCAPES = {"%25": "%", "%7B": "{", "%7D": "}"}
_UNESCAPE = re.compile("%25|%7B|%7D")
_SCAN_BATCH = 500

# For each entity key in ARGV[2..]: its neighbours, each followed by the
# neighbour's degree. Computing adjacency key names here (same escaping as
# `_escape`) is what makes "neighbours with degrees" one round trip.
_NEIGHBOURS_SCRIPT = """
local prefix = ARGV[1]
local escapes = {["%"] = "%25", ["{"] = "%7B", ["}"] = "%7D"}
local out = {}
for i = 2, #ARGV do
  local members = redis.call("SMEMBERS", prefix .. string.gsub(ARGV[i], "[%%{}]", escapes) .. "}")
  local row = {}
  for _, member in ipairs(members) do
    row[#row + 1] = member
    row[#row + 1] = redis.call("SCARD", prefix .. string.gsub(member, "[%%{}]", escapes) .. "}")
  end
  out[#out + 1] = row
end
return out
"""

# For each (entity key, JSON array of its new alias keys) in ARGV[2..]: move the entity
# from the alias sets of the aliases stored in its hash to those of the new ones. Run in
# the transaction before the entity hashes are written or deleted; same escaping as
# `_escape`.
_ALIASES_SCRIPT = """
local prefix = ARGV[1]
local escapes = {["%"] = "%25", ["{"] = "%7B", ["}"] = "%7D"}
local function tagged(kind, text)
  return prefix .. kind .. ":{" .. string.gsub(text, "[%%{}]", escapes) .. "}"
end
for i = 2, #ARGV, 2 do
  local key = ARGV[i]
  local new = cjson.decode(ARGV[i + 1])
  local kept = {}
  for _, alias in ipairs(new) do kept[alias] = true end
  local stored = redis.call("HGET", tagged("ent", key), "aliases")
  if stored then
    for _, alias in ipairs(cjson.decode(stored)) do
      if not kept[alias] then redis.call("SREM", tagged("alias", alias), key) end
    end
  end
  for _, alias in ipairs(new) do redis.call("SADD", tagged("alias", alias), key) end
end
return 0
"""


@dataclass(frozen=True)
class GraphBatch:
    """Everything one sink step writes, applied atomically by `GraphStore.apply`.

    A key may appear in the upserts or the deletes of its kind, not both.
    """

    entity_upserts: tuple[EntityRecord, ...] = ()
    entity_deletes: tuple[str, ...] = ()
    relation_upserts: tuple[RelationRecord, ...] = ()
    relation_deletes: tuple[Pair, ...] = ()
    chunk_upserts: tuple[Chunk, ...] = ()
    chunk_deletes: tuple[str, ...] = ()
    document_upserts: tuple[DocumentRecord, ...] = ()
    document_deletes: tuple[str, ...] = ()

    def is_empty(self) -> bool:
        return not any(
            (
                self.entity_upserts,
                self.entity_deletes,
                self.relation_upserts,
                self.relation_deletes,
                self.chunk_upserts,
                self.chunk_deletes,
                self.document_upserts,
                self.document_deletes,
            )
        )


@dataclass(frozen=True)
class StoredDocument:
    """A document's status record plus the times the store keeps for it."""

    record: DocumentRecord
    created_at: float
    updated_at: float


def _escape(text: str) -> str:
    return text.translate(_ESCAPES)


def _unescape(text: str) -> str:
    return _UNESCAPE.sub(lambda match: _UNESCAPES[match.group(0)], text)


def _dump_list(values: Sequence[str]) -> str:
    return json.dumps(list(values), ensure_ascii=False)


def _load_list(text: str) -> tuple[str, ...]:
    values = json.loads(text)
    if not isinstance(values, list):
        raise ValueError(f"expected a JSON array, found {text[:80]!r}")
    return tuple(values)  # `_dump_list` wrote strings: JSON reads them back as str


DEAD_LETTERS_KEPT = 10_000
RETRY_REQUESTS_KEPT = 1_000
"""The retry-request stream is trimmed to about this many entries (each asks for every
failed document, so an indexer that was away for more misses nothing it needs)."""


class KeyLayout:
    """Key names of one workspace (see the module docstring)."""

    def __init__(self, workspace: str) -> None:
        if not _WORKSPACE.fullmatch(workspace):
            raise ValueError(
                f"workspace {workspace!r} must be 1-64 characters of A-Z a-z 0-9 _ . - "
                "(it is part of every Redis key and SCAN pattern)"
            )
        self.workspace = workspace
        self.prefix = f"kg:{workspace}:"
        self.version = self.prefix + "version"
        self.adjacency_prefix = self.prefix + "adj:{"
        self.alias_prefix = self.prefix + "alias:{"

    def entity(self, key: str) -> str:
        return f"{self.prefix}ent:{{{_escape(key)}}}"

    def adjacency(self, key: str) -> str:
        return f"{self.adjacency_prefix}{_escape(key)}}}"

    def alias(self, alias: str) -> str:
        return f"{self.alias_prefix}{_escape(alias)}}}"

    def alias_of(self, redis_key: str) -> str:
        """The alias an alias-set key names (the inverse of `alias`)."""
        return _unescape(redis_key[len(self.alias_prefix) : -1])

    def relation(self, pair: Pair) -> str:
        return f"{self.prefix}rel:{{{_escape(pair[0])}}}:{_escape(pair[1])}"

    def chunk(self, chunk_id: str) -> str:
        return f"{self.prefix}chunk:{{{_escape(chunk_id)}}}"

    def document(self, doc_id: str) -> str:
        return f"{self.prefix}doc:{{{_escape(doc_id)}}}"

    def status(self, status: DocumentStatus) -> str:
        return f"{self.prefix}docstatus:{status.value}"

    @property
    def consumer_lag(self) -> str:
        return f"{self.prefix}consumer_lag"

    @property
    def dead_letters(self) -> str:
        return f"{self.prefix}dead_letters"

    @property
    def retry_requests(self) -> str:
        return f"{self.prefix}retry_requests"

    @property
    def source_hold(self) -> str:
        return f"{self.prefix}source_hold"

    def pattern(self, kind: str) -> str:
        return f"{self.prefix}{kind}:*"


# -- record <-> hash ---------------------------------------------------------


def _entity_fields(record: EntityRecord) -> HashFields:
    return {
        "key": record.key,
        "name": record.name,
        "type": record.type,
        "description": record.description,
        "source_chunk_ids": _dump_list(record.source_chunk_ids),
        "file_paths": _dump_list(record.file_paths),
        "doc_ids": _dump_list(record.doc_ids),
        "aliases": _dump_list(record.aliases),
    }


def _entity_from(fields: dict[str, str]) -> EntityRecord:
    return EntityRecord(
        key=fields["key"],
        name=fields["name"],
        type=fields["type"],
        description=fields["description"],
        source_chunk_ids=_load_list(fields["source_chunk_ids"]),
        file_paths=_load_list(fields["file_paths"]),
        doc_ids=_load_list(fields["doc_ids"]),
        aliases=_load_list(fields.get("aliases", "[]")),  # absent: written before aliases
    )


def _relation_fields(record: RelationRecord) -> HashFields:
    return {
        "source": record.source,
        "target": record.target,
        "source_name": record.source_name,
        "target_name": record.target_name,
        "keywords": _dump_list(record.keywords),
        "description": record.description,
        "weight": repr(float(record.weight)),
        "source_chunk_ids": _dump_list(record.source_chunk_ids),
        "file_paths": _dump_list(record.file_paths),
        "doc_ids": _dump_list(record.doc_ids),
    }


def _relation_from(fields: dict[str, str]) -> RelationRecord:
    return RelationRecord(
        source=fields["source"],
        target=fields["target"],
        source_name=fields["source_name"],
        target_name=fields["target_name"],
        keywords=_load_list(fields["keywords"]),
        description=fields["description"],
        weight=float(fields["weight"]),
        source_chunk_ids=_load_list(fields["source_chunk_ids"]),
        file_paths=_load_list(fields["file_paths"]),
        doc_ids=_load_list(fields["doc_ids"]),
    )


def _chunk_fields(chunk: Chunk) -> HashFields:
    return {
        "chunk_id": chunk.chunk_id,
        "doc_id": chunk.doc_id,
        "order": str(chunk.order),
        "text": chunk.text,
        "tokens": str(chunk.tokens),
        "file_path": chunk.file_path,
    }


def _chunk_from(fields: dict[str, str]) -> Chunk:
    return Chunk(
        chunk_id=fields["chunk_id"],
        doc_id=fields["doc_id"],
        order=int(fields["order"]),
        text=fields["text"],
        tokens=int(fields["tokens"]),
        file_path=fields["file_path"],
    )


def _document_fields(record: DocumentRecord, updated_at: str) -> HashFields:
    return {
        "doc_id": record.doc_id,
        "status": record.status.value,
        "file_path": record.file_path,
        "content_hash": record.content_hash,
        "chunk_ids": _dump_list(record.chunk_ids),
        "preview": record.preview,
        "length": str(record.length),
        "reason": record.reason,
        "failed_chunk_ids": _dump_list(record.failed_chunk_ids),
        "updated_at": updated_at,
    }


def _document_from(fields: dict[str, str]) -> StoredDocument:
    record = DocumentRecord(
        doc_id=fields["doc_id"],
        status=DocumentStatus(fields["status"]),
        file_path=fields["file_path"],
        content_hash=fields["content_hash"],
        chunk_ids=_load_list(fields["chunk_ids"]),
        preview=fields["preview"],
        length=int(fields["length"]),
        reason=fields["reason"],
        failed_chunk_ids=_load_list(fields.get("failed_chunk_ids", "[]")),  # older records: none
    )
    return StoredDocument(
        record=record,
        created_at=float(fields["created_at"]),
        updated_at=float(fields["updated_at"]),
    )


def _aliases_from(wanted: Sequence[str], members: Sequence[set[str]]) -> dict[str, list[str]]:
    return {
        alias: sorted(entities) for alias, entities in zip(wanted, members, strict=True) if entities
    }


# -- batch validation --------------------------------------------------------


def _check_no_overlap(kind: str, upserts: Iterable[Any], deletes: Iterable[Any]) -> None:
    both = set(upserts) & set(deletes)
    if both:
        example = min(both)
        raise ValueError(
            f"GraphBatch holds {len(both)} {kind} key(s) in both upserts and deletes "
            f"(e.g. {example!r}); send one final operation per key"
        )


def _check_batch(batch: GraphBatch) -> None:
    for entity in batch.entity_upserts:
        if not entity.key:
            raise ValueError(f"EntityRecord.key must be non-empty; got {entity!r}")
    for relation in batch.relation_upserts:
        if relation_pair(relation.source, relation.target) != relation.pair:
            raise ValueError(
                f"RelationRecord.source must sort before target; got "
                f"source={relation.source!r}, target={relation.target!r}"
            )
    for kind, ids in (
        ("chunk", [c.chunk_id for c in batch.chunk_upserts]),
        ("document", [d.doc_id for d in batch.document_upserts]),
    ):
        if any(not i for i in ids):
            raise ValueError(f"GraphBatch has a {kind} upsert with an empty id")
    _check_no_overlap("entity", (e.key for e in batch.entity_upserts), batch.entity_deletes)
    _check_no_overlap(
        "relation",
        (r.pair for r in batch.relation_upserts),
        (relation_pair(*p) for p in batch.relation_deletes),
    )
    _check_no_overlap("chunk", (c.chunk_id for c in batch.chunk_upserts), batch.chunk_deletes)
    _check_no_overlap(
        "document", (d.doc_id for d in batch.document_upserts), batch.document_deletes
    )


def _delete(pipe: Pipeline, keys: list[str]) -> None:
    if keys:
        pipe.delete(*keys)


def _adjacency_changes(layout: KeyLayout, pairs: Iterable[Pair]) -> dict[str, list[str]]:
    """Adjacency set key -> members to add (or remove), one command per set."""
    changes: dict[str, list[str]] = {}
    for source, target in pairs:
        changes.setdefault(layout.adjacency(source), []).append(target)
        changes.setdefault(layout.adjacency(target), []).append(source)
    return changes


def _update_alias_index(pipe: Pipeline, layout: KeyLayout, batch: GraphBatch) -> None:
    """Queue the alias script for every entity the batch writes or deletes (before the
    entity hashes change, since it reads the aliases stored there)."""
    changes: list[str] = []
    for entity in batch.entity_upserts:
        changes += [entity.key, _dump_list(entity.aliases)]
    for key in batch.entity_deletes:
        changes += [key, "[]"]
    if changes:
        pipe.eval(_ALIASES_SCRIPT, 0, layout.prefix, *changes)


class GraphStore:
    """The graph state of one workspace in Redis.

    Reads take a batch of keys and cost one round trip each (one pipeline or
    one script call). The client must decode responses (``decode_responses=True``).
    """

    def __init__(self, client: redis.Redis, workspace: str = "default") -> None:
        if not client.get_connection_kwargs().get("decode_responses"):
            raise ValueError("GraphStore needs a redis client created with decode_responses=True")
        self._client = client
        self.keys = KeyLayout(workspace)

    @classmethod
    def from_url(cls, url: str, workspace: str = "default") -> GraphStore:
        """A store with its own client (`redis://`, `rediss://` or `unix://` URL)."""
        return cls(redis.Redis.from_url(url, decode_responses=True), workspace)

    @property
    def workspace(self) -> str:
        return self.keys.workspace

    @property
    def client(self) -> redis.Redis:
        return self._client

    def ping(self) -> None:
        """Raise when Redis cannot be reached (the gateway's health check)."""
        self._client.ping()

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> GraphStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- writes ---------------------------------------------------------------

    def apply(self, batch: GraphBatch, now: float | None = None) -> int:
        """Apply `batch` and advance the index version in one MULTI/EXEC.

        Returns the new version. `now` (seconds since the epoch; default the
        wall clock) becomes documents' `updated_at`, and `created_at` on their
        first write. Adjacency follows relation upserts and deletes, and the
        alias index entity upserts and deletes (see the module docstring). Deleting
        an entity does not touch its relations: the dataflow deletes those itself
        (edge repair), in the same batch.
        """
        _check_batch(batch)
        stamp = repr(float(time.time() if now is None else now))
        keys = self.keys
        pipe = self._client.pipeline(transaction=True)
        removed_pairs = [relation_pair(*p) for p in batch.relation_deletes]
        _delete(pipe, [keys.relation(pair) for pair in removed_pairs])
        for adjacency, members in _adjacency_changes(keys, removed_pairs).items():
            pipe.srem(adjacency, *members)
        _update_alias_index(pipe, keys, batch)
        _delete(pipe, [keys.entity(key) for key in batch.entity_deletes])
        _delete(pipe, [keys.chunk(chunk_id) for chunk_id in batch.chunk_deletes])
        _delete(pipe, [keys.document(doc_id) for doc_id in batch.document_deletes])
        if batch.document_deletes:
            for status in DocumentStatus:
                pipe.zrem(keys.status(status), *batch.document_deletes)
        for relation in batch.relation_upserts:
            pipe.hset(keys.relation(relation.pair), mapping=_relation_fields(relation))
        added_pairs = [relation.pair for relation in batch.relation_upserts]
        for adjacency, members in _adjacency_changes(keys, added_pairs).items():
            pipe.sadd(adjacency, *members)
        for entity in batch.entity_upserts:
            pipe.hset(keys.entity(entity.key), mapping=_entity_fields(entity))
        for chunk in batch.chunk_upserts:
            pipe.hset(keys.chunk(chunk.chunk_id), mapping=_chunk_fields(chunk))
        documents = {d.doc_id: d for d in batch.document_upserts}  # the last one wins
        for document in documents.values():
            doc_key = keys.document(document.doc_id)
            pipe.hset(doc_key, mapping=_document_fields(document, stamp))
            pipe.hsetnx(doc_key, "created_at", stamp)
        for status in DocumentStatus if documents else ():
            now_in = [d.doc_id for d in documents.values() if d.status is status]
            elsewhere = [d.doc_id for d in documents.values() if d.status is not status]
            if elsewhere:
                pipe.zrem(keys.status(status), *elsewhere)
            if now_in:
                pipe.zadd(keys.status(status), dict.fromkeys(now_in, 0))
        pipe.incr(keys.version)
        results = pipe.execute()
        return int(results[-1])

    def clear(self) -> int:
        """Delete every key of this workspace (version included); returns how many."""
        deleted = 0
        batch: list[str] = []
        for key in self._client.scan_iter(match=self.keys.prefix + "*", count=1000):
            batch.append(key)
            if len(batch) >= _SCAN_BATCH:
                deleted += int(self._client.unlink(*batch))
                batch = []
        if batch:
            deleted += int(self._client.unlink(*batch))
        return deleted

    # -- reads (one round trip each) -------------------------------------------

    def get_entities(self, keys: Iterable[str]) -> dict[str, EntityRecord]:
        wanted = list(dict.fromkeys(keys))
        rows = self._hgetall_many([self.keys.entity(k) for k in wanted])
        return {k: _entity_from(row) for k, row in zip(wanted, rows, strict=True) if row}

    def chunk_ids_of_few(self, keys: Iterable[str], at_most: int) -> dict[str, tuple[str, ...]]:
        """The source chunk ids of those entities that cite at most `at_most` chunks
        (the others, and missing entities, are left out), in one round trip. A hub's
        long list is never parsed: chunk ids ("chunk-" + hex) hold no comma, so a list
        with `at_most` commas has too many."""
        wanted = list(dict.fromkeys(keys))
        pipe = self._client.pipeline(transaction=False)
        for key in wanted:
            pipe.hget(self.keys.entity(key), "source_chunk_ids")
        found = pipe.execute() if wanted else []
        return {
            key: _load_list(text)
            for key, text in zip(wanted, found, strict=True)
            if text is not None and text.count(",") < at_most
        }

    def get_relations(self, pairs: Iterable[Pair]) -> dict[Pair, RelationRecord]:
        """Relations by pair, in either order; the result is keyed by the sorted pair."""
        wanted = list(dict.fromkeys(relation_pair(*p) for p in pairs))
        rows = self._hgetall_many([self.keys.relation(p) for p in wanted])
        return {p: _relation_from(row) for p, row in zip(wanted, rows, strict=True) if row}

    def get_relations_with_endpoints(
        self, pairs: Iterable[Pair]
    ) -> tuple[dict[Pair, RelationRecord], dict[str, EntityRecord]]:
        """Relations by pair plus the entities at their ends, in one round trip.

        What `global` mode needs after a relation vector search. Relations are
        read before entities in the pipeline, so with batches applied atomically
        every relation returned has both endpoints in the result.
        """
        wanted = list(dict.fromkeys(relation_pair(*p) for p in pairs))
        ends = list(dict.fromkeys(key for pair in wanted for key in pair))
        rows = self._hgetall_many(
            [self.keys.relation(p) for p in wanted] + [self.keys.entity(k) for k in ends]
        )
        relations = {
            p: _relation_from(row)
            for p, row in zip(wanted, rows[: len(wanted)], strict=True)
            if row
        }
        entities = {
            k: _entity_from(row) for k, row in zip(ends, rows[len(wanted) :], strict=True) if row
        }
        return relations, entities

    def entities_by_alias(self, keys: Iterable[str]) -> dict[str, list[str]]:
        """The keys that are aliases, each with the (sorted) keys of the entities
        carrying it; keys that are no one's alias are left out."""
        wanted = list(dict.fromkeys(keys))
        pipe = self._client.pipeline(transaction=False)
        for key in wanted:
            pipe.smembers(self.keys.alias(key))
        return _aliases_from(wanted, pipe.execute() if wanted else [])

    def lookup_names(
        self, keys: Iterable[str]
    ) -> tuple[dict[str, EntityRecord], dict[str, list[str]]]:
        """Each key both as an entity key and as an alias, in one round trip: what
        `get_entities` and `entities_by_alias` return for them."""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}, {}
        pipe = self._client.pipeline(transaction=False)
        for key in wanted:
            pipe.hgetall(self.keys.entity(key))
        for key in wanted:
            pipe.smembers(self.keys.alias(key))
        replies = pipe.execute()
        rows, members = replies[: len(wanted)], replies[len(wanted) :]
        entities = {k: _entity_from(row) for k, row in zip(wanted, rows, strict=True) if row}
        return entities, _aliases_from(wanted, members)

    def node_degrees(self, keys: Iterable[str]) -> dict[str, int]:
        """Number of relations touching each key (0 for unknown keys)."""
        wanted = list(dict.fromkeys(keys))
        pipe = self._client.pipeline(transaction=False)
        for key in wanted:
            pipe.scard(self.keys.adjacency(key))
        counts = pipe.execute() if wanted else []
        return {k: int(n) for k, n in zip(wanted, counts, strict=True)}

    def edges_of(self, keys: Iterable[str]) -> dict[str, list[Pair]]:
        """The (sorted) pairs of every relation touching each key, in pair order."""
        wanted = list(dict.fromkeys(keys))
        pipe = self._client.pipeline(transaction=False)
        for key in wanted:
            pipe.smembers(self.keys.adjacency(key))
        members = pipe.execute() if wanted else []
        return {
            key: sorted(relation_pair(key, other) for other in others)
            for key, others in zip(wanted, members, strict=True)
        }

    def edge_degrees(self, pairs: Iterable[Pair]) -> dict[Pair, int]:
        """Edge degree of each pair: the sum of its endpoints' degrees (LightRAG's rank)."""
        wanted = list(dict.fromkeys(relation_pair(*p) for p in pairs))
        degrees = self.node_degrees(key for pair in wanted for key in pair)
        return {pair: degrees[pair[0]] + degrees[pair[1]] for pair in wanted}

    def get_neighbours(self, keys: Iterable[str]) -> dict[str, list[tuple[str, int]]]:
        """Each key's neighbours with the neighbour's degree, in neighbour-key order.

        A key's own degree is the length of its list, so the edge degree of
        (key, neighbour) is ``len(result[key]) + neighbour_degree`` with no
        further round trip.
        """
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}
        rows = self._client.eval(_NEIGHBOURS_SCRIPT, 0, self.keys.adjacency_prefix, *wanted)
        result: dict[str, list[tuple[str, int]]] = {}
        for key, row in zip(wanted, rows, strict=True):
            pairs = [(str(row[i]), int(row[i + 1])) for i in range(0, len(row), 2)]
            result[key] = sorted(pairs)
        return result

    def get_chunks(self, chunk_ids: Iterable[str]) -> dict[str, Chunk]:
        wanted = list(dict.fromkeys(chunk_ids))
        rows = self._hgetall_many([self.keys.chunk(c) for c in wanted])
        return {c: _chunk_from(row) for c, row in zip(wanted, rows, strict=True) if row}

    def get_documents(self, doc_ids: Iterable[str]) -> dict[str, StoredDocument]:
        wanted = list(dict.fromkeys(doc_ids))
        rows = self._hgetall_many([self.keys.document(d) for d in wanted])
        return {d: _document_from(row) for d, row in zip(wanted, rows, strict=True) if row}

    def documents_by_status(
        self, status: DocumentStatus, offset: int = 0, limit: int = 100
    ) -> tuple[list[str], int]:
        """A page of doc ids with `status` (in id order) and how many there are."""
        if offset < 0 or limit < 0:
            raise ValueError(f"offset and limit must be >= 0; got offset={offset}, limit={limit}")
        key = self.keys.status(status)
        pipe = self._client.pipeline(transaction=False)
        if limit:
            pipe.zrange(key, offset, offset + limit - 1)
        pipe.zcard(key)
        replies = pipe.execute()
        ids = [str(i) for i in replies[0]] if limit else []
        return ids, int(replies[-1])

    def status_counts(self) -> dict[DocumentStatus, int]:
        pipe = self._client.pipeline(transaction=False)
        for status in DocumentStatus:
            pipe.zcard(self.keys.status(status))
        counts = pipe.execute()
        return {status: int(n) for status, n in zip(DocumentStatus, counts, strict=True)}

    def set_consumer_lag(self, lag: dict[int, int]) -> None:
        """Record the indexer's Kafka lag per partition (for `kgstream status`)."""
        pipe = self._client.pipeline(transaction=True)
        pipe.delete(self.keys.consumer_lag)
        if lag:
            pipe.hset(self.keys.consumer_lag, mapping={str(p): n for p, n in lag.items()})
        pipe.execute()

    def consumer_lag(self) -> dict[int, int]:
        raw = self._client.hgetall(self.keys.consumer_lag)
        return {int(partition): int(lag) for partition, lag in sorted(raw.items())}

    def set_source_hold(self, reason: str | None) -> None:
        """Record why the indexer's source holds (its watched folder is missing), or that it
        does not (None), for `kgstream status`."""
        if reason is None:
            self._client.delete(self.keys.source_hold)
        else:
            self._client.set(self.keys.source_hold, reason)

    def source_hold(self) -> str | None:
        reason = self._client.get(self.keys.source_hold)
        return None if reason is None else str(reason)

    def record_dead_letter(self, origin: str, reason: str, at: float) -> None:
        """Remember a message the indexer could not decode (for `kgstream status`).

        Idempotent: a replayed message (the same origin and reason) is one entry, kept with
        the time it was first seen. Only the newest `DEAD_LETTERS_KEPT` are kept."""
        member = json.dumps([origin, reason], ensure_ascii=False)
        pipe = self._client.pipeline(transaction=True)
        pipe.zadd(self.keys.dead_letters, {member: at}, nx=True)
        pipe.zremrangebyrank(self.keys.dead_letters, 0, -DEAD_LETTERS_KEPT - 1)
        pipe.execute()

    def dead_letters(self, limit: int = 10) -> tuple[int, list[tuple[str, str, float]]]:
        """How many dead letters are kept, and the newest `limit` as (origin, reason, time)."""
        pipe = self._client.pipeline(transaction=False)
        pipe.zcard(self.keys.dead_letters)
        if limit > 0:
            pipe.zrevrange(self.keys.dead_letters, 0, limit - 1, withscores=True)
        replies = pipe.execute()
        total, newest = replies[0], replies[1] if limit > 0 else []
        letters = []
        for member, at in newest:
            origin, reason = json.loads(member)
            letters.append((str(origin), str(reason), float(at)))
        return int(total), letters

    def request_retry(self, at: float) -> str:
        """Append a request to retry every document whose extraction failed to the
        retry-request stream (read by the indexer's retry input,
        `connectors/redis/retry_requests.py`); returns its stream id. A request names no
        document, so the stream keeps no trace of deleted ones."""
        entry = self._client.xadd(
            self.keys.retry_requests,
            {"at": repr(at)},
            maxlen=RETRY_REQUESTS_KEPT,
            approximate=True,
        )
        return str(entry)

    def retry_requests_after(self, last_id: str, count: int) -> list[str]:
        """The stream ids of up to `count` retry requests after `last_id` ("0" = from the
        start), oldest first; never blocks."""
        start = "-" if last_id == "0" else f"({last_id}"
        rows = self._client.xrange(self.keys.retry_requests, start, "+", count=count)
        return [str(entry) for entry, _ in rows or ()]

    def last_retry_request_id(self) -> str:
        """The newest retry request's stream id ("0" when there is none)."""
        rows = self._client.xrevrange(self.keys.retry_requests, "+", "-", count=1)
        return str(rows[0][0]) if rows else "0"

    def version(self) -> int:
        """The index version: how many batches have been applied to this workspace."""
        value = self._client.get(self.keys.version)
        return int(value) if value is not None else 0

    def wait_for_version(
        self,
        version: int,
        timeout_seconds: float,
        poll_interval_seconds: float = 0.005,
        give_up: Callable[[], bool] | None = None,
    ) -> int:
        """Return the current version once it is >= `version` (read-your-writes).

        Polls, because a GET every few milliseconds is cheap and, unlike a
        subscription, cannot miss a notification across a reconnect.
        Raises TimeoutError when `timeout_seconds` pass first, InterruptedError as soon
        as `give_up()` is true (the caller is no longer waiting: a cancelled call).
        """
        deadline = time.monotonic() + timeout_seconds
        while True:
            current = self.version()
            if current >= version:
                return current
            if give_up is not None and give_up():
                raise InterruptedError(
                    f"stopped waiting for index version {version} of workspace "
                    f"{self.workspace!r} (at {current}): the caller gave up"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"index version of workspace {self.workspace!r} is {current}, still "
                    f"below {version} after {timeout_seconds} s; the indexer may be "
                    "behind or stopped"
                )
            time.sleep(min(poll_interval_seconds, remaining))

    # -- export (SCAN) -------------------------------------------------------

    def record_counts(self) -> dict[str, int]:
        """How many entities, relations and chunks the workspace holds (one SCAN of each
        kind's keys: a second or so per million records)."""
        kinds = {"entities": "ent", "relations": "rel", "chunks": "chunk"}
        return {
            name: sum(len(keys) for keys in self._scan_keys(kind)) for name, kind in kinds.items()
        }

    def iter_entities(self) -> Iterator[EntityRecord]:
        return (_entity_from(row) for row in self._scan_hashes("ent"))

    def iter_relations(self) -> Iterator[RelationRecord]:
        return (_relation_from(row) for row in self._scan_hashes("rel"))

    def iter_aliases(self) -> Iterator[tuple[str, tuple[str, ...]]]:
        """Every alias with the sorted keys of the entities carrying it, in no set order."""
        for keys in self._scan_keys("alias"):
            pipe = self._client.pipeline(transaction=False)
            for key in keys:
                pipe.smembers(key)
            for key, members in zip(keys, pipe.execute(), strict=True):
                if members:
                    yield self.keys.alias_of(key), tuple(sorted(members))

    def iter_chunks(self) -> Iterator[Chunk]:
        return (_chunk_from(row) for row in self._scan_hashes("chunk"))

    def iter_documents(self) -> Iterator[StoredDocument]:
        return (_document_from(row) for row in self._scan_hashes("doc"))

    # -- helpers -------------------------------------------------------------

    def _hgetall_many(self, keys: Sequence[str]) -> list[dict[str, str]]:
        if not keys:
            return []
        pipe = self._client.pipeline(transaction=False)
        for key in keys:
            pipe.hgetall(key)
        return list(pipe.execute())

    def _scan_hashes(self, kind: str) -> Iterator[dict[str, str]]:
        """Every hash of one kind, each once, in no set order."""
        for keys in self._scan_keys(kind):
            yield from (row for row in self._hgetall_many(keys) if row)

    def _scan_keys(self, kind: str) -> Iterator[list[str]]:
        """Every key of one kind, each once (SCAN may repeat keys), in batches."""
        seen: set[str] = set()
        pending: list[str] = []
        for key in self._client.scan_iter(match=self.keys.pattern(kind), count=1000):
            if key in seen:
                continue
            seen.add(key)
            pending.append(key)
            if len(pending) >= _SCAN_BATCH:
                yield pending
                pending = []
        if pending:
            yield pending
