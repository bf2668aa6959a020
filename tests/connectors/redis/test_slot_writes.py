"""Graph batches on a Redis Cluster (connectors/redis/slot_writes.py), beyond the contract
suite (test_graph_store.py, which runs on the cluster too): a batch cut short anywhere
is retried whole by the indexer, and must then leave exactly what one write leaves."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TypeVar

import pytest
from redis.cluster import RedisCluster

from connectors.redis.graph_store import GraphStore
from connectors.redis.slot_writes import SlotWrites, plan_phases, read_state, run_phase
from connectors.redis.written_lists import SIDE
from dataflow.core.chunking import Chunk
from dataflow.core.commit import GraphBatch
from dataflow.core.contributions import EntityRecord, RelationRecord
from dataflow.core.documents import DocumentStatus
from tests.connectors.redis.test_graph_store import document, entity, relation, snapshot
from tests.support.redis import RedisTestCluster

_workspaces = itertools.count()
R = TypeVar("R", EntityRecord, RelationRecord)


def cited(record: R, first: int, last: int) -> R:
    """`record` cited by chunks `first` to `last` (of as many documents): at least `SIDE` of
    them put its citation lists in sorted sets (written_lists.py)."""
    ids = tuple(f"chunk-{n:04}" for n in range(first, last))
    paths = tuple(f"docs/{n:04}.md" for n in range(first, last))
    return replace(record, source_chunk_ids=ids, file_paths=paths, doc_ids=paths)


BEFORE = GraphBatch(
    entity_upserts=(
        cited(entity("adam smith", aliases=("adam", "smith")), 0, SIDE + 10),
        cited(entity("bella jones", aliases=("bella",)), 0, SIDE),
        entity("harbour {board}"),
    ),
    relation_upserts=(
        relation("adam smith", "harbour {board}"),
        cited(relation("bella jones", "harbour {board}"), 0, SIDE),
    ),
    chunk_upserts=(Chunk("chunk-1", "a.md", 0, "old text", 2, "a.md"),),
    document_upserts=(
        document("a.md", DocumentStatus.PROCESSED, chunk_ids=("chunk-1",)),
        document("b.md", DocumentStatus.PROCESSED),
    ),
)
# An edit of a.md and the deletion of b.md, as the commit step writes them: aliases move,
# an entity and its relation go, a relation and a chunk come, documents change status.
# The hubs' lists change by a few entries, are deleted with their records, or come whole.
CHANGE = GraphBatch(
    entity_upserts=(
        cited(
            entity("adam smith", description="edited", aliases=("adamsmith", "smith")), 2, SIDE + 12
        ),
        entity("kiln cafe", aliases=("kiln",)),
    ),
    entity_deletes=("bella jones",),
    relation_upserts=(cited(relation("adam smith", "kiln cafe"), 0, SIDE + 1),),
    relation_deletes=(("harbour {board}", "bella jones"),),
    chunk_upserts=(Chunk("chunk-2", "a.md", 0, "new text", 2, "a.md"),),
    chunk_deletes=("chunk-1",),
    document_upserts=(document("a.md", DocumentStatus.PROCESSED, chunk_ids=("chunk-2",)),),
    document_deletes=("b.md",),
)
KEYS = ("adam smith", "bella jones", "harbour {board}", "kiln cafe")


@pytest.fixture
def new_store(redis_cluster: RedisTestCluster) -> Iterator[Callable[[], GraphStore]]:
    """Opens stores on fresh workspaces of the session's cluster; drops them afterwards."""
    opened: list[GraphStore] = []

    def open_one() -> GraphStore:
        store = GraphStore.from_url(redis_cluster.url, f"slots{next(_workspaces)}")
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        store.clear()
        store.close()


def state(store: GraphStore) -> dict[str, object]:
    keys = sorted(store.client.scan_iter(match=store.keys.prefix + "*"))
    return {
        **snapshot(store),
        "degrees": store.node_degrees(KEYS),
        "keys": [key.removeprefix(store.keys.prefix) for key in keys],
    }


def test_a_batch_cut_after_any_slot_call_and_retried_whole_ends_as_if_written_once(
    new_store: Callable[[], GraphStore],
) -> None:
    """The indexer retries a write cut by an outage whole (OutageWait); the cut may fall
    after any slot's call of any phase. Among what this catches: the alias moves must come
    a phase before the entity hashes, since a retry reads the stored aliases again."""
    reference = new_store()
    reference.apply(BEFORE, now=1.0)
    reference.apply(CHANGE, now=2.0)
    expected = state(reference)
    cuts = 0
    for phase_index in range(5):
        call_index = 0
        while True:
            store = new_store()
            store.apply(BEFORE, now=1.0)
            cluster = store.client
            assert isinstance(cluster, RedisCluster)
            stored = read_state(cluster, store.keys, CHANGE)
            lists = store.plan_lists(CHANGE)
            phases = plan_phases(store.keys, CHANGE, stored, repr(2.0), lists)
            slots = list(phases[phase_index].slots.items())
            if call_index >= len(slots):
                break
            for phase in phases[:phase_index]:
                if phase:
                    run_phase(cluster, phase)
            run_phase(cluster, SlotWrites(dict([slots[call_index]])))  # then the outage

            store.apply(CHANGE, now=2.0)  # the retry

            assert state(store) == expected, f"cut after call {call_index} of phase {phase_index}"
            call_index += 1
            cuts += 1
    assert cuts >= 15, "the batch must spread over slots, or the cuts prove little"


def test_a_records_sorted_sets_change_in_the_same_script_call_as_its_hash(
    new_store: Callable[[], GraphStore],
) -> None:
    """A reader must never see a record's field marked while its sorted set is not written
    (or the other way round): both go in one slot's call of one phase, which Redis runs
    atomically, as one server's MULTI/EXEC does."""
    store = new_store()
    store.apply(BEFORE, now=1.0)
    cluster = store.client
    assert isinstance(cluster, RedisCluster)
    lists = store.plan_lists(CHANGE)
    assert lists.side_writes, "the change must write sorted sets, or this proves nothing"
    phases = plan_phases(store.keys, CHANGE, read_state(cluster, store.keys, CHANGE), "2.0", lists)
    records = {
        *(store.keys.entity(e.key) for e in CHANGE.entity_upserts),
        *(store.keys.relation(r.pair) for r in CHANGE.relation_upserts),
    }
    checked = 0
    for phase in phases:
        for slot in phase.slots.values():
            for side in (key for key in slot.keys if key.startswith(store.keys.prefix + "list:")):
                record = store.keys.prefix + side.removeprefix(store.keys.prefix + "list:")
                record = record.rsplit(":", 1)[0]
                if record in records:
                    assert record in slot.keys, f"{side} is written apart from {record}"
                    checked += 1
    assert checked >= len(lists.side_writes)
