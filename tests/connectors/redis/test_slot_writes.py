"""Graph batches on a Redis Cluster (connectors/redis/slot_writes.py), beyond the contract
suite (test_graph_store.py, which runs on the cluster too): a batch cut short anywhere
is retried whole by the indexer, and must then leave exactly what one write leaves."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest
from redis.cluster import RedisCluster

from connectors.redis.graph_store import GraphBatch, GraphStore
from connectors.redis.slot_writes import SlotWrites, plan_phases, read_state, run_phase
from connectors.redis.written_lists import ListPlan
from dataflow.core.chunking import Chunk
from dataflow.core.documents import DocumentStatus
from tests.connectors.redis.test_graph_store import document, entity, relation, snapshot
from tests.support.redis import RedisTestCluster

_workspaces = itertools.count()

BEFORE = GraphBatch(
    entity_upserts=(
        entity("adam smith", aliases=("adam", "smith")),
        entity("bella jones", aliases=("bella",)),
        entity("harbour {board}"),
    ),
    relation_upserts=(
        relation("adam smith", "harbour {board}"),
        relation("bella jones", "harbour {board}"),
    ),
    chunk_upserts=(Chunk("chunk-1", "a.md", 0, "old text", 2, "a.md"),),
    document_upserts=(
        document("a.md", DocumentStatus.PROCESSED, chunk_ids=("chunk-1",)),
        document("b.md", DocumentStatus.PROCESSED),
    ),
)
# An edit of a.md and the deletion of b.md, as the commit step writes them: aliases move,
# an entity and its relation go, a relation and a chunk come, documents change status.
CHANGE = GraphBatch(
    entity_upserts=(
        entity("adam smith", description="edited", aliases=("adamsmith", "smith")),
        entity("kiln cafe", aliases=("kiln",)),
    ),
    entity_deletes=("bella jones",),
    relation_upserts=(relation("adam smith", "kiln cafe"),),
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
            phases = plan_phases(store.keys, CHANGE, stored, repr(2.0), ListPlan())
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
