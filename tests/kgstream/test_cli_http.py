"""`kgstream run --watch` serving the HTTP API: read-your-writes through the watched folder
(an upsert over HTTP writes the file, the watcher indexes it, an Ollama client's answer
cites it, a delete removes it), and `--no-http`."""

import re
import signal
import subprocess
from pathlib import Path

import httpx
import ollama
import pytest

from tests.kgstream.processes import clean_environment, kgstream
from tests.support.wait import wait_until

DOCS = {"people/carla.md": "Carla Diaz leads the Atlas Project at Northwind Labs in Lisbon."}


@pytest.fixture
def env(llm_server):
    return clean_environment(llm_server.base_url)


def read_until(process: subprocess.Popen[str], marker: str) -> str:
    """The process's output up to and including the first line holding `marker`."""
    output = ""
    while marker not in output:
        line = process.stdout.readline() if process.stdout else ""
        assert line, f"kgstream exited early: {output}"
        output += line
    return output


def stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output
    return output


def test_http_ingest_goes_through_the_watched_folder(env, tmp_path: Path) -> None:
    folder, data = tmp_path / "docs", tmp_path / "data"
    for name, text in DOCS.items():
        (folder / name).parent.mkdir(parents=True)
        (folder / name).write_text(text)
    running = kgstream(
        "run", "--watch", str(folder), "--data", str(data), "--grpc", "127.0.0.1:0", env=env
    )
    try:
        url = re.search(r"web:\s+(http://\S+?)/ ", read_until(running, "web:")).group(1)
        http = httpx.Client(base_url=url, timeout=30)

        def processed() -> int:
            return http.get("/api/v1/version").json()["documents"]["processed"]

        wait_until(lambda: processed() == 1, 60, "the first document")
        upsert = http.put(
            "/api/v1/documents/notes/ada.md",
            json={"content": "Ada Lovelace wrote notes on the Analytical Engine."},
        )
        assert upsert.status_code == 200, upsert.text
        published = upsert.json()
        assert published["topic"] == f"folder:{folder.resolve()}"
        assert (folder / "notes" / "ada.md").read_text().startswith("Ada Lovelace")
        assert not [p.name for p in (folder / "notes").iterdir() if p.name.startswith(".")]
        # read-your-writes: wait for the version the upsert promises, then the entity is there
        reached = http.get(
            "/api/v1/version",
            params={"min_index_version": published["min_index_version"], "timeout_ms": 60_000},
        )
        assert reached.status_code == 200
        wait_until(lambda: http.get("/api/v1/entities/Ada Lovelace").status_code == 200, 60, "Ada")
        # an Ollama client, pointed at the same port, answers from the new document
        chat = ollama.Client(host=url).chat(
            model="kgstream-local", messages=[{"role": "user", "content": "Who is Ada Lovelace?"}]
        )
        assert chat.done and "notes/ada.md" in (chat.message.content or "")
        deleted = http.delete("/api/v1/documents/notes/ada.md")
        assert deleted.status_code == 200, deleted.text
        assert not (folder / "notes" / "ada.md").exists()
        wait_until(
            lambda: http.get("/api/v1/documents/notes/ada.md").status_code == 404, 60, "delete"
        )
        assert http.get("/api/v1/entities/Ada Lovelace").status_code == 404
        for bad in ("notes/.hidden.md", "notes/draft.md.tmp"):
            refused = http.put(f"/api/v1/documents/{bad}", json={"content": "x"})
            assert refused.status_code == 400, (bad, refused.text)
            assert refused.json()["error"]["field"] == "doc_id"
        assert not (folder / "notes" / ".hidden.md").exists()
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        (elsewhere / "victim.md").write_text("outside")
        (folder / "linked").symlink_to(elsewhere)
        for method in ("PUT", "DELETE"):
            path = "/api/v1/documents/linked/victim.md"
            refused = http.request(method, path, json={"content": "x"})
            assert refused.status_code == 400, (method, refused.text)
            assert refused.json()["error"]["field"] == "doc_id"
            assert "'linked', a symbolic link" in refused.json()["error"]["message"]
        assert [p.read_text() for p in elsewhere.iterdir()] == ["outside"]
        http.close()
    finally:
        stop(running)


def test_no_http_serves_grpc_only(env, tmp_path: Path) -> None:
    running = kgstream(
        "serve", "--data", str(tmp_path / "data"), "--grpc", "127.0.0.1:0", "--no-http", env=env
    )
    try:
        banner = read_until(running, "stop:")
    finally:
        stop(running)
    assert "gateway on" in banner and "web:" not in banner
