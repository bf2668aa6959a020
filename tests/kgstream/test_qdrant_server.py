"""kgstream on a real Qdrant server, as a user runs it: `kgstream index` with
`KGSTREAM_QDRANT_URL` set (tests/support/qdrant.py), the graph on the embedded default.

After the first index, and again after an edit and a delete, the server-backed index holds
what a fresh `kgstream index` of the same folder on the embedded default (Qdrant Edge)
holds: the same export, byte for byte, the same vector points (keys, payloads and vectors),
and the same retrieved context in every query mode."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from connectors.embeddings.base import embedding_space_name
from connectors.embeddings.remote import OpenAIEmbedder, OpenAIEmbeddingOptions
from connectors.index_export import read_index
from connectors.stores import StoreLocations, open_stores
from connectors.vectors.port import JsonValue, VectorKind
from kgstream.cli import main
from tests.kgstream.test_redis_cluster import DOCS, MODES, export, query, write
from tests.support.qdrant import QdrantTestServer, drop_workspace

VECTOR_TOLERANCE = 1e-6

Vectors = dict[VectorKind, dict[str, tuple[tuple[float, ...], dict[str, JsonValue]]]]


@pytest.fixture
def workspace(qdrant_server: QdrantTestServer) -> str:
    return f"e2e-{uuid.uuid4().hex[:12]}"


def stored_vectors(locations: StoreLocations, llm_server) -> Vectors:
    """Every vector point, by kind and key (the indexer is not running)."""
    embedder = OpenAIEmbedder(OpenAIEmbeddingOptions(llm_server.base_url, "test-embedding-model"))
    space = embedding_space_name(embedder)
    with open_stores(locations, space, embedder.dimension) as stores:
        return read_index(stores).vectors


def assert_same_vectors(found: Vectors, expected: Vectors, step: str) -> None:
    assert set(found) == set(expected), step
    for kind, points in expected.items():
        assert sorted(found[kind]) == sorted(points), f"{step}: {kind.value} keys"
        assert points, f"{step}: no {kind.value} points: the comparison would prove little"
        for key, (vector, payload) in points.items():
            found_vector, found_payload = found[kind][key]
            assert found_payload == payload, f"{step}: {kind.value} {key!r}"
            assert found_vector == pytest.approx(vector, abs=VECTOR_TOLERANCE), (
                f"{step}: {kind.value} {key!r}"
            )


def test_index_on_a_qdrant_server_equals_a_fresh_embedded_build_through_an_edit_and_a_delete(
    qdrant_server: QdrantTestServer,
    workspace: str,
    llm_server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder, data = tmp_path / "docs", tmp_path / "data"
    server_env = {"KGSTREAM_QDRANT_URL": qdrant_server.url, "KGSTREAM_WORKSPACE": workspace}
    monkeypatch.setenv("KGSTREAM_EMBEDDING_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("KGSTREAM_EMBEDDING_MODEL", "test-embedding-model")
    for name in ("OPENAI_BASE_URL", "KGSTREAM_LLM_BASE_URL", "KGSTREAM_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    on_server = StoreLocations(data, workspace, qdrant_url=qdrant_server.url)
    write(folder, DOCS)
    try:
        for step in ("the first index", "an edit and a delete"):
            if step == "an edit and a delete":
                write(folder, {"team/alice.md": DOCS["team/alice.md"].replace("Lisbon", "Porto")})
                (folder / "team/bob.md").unlink()
            for name, value in server_env.items():
                monkeypatch.setenv(name, value)
            assert main(["index", str(folder), "--data", str(data)]) == 0, step
            found_export = export(data, tmp_path / "server.json")
            found_answers = {mode: query(data, mode, capsys) for mode in MODES}

            for name in server_env:
                monkeypatch.delenv(name)
            fresh = tmp_path / f"fresh-{len(step)}"
            assert main(["index", str(folder), "--data", str(fresh)]) == 0, step
            assert found_export == export(fresh, tmp_path / "fresh.json"), step
            for mode in MODES:
                assert found_answers[mode] == query(fresh, mode, capsys), f"{step}: {mode}"
            assert_same_vectors(
                stored_vectors(on_server, llm_server),
                stored_vectors(StoreLocations(fresh), llm_server),
                step,
            )
        assert b"Porto" in found_export and b"bob tanaka" not in found_export.lower()
    finally:
        drop_workspace(qdrant_server.url, workspace)
