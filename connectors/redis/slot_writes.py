"""A graph batch on a Redis Cluster: per-slot writes in phases that readers can rely on.

A cluster runs MULTI/EXEC and scripts on the keys of one hash slot only, so a batch cannot
be one transaction there. Instead it is written in phases; each phase is one Lua call per
slot (atomic on that slot), sent as one pipeline (one round trip per node), and a phase
starts only once the one before has been applied everywhere:

1. *withdraw*: the batch's documents (those it writes and its `withdrawn_documents`) whose
   stored status is PROCESSED become PROCESSING (hash and status sets), so none of them
   reads as PROCESSED while its records change;
2. *retract and prepare*: relation deletes with their adjacency, the alias index moves
   (computed from the aliases stored in the entity hashes, read before phase 1), chunks;
3. *entities*: entity upserts and deletes, with their long lists' sorted sets
   (connectors/redis/written_lists.py: a set shares its record's hash tag, so its slot's call);
4. *relations*: relation upserts with their adjacency and their sorted sets (a deleted
   relation's go in phase 2, with it);
5. *documents*: document records and the status sets;
6. the index version's INCR (with the graph projection's queries, when it is written: one
   MULTI/EXEC on the version's slot, connectors/redis/projection_control.py).

So a document is PROCESSED only while all its records are there; an entity is written
before any relation that points at it, and deleted after the relations that did; the
version moves only once the whole batch is in. Why the alias index moves in phase 2 and
not with its entity: a retried batch reads the stored aliases again, and they must still
be the old ones for as long as any alias set may still hold the entity under them.

Every command is idempotent (HSET, DEL, SADD, SREM, ZADD, ZREM), so a batch cut short by
an outage is retried whole (`OutageWait`, connectors/errors.py) and ends as if written once;
only the version can count one batch twice, which keeps it monotonic. What a reader sees
meanwhile is in docs/decisions/0019-graph-state-in-plain-redis.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import NoScriptError

from connectors.redis.keys import KeyLayout
from connectors.redis.records import (
    HashFields,
    chunk_fields,
    document_fields,
    entity_fields,
    latest_documents,
    load_list,
    relation_fields,
    status_moves,
)
from connectors.redis.written_lists import ListPlan, side_lists
from dataflow.core.commit import GraphBatch
from dataflow.core.documents import DocumentStatus
from dataflow.core.naming import relation_pair

# One slot's commands, atomically. KEYS: the slot's keys. ARGV: the commands, each as its
# length n and then n words: the command's name, the index of its key in KEYS, and its
# other arguments. The shebang makes Redis refuse a key outside the declared slot.
APPLY_SCRIPT = """#!lua
local i = 1
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  local call = {ARGV[i + 1], KEYS[tonumber(ARGV[i + 2])]}
  for j = i + 3, i + n do call[#call + 1] = ARGV[j] end
  redis.call(unpack(call))
  i = i + n + 1
end
return #KEYS
"""
_APPLY_SHA = hashlib.sha1(APPLY_SCRIPT.encode()).hexdigest()

# Members per SADD/SREM/ZREM/ZADD command: Lua's unpack takes up to about 8,000 values.
MEMBERS_PER_COMMAND = 1000


@dataclass
class _Slot:
    keys: dict[str, int] = field(default_factory=dict)  # key -> its index in KEYS (from 1)
    argv: list[str] = field(default_factory=list)


@dataclass
class SlotWrites:
    """One phase: commands grouped by the hash slot of their key."""

    slots: dict[int, _Slot] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.slots)

    def add(self, command: str, key: str, *args: str) -> None:
        slot = self.slots.setdefault(key_slot(key.encode()), _Slot())
        index = slot.keys.setdefault(key, len(slot.keys) + 1)
        slot.argv += [str(2 + len(args)), command, str(index), *args]

    def add_each(self, command: str, key: str, members: Sequence[str], width: int = 1) -> None:
        """`command key` over `members` (taken `width` values at a time: 2 for ZADD's
        score-member pairs), in commands of at most `MEMBERS_PER_COMMAND` members."""
        step = MEMBERS_PER_COMMAND * width
        for start in range(0, len(members), step):
            self.add(command, key, *members[start : start + step])

    def add_hash(self, key: str, fields: HashFields) -> None:
        self.add("HSET", key, *(str(part) for item in fields.items() for part in item))

    def calls(self) -> Iterator[tuple[list[str], list[str]]]:
        """Each slot's (KEYS, ARGV) for `APPLY_SCRIPT`."""
        for slot in self.slots.values():
            yield list(slot.keys), slot.argv


@dataclass(frozen=True)
class StoredState:
    """What the phases depend on, read before the first: the aliases stored in the
    entity hashes the batch writes or deletes, and which of its documents are PROCESSED."""

    aliases: dict[str, tuple[str, ...]]
    processed: frozenset[str]


def read_state(client: RedisCluster, keys: KeyLayout, batch: GraphBatch) -> StoredState:
    entities = list(dict.fromkeys([e.key for e in batch.entity_upserts] + [*batch.entity_deletes]))
    documents = _touched_documents(batch)
    if not entities and not documents:
        return StoredState({}, frozenset())
    pipe = pipeline(client)
    for key in entities:
        pipe.hget(keys.entity(key), "aliases")
    for doc_id in documents:
        pipe.hget(keys.document(doc_id), "status")
    replies = pipe.execute()
    aliases = {
        key: load_list(text)
        for key, text in zip(entities, replies[: len(entities)], strict=True)
        if text is not None
    }
    processed = frozenset(
        doc_id
        for doc_id, status in zip(documents, replies[len(entities) :], strict=True)
        if status == DocumentStatus.PROCESSED.value
    )
    return StoredState(aliases, processed)


def plan_phases(
    keys: KeyLayout, batch: GraphBatch, stored: StoredState, stamp: str, lists: ListPlan
) -> list[SlotWrites]:
    """The batch as phases 1-5 of the module docstring (the version's INCR is the caller's)."""
    withdraw, prepare, entities, relations, documents = (SlotWrites() for _ in range(5))

    withdrawn = [d for d in _touched_documents(batch) if d in stored.processed]
    for doc_id in withdrawn:
        withdraw.add("HSET", keys.document(doc_id), "status", DocumentStatus.PROCESSING.value)
    withdraw.add_each("ZREM", keys.status(DocumentStatus.PROCESSED), withdrawn)
    withdraw.add_each("ZADD", keys.status(DocumentStatus.PROCESSING), _scored(withdrawn), 2)

    removed_pairs = [relation_pair(*p) for p in batch.relation_deletes]
    for pair in removed_pairs:
        prepare.add("DEL", keys.relation(pair))
    for adjacency, members in keys.adjacency_changes(removed_pairs).items():
        prepare.add_each("SREM", adjacency, members)
    new_aliases = {e.key: e.aliases for e in batch.entity_upserts}
    new_aliases.update(dict.fromkeys(batch.entity_deletes, ()))
    for key, aliases in new_aliases.items():
        for alias in stored.aliases.get(key, ()):
            if alias not in aliases:
                prepare.add("SREM", keys.alias(alias), key)
        for alias in aliases:
            prepare.add("SADD", keys.alias(alias), key)
    for chunk in batch.chunk_upserts:
        prepare.add_hash(keys.chunk(chunk.chunk_id), chunk_fields(chunk))
    for chunk_id in batch.chunk_deletes:
        prepare.add("DEL", keys.chunk(chunk_id))

    for pair in removed_pairs:
        _delete_side_lists(prepare, keys, keys.relation(pair))
    for entity in batch.entity_upserts:
        key = keys.entity(entity.key)
        left_out, marked = lists.fields_left_out(key), lists.fields_marked(key)
        entities.add_hash(key, entity_fields(entity, left_out, marked))
    for key in batch.entity_deletes:
        entities.add("DEL", keys.entity(key))
        _delete_side_lists(entities, keys, keys.entity(key))

    for relation in batch.relation_upserts:
        key = keys.relation(relation.pair)
        left_out, marked = lists.fields_left_out(key), lists.fields_marked(key)
        relations.add_hash(key, relation_fields(relation, left_out, marked))
    # A record's sorted sets change in its own phase, in its slot's call: its hash tag.
    for side in lists.side_deletes:
        (entities if side.startswith(keys.entity_side_lists) else relations).add("DEL", side)
    for write in lists.side_writes:
        phase = entities if write.key.startswith(keys.entity_side_lists) else relations
        if write.whole:
            phase.add("DEL", write.key)
        phase.add_each("ZREM", write.key, write.removed)
        phase.add_each("ZADD", write.key, _scored(write.added), 2)
    added_pairs = [relation.pair for relation in batch.relation_upserts]
    for adjacency, members in keys.adjacency_changes(added_pairs).items():
        relations.add_each("SADD", adjacency, members)

    for doc_id in batch.document_deletes:
        documents.add("DEL", keys.document(doc_id))
    for status in DocumentStatus if batch.document_deletes else ():
        documents.add_each("ZREM", keys.status(status), list(batch.document_deletes))
    upserts = latest_documents(batch)
    for document in upserts.values():
        doc_key = keys.document(document.doc_id)
        documents.add_hash(doc_key, document_fields(document, stamp))
        documents.add("HSETNX", doc_key, "created_at", stamp)
    for status, now_in, elsewhere in status_moves(upserts.values()):
        documents.add_each("ZREM", keys.status(status), elsewhere)
        documents.add_each("ZADD", keys.status(status), _scored(now_in), 2)
    return [withdraw, prepare, entities, relations, documents]


def apply_to_cluster(
    client: RedisCluster,
    keys: KeyLayout,
    batch: GraphBatch,
    stamp: str,
    lists: ListPlan,
    bump: Callable[[], int] | None = None,
) -> int:
    """Write `batch` phase by phase (records leaving out the lists `lists` says the store
    has), then advance the version (by `bump`, when the version's INCR carries more: the
    graph projection's queries); returns the new version."""
    stored = read_state(client, keys, batch)
    for phase in plan_phases(keys, batch, stored, stamp, lists):
        if phase:
            run_phase(client, phase)
    return bump() if bump is not None else int(client.incr(keys.version))


def run_phase(client: RedisCluster, phase: SlotWrites) -> None:
    """One `APPLY_SCRIPT` call per slot in one pipeline; the script body is sent only to
    nodes that do not have it cached yet (a first call, a restarted node)."""
    calls = list(phase.calls())
    missing = _call_scripts(client, calls, "EVALSHA", _APPLY_SHA)
    if missing:
        _call_scripts(client, missing, "EVAL", APPLY_SCRIPT)


def _call_scripts(
    client: RedisCluster, calls: list[tuple[list[str], list[str]]], command: str, script: str
) -> list[tuple[list[str], list[str]]]:
    """Run `calls`; return those refused for want of the script (NOSCRIPT), raise others."""
    pipe = pipeline(client)
    for slot_keys, argv in calls:
        # Naming the node spares redis-py a COMMAND GETKEYS round trip per script call
        # (a script's keys are "movable" to its key parser); a MOVED reply is still followed.
        node = client.get_node_from_key(slot_keys[0])  # type: ignore[no-untyped-call]
        pipe.execute_command(command, script, len(slot_keys), *slot_keys, *argv, target_nodes=node)
    replies = pipe.execute(raise_on_error=False)
    missing = []
    for call, reply in zip(calls, replies, strict=True):
        if isinstance(reply, NoScriptError):
            missing.append(call)
        elif isinstance(reply, Exception):
            raise reply
    return missing


def pipeline(client: RedisCluster) -> Any:
    """A non-transactional cluster pipeline: commands grouped by node, one round trip each
    (redis-py's `ClusterPipeline` carries no type annotations)."""
    return client.pipeline(transaction=False)  # type: ignore[no-untyped-call]


def _delete_side_lists(phase: SlotWrites, keys: KeyLayout, record: str) -> None:
    """Delete the sorted sets a deleted record's lists may be in (written_lists.py)."""
    for side in side_lists(keys.side_list, record):
        phase.add("DEL", side)


def _touched_documents(batch: GraphBatch) -> list[str]:
    ids = [d.doc_id for d in batch.document_upserts] + [
        *batch.document_deletes,
        *batch.withdrawn_documents,
    ]
    return list(dict.fromkeys(ids))


def _scored(members: Sequence[str]) -> list[str]:
    """ZADD's arguments: every member with score 0 (status sets are in id order)."""
    return [part for member in members for part in ("0", member)]
