"""`kgstream retry-failed` as a user runs it: documents whose extraction failed are extracted
again by the running indexer, or by the next `kgstream index`, without re-sending them;
documents that failed for a permanent reason are listed and left alone."""

import json
import signal
from pathlib import Path

import pytest

from connectors.index_export import read_graph
from connectors.kafka.producer import DocumentEventProducer
from connectors.stores import StoreLocations, open_graph_store
from dataflow.core.documents import DocumentUpsert, FailureKind
from dataflow.core.index import IndexSnapshot
from kgstream.cli import main
from tests.kgstream.processes import clean_environment, finish, kgstream
from tests.kgstream.test_cli_watch import fresh_build, stored_graph
from tests.support.llm_server import offline_extraction_reply, status
from tests.support.wait import wait_until

POISON = "Quillon Varga"
FILES = {
    "bad.md": f"{POISON} audits Harbour Forge in Tallinn for the Northern Registry.",
    "good.md": "Marta Ilves founded Tallow Works in Riga.",
}


def write(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in FILES.items():
        (folder / name).write_text(text)
    (folder / "latin1.md").write_bytes("Caf\xe9 Noir".encode("latin-1"))  # not UTF-8: permanent


def poison(llm_server) -> None:
    llm_server.responder = offline_extraction_reply
    llm_server.fault_for = lambda body: (
        status(500) if POISON in body["messages"][-1]["content"] else None
    )


def llm_environment(llm_server) -> dict[str, str]:
    return {
        "KGSTREAM_LLM_BASE_URL": llm_server.base_url,
        "KGSTREAM_LLM_MODEL": "test-chat-model",
        "KGSTREAM_LLM_MAX_RETRIES": "0",
    }


def graph_at_rest(data: Path) -> IndexSnapshot:
    """The stored graph of a data directory no process is running on."""
    graph, embedded = open_graph_store(StoreLocations(data))
    try:
        return read_graph(graph)
    finally:
        if embedded is not None:
            embedded.stop()


def statuses(graph: IndexSnapshot | None) -> dict[str, str]:
    if graph is None:
        return {}
    return {doc_id: record.status.value for doc_id, record in graph.documents.items()}


def test_retry_failed_then_the_next_index_re_extracts_what_failed(
    llm_server, monkeypatch, tmp_path, capsys
):
    for name, value in clean_environment(llm_server.base_url).items():
        monkeypatch.setenv(name, value)
    for name, value in llm_environment(llm_server).items():
        monkeypatch.setenv(name, value)
    folder, data = tmp_path / "docs", tmp_path / "data"
    write(folder)
    poison(llm_server)
    assert main(["index", str(folder), "--data", str(data)]) == 0
    assert "hint: `kgstream retry-failed` extracts the chunks that failed again" in (
        capsys.readouterr().out
    )
    failed = {"bad.md": "FAILED", "good.md": "PROCESSED", "latin1.md": "FAILED"}
    at_rest = graph_at_rest(data)
    assert statuses(at_rest) == failed
    kinds = {d: record.failure_kind for d, record in at_rest.documents.items()}
    assert kinds == {
        "bad.md": FailureKind.EXTRACTION,
        "good.md": None,
        "latin1.md": FailureKind.NOT_UTF8,
    }
    assert main(["status", "--data", str(data), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["failures"]
    assert {(f["doc_id"], f["failure_kind"], f["retryable"]) for f in shown} == {
        ("bad.md", "extraction", True),
        ("latin1.md", "not_utf8", False),
    }

    llm_server.fault_for = None  # the endpoint recovers
    capsys.readouterr()
    assert main(["retry-failed", "--data", str(data)]) == 0
    output = capsys.readouterr().out
    assert "asked the indexer to retry 1 document(s) whose extraction failed" in output
    assert "1 document(s) failed for a reason a retry cannot fix" in output
    assert "latin1.md: content is not valid UTF-8" in output

    llm_server.reset()
    assert main(["index", str(folder), "--data", str(data)]) == 0
    assert "retry-failed" not in capsys.readouterr().out  # latin1.md is not retryable
    graph = graph_at_rest(data)
    assert statuses(graph) == {**failed, "bad.md": "PROCESSED"}
    assert graph == fresh_build(folder)
    calls = [str(body["messages"]) for body in llm_server.bodies()]
    assert calls and all(POISON in call for call in calls)  # only the failed chunk (+ gleaning)

    llm_server.reset()  # the request was acted on once: indexing again retries nothing
    assert main(["index", str(folder), "--data", str(data)]) == 0
    assert llm_server.chat_calls == 0


@pytest.fixture
def run_env(llm_server):
    return {**clean_environment(llm_server.base_url), **llm_environment(llm_server)}


def test_a_running_indexer_retries_at_once(llm_server, run_env, tmp_path, capsys):
    folder, data = tmp_path / "docs", tmp_path / "data"
    write(folder)
    poison(llm_server)
    running = kgstream(
        "run", "--watch", str(folder), "--data", str(data), "--no-serve", env=run_env
    )
    try:
        wait_until(
            lambda: statuses(stored_graph(data)).get("bad.md") == "FAILED", 60, "bad.md to fail"
        )
        llm_server.fault_for = None

        assert main(["retry-failed", "--data", str(data)]) == 0

        wait_until(lambda: stored_graph(data) == fresh_build(folder), 60, "the retried index")
        assert statuses(stored_graph(data))["bad.md"] == "PROCESSED"
    finally:
        running.send_signal(signal.SIGTERM)
        output, _ = running.communicate(timeout=60)
    assert running.returncode == 0, output


def test_a_kafka_run_retries_what_failed_without_the_event_being_sent_again(
    kafka_broker, llm_server, run_env, tmp_path
):
    topic = "retry-documents"
    kafka_broker.create_topic(topic, 2)
    with DocumentEventProducer(kafka_broker.bootstrap_servers, topic) as producer:
        for doc_id, text in FILES.items():
            producer.send(DocumentUpsert(doc_id, text, doc_id))
    kafka = ["--kafka", kafka_broker.bootstrap_servers, "--topic", topic]
    live, rebuilt = tmp_path / "live", tmp_path / "rebuilt"
    run = ["run", *kafka, "--data", str(live), "--until-caught-up", "--no-serve"]
    poison(llm_server)

    finish(kgstream(*run, env=run_env))
    assert statuses(graph_at_rest(live)) == {"bad.md": "FAILED", "good.md": "PROCESSED"}

    llm_server.fault_for = None
    output = finish(kgstream("retry-failed", "--data", str(live), env=run_env))
    assert "retry 1 document(s)" in output
    finish(kgstream(*run, env=run_env))  # nothing new on the topic: only the retry

    finish(kgstream("replay", *kafka, "--data", str(rebuilt), env=run_env))
    graph = graph_at_rest(live)
    assert statuses(graph) == {"bad.md": "PROCESSED", "good.md": "PROCESSED"}
    assert graph == graph_at_rest(rebuilt)
