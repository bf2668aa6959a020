"""`kgstream run` serving the gateway while it indexes, and `kgstream query` against it
(over gRPC) and against the stores directly (--data)."""

import json
import re
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest

from kgstream.cli import main
from tests.kgstream.processes import clean_environment, kgstream
from tests.support.wait import wait_until

DOCS = {
    "people/carla.md": "Carla Diaz leads the Atlas Project at Northwind Labs in Lisbon.",
    "org/helios.md": "Helios Corp funds the Atlas Project. Helios Corp is based in Geneva.",
}


@pytest.fixture
def env(llm_server):
    return clean_environment(llm_server.base_url)


def sample(exposition: str, series: str) -> float:
    """The value of one series in Prometheus text exposition."""
    for line in exposition.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{series} not exported:\n{exposition}")


def read_banner(process: subprocess.Popen[str]) -> str:
    """The process's output up to its "gateway on HOST:PORT" line."""
    banner = ""
    while "gateway on" not in banner:
        line = process.stdout.readline() if process.stdout else ""
        assert line, f"kgstream exited early: {banner}"
        banner += line
    return banner


def write(folder: Path) -> None:
    for name, text in DOCS.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def test_run_serves_the_gateway_and_query_reaches_it(env, tmp_path, capsys, monkeypatch):
    folder, data = tmp_path / "docs", tmp_path / "data"
    write(folder)
    env = {**env, "KGSTREAM_METRICS_ADDRESS": "127.0.0.1:0", "KGSTREAM_LOG_FORMAT": "json"}
    running = kgstream(
        "run", "--watch", str(folder), "--data", str(data), "--grpc", "127.0.0.1:0", env=env
    )
    try:
        banner = read_banner(running)
        address = re.search(r"gateway on (\S+)", banner).group(1)
        metrics_url = re.search(r"metrics on (\S+)", banner).group(1)

        def ask() -> dict:
            capsys.readouterr()
            code = main(
                [
                    "query",
                    "Who leads the Atlas Project?",
                    "--grpc",
                    address,
                    "--mode",
                    "local",
                    "--context-only",
                    "--json",
                ]
            )
            assert code == 0
            return json.loads(capsys.readouterr().out)

        wait_until(lambda: "carla diaz" in {e["key"] for e in ask()["entities"]}, 60, "indexing")
        result = ask()
        assert result["answer"] is None and result["index_version"] > 0
        assert {c["doc_id"] for c in result["chunks"]} >= {"people/carla.md"}
        assert result["references"][0]["file_path"] in DOCS

        metrics = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
        assert sample(metrics, 'kgstream_events_in_total{source="folder"}') >= 2
        assert sample(metrics, 'kgstream_documents_by_status{status="PROCESSED"}') == 2
        assert sample(metrics, "kgstream_index_version") >= 1
        assert sample(metrics, "kgstream_freshness_seconds_count") >= 2
        assert sample(metrics, "kgstream_chunks_extracted_total") >= 2
        assert sample(metrics, "kgstream_embedding_calls_total") >= 1
        assert sample(metrics, 'kgstream_query_latency_seconds_count{mode="local"}') >= 1
    finally:
        running.send_signal(signal.SIGINT)
        output, _ = running.communicate(timeout=60)
    assert running.returncode == 0, output

    capsys.readouterr()
    for key in ("KGSTREAM_EMBEDDING_BASE_URL", "KGSTREAM_EMBEDDING_MODEL"):
        monkeypatch.setenv(key, env[key])
    assert main(["query", "Helios Corp", "--data", str(data), "--mode", "naive", "--json"]) == 0
    answered = json.loads(capsys.readouterr().out)
    assert "No LLM is configured" in answered["answer"]
    assert answered["chunks"] and answered["chunks"][0]["file_path"] in DOCS

    # A restarted gateway alone (`serve` commits nothing) exports the index state at once.
    serving = kgstream("serve", "--data", str(data), "--grpc", "127.0.0.1:0", env=env)
    try:
        banner = read_banner(serving)
        metrics_url = re.search(r"metrics on (\S+)", banner).group(1)
        metrics = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
        assert sample(metrics, 'kgstream_documents_by_status{status="PROCESSED"}') == 2
        assert sample(metrics, "kgstream_index_version") >= result["index_version"] > 0
        assert sample(metrics, "process_resident_memory_bytes") > 0
    finally:
        serving.send_signal(signal.SIGINT)
        output, _ = serving.communicate(timeout=60)
    assert serving.returncode == 0, output
