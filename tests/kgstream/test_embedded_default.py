"""The embedded default end to end, as `scripts/run` uses it: the sample corpus, the local
MiniLM embedder, embedded redis-server and Qdrant Edge, no network, no LLM."""

import json
from pathlib import Path

import pytest

from kgstream.cli import main

pytestmark = pytest.mark.services  # the embedded redis-server

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(autouse=True)
def embedded_default(monkeypatch):
    for name in (
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "KGSTREAM_LLM_BASE_URL",
        "KGSTREAM_EMBEDDING_BASE_URL",
        "KGSTREAM_REDIS_URL",
        "KGSTREAM_QDRANT_URL",
        "KGSTREAM_KAFKA_BOOTSTRAP_SERVERS",
    ):
        monkeypatch.delenv(name, raising=False)


def run_json(capsys, *argv: str) -> dict:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_sample_corpus_indexes_and_answers_offline_and_survives_a_restart(tmp_path, capsys):
    data = str(tmp_path / "data")
    assert main(["index", str(EXAMPLES), "--data", data]) == 0
    status = run_json(capsys, "status", "--data", data, "--json")
    assert status["documents"]["PROCESSED"] == 12 and not status["failures"]

    question = "Who leads the Tidewater Battery Lab?"
    local = run_json(capsys, "query", question, "--data", data, "--mode", "local", "--json")
    assert local["entities"][0]["key"] == "tidewater battery lab"
    assert "imogen hale" in {e["key"] for e in local["entities"][:5]}
    naive = run_json(capsys, "query", question, "--data", data, "--mode", "naive", "--json")
    assert naive["chunks"][0]["file_path"] == "org/tidewater-battery-lab.md"
    assert "No LLM is configured" in naive["answer"]
    assert naive["answer"].startswith("Tidewater Battery Lab is the research arm")  # quoted
    assert "[1]" in naive["answer"]

    # A restart on the same data finds everything where it was and re-indexes nothing.
    assert main(["index", str(EXAMPLES), "--data", data]) == 0
    assert run_json(capsys, "status", "--data", data, "--json") == status
