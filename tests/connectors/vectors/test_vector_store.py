"""One contract for every vector-store backend we ship.

Each test runs against qdrant-client's local mode in memory, local mode on disk, Qdrant
Edge on disk, and a real Qdrant server (tests/support/qdrant.py): one server for the
session, each test in a workspace of its own, whose collections are dropped after it.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import qdrant_edge as edge

from connectors.vectors.base import (
    DOC_IDS_FIELD,
    PAYLOAD_FIELD,
    TERMS_FIELD,
    BaseVectorStore,
    VectorStoreOptions,
    collection_name,
    index_fields,
    path_prefixes,
    point_id,
    strip_index_fields,
)
from connectors.vectors.edge import EdgeVectorStore
from connectors.vectors.port import (
    VectorFilter,
    VectorHit,
    VectorKind,
    VectorPoint,
    VectorSpaceMismatchError,
    VectorStoreNotOpenError,
)
from connectors.vectors.qdrant import QdrantClientVectorStore
from dataflow.core.lexical import inverse_document_frequency, term_dimension
from dataflow.core.naming import relation_id, relation_pair
from tests.support.qdrant import QdrantTestServer, drop_workspace
from tests.support.wait import wait_until

SPACE = "test-model-8"
DIM = 8
WORKSPACE = "ws"
OPTIONS = VectorStoreOptions(batch_size=3)  # small, so every write spans several batches


@dataclass(frozen=True)
class Backend:
    name: str
    open: Callable[[], BaseVectorStore]
    persistent: bool


def _server_backend(request: pytest.FixtureRequest) -> Backend:
    """The session's Qdrant server, in a workspace of this test's own."""
    server: QdrantTestServer = request.getfixturevalue("qdrant_server")
    workspace = f"contract-{uuid.uuid4().hex[:12]}"

    request.addfinalizer(lambda: drop_workspace(server.url, workspace))
    return Backend(
        "qdrant-server",
        lambda: QdrantClientVectorStore.from_url(server.url, workspace, OPTIONS),
        persistent=True,
    )


def _backends(tmp_path: Path) -> dict[str, Backend]:
    memory_store: list[BaseVectorStore] = []

    def open_memory() -> BaseVectorStore:
        # ":memory:" lives as long as its client: "reopening" returns the same store.
        if not memory_store:
            memory_store.append(QdrantClientVectorStore.in_memory(WORKSPACE, OPTIONS))
        return memory_store[0]

    return {
        "qdrant-local-memory": Backend("qdrant-local-memory", open_memory, persistent=False),
        "qdrant-local-path": Backend(
            "qdrant-local-path",
            lambda: QdrantClientVectorStore.from_path(str(tmp_path / "local"), WORKSPACE, OPTIONS),
            persistent=True,
        ),
        "edge": Backend(
            "edge",
            lambda: EdgeVectorStore(tmp_path / "edge", WORKSPACE, OPTIONS),
            persistent=True,
        ),
    }


@pytest.fixture(
    params=[
        "qdrant-local-memory",
        "qdrant-local-path",
        "edge",
        pytest.param("qdrant-server", marks=pytest.mark.services),
    ]
)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "qdrant-server":
        return _server_backend(request)
    return _backends(tmp_path)[request.param]


@pytest.fixture
def store(backend: Backend) -> Iterator[BaseVectorStore]:
    opened = backend.open()
    opened.ensure_collections(SPACE, DIM)
    yield opened
    opened.close()


def unit(*components: float) -> list[float]:
    """An 8-d vector from its leading components (the rest zero)."""
    return [*components, *([0.0] * (DIM - len(components)))]


def chunk(key: str, vector: list[float], doc_id: str, file_path: str) -> VectorPoint:
    return VectorPoint(
        VectorKind.CHUNK,
        key,
        vector,
        {"doc_id": doc_id, "file_path": file_path, "text": f"text of {key}"},
    )


def entity(key: str, vector: list[float], doc_ids: list[str], paths: list[str]) -> VectorPoint:
    return VectorPoint(
        VectorKind.ENTITY, key, vector, {"name": key, "doc_ids": doc_ids, "file_paths": paths}
    )


def keys(hits: list[VectorHit]) -> list[str]:
    return [hit.key for hit in hits]


def test_search_returns_hits_by_descending_cosine_with_ties_ordered_by_key(
    store: BaseVectorStore,
) -> None:
    store.upsert(
        [
            chunk("c-far", unit(0, 1), "d1", "a.md"),
            chunk("c-near", unit(1, 0.1), "d1", "a.md"),
            chunk("c-mid", unit(1, 1), "d1", "a.md"),
            chunk("c-tie-b", unit(1, 0.5), "d1", "a.md"),
            chunk("c-tie-a", unit(2, 1), "d1", "a.md"),  # same direction as c-tie-b
            chunk("c-opposite", unit(-1, 0), "d1", "a.md"),
        ]
    )

    hits = store.search(VectorKind.CHUNK, unit(1, 0), top_k=6)

    assert keys(hits) == ["c-near", "c-tie-a", "c-tie-b", "c-mid", "c-far", "c-opposite"]
    assert hits[0].score == pytest.approx(1 / math.sqrt(1.01), abs=1e-5)
    assert hits[1].score == hits[2].score == pytest.approx(2 / math.sqrt(5), abs=1e-5)
    assert hits[-1].score == pytest.approx(-1.0, abs=1e-5)
    assert hits[0].payload == {"doc_id": "d1", "file_path": "a.md", "text": "text of c-near"}


def test_top_k_cut_inside_a_tie_keeps_the_smallest_keys(store: BaseVectorStore) -> None:
    tied = [f"e{i:02d}" for i in range(12)]
    store.upsert(entity(key, unit(1, 1), ["d"], ["x.md"]) for key in reversed(tied))
    store.upsert([entity("best", unit(1, 0.9), ["d"], ["x.md"])])

    hits = store.search(VectorKind.ENTITY, unit(1, 1), top_k=4)

    # "best" is slightly off the query direction, so four of the twelve exact matches win:
    assert keys(hits) == tied[:4]


def test_kinds_live_in_separate_collections(store: BaseVectorStore) -> None:
    store.upsert(
        [
            chunk("same-key", unit(1), "d", "a.md"),
            entity("same-key", unit(0, 1), ["d"], ["a.md"]),
        ]
    )

    assert store.count(VectorKind.CHUNK) == 1
    assert store.count(VectorKind.ENTITY) == 1
    assert store.count(VectorKind.RELATION) == 0
    assert keys(store.search(VectorKind.RELATION, unit(1), top_k=5)) == []
    assert store.get(VectorKind.ENTITY, ["same-key"])["same-key"].payload["name"] == "same-key"


def test_deleted_points_are_gone_from_search_get_count_and_export(store: BaseVectorStore) -> None:
    store.upsert(chunk(f"c{i}", unit(1, i), "d", "a.md") for i in range(7))

    store.delete(VectorKind.CHUNK, ["c1", "c3", "c5", "never-existed"])

    remaining = ["c0", "c2", "c4", "c6"]
    assert sorted(keys(store.search(VectorKind.CHUNK, unit(1), top_k=10))) == remaining
    assert sorted(store.get(VectorKind.CHUNK, [f"c{i}" for i in range(7)])) == remaining
    assert store.count(VectorKind.CHUNK) == 4
    assert sorted(p.key for p in store.iter_points(VectorKind.CHUNK)) == remaining


def test_upserting_a_key_twice_keeps_one_point_with_the_new_vector_and_payload(
    store: BaseVectorStore,
) -> None:
    store.upsert([entity("alan turing", unit(1), ["d1"], ["old.md"])])
    store.upsert([entity("alan turing", unit(0, 1), ["d2"], ["new.md"])])
    # Duplicates inside one call: the last one wins too.
    store.upsert(
        [
            entity("ada", unit(1), ["d1"], ["a.md"]),
            entity("ada", unit(0, 0, 1), ["d3"], ["c.md"]),
        ]
    )

    assert store.count(VectorKind.ENTITY) == 2
    turing = store.get(VectorKind.ENTITY, ["alan turing"])["alan turing"]
    assert turing.payload == {"name": "alan turing", "doc_ids": ["d2"], "file_paths": ["new.md"]}
    assert turing.vector == pytest.approx(unit(0, 1))
    assert store.get(VectorKind.ENTITY, ["ada"])["ada"].vector == pytest.approx(unit(0, 0, 1))
    assert keys(store.search(VectorKind.ENTITY, unit(1), top_k=1)) != ["alan turing"]


def _filter_corpus() -> list[VectorPoint]:
    return [
        chunk("c1", unit(1, 0.1), "doc-1", "notes/2024/jan.md"),
        chunk("c2", unit(1, 0.2), "doc-2", "notes/2024/feb.md"),
        chunk("c3", unit(1, 0.3), "doc-3", "notes/2025/jan.md"),
        chunk("c4", unit(1, 0.4), "doc-4", "notes/2024x/odd.md"),
        chunk("c5", unit(1, 0.5), "doc-5", "readme.md"),
        entity("e-multi", unit(1, 0.6), ["doc-2", "doc-5"], ["notes/2024/feb.md", "readme.md"]),
        entity("e-only-2025", unit(1, 0.7), ["doc-3"], ["notes/2025/jan.md"]),
    ]


def test_filter_by_doc_ids_keeps_points_from_any_listed_document(
    store: BaseVectorStore,
) -> None:
    store.upsert(_filter_corpus())

    by_docs = VectorFilter(doc_ids=("doc-2", "doc-5"))
    assert keys(store.search(VectorKind.CHUNK, unit(1), 10, by_docs)) == ["c2", "c5"]
    assert keys(store.search(VectorKind.ENTITY, unit(1), 10, by_docs)) == ["e-multi"]
    assert keys(store.search(VectorKind.CHUNK, unit(1), 10, VectorFilter(("nope",)))) == []


def test_filter_by_file_path_prefix_matches_whole_path_components(
    store: BaseVectorStore,
) -> None:
    store.upsert(_filter_corpus())

    def search(kind: VectorKind, prefix: str) -> list[str]:
        return keys(store.search(kind, unit(1), 10, VectorFilter(file_path_prefix=prefix)))

    assert search(VectorKind.CHUNK, "notes/2024") == ["c1", "c2"]  # not notes/2024x/
    assert search(VectorKind.CHUNK, "notes/2024/") == ["c1", "c2"]
    assert search(VectorKind.CHUNK, "notes") == ["c1", "c2", "c3", "c4"]
    assert search(VectorKind.CHUNK, "notes/2025/jan.md") == ["c3"]
    assert search(VectorKind.CHUNK, "readme.md") == ["c5"]
    assert search(VectorKind.CHUNK, "notes/20") == []
    assert search(VectorKind.ENTITY, "notes/2024") == ["e-multi"]
    assert search(VectorKind.ENTITY, "notes") == ["e-multi", "e-only-2025"]


def test_doc_and_path_filters_combine_as_and(store: BaseVectorStore) -> None:
    store.upsert(_filter_corpus())

    both = VectorFilter(doc_ids=("doc-1", "doc-3", "doc-5"), file_path_prefix="notes/2024")

    assert keys(store.search(VectorKind.CHUNK, unit(1), 10, both)) == ["c1"]


def test_filtered_top_k_counts_only_matching_points(store: BaseVectorStore) -> None:
    store.upsert(_filter_corpus())

    hits = store.search(VectorKind.CHUNK, unit(1), 1, VectorFilter(file_path_prefix="notes/2025"))

    assert keys(hits) == ["c3"]


def test_payloads_reads_the_matching_points_payloads_up_to_a_limit(store: BaseVectorStore) -> None:
    store.upsert(_filter_corpus())
    written = {p.key: dict(p.payload) for p in _filter_corpus() if p.kind is VectorKind.CHUNK}
    in_notes = VectorFilter(file_path_prefix="notes")

    assert store.payloads(VectorKind.CHUNK) == written
    assert store.payloads(VectorKind.CHUNK, in_notes) == {
        key: written[key] for key in ("c1", "c2", "c3", "c4")
    }
    assert store.payloads(VectorKind.CHUNK, in_notes, ["c2", "c5", "missing"]) == {
        "c2": written["c2"]
    }
    assert store.payloads(VectorKind.CHUNK, keys=[]) == {}
    some = store.payloads(VectorKind.CHUNK, in_notes, limit=3)
    assert len(some) == 3 and some.items() <= written.items()
    assert len(store.payloads(VectorKind.CHUNK, limit=100)) == len(written)
    with pytest.raises(ValueError, match="limit"):
        store.payloads(VectorKind.CHUNK, limit=0)


def test_get_count_and_iter_points_return_exactly_what_was_written(
    store: BaseVectorStore,
) -> None:
    rng = np.random.default_rng(7)
    written = {
        f"k{i}": VectorPoint(
            VectorKind.RELATION,
            relation_id(relation_pair(f"a{i}", f"b{i}")),
            rng.standard_normal(DIM).tolist(),
            {
                "source": f"a{i}",
                "target": f"b{i}",
                "weight": i + 0.5,
                "keywords": ["x", "y"],
                "nested": {"flag": i % 2 == 0, "none": None},
                "doc_ids": [f"d{i}"],
                "file_paths": [f"dir/f{i}.md"],
            },
        )
        for i in range(10)
    }
    store.upsert(written.values())

    assert store.count(VectorKind.RELATION) == 10
    exported = {p.key: p for p in store.iter_points(VectorKind.RELATION)}
    fetched = store.get(VectorKind.RELATION, [p.key for p in written.values()] + ["missing"])
    assert sorted(exported) == sorted(fetched) == sorted(p.key for p in written.values())
    for original in written.values():
        for read in (exported[original.key], fetched[original.key]):
            assert read.kind is VectorKind.RELATION
            assert read.payload == original.payload
            expected = np.asarray(original.vector) / np.linalg.norm(original.vector)
            assert read.vector == pytest.approx(expected.tolist(), abs=1e-6)


def test_points_survive_close_and_reopen(backend: Backend) -> None:
    first = backend.open()
    first.ensure_collections(SPACE, DIM)
    first.upsert(_filter_corpus())
    first.delete(VectorKind.CHUNK, ["c4"])
    before = {p.key: p for p in first.iter_points(VectorKind.CHUNK)}
    if backend.persistent:
        first.close()

    second = backend.open()
    second.ensure_collections(SPACE, DIM)

    after = {p.key: p for p in second.iter_points(VectorKind.CHUNK)}
    assert sorted(after) == ["c1", "c2", "c3", "c5"]
    for key, point in after.items():
        assert point.payload == before[key].payload
        assert point.vector == pytest.approx(before[key].vector, abs=1e-6)
    hits = second.search(VectorKind.ENTITY, unit(1), 10, VectorFilter(file_path_prefix="notes"))
    assert keys(hits) == ["e-multi", "e-only-2025"]
    second.close()


def test_opening_a_workspace_with_another_embedding_space_fails_and_names_the_fix(
    backend: Backend,
) -> None:
    first = backend.open()
    first.ensure_collections(SPACE, DIM)
    first.upsert([chunk("c", unit(1), "d", "a.md")])
    if backend.persistent:
        first.close()
    second = backend.open()

    with pytest.raises(VectorSpaceMismatchError) as raised:
        second.ensure_collections("other-model-16", 16)
    with pytest.raises(VectorSpaceMismatchError):
        second.ensure_collections(SPACE, 16)  # same name, other dimension

    message = str(raised.value)
    assert SPACE in message and "other-model-16" in message
    assert "rebuild-vectors" in message
    with pytest.raises(VectorStoreNotOpenError):
        second.count(VectorKind.CHUNK)
    # The rebuild path: drop the old space, open the new one, empty.
    second.clear()
    second.ensure_collections("other-model-16", 16)
    assert second.count(VectorKind.CHUNK) == 0
    second.close()


def test_clear_empties_every_collection_and_keeps_the_store_open(store: BaseVectorStore) -> None:
    store.upsert(_filter_corpus())

    store.clear()

    assert [store.count(kind) for kind in VectorKind] == [0, 0, 0]
    store.upsert([chunk("fresh", unit(1), "d", "a.md")])
    assert keys(store.search(VectorKind.CHUNK, unit(1), 3)) == ["fresh"]


def test_reads_and_writes_before_ensure_collections_fail_clearly(backend: Backend) -> None:
    unopened = backend.open()

    with pytest.raises(VectorStoreNotOpenError, match="ensure_collections"):
        unopened.upsert([chunk("c", unit(1), "d", "a.md")])
    with pytest.raises(VectorStoreNotOpenError, match="ensure_collections"):
        unopened.search(VectorKind.CHUNK, unit(1), 3)
    unopened.close()


@pytest.mark.parametrize(
    ("vector", "message"),
    [(unit(1)[:-1], "shape"), ([0.0] * DIM, "norm"), (unit(math.nan), "norm")],
)
def test_bad_vectors_are_rejected_with_the_reason_before_anything_is_written(
    store: BaseVectorStore, vector: list[float], message: str
) -> None:
    good = [chunk(f"good{i}", unit(1, i), "d", "a.md") for i in range(4)]  # two batches

    with pytest.raises(ValueError, match=message):
        store.upsert([*good, chunk("bad", vector, "d", "a.md")])
    with pytest.raises(ValueError, match=message):
        store.search(VectorKind.CHUNK, vector, 3)
    assert store.count(VectorKind.CHUNK) == 0


def test_reserved_or_mistyped_payload_fields_are_rejected(store: BaseVectorStore) -> None:
    with pytest.raises(ValueError, match="reserved prefix"):
        store.upsert([VectorPoint(VectorKind.CHUNK, "c", unit(1), {"_kg_key": "x"})])
    with pytest.raises(ValueError, match="'doc_ids' must be a list of strings"):
        store.upsert([VectorPoint(VectorKind.ENTITY, "e", unit(1), {"doc_ids": "d1"})])


def test_point_id_is_a_stable_uuid_of_kind_and_key() -> None:
    chunk_id = point_id(VectorKind.CHUNK, "abc")

    assert chunk_id == point_id(VectorKind.CHUNK, "abc")
    assert uuid.UUID(chunk_id).version == 5
    assert chunk_id != point_id(VectorKind.ENTITY, "abc")
    assert chunk_id != point_id(VectorKind.CHUNK, "abd")
    # Pinned: changing the namespace or the id format would orphan every stored point.
    assert chunk_id == "cb8835c2-532b-576f-ae52-dd1175fd001e"


def test_relation_point_key_is_the_sorted_pair_joined_by_unit_separator() -> None:
    assert relation_id(relation_pair("turing", "ada")) == "ada\x1fturing"
    assert relation_id(relation_pair("ada", "turing")) == "ada\x1fturing"
    with pytest.raises(ValueError, match="two different"):
        relation_pair("ada", "ada")


def test_path_prefixes_list_every_directory_then_the_path() -> None:
    assert path_prefixes("a/b/c.md") == ["a/", "a/b/", "a/b/c.md"]
    assert path_prefixes("c.md") == ["c.md"]


def test_collection_names_carry_workspace_kind_and_a_safe_space() -> None:
    assert (
        collection_name("ws", VectorKind.ENTITY, "all-minilm-l6-v2-384")
        == "kg_ws_entities_all-minilm-l6-v2-384"
    )
    unsafe = collection_name("ws", VectorKind.CHUNK, "openai/text-embedding-3-small:1536")
    assert unsafe.startswith("kg_ws_chunks_openai_text-embedding-3-small_1536_")
    assert unsafe != collection_name("ws", VectorKind.CHUNK, "openai_text-embedding-3-small_1536")


def lexical_chunk(key: str, text: str, doc_id: str = "d", file_path: str = "a.md") -> VectorPoint:
    return VectorPoint(
        VectorKind.CHUNK, key, unit(1), {"doc_id": doc_id, "file_path": file_path}, text
    )


def test_lexical_search_ranks_by_shared_terms_weighted_by_their_rarity(
    store: BaseVectorStore,
) -> None:
    store.upsert(
        [
            lexical_chunk("c-both", "Saltglass storage programme at the lab"),
            lexical_chunk("c-rare", "the Saltglass programme"),
            lexical_chunk("c-common", "the lab report on the lab"),
            lexical_chunk("c-once", "wind turbines and a lab"),
            lexical_chunk("c-none", "wind turbines offshore"),
            lexical_chunk("c-empty", ""),
        ]
    )

    hits = store.search_lexical(VectorKind.CHUNK, "Which lab runs Saltglass?", 10)

    # "saltglass" (2 of 6 texts) outweighs "lab" (3 of 6), and a term repeated counts more.
    assert keys(hits) == ["c-both", "c-rare", "c-common", "c-once"]
    assert store.search_lexical(VectorKind.CHUNK, "what is the?", 10) == []


def test_lexical_weights_follow_deletes_exactly(store: BaseVectorStore) -> None:
    """The IDF is the live collection's: deleting documents changes it at once."""
    common = [lexical_chunk(f"c-lab{i}", "lab notes") for i in range(4)]
    store.upsert([*common, lexical_chunk("c-mix", "lab notes gearbox")])
    before = store.search_lexical(VectorKind.CHUNK, "lab gearbox", 10)[0].score

    store.delete(VectorKind.CHUNK, [p.key for p in common])
    after = store.search_lexical(VectorKind.CHUNK, "lab gearbox", 10)

    assert keys(after) == ["c-mix"]
    assert after[0].score != pytest.approx(before)


def test_lexical_counts_are_reused_within_one_as_of_and_counted_again_for_the_next(
    store: BaseVectorStore,
) -> None:
    """The gateway passes the index version as `as_of`: one Retrieve's several lexical
    searches count each term once, and a new version sees the live counts."""
    common = [lexical_chunk(f"c-lab{i}", "lab notes") for i in range(4)]
    store.upsert([*common, lexical_chunk("c-mix", "lab notes gearbox")])
    before = store.lexical_query(VectorKind.CHUNK, "lab gearbox", as_of=1)

    store.delete(VectorKind.CHUNK, [p.key for p in common])

    assert store.lexical_query(VectorKind.CHUNK, "lab gearbox", as_of=1) == before
    live = store.lexical_query(VectorKind.CHUNK, "lab gearbox")
    assert live != before
    assert store.lexical_query(VectorKind.CHUNK, "lab gearbox", as_of=2) == live


def _query_weights(store: BaseVectorStore, text: str) -> dict[int, float]:
    query = store.lexical_query(VectorKind.CHUNK, text)
    return dict(zip(query.indices, query.values, strict=True))


def test_a_terms_document_frequency_counts_whole_terms_only(store: BaseVectorStore) -> None:
    """The terms are one text with a full-text index: a term is counted where it is a whole
    token, never inside a longer one."""
    store.upsert(
        [
            lexical_chunk("c-art", "the art of war"),
            lexical_chunk("c-party", "a party of artists"),
            lexical_chunk("c-kyoto-weather", "京都の天気"),
            lexical_chunk("c-kyoto", "京都 weather"),
        ]
    )
    weights = _query_weights(store, "art party 京都 labs")
    assert weights == {
        term_dimension("art"): pytest.approx(inverse_document_frequency(4, 1)),
        term_dimension("party"): pytest.approx(inverse_document_frequency(4, 1)),
        term_dimension("京都"): pytest.approx(inverse_document_frequency(4, 2)),  # both bigrams
    }


def test_edge_counts_a_term_with_an_apostrophe_as_one_token(tmp_path: Path) -> None:
    # qdrant-client's local mode (tests only) splits "o'neil" into two words when it
    # counts; Qdrant's whitespace tokenizer keeps it whole.
    store = EdgeVectorStore(tmp_path / "edge", WORKSPACE, OPTIONS)
    store.ensure_collections(SPACE, DIM)
    store.upsert([lexical_chunk("c-1", "O'Neil spoke"), lexical_chunk("c-2", "o neil spoke")])
    weights = _query_weights(store, "o'neil")
    assert weights == {term_dimension("o'neil"): pytest.approx(inverse_document_frequency(2, 1))}
    store.close()


def _as_before_terms_were_text(store: BaseVectorStore) -> None:
    """Leave `store`'s collections as the kgstream before vector format 5 wrote them: each
    point's terms a keyword list, indexed as keywords, the metadata saying format 4."""
    for record in store.collections():
        name = record.name
        older = {**record.to_metadata(), "format": "kgstream-vectors/4"}
        lists = {
            i: {TERMS_FIELD: payload[TERMS_FIELD].split()}
            for i, payload in _raw_payloads(store, name).items()
        }
        if isinstance(store, EdgeVectorStore):
            shard = store.shard(name)
            for i, payload in lists.items():
                shard.update(edge.UpdateOperation.set_payload([i], payload))
            shard.update(edge.UpdateOperation.delete_field_index(TERMS_FIELD))
            keyword = edge.PayloadSchemaType.Keyword
            shard.update(edge.UpdateOperation.create_field_index(TERMS_FIELD, keyword))
            (store.path / name / "kgstream.json").write_text(json.dumps(older))
        else:
            assert isinstance(store, QdrantClientVectorStore)
            for i, payload in lists.items():
                store.client.set_payload(name, payload, points=[i], wait=True)
            store.client.update_collection(name, metadata=older)


def _raw_payloads(store: BaseVectorStore, name: str) -> dict[str, dict[str, Any]]:
    """Every point's stored payload, index fields included, by point id."""
    if isinstance(store, EdgeVectorStore):
        request = edge.ScrollRequest(limit=1000, with_payload=True, with_vector=False)
        points, _ = store.shard(name).scroll(request)
        return {str(r.id): dict(r.payload or {}) for r in points}
    assert isinstance(store, QdrantClientVectorStore)
    records, _ = store.client.scroll(name, limit=1000, with_payload=True)
    return {str(r.id): dict(r.payload or {}) for r in records}


def test_a_collection_whose_terms_are_keywords_is_rewritten_when_opened(backend: Backend) -> None:
    texts = {"c-art": "the art of war", "c-party": "a party of artists", "c-lab": "art lab"}
    first = backend.open()
    first.ensure_collections(SPACE, DIM)
    first.upsert([lexical_chunk(key, text) for key, text in texts.items()])
    expected = _query_weights(first, "art party lab")
    _as_before_terms_were_text(first)
    assert {r.keyword_terms for r in first.collections()} == {True}
    if backend.persistent:
        first.close()

    again = backend.open()
    again.ensure_collections(SPACE, DIM)

    assert {(r.current_format, r.keyword_terms) for r in again.collections()} == {(True, False)}
    name = collection_name(again.workspace, VectorKind.CHUNK, SPACE)
    stored = sorted(payload[TERMS_FIELD] for payload in _raw_payloads(again, name).values())
    assert stored == ["art lab", "art war", "artists party"]
    assert _query_weights(again, "art party lab") == expected
    assert expected[term_dimension("art")] == pytest.approx(inverse_document_frequency(3, 2))
    again.upsert([lexical_chunk("c-art-2", "art")])  # and it goes on as a current one
    assert _query_weights(again, "art")[term_dimension("art")] == pytest.approx(
        inverse_document_frequency(4, 3)
    )
    again.close()


def test_lexical_search_respects_filters_and_key_restrictions(store: BaseVectorStore) -> None:
    store.upsert(
        [
            lexical_chunk("c1", "tidal battery", "d1", "notes/a.md"),
            lexical_chunk("c2", "tidal battery", "d2", "other/b.md"),
            lexical_chunk("c3", "tidal battery", "d3", "notes/c.md"),
        ]
    )

    scoped = store.search_lexical(VectorKind.CHUNK, "battery", 10, VectorFilter(doc_ids=("d2",)))
    under = store.search_lexical(
        VectorKind.CHUNK, "battery", 10, VectorFilter(file_path_prefix="notes")
    )
    among = store.search_lexical(VectorKind.CHUNK, "battery", 10, keys=["c3", "c2", "missing"])

    assert keys(scoped) == ["c2"]
    assert keys(under) == ["c1", "c3"]
    assert keys(among) == ["c2", "c3"]
    assert store.search_lexical(VectorKind.CHUNK, "battery", 10, keys=[]) == []


def test_a_chunk_point_is_its_own_chunk_id(store: BaseVectorStore) -> None:
    # A search among chunks matches the chunk id indexed with each chunk point: a payload
    # naming another chunk would be found among that one.
    with pytest.raises(ValueError, match="chunk ids \\['c2'\\] must be its key"):
        store.upsert([VectorPoint(VectorKind.CHUNK, "c1", unit(1), {"chunk_id": "c2"})])
    store.upsert([VectorPoint(VectorKind.CHUNK, "c1", unit(1), {"chunk_id": "c1"})])

    assert keys(store.search(VectorKind.CHUNK, unit(1), 5, keys=["c1"])) == ["c1"]
    assert keys(store.search(VectorKind.CHUNK, unit(1), 5, VectorFilter(chunk_ids=("c1",)))) == [
        "c1"
    ]


def test_dense_search_can_be_restricted_to_given_keys(store: BaseVectorStore) -> None:
    store.upsert(
        [
            chunk("c-best", unit(1, 0), "d", "a.md"),
            chunk("c-good", unit(1, 0.5), "d", "a.md"),
            chunk("c-poor", unit(0, 1), "d", "a.md"),
        ]
    )

    hits = store.search(VectorKind.CHUNK, unit(1, 0), 5, keys=["c-poor", "c-good"])

    assert keys(hits) == ["c-good", "c-poor"]


def test_a_lexical_vector_survives_reopening_and_an_upsert_without_text_drops_it(
    backend: Backend,
) -> None:
    opened = backend.open()
    opened.ensure_collections(SPACE, DIM)
    opened.upsert([lexical_chunk("c1", "harbour summit"), lexical_chunk("c2", "harbour")])
    if backend.persistent:
        opened.close()
        opened = backend.open()
        opened.ensure_collections(SPACE, DIM)
    assert keys(opened.search_lexical(VectorKind.CHUNK, "summit", 5)) == ["c1"]

    opened.upsert([chunk("c1", unit(1), "d", "a.md")])

    assert opened.search_lexical(VectorKind.CHUNK, "summit", 5) == []
    assert keys(opened.search_lexical(VectorKind.CHUNK, "harbour", 5)) == ["c2"]
    opened.close()


def test_a_chunk_filter_finds_the_points_that_cite_those_chunks(store: BaseVectorStore) -> None:
    def cited(key: str, vector: list[float], chunk_ids: list[str]) -> VectorPoint:
        payload = {"name": key, "doc_ids": ["d"], "file_paths": ["a.md"], "chunk_ids": chunk_ids}
        return VectorPoint(VectorKind.ENTITY, key, vector, payload)

    store.upsert(
        [
            cited("e-both", unit(1, 0), ["c1", "c2"]),
            cited("e-one", unit(1, 1), ["c2"]),
            cited("e-other", unit(1, 0), ["c3"]),
        ]
    )

    hits = store.search(VectorKind.ENTITY, unit(1, 0), 10, VectorFilter(chunk_ids=("c1", "c2")))

    assert keys(hits) == ["e-both", "e-one"]
    assert hits[0].payload["chunk_ids"] == ["c1", "c2"]


def test_hits_without_payload_carry_the_same_keys_and_scores_and_an_empty_payload(
    store: BaseVectorStore,
) -> None:
    store.upsert(
        [
            lexical_chunk("c-a", "Saltglass storage at the lab"),
            lexical_chunk("c-b", "the Saltglass programme"),
            lexical_chunk("c-c", "wind turbines offshore"),
        ]
    )
    vector = unit(1, 0)
    query = store.lexical_query(VectorKind.CHUNK, "Saltglass lab")
    searches = [
        lambda with_payload: store.search(
            VectorKind.CHUNK, vector, 3, keys=["c-a", "c-c"], with_payload=with_payload
        ),
        lambda with_payload: store.search_sparse(
            VectorKind.CHUNK, query, 3, with_payload=with_payload
        ),
    ]
    for search in searches:
        full, bare = search(True), search(False)
        assert full and [(h.key, h.score) for h in bare] == [(h.key, h.score) for h in full]
        assert all(hit.payload == {} for hit in bare)
        assert full[0].payload["file_path"] == "a.md"


def test_an_ends_filter_finds_the_relations_of_those_entities(store: BaseVectorStore) -> None:
    def relation(source: str, target: str, vector: list[float]) -> VectorPoint:
        payload = {"source": source, "target": target, "doc_ids": ["d"], "file_paths": ["a.md"]}
        return VectorPoint(VectorKind.RELATION, f"{source}|{target}", vector, payload)

    store.upsert(
        [
            relation("ada", "bob", unit(1, 0)),
            relation("bob", "cy", unit(1, 0.2)),
            relation("cy", "dee", unit(1, 0)),
        ]
    )

    hits = store.search(VectorKind.RELATION, unit(1, 0), 10, VectorFilter(ends=("ada", "cy")))

    assert keys(hits) == ["ada|bob", "cy|dee", "bob|cy"]
    assert hits[0].payload == {
        "source": "ada",
        "target": "bob",
        "doc_ids": ["d"],
        "file_paths": ["a.md"],
    }
    assert keys(store.search(VectorKind.RELATION, unit(1, 0), 10, VectorFilter(ends=("bob",)))) == [
        "ada|bob",
        "bob|cy",
    ]


def test_searches_without_payload_read_each_points_key_once(store: BaseVectorStore) -> None:
    # Reading a payload back costs more than scoring a whole collection: a search
    # without payload reads none, and a point's key is read from the backend only the
    # first time it is hit (a point id is a hash of its key, so the pair never changes).
    store.upsert([chunk(f"c-{n}", unit(1, n / 10), "d", "a.md") for n in range(6)])
    first = store.search(VectorKind.CHUNK, unit(1, 0), 3, with_payload=False)
    again = store.search(VectorKind.CHUNK, unit(1, 0), 6, with_payload=False)

    assert keys(first) == ["c-0", "c-1", "c-2"]
    assert keys(again) == ["c-0", "c-1", "c-2", "c-3", "c-4", "c-5"]
    # Six points hit, six keys read: each once, the second search only those it had not seen.
    assert store.key_cache.read_from_backend == 6
    store.delete(VectorKind.CHUNK, ["c-0"])
    assert keys(store.search(VectorKind.CHUNK, unit(1, 0), 2, with_payload=False)) == ["c-1", "c-2"]


def test_the_key_cache_keeps_at_most_its_size(store: BaseVectorStore) -> None:
    store.options = replace(store.options, cached_keys=2)
    store.upsert([chunk(f"c-{n}", unit(1, n / 10), "d", "a.md") for n in range(5)])
    hits = store.search(VectorKind.CHUNK, unit(1, 0), 5, with_payload=False)
    assert keys(hits) == [f"c-{n}" for n in range(5)]
    assert store.key_cache.cached == 2


def test_the_key_warmup_reads_every_key_ahead_and_stops_on_close(backend: Backend) -> None:
    opened = backend.open()
    opened.ensure_collections(SPACE, DIM)
    opened.upsert([chunk(f"c-{n}", unit(1, n / 10), "d", "a.md") for n in range(7)])
    opened.upsert([entity(f"e-{n}", unit(0, 1, n / 10), ["d"], ["a.md"]) for n in range(4)])
    opened.start_key_warmup()
    wait_until(
        lambda: opened.key_cache.cached >= 11, 30, "the warm-up to read every key", interval=0.01
    )
    assert opened.key_cache.cached == 11

    found = opened.search(VectorKind.ENTITY, unit(0, 1), 4, with_payload=False)
    assert keys(found) == ["e-0", "e-1", "e-2", "e-3"]
    assert opened.key_cache.read_from_backend == 0  # every key was read ahead
    opened.close()
    assert not opened.key_cache.warming_up


def _edge_contents(store: EdgeVectorStore) -> dict[VectorKind, dict[str, VectorPoint]]:
    return {kind: {p.key: p for p in store.iter_points(kind)} for kind in VectorKind}


def test_edge_compaction_keeps_every_live_point_and_drops_the_deleted_from_the_files(
    tmp_path: Path,
) -> None:
    store = EdgeVectorStore(tmp_path / "edge", WORKSPACE, OPTIONS)
    store.ensure_collections(SPACE, DIM)
    store.upsert([*_filter_corpus(), lexical_chunk("c-gone", "quorvel brumblewick zanzibar")])
    store.delete(VectorKind.CHUNK, ["c-gone"])
    before = _edge_contents(store)
    query = VectorFilter(file_path_prefix="notes")
    searched = keys(store.search(VectorKind.ENTITY, unit(1), 10, query))

    store.compact()

    assert _edge_contents(store) == before
    assert keys(store.search(VectorKind.ENTITY, unit(1), 10, query)) == searched
    store.close()
    files = [p for p in (tmp_path / "edge").rglob("*") if p.is_file()]
    assert not [p for p in files if b"brumblewick" in p.read_bytes()]
    reopened = EdgeVectorStore(tmp_path / "edge", WORKSPACE, OPTIONS)
    reopened.ensure_collections(SPACE, DIM)
    assert _edge_contents(reopened) == before
    reopened.close()


def test_an_interrupted_edge_compaction_is_finished_on_the_next_open(tmp_path: Path) -> None:
    store = EdgeVectorStore(tmp_path / "edge", WORKSPACE, OPTIONS)
    store.ensure_collections(SPACE, DIM)
    store.upsert(_filter_corpus())
    before = _edge_contents(store)
    store.close()
    # Stopped between the two renames: the old shard retired, the new one not yet in.
    for collection in (tmp_path / "edge").iterdir():
        (collection / "shard").rename(collection / "shard.retired")
        (collection / "shard.compacting").mkdir()

    reopened = EdgeVectorStore(tmp_path / "edge", WORKSPACE, OPTIONS)
    reopened.ensure_collections(SPACE, DIM)
    assert _edge_contents(reopened) == before
    reopened.close()
    assert sorted(p.name for p in next((tmp_path / "edge").iterdir()).iterdir()) == [
        "kgstream.json",
        "shard",
    ]


def test_a_callers_payload_is_stored_as_one_json_text_and_read_back_as_given() -> None:
    # Opaque, since no filter reads it: a binding converts a list element by element (Qdrant
    # Edge: 3.4 us a string), and a hub's payload lists hundreds of chunks, documents, paths.
    payload = {
        "name": "Kessler Institute",
        "doc_ids": ["d2", "d1"],
        "file_paths": ["a/x.md", "b/y.md"],
        "chunk_ids": ["c1", "c2"],
        "weight": 0.1,
        "nested": {"n": None, "ok": True},
    }
    stored = index_fields(VectorKind.ENTITY, "kessler institute", payload)
    assert isinstance(stored[PAYLOAD_FIELD], str)
    assert not {"name", "doc_ids", "file_paths", "chunk_ids"} & stored.keys()
    assert stored[DOC_IDS_FIELD] == ["d1", "d2"]  # the indexed copies stay lists
    assert strip_index_fields(stored) == payload
    # A point written before keeps its fields at the top level, and still reads back.
    older = {"_kg_key": "kessler institute", "_kg_doc_ids": ["d1"], "name": "Kessler Institute"}
    assert strip_index_fields(older) == {"name": "Kessler Institute"}
