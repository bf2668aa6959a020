"""`kgstream run --watch` as a process: after each file operation the stores equal a
from-scratch build of the folder's current content (graph, then vectors at the end)."""

import os
import shutil
import signal
from pathlib import Path

import pytest

from connectors.embeddings.base import embedding_space_name
from connectors.embeddings.remote import OpenAIEmbedder, OpenAIEmbeddingOptions
from connectors.folder.scan import iter_document_paths, read_document
from connectors.index_export import read_graph, read_index
from connectors.stores import StoreLocations, open_graph_store, open_stores
from connectors.tokenizer import TiktokenTokenizer
from connectors.vectors.port import VectorKind
from dataflow.core.contributions import Renderer
from dataflow.core.index import IndexSnapshot, ReferenceIndex
from dataflow.core.naming import relation_id
from dataflow.core.offline.extractor import extract_offline
from tests.kgstream.processes import clean_environment, kgstream
from tests.support.wait import wait_until

TOKENIZER = TiktokenTokenizer()


def fresh_build(folder: Path) -> IndexSnapshot:
    index = ReferenceIndex(TOKENIZER, extract_offline)
    index.apply_all(read_document(folder, path) for path in iter_document_paths(folder))
    return index.snapshot(Renderer(TOKENIZER.count))


def stored_graph(data: Path) -> IndexSnapshot | None:
    if not (data / "redis" / "redis.sock").exists():
        return None
    graph, embedded = open_graph_store(StoreLocations(data))
    assert embedded is None
    try:
        return read_graph(graph)
    except Exception:
        return None


@pytest.fixture
def env(llm_server):
    return clean_environment(llm_server.base_url)


def test_watched_folder_follows_every_file_operation(env, llm_server, tmp_path):
    folder, data = tmp_path / "docs", tmp_path / "data"
    (folder / "team").mkdir(parents=True)
    (folder / "team" / "alice.md").write_text("Alice Moreau founded Northwind Labs in Lisbon.")
    running = kgstream("run", "--watch", str(folder), "--data", str(data), "--no-serve", env=env)

    def caught_up(step: str) -> None:
        wait_until(lambda: stored_graph(data) == fresh_build(folder), 60, f"the index after {step}")

    try:
        caught_up("start")
        (folder / "team" / "bob.md").write_text("Bob Tanaka joined Helios Corp in Geneva.")
        caught_up("create")
        (folder / "team" / "alice.md").write_text("Alice Moreau founded Northwind Labs in Porto.")
        caught_up("edit")
        temporary = folder / "team" / ".carla.md.tmp"
        temporary.write_text("Carla Diaz leads the Atlas Project at Northwind Labs.")
        os.replace(temporary, folder / "team" / "carla.md")
        caught_up("atomic save")
        (folder / "team" / "bob.md").rename(folder / "bob-tanaka.md")
        caught_up("rename")
        (folder / "bob-tanaka.md").unlink()
        caught_up("delete")
        (folder / "archive").mkdir()
        (folder / "archive" / "old.md").write_text("Helios Corp opened an office in Nairobi.")
        caught_up("create in a new directory")
        shutil.rmtree(folder / "archive")
        caught_up("directory delete")
        assert set(stored_graph(data).documents) == {"team/alice.md", "team/carla.md"}
    finally:
        running.send_signal(signal.SIGINT)
        output, _ = running.communicate(timeout=60)
    assert running.returncode == 0, output

    expected = fresh_build(folder)
    embedder = OpenAIEmbedder(OpenAIEmbeddingOptions(llm_server.base_url, "test-embedding-model"))
    with open_stores(
        StoreLocations(data), embedding_space_name(embedder), embedder.dimension
    ) as stores:
        index = read_index(stores)
    assert index.graph == expected
    assert set(index.vectors[VectorKind.CHUNK]) == set(expected.chunks)
    assert set(index.vectors[VectorKind.ENTITY]) == set(expected.entities)
    assert set(index.vectors[VectorKind.RELATION]) == {
        relation_id(pair) for pair in expected.relations
    }
    for key, entity in expected.entities.items():
        vector, _ = index.vectors[VectorKind.ENTITY][key]
        assert vector == pytest.approx(embedder.embed([entity.embedding_text])[0], abs=1e-6)


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_ends_the_run_with_one_line_and_the_next_run_resumes(
    env, tmp_path, stop_signal
):
    folder, data = tmp_path / "docs", tmp_path / "data"
    folder.mkdir()
    (folder / "alice.md").write_text("Alice Moreau founded Northwind Labs in Lisbon.")
    env = {**env, "RUST_BACKTRACE": "1"}  # as on machines that set it: no backtrace either
    arguments = ["run", "--watch", str(folder), "--data", str(data), "--grpc", "127.0.0.1:0"]

    running = kgstream(*arguments, env=env)
    try:
        wait_until(lambda: stored_graph(data) == fresh_build(folder), 60, "the first index")
    finally:
        running.send_signal(stop_signal)
        output, _ = running.communicate(timeout=60)
    assert running.returncode == 0, output
    name = signal.Signals(stop_signal).name
    assert [line for line in output.splitlines() if name in line] == [
        f"kgstream: {name}: stopping once the documents in flight are committed "
        "(send it again to stop at once)"
    ]
    assert not any(word in output for word in ("panicked", "backtrace", "Traceback")), output

    (folder / "bob.md").write_text("Bob Tanaka joined Helios Corp in Geneva.")
    running = kgstream(*arguments, env=env)
    try:
        wait_until(lambda: stored_graph(data) == fresh_build(folder), 60, "the resumed index")
    finally:
        running.send_signal(signal.SIGTERM)
        output, _ = running.communicate(timeout=60)
    assert running.returncode == 0 and "panicked" not in output, output
