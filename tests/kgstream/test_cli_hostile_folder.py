"""`kgstream run --watch` and `kgstream index` on hostile folders, as processes: odd file
names, the watched root vanishing and coming back. After each step the stores equal a
from-scratch build of the folder (tests/kgstream/test_cli_watch.py's oracle)."""

import json
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from connectors.folder.scan import iter_document_paths, read_document
from connectors.redis.graph_store import GraphStore
from connectors.redis.index_control import RedisIndexControl
from dataflow.core.contributions import Renderer
from dataflow.core.documents import DocumentLimits, DocumentStatus
from dataflow.core.index import ReferenceIndex
from dataflow.core.offline.extractor import extract_offline
from kgstream.cli import main
from tests.kgstream.processes import clean_environment, finish, kgstream
from tests.kgstream.test_cli_watch import TOKENIZER, fresh_build
from tests.kgstream.test_store_outages import Run, metric, stored
from tests.support.ports import free_port
from tests.support.redis import RedisTestServer
from tests.support.wait import wait_until

HOSTILE_NAMES = {
    os.fsdecode(b"caf\xe9.txt"): "Zoe\u0308 Quist opened a cafe in Lyon.",  # Latin-1, old zip
    "back\\slash.md": "Alice Moreau founded Northwind Labs in Lisbon.",
    "line\nbreak.md": "Bob Tanaka joined Helios Corp in Geneva.",
}


@pytest.fixture
def env(llm_server) -> dict[str, str]:
    return {**clean_environment(llm_server.base_url), "RUST_BACKTRACE": "1"}


@pytest.fixture
def redis_server() -> Iterator[RedisTestServer]:
    server = RedisTestServer().start()
    yield server
    server.stop()


@contextmanager
def watching(
    env: dict[str, str], folder: Path, data: Path, server: RedisTestServer
) -> Iterator[Run]:
    """`kgstream run --watch` for the body of a with-block; it must then stop cleanly."""
    run = Run(env, folder, data, server)
    try:
        yield run
    finally:
        output = run.stop()
    assert run.process.returncode == 0 and "Traceback" not in output, output


def write_hostile_folder(folder: Path) -> None:
    folder.mkdir()
    for name, text in HOSTILE_NAMES.items():
        (folder / name).write_text(text)
    (folder / "plain.md").write_text("Carla Diaz leads the Atlas Project at Northwind Labs.")


def test_index_indexes_names_with_non_utf8_bytes_backslashes_and_newlines(
    env, tmp_path, redis_server
):
    folder, data = tmp_path / "docs", tmp_path / "data"
    write_hostile_folder(folder)
    env = {**env, "KGSTREAM_REDIS_URL": redis_server.url}

    output = finish(kgstream("index", str(folder), "--data", str(data), env=env))
    assert "PROCESSED 4, FAILED 0" in output, output
    graph = stored(redis_server)
    assert graph == fresh_build(folder)
    assert set(graph.documents) == {"caf\\xe9.txt", "back\\slash.md", "line\nbreak.md", "plain.md"}
    assert "zo\u00eb quist" in graph.entities  # decomposed text is composed: one entity
    output = finish(kgstream("index", str(folder), "--data", str(data), env=env))
    assert "PROCESSED 4, FAILED 0" in output and "Traceback" not in output, output


def test_watching_names_with_non_utf8_bytes_survives_edits_deletes_and_restarts(
    env, tmp_path, redis_server
):
    folder, data = tmp_path / "docs", tmp_path / "data"
    write_hostile_folder(folder)

    with watching(env, folder, data, redis_server):
        wait_until(lambda: stored(redis_server) == fresh_build(folder), 60, "the first index")
        (folder / os.fsdecode(b"caf\xe9.txt")).write_text("Zoe Quist sold the cafe to Helios.")
        (folder / "back\\slash.md").unlink()
        (folder / os.fsdecode(b"na\xefve.md")).write_text("Dora Lind joined Helios Corp.")
        wait_until(lambda: stored(redis_server) == fresh_build(folder), 60, "the edits")

    (folder / os.fsdecode(b"caf\xe9.txt")).unlink()
    with watching(env, folder, data, redis_server):  # the start-up scan meets the names again
        wait_until(lambda: stored(redis_server) == fresh_build(folder), 60, "the resumed index")


def source_hold(server: RedisTestServer) -> str | None:
    with GraphStore.from_url(server.url) as graph:
        return RedisIndexControl(graph.client, graph.workspace).source_hold()


@pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")
def test_a_vanished_root_keeps_the_index_is_reported_and_is_reconciled_when_back(
    env, tmp_path, redis_server
):
    folder, data = tmp_path / "docs", tmp_path / "data"
    folder.mkdir()
    (folder / "alice.md").write_text("Alice Moreau founded Northwind Labs in Lisbon.")
    (folder / "bob.md").write_text("Bob Tanaka joined Helios Corp in Geneva.")
    (folder / "carla.md").write_text("Carla Diaz leads the Atlas Project in Porto.")
    with watching(env, folder, data, redis_server) as run:
        wait_until(lambda: stored(redis_server) == fresh_build(folder), 60, "the first index")
        before = stored(redis_server)

        away = tmp_path / "moved-away"
        folder.rename(away)  # an unmounted share or a `mv` looks the same from inside
        wait_until(lambda: metric(run.metrics_port, "source_holding") == 1.0, 30, "the gauge")
        hold = source_hold(redis_server)
        assert hold is not None and "missing" in hold
        assert stored(redis_server) == before
        status_env = {**env, "KGSTREAM_REDIS_URL": redis_server.url}
        status = finish(kgstream("status", "--data", str(data), "--json", env=status_env))
        assert '"source_hold": "watched folder' in status, status

        (away / "bob.md").unlink()
        (away / "carla.md").write_text("Carla Diaz leads the Atlas Project in Faro.")
        away.rename(folder)
        wait_until(lambda: stored(redis_server) == fresh_build(folder), 10, "the reconciled index")
        wait_until(lambda: metric(run.metrics_port, "source_holding") == 0.0, 10, "the gauge")
        assert source_hold(redis_server) is None
        assert len(run.said("is missing")) == 1, run.lines  # one warning, not one per look
        assert len(run.said("is back: rescanning it")) == 1, run.lines


LIMIT = 2000  # KGSTREAM_MAX_DOCUMENT_BYTES for the content tests


def limited_build(folder: Path) -> object:
    index = ReferenceIndex(TOKENIZER, extract_offline, limits=DocumentLimits(max_bytes=LIMIT))
    index.apply_all(read_document(folder, path) for path in iter_document_paths(folder))
    return index.snapshot(Renderer(TOKENIZER.count))


def test_bad_files_fail_alone_with_their_reason_and_the_folder_goes_on(env, tmp_path, redis_server):
    folder, data = tmp_path / "docs", tmp_path / "data"
    folder.mkdir()
    files = {
        "good.md": b"Alice Moreau founded Northwind Labs in Lisbon.",
        "binary.bin": bytes(range(256)) * 3,
        "latin1.txt": "Caf\xe9 Lumi\xe8re hired Bob Tanaka.".encode("latin-1"),
        "empty.md": b"",
        "at-limit.md": ("Carla Diaz leads the Atlas Project. " * 100).encode()[:LIMIT],
        "over-limit.md": b"Dora Lind " * 300,
        "utf16.txt": "Zoë Quist met Erik Berg in Oslo.".encode("utf-16"),
    }
    for name, content in files.items():
        (folder / name).write_bytes(content)
    with watching(
        {**env, "KGSTREAM_MAX_DOCUMENT_BYTES": str(LIMIT)}, folder, data, redis_server
    ) as run:
        wait_until(lambda: stored(redis_server) == limited_build(folder), 60, "the first index")
        documents = stored(redis_server).documents
        reasons = {d: r.reason for d, r in documents.items() if r.status is DocumentStatus.FAILED}
        assert set(reasons) == {"binary.bin", "latin1.txt", "empty.md", "over-limit.md"}
        assert reasons["binary.bin"] == "content is binary, not text"
        assert reasons["latin1.txt"].startswith("content is not valid UTF-8 (byte 3:")
        assert reasons["empty.md"] == "document is empty or whitespace only"
        assert reasons["over-limit.md"].startswith(
            f"document is 3000 bytes, over the limit of {LIMIT}"
        )
        assert "zoë quist" in stored(redis_server).entities  # UTF-16 with its byte-order mark

        (folder / "latin1.txt").write_text("Café Lumière hired Bob Tanaka.")  # fixed: UTF-8
        (folder / "more-binary.dat").write_bytes(b"\x00\x01\x02\x03" * 100)
        (folder / "later.md").write_text("Erik Berg joined Helios Corp.")
        wait_until(lambda: stored(redis_server) == limited_build(folder), 60, "the live changes")
        assert run.process.poll() is None, run.lines


def test_a_hundred_saves_in_ten_seconds_leave_the_last_content_and_nothing_stale(
    env, tmp_path, redis_server
):
    folder, data = tmp_path / "docs", tmp_path / "data"
    folder.mkdir()
    (folder / "busy.md").write_text("Version 0 names Person Zero.")
    names = ["Alice Moreau", "Bob Tanaka", "Carla Diaz", "Dora Lind", "Erik Berg"]
    with watching(env, folder, data, redis_server):
        wait_until(lambda: stored(redis_server) == fresh_build(folder), 60, "the first index")
        for version in range(1, 101):
            text = f"Version {version}: {names[version % 5]} met {names[(version + 1) % 5]}."
            temporary = folder / ".busy.md.tmp"
            temporary.write_text(text)
            os.replace(temporary, folder / "busy.md")  # an editor's atomic save
            time.sleep(0.1)  # the pace of the saves, not a wait for the indexer
        wait_until(lambda: stored(redis_server) == fresh_build(folder), 60, "the last save")
        (record,) = stored(redis_server).documents.values()
        assert record.preview.startswith("Version 100:")


def test_edits_made_while_the_first_scan_is_being_indexed_are_all_applied(
    env, tmp_path, redis_server
):
    folder, data = tmp_path / "docs", tmp_path / "data"
    folder.mkdir()
    total = 300
    for number in range(total):
        (folder / f"doc-{number:03}.md").write_text(
            f"Report {number}: Person{number} Moreau works with Helios Corp in City{number}."
        )
    with watching(env, folder, data, redis_server):

        def processed() -> int:
            with GraphStore.from_url(redis_server.url) as graph:
                return graph.status_counts().get(DocumentStatus.PROCESSED, 0)

        wait_until(lambda: processed() > 0, 60, "the first documents")
        (folder / "doc-000.md").write_text("Report 0, edited: Alice Moreau moved to Porto.")
        (folder / "doc-150.md").unlink()
        (folder / f"doc-{total - 1:03}.md").write_text("The last report, edited before its turn.")
        (folder / "new.md").write_text("Bob Tanaka joined while the first scan ran.")
        during = processed()
        wait_until(lambda: stored(redis_server) == fresh_build(folder), 120, "the edited index")
        assert during < total, f"the edits came after indexing ended ({during} processed)"


def test_the_gateway_serves_documents_whose_names_were_not_utf8(env, tmp_path, capsys):
    folder, data = tmp_path / "docs", tmp_path / "data"
    write_hostile_folder(folder)
    address = f"127.0.0.1:{free_port()}"
    running = kgstream(
        "run", "--watch", str(folder), "--data", str(data), "--grpc", address, env=env
    )

    def ask() -> dict:
        capsys.readouterr()
        question = ["query", "Who is Zoë Quist?", "--grpc", address, "--mode", "local"]
        if main([*question, "--context-only", "--json"]) != 0:
            return {"entities": [], "chunks": []}  # the gateway is not up yet
        return json.loads(capsys.readouterr().out)

    try:
        wait_until(lambda: "zoë quist" in {e["key"] for e in ask()["entities"]}, 60, "indexing")
        result = ask()
        assert "caf\\xe9.txt" in {c["doc_id"] for c in result["chunks"]}
        assert "caf\\xe9.txt" in {r["file_path"] for r in result["references"]}
    finally:
        running.send_signal(signal.SIGTERM)
        output, _ = running.communicate(timeout=60)
    assert running.returncode == 0 and "Traceback" not in output, output


def test_a_file_replaced_by_a_folder_is_retracted_before_any_rescan_and_back_again(
    env, tmp_path, redis_server
):
    folder, data = tmp_path / "docs", tmp_path / "data"
    folder.mkdir()
    (folder / "notes.md").write_text("Alice Moreau founded Northwind Labs in Lisbon.")
    (folder / "other.md").write_text("Bob Tanaka joined Helios Corp in Geneva.")
    with watching(env, folder, data, redis_server):  # rescans every 30 s: this is the watcher
        wait_until(lambda: stored(redis_server) == fresh_build(folder), 60, "the first index")
        (folder / "notes.md").unlink()
        (folder / "notes.md").mkdir()
        (folder / "notes.md" / "inside.md").write_text("Carla Diaz leads the Atlas Project.")
        wait_until(lambda: stored(redis_server) == fresh_build(folder), 10, "the folder")
        assert "alice moreau" not in stored(redis_server).entities
        (folder / "notes.md" / "inside.md").unlink()
        (folder / "notes.md").rmdir()
        (folder / "notes.md").write_text("Alice Moreau moved Northwind Labs to Porto.")
        wait_until(lambda: stored(redis_server) == fresh_build(folder), 10, "the file again")
        assert set(stored(redis_server).documents) == {"notes.md", "other.md"}
