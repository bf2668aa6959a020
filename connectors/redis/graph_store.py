"""The graph records in Redis (the `GraphRecords` port of `connectors/redis/ports.py`):
entities, relations, adjacency, chunks, document status and the index version.

Plain Redis data structures only (hashes, sets, sorted sets, one counter), so
the same code runs on the embedded redis-server, Redis 7+, Valkey or a managed
Redis, standalone or a Redis Cluster. Every write is an idempotent upsert or
delete by a deterministic id. On one Redis node a `GraphBatch` is applied as one
MULTI/EXEC together with the increment of the index version: a reader sees all of
a batch or none of it, so never an edge without its endpoints, and a replayed batch
leaves the data as they were. A batch's `withdrawn_documents` (the documents whose
records it changes while another writer owns their status) leave PROCESSED in it. On a
Redis Cluster a batch is written slot by slot in phases (`connectors/redis/slot_writes.py`),
ordered so that a reader still never sees a PROCESSED document whose records are missing,
an edge without its endpoints, or a version whose batch is not whole. The key layout is
in `connectors/redis/keys.py`; records as hashes in `connectors/redis/records.py`. The
control plane shares the client and the workspace (`connectors/redis/index_control.py`).

The alias index is kept exact the way adjacency is: written with the records it follows.
Adjacency needs no read, since a relation upsert or delete says which edge to add or drop;
an entity upsert only says its new aliases, so the entity's stored aliases are read (on
one node by a script inside the transaction; on a cluster before the batch's phases), the
entity is removed from the alias sets it no longer has and added to the rest (a delete is
an upsert to no aliases).

When the graph projection is on (`open_projection`), each batch's FalkorDB queries
(connectors/redis/projection.py) run in its transaction before the version's INCR; on a
cluster, in one MULTI/EXEC with the INCR on the version's slot, after the phases.

The records' layout is stamped in the workspace (`GRAPH_FORMAT`): a workspace whose records
carry another stamp, or none, is refused with the commands that rebuild it
(`GraphStore.check_format`), never read with defaults for what its records lack.

Scripts touch the keys of one slot per call on a cluster: there the neighbour and alias
scripts (which compute key names of other slots) are replaced by pipelined reads and by
the per-slot writes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain
from typing import Any

from redis.client import Pipeline
from redis.cluster import RedisCluster

from connectors.redis.clients import RedisClient, connect
from connectors.redis.keys import KeyLayout, Pair
from connectors.redis.ports import GraphFormatError, StoredDocument
from connectors.redis.projection import GraphProjection
from connectors.redis.projection_control import (
    ProjectionDecision,
    ProjectionFailed,
    ProjectionMode,
    check_replies,
    create_schema,
    node_client,
    open_projection,
    queue_batch,
    write_batch,
)
from connectors.redis.records import (
    ReadFields,
    aliases_from,
    check_batch,
    chunk_fields,
    chunk_from,
    document_fields,
    document_from,
    dump_list,
    entity_fields,
    entity_from,
    entity_lists,
    latest_documents,
    load_list,
    relation_fields,
    relation_from,
    relation_lists,
    status_moves,
)
from connectors.redis.slot_writes import apply_to_cluster
from connectors.redis.written_lists import (
    SIDE,
    SIDE_FIELDS,
    SIDE_MARKER,
    ListPlan,
    SideWrite,
    WrittenLists,
)
from dataflow.core.chunking import Chunk
from dataflow.core.commit import GraphBatch
from dataflow.core.contributions import EntityRecord, RelationRecord
from dataflow.core.documents import DocumentStatus
from dataflow.core.naming import relation_pair

GRAPH_FORMAT = "kgstream-graph/2"
"""The layout of the records this kgstream writes and reads (hashes as records.py makes them,
a FAILED document's record naming its failure kind), kept in the workspace's `format` key."""

_SCAN_BATCH = 500
_SIDE_BATCH = 1_000  # members a ZADD sends at once

# For each entity key in ARGV[2..]: its neighbours, each followed by the
# neighbour's degree. Computing adjacency key names here (same escaping as
# `keys.escape`) is what makes "neighbours with degrees" one round trip.
_NEIGHBOURS_SCRIPT = """
local prefix = ARGV[1]
local escapes = {["%"] = "%25", ["{"] = "%7B", ["}"] = "%7D"}
local out = {}
local degrees = {}  -- a hub is a neighbour of most keys asked: count its degree once
for i = 2, #ARGV do
  local members = redis.call("SMEMBERS", prefix .. string.gsub(ARGV[i], "[%%{}]", escapes) .. "}")
  local row = {}
  for _, member in ipairs(members) do
    local degree = degrees[member]
    if degree == nil then
      degree = redis.call("SCARD", prefix .. string.gsub(member, "[%%{}]", escapes) .. "}")
      degrees[member] = degree
    end
    row[#row + 1] = member
    row[#row + 1] = degree
  end
  out[#out + 1] = row
end
return out
"""

# For each (entity key, JSON array of its new alias keys) in ARGV[2..]: move the entity
# from the alias sets of the aliases stored in its hash to those of the new ones. Run in
# the transaction before the entity hashes are written or deleted; same escaping as
# `keys.escape`.
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


# A batch's `withdrawn_documents` on one node, inside its transaction: each document whose
# status is PROCESSED turns PROCESSING (hash and status sets); others are left alone, and a
# missing record is not created. KEYS: the PROCESSED and PROCESSING sets, then the documents'
# hashes; ARGV: the two status values, then the doc ids in the order of their hashes.
_WITHDRAW_SCRIPT = """
for i = 3, #KEYS do
  if redis.call("HGET", KEYS[i], "status") == ARGV[1] then
    redis.call("HSET", KEYS[i], "status", ARGV[2])
    redis.call("ZREM", KEYS[1], ARGV[i])
    redis.call("ZADD", KEYS[2], 0, ARGV[i])
  end
end
return 0
"""


def _delete(pipe: Pipeline, keys: list[str]) -> None:
    if keys:
        pipe.delete(*keys)


def _write_side_lists(pipe: Pipeline, writes: Iterable[SideWrite]) -> None:
    """The changes of long lists' sorted sets (connectors/redis/written_lists.py)."""
    for write in writes:
        if write.whole:
            pipe.delete(write.key)
        if write.removed:
            pipe.zrem(write.key, *write.removed)
        for start in range(0, len(write.added), _SIDE_BATCH):
            pipe.zadd(write.key, dict.fromkeys(write.added[start : start + _SIDE_BATCH], 0))


def _update_alias_index(pipe: Pipeline, layout: KeyLayout, batch: GraphBatch) -> None:
    """Queue the alias script for every entity the batch writes or deletes (before the
    entity hashes change, since it reads the aliases stored there)."""
    changes: list[str] = []
    for entity in batch.entity_upserts:
        changes += [entity.key, dump_list(entity.aliases)]
    for key in batch.entity_deletes:
        changes += [key, "[]"]
    if changes:
        pipe.eval(_ALIASES_SCRIPT, 0, layout.prefix, *changes)


class GraphStore:
    """The graph records of one workspace in Redis (`GraphRecords`).

    Reads take a batch of keys and cost one round trip each (one pipeline or
    one script call); on a Redis Cluster one round trip per node, and two for
    `get_neighbours` and `get_relations_with_endpoints`. A read of records one of which
    keeps a long list in a sorted set (a hub's, on one server: written_lists.py) takes one
    more, for the sets. The client (a `redis.Redis`
    or a `redis.cluster.RedisCluster`) must decode responses (``decode_responses=True``).
    """

    def __init__(self, client: RedisClient, workspace: str = "default") -> None:
        if not client.get_connection_kwargs().get("decode_responses"):
            raise ValueError("GraphStore needs a redis client created with decode_responses=True")
        self._client = client
        self._cluster = client if isinstance(client, RedisCluster) else None
        self.keys = KeyLayout(workspace)
        self._written = WrittenLists(self.keys.side_list)
        self._format_checked = False
        self._projection: GraphProjection | None = None

    @classmethod
    def from_url(cls, url: str, workspace: str = "default") -> GraphStore:
        """A store with its own client: one server (`redis://`, `rediss://`, `unix://`) or a
        Redis Cluster (`redis+cluster://`, `rediss+cluster://`; `connectors/redis/clients.py`)."""
        return cls(connect(url), workspace)

    @property
    def workspace(self) -> str:
        return self.keys.workspace

    @property
    def client(self) -> RedisClient:
        return self._client

    @property
    def is_cluster(self) -> bool:
        return self._cluster is not None

    def ping(self) -> None:
        """Raise when Redis cannot be reached (the gateway's health check)."""
        self._client.ping()

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> GraphStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def check_format(self) -> None:
        """Stamp `GRAPH_FORMAT` on a workspace that holds no records yet; raise
        `GraphFormatError` when it holds records of another layout, or records without a
        stamp (a version but no format)."""
        pipe = self._client.pipeline(transaction=False)
        pipe.get(self.keys.format)
        pipe.exists(self.keys.version)
        stamp, written = pipe.execute()
        if stamp is None and not written:
            if self._client.set(self.keys.format, GRAPH_FORMAT, nx=True):
                stamp = GRAPH_FORMAT
            else:  # another process stamped it first
                stamp = self._client.get(self.keys.format)
        if stamp != GRAPH_FORMAT:
            found = (
                "by an older kgstream (no format stamp)"
                if stamp is None
                else f"in format {stamp!r}"
            )
            raise GraphFormatError(
                f"workspace {self.workspace!r} holds graph records written {found}, which "
                f"this kgstream (format {GRAPH_FORMAT!r}) does not read. Rebuild the index: "
                "`kgstream index DIR --data NEW` (a new data directory), or `kgstream replay "
                "--data NEW` from its Kafka topic; with a Redis server, into a new workspace "
                "(KGSTREAM_WORKSPACE) or an emptied one."
            )
        self._format_checked = True

    # -- the graph projection ------------------------------------------------------

    def open_projection(self, mode: ProjectionMode) -> ProjectionDecision:
        """Write the graph projection (connectors/redis/projection.py) with every batch from
        now on, as `mode` says (connectors/redis/projection_control.py), or say why not."""
        projection = GraphProjection(self.keys)
        decision = open_projection(self._client, projection, mode)
        self._projection = projection if decision.written else None
        return decision

    @property
    def projection(self) -> GraphProjection | None:
        """The projection this store writes, or None."""
        return self._projection

    # -- writes --------------------------------------------------------------------

    def apply(self, batch: GraphBatch, now: float | None = None) -> int:
        """Apply `batch` and advance the index version: in one MULTI/EXEC on one Redis
        node, in per-slot phases on a cluster (`connectors/redis/slot_writes.py`).

        Returns the new version. `now` (seconds since the epoch; default the
        wall clock) becomes documents' `updated_at`, and `created_at` on their
        first write. Adjacency follows relation upserts and deletes, and the
        alias index entity upserts and deletes (see the module docstring). Deleting
        an entity does not touch its relations: the dataflow deletes those itself
        (edge repair), in the same batch.
        """
        check_batch(batch)
        if not self._format_checked:
            self.check_format()
        seconds = float(time.time() if now is None else now)
        stamp = repr(seconds)
        keys = self.keys
        lists = self.plan_lists(batch)
        projection = self._projection
        queries = [] if projection is None else projection.batch_queries(batch, lists, seconds)
        deleted = [
            *(keys.entity(key) for key in batch.entity_deletes),
            *(keys.relation(relation_pair(*pair)) for pair in batch.relation_deletes),
        ]
        try:
            if self._cluster is not None:
                version = apply_to_cluster(
                    self._cluster,
                    keys,
                    batch,
                    stamp,
                    lists,
                    bump=None if projection is None else self._bump_with(projection, queries),
                )
            else:
                version = self._apply_to_node(batch, stamp, lists, deleted, queries)
        except ProjectionFailed:
            self._projection = None  # behind its records from now on: never written again
            self._written.written(lists, deleted)
            raise
        self._written.written(lists, deleted)
        return version

    def _bump_with(self, projection: GraphProjection, queries: list[str]) -> Callable[[], int]:
        """A cluster's last phase: the projection's queries and the version's INCR, in one
        MULTI/EXEC on the node of their shared slot."""
        return lambda: write_batch(self._client, projection, queries)

    def plan_lists(self, batch: GraphBatch) -> ListPlan:
        """How `apply` writes the long lists of `batch`'s records (`WrittenLists.plan`)."""
        keys = self.keys
        if not self._written.knows_side_lists:
            self._written.know_side_lists(self._client.scan_iter(match=keys.pattern("list")))
        return self._written.plan(
            chain(
                (
                    (keys.entity(e.key), entity_lists(e), e.list_changes)
                    for e in batch.entity_upserts
                ),
                (
                    (keys.relation(r.pair), relation_lists(r), r.list_changes)
                    for r in batch.relation_upserts
                ),
            )
        )

    def forget_written(self) -> None:
        """Write every record whole from now on, until written again (`WrittenLists`): for a
        server that may have lost its last writes."""
        self._written.clear()

    def _apply_to_node(
        self,
        batch: GraphBatch,
        stamp: str,
        lists: ListPlan,
        deleted: Sequence[str],
        queries: Sequence[str],
    ) -> int:
        keys = self.keys
        pipe = self._client.pipeline(transaction=True)
        if batch.withdrawn_documents:
            withdrawn = batch.withdrawn_documents
            statuses = (
                keys.status(DocumentStatus.PROCESSED),
                keys.status(DocumentStatus.PROCESSING),
            )
            pipe.eval(
                _WITHDRAW_SCRIPT,
                2 + len(withdrawn),
                *statuses,
                *(keys.document(doc_id) for doc_id in withdrawn),
                DocumentStatus.PROCESSED.value,
                DocumentStatus.PROCESSING.value,
                *withdrawn,
            )
        removed_pairs = [relation_pair(*p) for p in batch.relation_deletes]
        _delete(pipe, [keys.relation(pair) for pair in removed_pairs])
        for adjacency, members in keys.adjacency_changes(removed_pairs).items():
            pipe.srem(adjacency, *members)
        _update_alias_index(pipe, keys, batch)
        _delete(pipe, [keys.entity(key) for key in batch.entity_deletes])
        _delete(pipe, [side for key in deleted for side in self._written.side_lists_of(key)])
        _delete(pipe, lists.side_deletes)
        _delete(pipe, [keys.chunk(chunk_id) for chunk_id in batch.chunk_deletes])
        _delete(pipe, [keys.document(doc_id) for doc_id in batch.document_deletes])
        if batch.document_deletes:
            for status in DocumentStatus:
                pipe.zrem(keys.status(status), *batch.document_deletes)
        for relation in batch.relation_upserts:
            key = keys.relation(relation.pair)
            left_out, marked = lists.fields_left_out(key), lists.fields_marked(key)
            pipe.hset(key, mapping=relation_fields(relation, left_out, marked))
        added_pairs = [relation.pair for relation in batch.relation_upserts]
        for adjacency, members in keys.adjacency_changes(added_pairs).items():
            pipe.sadd(adjacency, *members)
        for entity in batch.entity_upserts:
            key = keys.entity(entity.key)
            left_out, marked = lists.fields_left_out(key), lists.fields_marked(key)
            pipe.hset(key, mapping=entity_fields(entity, left_out, marked))
        _write_side_lists(pipe, lists.side_writes)
        for chunk in batch.chunk_upserts:
            pipe.hset(keys.chunk(chunk.chunk_id), mapping=chunk_fields(chunk))
        documents = latest_documents(batch)
        for document in documents.values():
            doc_key = keys.document(document.doc_id)
            pipe.hset(doc_key, mapping=document_fields(document, stamp))
            pipe.hsetnx(doc_key, "created_at", stamp)
        for status, now_in, elsewhere in status_moves(documents.values()):
            if elsewhere:
                pipe.zrem(keys.status(status), *elsewhere)
            if now_in:
                pipe.zadd(keys.status(status), dict.fromkeys(now_in, 0))
        if self._projection is None:
            pipe.incr(keys.version)
            return int(pipe.execute()[-1])
        count = queue_batch(pipe, self._projection, queries)
        replies = pipe.execute(raise_on_error=False)
        records = [reply for reply in replies[:-count] if isinstance(reply, Exception)]
        if records:
            raise records[0]
        check_replies(self._projection, replies[-count:])
        return int(replies[-1])

    def clear(self) -> int:
        """Delete every key of this workspace (the version, the format stamp and the control
        plane's included); returns how many."""
        deleted = 0
        batch: list[str] = []
        for key in self._client.scan_iter(match=self.keys.prefix + "*", count=1000):
            batch.append(key)
            if len(batch) >= _SCAN_BATCH:
                deleted += int(self._client.unlink(*batch))
                batch = []
        if batch:
            deleted += int(self._client.unlink(*batch))
        deleted += int(self._client.unlink(GraphProjection(self.keys).key))
        if self._projection is not None:  # a new, empty projection, written from here on
            create_schema(node_client(self._client, self._projection.key), self._projection)
        self._written.clear()
        self._format_checked = False  # its stamp went too: the next write stamps it again
        return deleted

    # -- the index version ---------------------------------------------------------

    def version(self) -> int:
        """The index version: how many batches have been applied to this workspace."""
        value = self._client.get(self.keys.version)
        return int(value) if value is not None else 0

    # -- reads (one round trip each) -----------------------------------------------

    def get_entities(self, keys: Iterable[str]) -> dict[str, EntityRecord]:
        wanted = list(dict.fromkeys(keys))
        redis_keys = [self.keys.entity(k) for k in wanted]
        rows = self._read_in(redis_keys, self._hgetall_many(redis_keys))
        return {k: entity_from(row) for k, row in zip(wanted, rows, strict=True) if row}

    def get_entities_and_degrees(
        self, keys: Iterable[str], degrees_only: Iterable[str] = ()
    ) -> tuple[dict[str, EntityRecord], dict[str, int]]:
        """What `get_entities` and `node_degrees` return for `keys`, plus the degrees alone
        of `degrees_only` (entities whose records the caller holds), in one round trip (an
        entity and its adjacency share a slot, so also one per node on a cluster)."""
        wanted = list(dict.fromkeys(keys))
        reading = set(wanted)
        counted = wanted + [key for key in dict.fromkeys(degrees_only) if key not in reading]
        redis_keys = [self.keys.entity(k) for k in wanted]
        rows, degrees = self._hashes_and_degrees(redis_keys, counted)
        read = self._read_in(redis_keys, rows)
        return {k: entity_from(row) for k, row in zip(wanted, read, strict=True) if row}, degrees

    def chunk_ids_of_few(self, keys: Iterable[str], at_most: int) -> dict[str, tuple[str, ...]]:
        """The source chunk ids of those entities that cite at most `at_most` chunks
        (the others, and missing entities, are left out), in one round trip. A hub's
        long list is never parsed: chunk ids ("chunk-" + hex) hold no comma, so a list
        with `at_most` commas has too many, and one in a sorted set has at least `SIDE`."""
        if at_most >= SIDE:
            raise ValueError(f"at_most must be under {SIDE}: a longer list is not in the hash")
        wanted = list(dict.fromkeys(keys))
        pipe = self._client.pipeline(transaction=False)
        for key in wanted:
            pipe.hget(self.keys.entity(key), "source_chunk_ids")
        found = pipe.execute() if wanted else []
        return {
            key: load_list(text)
            for key, text in zip(wanted, found, strict=True)
            if text is not None and text != SIDE_MARKER and text.count(",") < at_most
        }

    def get_relations(self, pairs: Iterable[Pair]) -> dict[Pair, RelationRecord]:
        """Relations by pair, in either order; the result is keyed by the sorted pair."""
        wanted = list(dict.fromkeys(relation_pair(*p) for p in pairs))
        redis_keys = [self.keys.relation(p) for p in wanted]
        rows = self._read_in(redis_keys, self._hgetall_many(redis_keys))
        return {p: relation_from(row) for p, row in zip(wanted, rows, strict=True) if row}

    def get_relations_with_endpoints(
        self, pairs: Iterable[Pair]
    ) -> tuple[dict[Pair, RelationRecord], dict[str, EntityRecord]]:
        """Relations by pair plus the entities at their ends, in one round trip (two on a
        cluster).

        Relations are read before entities, so with entities written before the relations
        that point at them every relation returned has both endpoints in the result. One
        node runs a pipeline's reads in order; a cluster pipeline reads every node at
        once, so there the entities are read in a second round trip.
        """
        wanted = list(dict.fromkeys(relation_pair(*p) for p in pairs))
        ends = list(dict.fromkeys(key for pair in wanted for key in pair))
        if not wanted:
            return {}, {}
        relation_keys = [self.keys.relation(pair) for pair in wanted]
        entity_keys = [self.keys.entity(key) for key in ends]
        pipe = self._client.pipeline(transaction=False)
        for redis_key in relation_keys:
            pipe.hgetall(redis_key)
        if self._cluster is not None:
            # A cluster pipeline reads every node at once: the entities must come after.
            relation_rows = pipe.execute()
            pipe = self._client.pipeline(transaction=False)
        for redis_key in entity_keys:
            pipe.hgetall(redis_key)
        replies = pipe.execute()
        if self._cluster is None:
            relation_rows, replies = replies[: len(wanted)], replies[len(wanted) :]
        both = self._read_in([*relation_keys, *entity_keys], [*relation_rows, *replies])
        relation_rows, replies = both[: len(wanted)], both[len(wanted) :]
        relations = {
            p: relation_from(row) for p, row in zip(wanted, relation_rows, strict=True) if row
        }
        entities = {k: entity_from(row) for k, row in zip(ends, replies, strict=True) if row}
        return relations, entities

    def get_relations_and_end_degrees(
        self, pairs: Iterable[Pair]
    ) -> tuple[dict[Pair, RelationRecord], dict[str, int]]:
        """What `get_relations` returns, plus the `node_degrees` of every end (a relation's
        edge degree is their sum), in one round trip (one per node on a cluster)."""
        wanted = list(dict.fromkeys(relation_pair(*p) for p in pairs))
        if not wanted:
            return {}, {}
        ends = list(dict.fromkeys(key for pair in wanted for key in pair))
        redis_keys = [self.keys.relation(p) for p in wanted]
        rows, degrees = self._hashes_and_degrees(redis_keys, ends)
        read = self._read_in(redis_keys, rows)
        return {p: relation_from(row) for p, row in zip(wanted, read, strict=True) if row}, degrees

    def entities_by_alias(self, keys: Iterable[str]) -> dict[str, list[str]]:
        """The keys that are aliases, each with the (sorted) keys of the entities
        carrying it; keys that are no one's alias are left out."""
        wanted = list(dict.fromkeys(keys))
        pipe = self._client.pipeline(transaction=False)
        for key in wanted:
            pipe.smembers(self.keys.alias(key))
        return aliases_from(wanted, pipe.execute() if wanted else [])

    def lookup_names(
        self, keys: Iterable[str]
    ) -> tuple[dict[str, EntityRecord], dict[str, list[str]]]:
        """Each key both as an entity key and as an alias, in one round trip: what
        `get_entities` and `entities_by_alias` return for them."""
        wanted = list(dict.fromkeys(keys))
        entities, members = self._entities_and(
            wanted, lambda pipe, key: pipe.smembers(self.keys.alias(key))
        )
        return entities, aliases_from(wanted, members)

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
        return {
            key: sorted(relation_pair(key, other) for other in others)
            for key, others in zip(wanted, self._adjacency_of(wanted), strict=True)
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
        if self._cluster is not None:
            return self._neighbours_on_cluster(wanted)
        rows = self._client.eval(_NEIGHBOURS_SCRIPT, 0, self.keys.adjacency_prefix, *wanted)
        result: dict[str, list[tuple[str, int]]] = {}
        for key, row in zip(wanted, rows, strict=True):
            # (neighbour, degree) pairs: the script returns keys as strings, degrees as integers
            result[key] = sorted(zip(row[::2], row[1::2], strict=True))
        return result

    def _neighbours_on_cluster(self, wanted: list[str]) -> dict[str, list[tuple[str, int]]]:
        """`get_neighbours` in two pipelined reads: a script may not read the adjacency
        sets of other slots on a cluster."""
        adjacency = dict(zip(wanted, self._adjacency_of(wanted), strict=True))
        others = list(dict.fromkeys(n for members in adjacency.values() for n in members))
        degrees = self.node_degrees(others)
        return {key: sorted((n, degrees[n]) for n in members) for key, members in adjacency.items()}

    def get_chunks(self, chunk_ids: Iterable[str]) -> dict[str, Chunk]:
        wanted = list(dict.fromkeys(chunk_ids))
        rows = self._hgetall_many([self.keys.chunk(c) for c in wanted])
        return {c: chunk_from(row) for c, row in zip(wanted, rows, strict=True) if row}

    def get_documents(self, doc_ids: Iterable[str]) -> dict[str, StoredDocument]:
        wanted = list(dict.fromkeys(doc_ids))
        rows = self._hgetall_many([self.keys.document(d) for d in wanted])
        return {d: document_from(row) for d, row in zip(wanted, rows, strict=True) if row}

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

    # -- export (SCAN) -------------------------------------------------------------

    def record_counts(self) -> dict[str, int]:
        """How many entities, relations and chunks the workspace holds (one SCAN of each
        kind's keys: a second or so per million records)."""
        kinds = {"entities": "ent", "relations": "rel", "chunks": "chunk"}
        return {
            name: sum(len(keys) for keys in self._scan_keys(kind)) for name, kind in kinds.items()
        }

    def iter_entities(self) -> Iterator[EntityRecord]:
        return (entity_from(row) for row in self._scan_records("ent"))

    def iter_relations(self) -> Iterator[RelationRecord]:
        return (relation_from(row) for row in self._scan_records("rel"))

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
        return (chunk_from(row) for row in self._scan_hashes("chunk"))

    def iter_documents(self) -> Iterator[StoredDocument]:
        return (document_from(row) for row in self._scan_hashes("doc"))

    # -- helpers -------------------------------------------------------------------

    def _entities_and(
        self,
        wanted: Sequence[str],
        command: Callable[[Pipeline, str], object],
    ) -> tuple[dict[str, EntityRecord], list[Any]]:
        """The entities of `wanted` and, in the same round trip, the replies of `command`
        (queued on the pipeline for each entity key), in key order."""
        if not wanted:
            return {}, []
        redis_keys = [self.keys.entity(key) for key in wanted]
        pipe = self._client.pipeline(transaction=False)
        for redis_key in redis_keys:
            pipe.hgetall(redis_key)
        for key in wanted:
            command(pipe, key)
        replies = pipe.execute()
        rows = self._read_in(redis_keys, replies[: len(wanted)])
        entities = {k: entity_from(row) for k, row in zip(wanted, rows, strict=True) if row}
        return entities, list(replies[len(wanted) :])

    def _hashes_and_degrees(
        self, hashes: Sequence[str], entity_keys: Sequence[str]
    ) -> tuple[list[dict[str, str]], dict[str, int]]:
        """The hashes at the Redis keys `hashes` and the `node_degrees` of `entity_keys`,
        in one pipeline."""
        if not hashes and not entity_keys:
            return [], {}
        pipe = self._client.pipeline(transaction=False)
        for key in hashes:
            pipe.hgetall(key)
        for key in entity_keys:
            pipe.scard(self.keys.adjacency(key))
        replies = pipe.execute()
        counts = replies[len(hashes) :]
        return replies[: len(hashes)], {k: int(n) for k, n in zip(entity_keys, counts, strict=True)}

    def _hgetall_many(self, keys: Sequence[str]) -> list[dict[str, str]]:
        if not keys:
            return []
        pipe = self._client.pipeline(transaction=False)
        for key in keys:
            pipe.hgetall(key)
        return list(pipe.execute())

    def _adjacency_of(self, keys: Sequence[str]) -> list[set[str]]:
        """The adjacency set of each entity key, in one pipeline."""
        if not keys:
            return []
        pipe = self._client.pipeline(transaction=False)
        for key in keys:
            pipe.smembers(self.keys.adjacency(key))
        return list(pipe.execute())

    def _scan_hashes(self, kind: str) -> Iterator[dict[str, str]]:
        """Every hash of one kind, each once, in no set order."""
        for keys in self._scan_keys(kind):
            yield from (row for row in self._hgetall_many(keys) if row)

    def _scan_records(self, kind: str) -> Iterator[ReadFields]:
        """Every entity or relation record, each once, in no set order, its long lists read
        in."""
        for keys in self._scan_keys(kind):
            yield from (row for row in self._read_in(keys, self._hgetall_many(keys)) if row)

    def _read_in(
        self, redis_keys: Sequence[str], rows: Sequence[dict[str, str]]
    ) -> list[ReadFields]:
        """`rows`, the hashes at `redis_keys`, with each list that is in a sorted set read in
        (connectors/redis/written_lists.py): in a second round trip, only when a row has one.
        A write between the two reads can make such a record newer than its hash or, when
        it was deleted meanwhile, leave the list empty."""
        marked = [
            (index, name)
            for index, row in enumerate(rows)
            if row
            for name in SIDE_FIELDS
            if row.get(name) == SIDE_MARKER
        ]
        if not marked:
            return list(rows)
        pipe = self._client.pipeline(transaction=False)
        for index, name in marked:
            pipe.zrange(self.keys.side_list(redis_keys[index], name), 0, -1)
        read: list[ReadFields] = list(rows)
        for (index, name), values in zip(marked, pipe.execute(), strict=True):
            read[index] = {**read[index], name: tuple(values)}
        return read

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
