"""Congruence: Qdrant Edge, qdrant-client's local mode and a real Qdrant server answer
every call alike.

In the style of qdrant-client's own congruence tests: one seeded sequence of a few
hundred random calls (upserts of every kind with doc/path payloads, overwrites, deletes,
searches with and without filters, get, iter_points, count) runs against Edge and one
qdrant-client backend (local mode, or the session's Qdrant server from
tests/support/qdrant.py), and every answer is compared. The contract suite
(test_vector_store.py) pins what the answers must be on hand-made data; this test looks
for any place where the engines drift apart on data nobody thought of.

Every engine searches exactly here: Edge only builds an HNSW index when `optimize` is
called, which this test never calls, and the server only past its indexing threshold,
far above these few hundred points; so no approximation can make it flaky. Scores still
differ in the last bits: Edge and the server return float32 scores, local mode float64
ones, so two points whose scores round to the same float32 tie in Edge (ordered by key)
but not in local mode (ordered by score), ~1e-8 apart. Near-equal scores are therefore
compared within a tolerance, and the keys of such a group as a set.

To reproduce a failure, rerun with its seed; each message names the step.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from connectors.vectors.base import BaseVectorStore, VectorStoreOptions, path_prefixes
from connectors.vectors.edge import EdgeVectorStore
from connectors.vectors.port import JsonValue, VectorFilter, VectorHit, VectorKind, VectorPoint
from connectors.vectors.qdrant import QdrantClientVectorStore
from connectors.vectors.qdrant_cluster import QdrantClusterOptions
from dataflow.core.naming import relation_id, relation_pair
from tests.connectors.vectors.test_vector_store import DIM, SPACE, WORKSPACE
from tests.support.qdrant import QdrantTestServer, drop_workspace

SCORE_TOLERANCE = 1e-5
VECTOR_TOLERANCE = 1e-6
STEPS = 300
OPTIONS = VectorStoreOptions(batch_size=4)  # small, so writes and reads span batches

ENTITY_NAMES = [f"ent-{i:02d}" for i in range(14)]
DOC_IDS = [f"doc-{i}" for i in range(8)]
FILE_PATHS = [
    "readme.md",
    "notes/a.md",
    "notes/2024/jan.md",
    "notes/2024/feb.md",
    "notes/2024x/odd.md",
    "notes/2025/jan.md",
    "src/pkg/mod.py",
    "src/pkg/sub/deep.py",
    "src/pkgs/other.py",
    "über/ß.md",
]
# Every directory and file, with and without a trailing slash, plus near misses.
PATH_FILTERS = sorted(
    {
        *(prefix for path in FILE_PATHS for prefix in path_prefixes(path)),  # "a/b/", "a/b/c.md"
        *(prefix.rstrip("/") for path in FILE_PATHS for prefix in path_prefixes(path)),  # "a/b"
        "notes/20",
        "src/pk",
        "missing/dir",
        "readme",
    }
)


class Generator:
    """Random calls from one seed: the same sequence for both backends."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.keys = {
            VectorKind.CHUNK: [f"chunk-{i:02d}" for i in range(40)],
            VectorKind.ENTITY: ENTITY_NAMES,
            VectorKind.RELATION: sorted(
                {
                    relation_id(relation_pair(a, b))
                    for a, b in (self.rng.sample(ENTITY_NAMES, 2) for _ in range(40))
                }
            ),
        }
        self.vectors: list[list[float]] = []  # earlier vectors, reused to make exact ties

    def kind(self) -> VectorKind:
        return self.rng.choice(list(VectorKind))

    def vector(self) -> list[float]:
        rng = self.rng
        roll = rng.random()
        if self.vectors and roll < 0.15:
            # Same direction as an earlier vector, scaled by a power of two: after the
            # store's float32 normalisation the two are bit-identical, an exact tie.
            scale = rng.choice([0.5, 2.0, 4.0])
            return [scale * x for x in rng.choice(self.vectors)]
        if roll < 0.45:
            # Small integer components: many exact and near ties on purpose.
            vector = [float(rng.randint(-2, 2)) for _ in range(DIM)]
            if not any(vector):
                vector[rng.randrange(DIM)] = 1.0
        else:
            vector = [rng.gauss(0.0, 1.0) for _ in range(DIM)]
        self.vectors.append(vector)
        return vector

    def payload(self, kind: VectorKind, key: str) -> dict[str, JsonValue]:
        rng = self.rng
        extra: dict[str, JsonValue] = {
            "n": rng.randint(-5, 5),
            "weight": round(rng.uniform(0, 10), 3),
            "flag": rng.random() < 0.5,
            "none": None,
            "tags": rng.sample(["x", "y", "z", "ünï"], rng.randint(0, 3)),
            "nested": {"depth": {"list": [1, "two", 3.5, None, True]}},
        }
        if kind is VectorKind.CHUNK:
            payload: dict[str, JsonValue] = {"text": f"text of {key} #{rng.random():.6f}"}
            if rng.random() < 0.9:
                payload["doc_id"] = rng.choice(DOC_IDS)
                payload["file_path"] = rng.choice(FILE_PATHS)
        else:
            payload = {
                "doc_ids": rng.sample(DOC_IDS, rng.randint(0, 3)),
                "file_paths": rng.sample(FILE_PATHS, rng.randint(0, 3)),
            }
            if kind is VectorKind.RELATION:
                payload["source"], payload["target"] = key.split("\x1f")
            else:
                payload["name"] = key
        if rng.random() < 0.7:
            payload.update(rng.sample(sorted(extra.items()), rng.randint(1, len(extra))))
        return payload

    def points(self) -> list[VectorPoint]:
        kinds = [self.kind()] if self.rng.random() < 0.5 else list(VectorKind)
        points = []
        for _ in range(self.rng.randint(1, 9)):
            kind = self.rng.choice(kinds)
            key = self.rng.choice(self.keys[kind])  # often one that exists: an overwrite
            points.append(VectorPoint(kind, key, self.vector(), self.payload(kind, key)))
        return points

    def some_keys(self, kind: VectorKind) -> list[str]:
        chosen = self.rng.sample(self.keys[kind], self.rng.randint(0, 6))
        if self.rng.random() < 0.3:
            chosen.append(f"never-written-{self.rng.randrange(100)}")
        return chosen

    def query_filter(self) -> VectorFilter | None:
        roll = self.rng.random()
        doc_ids = tuple(self.rng.sample([*DOC_IDS, "doc-none"], self.rng.randint(1, 3)))
        prefix = self.rng.choice(PATH_FILTERS)
        if roll < 0.4:
            return None
        if roll < 0.6:
            return VectorFilter(doc_ids=doc_ids)
        if roll < 0.85:
            return VectorFilter(file_path_prefix=prefix)
        return VectorFilter(doc_ids=doc_ids, file_path_prefix=prefix)


def _local_mode() -> QdrantClientVectorStore:
    """Local mode on the server adapter's code path: payload indexes created and a cluster
    layout given at collection creation, as against a Qdrant cluster (local mode ignores
    both, and warns about the indexes)."""
    return QdrantClientVectorStore(
        QdrantClient(":memory:"),
        WORKSPACE,
        OPTIONS,
        create_payload_indexes=True,
        cluster=QdrantClusterOptions(
            shard_number=3, replication_factor=2, write_consistency_factor=2
        ),
    )


def _server(request: pytest.FixtureRequest) -> QdrantClientVectorStore:
    """The session's Qdrant server, in a workspace of this test's own (dropped after it),
    its collections in three shards."""
    server: QdrantTestServer = request.getfixturevalue("qdrant_server")
    workspace = f"congruence-{uuid.uuid4().hex[:12]}"
    store = QdrantClientVectorStore.from_url(
        server.url, workspace, OPTIONS, cluster=QdrantClusterOptions(shard_number=3)
    )
    request.addfinalizer(lambda: drop_workspace(server.url, workspace))
    return store


@pytest.fixture(params=["local", pytest.param("server", marks=pytest.mark.services)])
def stores(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[BaseVectorStore, BaseVectorStore]]:
    """Edge, and a qdrant-client backend: local mode or the Qdrant server."""
    edge = EdgeVectorStore(tmp_path / "edge", WORKSPACE, OPTIONS)
    other = _local_mode() if request.param == "local" else _server(request)
    yield edge, other
    edge.close()
    other.close()


@pytest.mark.filterwarnings("ignore:Payload indexes have no effect:UserWarning")
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_edge_and_qdrant_client_agree_on_a_random_sequence_of_calls(
    seed: int, stores: tuple[BaseVectorStore, BaseVectorStore]
) -> None:
    edge, local = stores
    both = (edge, local)
    gen = Generator(seed)
    rng = gen.rng
    for store in both:
        store.ensure_collections(SPACE, DIM)

    searches = filtered = 0
    for step in range(STEPS):
        where = f"seed {seed}, step {step}"
        roll = rng.random()
        if roll < 0.35:
            points = gen.points()
            for store in both:
                store.upsert(points)
        elif roll < 0.45:
            kind = gen.kind()
            doomed = gen.some_keys(kind)
            for store in both:
                store.delete(kind, doomed)
        elif roll < 0.80:
            kind = gen.kind()
            query = gen.vector()
            top_k = rng.choice([1, 2, 3, 5, 8, 13, 50])
            query_filter = gen.query_filter()
            args = (kind, query, top_k, query_filter)
            assert_same_hits(edge.search(*args), local.search(*args), edge, local, args, where)
            searches += 1
            filtered += query_filter is not None
        elif roll < 0.90:
            kind = gen.kind()
            wanted = gen.some_keys(kind)
            assert_same_points(edge.get(kind, wanted), local.get(kind, wanted), where)
        elif roll < 0.95:
            kind = gen.kind()
            assert edge.count(kind) == local.count(kind), where
        elif roll < 0.98:
            kind = gen.kind()
            assert_same_points(exported(edge, kind), exported(local, kind), where)
        else:
            for store in both:  # reopening an open workspace is idempotent
                store.ensure_collections(SPACE, DIM)

    for kind in VectorKind:  # the final states agree in full
        where = f"seed {seed}, final {kind.value}"
        assert edge.count(kind) == local.count(kind), where
        assert_same_points(exported(edge, kind), exported(local, kind), where)
    assert searches > 50 and filtered > 20  # the sequence exercised what it is meant to
    assert sum(edge.count(kind) for kind in VectorKind) > 30


def exported(store: BaseVectorStore, kind: VectorKind) -> dict[str, VectorPoint]:
    points: dict[str, VectorPoint] = {}
    for point in store.iter_points(kind):
        assert point.key not in points, f"{point.key!r} exported twice"
        points[point.key] = point
    return points


def assert_same_points(
    edge: dict[str, VectorPoint], local: dict[str, VectorPoint], where: str
) -> None:
    assert sorted(edge) == sorted(local), where
    for key, point in edge.items():
        other = local[key]
        assert point.kind is other.kind, f"{where}: {key!r}"
        assert point.payload == other.payload, f"{where}: {key!r}"
        assert point.vector == pytest.approx(other.vector, abs=VECTOR_TOLERANCE), (
            f"{where}: {key!r}"
        )


def assert_same_hits(
    edge_hits: list[VectorHit],
    local_hits: list[VectorHit],
    edge: BaseVectorStore,
    local: BaseVectorStore,
    args: tuple[VectorKind, list[float], int, VectorFilter | None],
    where: str,
) -> None:
    """Same keys in the same order, scores within tolerance.

    Scores within tolerance of each other may come in either order (the engines round
    differently), so such a group is compared as a set of keys; a group cut by `top_k`
    may hold different members, as long as each is tied with the cut in the other store.
    """
    kind, query, top_k, query_filter = args
    where = f"{where}: search {kind.value} top_k={top_k} filter={query_filter}"
    assert len(edge_hits) == len(local_hits), f"{where}: {_keys(edge_hits)} vs {_keys(local_hits)}"
    for a, b in zip(edge_hits, local_hits, strict=True):
        assert a.score == pytest.approx(b.score, abs=SCORE_TOLERANCE), where
    for hit in (*edge_hits, *local_hits):
        assert hit.kind is kind, where
    if _keys(edge_hits) == _keys(local_hits):
        for a, b in zip(edge_hits, local_hits, strict=True):
            assert a.payload == b.payload, f"{where}: {a.key!r}"
        return

    local_by_key = {hit.key: hit for hit in local_hits}
    groups = _near_tie_groups(edge_hits, local_hits)
    for index, (start, end) in enumerate(groups):
        edge_keys = set(_keys(edge_hits[start:end]))
        local_keys = set(_keys(local_hits[start:end]))
        cut = index == len(groups) - 1 and len(edge_hits) == top_k
        if edge_keys == local_keys:
            continue
        assert cut, f"{where}: near-tied group {edge_keys} vs {local_keys}"
        # The group straddles top_k: look wider for the members one store cut off.
        boundary = edge_hits[-1].score
        wider = top_k + 2 * (end - start) + 10
        for store, missing in ((local, edge_keys - local_keys), (edge, local_keys - edge_keys)):
            found = {hit.key: hit for hit in store.search(kind, query, wider, query_filter)}
            for key in missing:
                assert key in found, f"{where}: {key!r} missing from the wider search"
                assert found[key].score == pytest.approx(boundary, abs=SCORE_TOLERANCE), where
    for hit in edge_hits:
        if hit.key in local_by_key:
            assert hit.payload == local_by_key[hit.key].payload, f"{where}: {hit.key!r}"


def _near_tie_groups(a: list[VectorHit], b: list[VectorHit]) -> list[tuple[int, int]]:
    """Index ranges [start, end) whose consecutive scores are near-equal in either list."""
    groups: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(a) + 1):
        if i == len(a) or all(
            hits[i - 1].score - hits[i].score > SCORE_TOLERANCE for hits in (a, b)
        ):
            groups.append((start, i))
            start = i
    return groups


def _keys(hits: list[VectorHit]) -> list[str]:
    return [hit.key for hit in hits]
