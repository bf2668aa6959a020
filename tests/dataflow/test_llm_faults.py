"""LLM faults through the real dataflow: a chunk whose calls keep failing fails its document
with the reason, the rest of the stream flows, and a retry request re-extracts exactly the
failed chunks (the OpenAI-compatible test server answers with the offline extractor's
records, so the result can be compared with a from-scratch build)."""

from datetime import timedelta

import pytest
from bytewax.testing import TestingSource, run_main

from connectors.llm.client import ChatClient, LLMOptions
from connectors.redis.retry_requests import RetryRequestSource
from connectors.retry import Backoff
from dataflow.core.contributions import Renderer, RenderOptions
from dataflow.core.documents import DocumentStatus, DocumentUpsert
from dataflow.core.index import ReferenceIndex
from dataflow.core.offline.extractor import extract_offline
from dataflow.flow import build_flow
from kgstream.assembly import llm_summarizer
from kgstream.indexer import recovery_partitions
from tests.dataflow import harness
from tests.dataflow.harness import (
    CHUNKING,
    TOKENIZER,
    events,
    fresh_build,
    stored,
)
from tests.support.llm_server import cut, garbage, offline_extraction_reply, stall, status

POISON = "Quillon Varga"  # the failing chunk's marker: its extraction calls meet the fault
GOOD = "Marta Ilves founded Tallow Works in Riga. Tallow Works builds ferries for Baltic Line."
BAD = (
    "Oskar Lind runs Harbour Forge in Tallinn. Harbour Forge repairs ships for Baltic Line.\n\n"
    f"{POISON} audits Harbour Forge from Helsinki for the Northern Registry."
)
TIMEOUT = 0.4


@pytest.fixture
def chat_client(llm_server):
    llm_server.responder = offline_extraction_reply
    options = LLMOptions(
        llm_server.base_url,
        "test-chat-model",
        timeout_seconds=TIMEOUT,
        max_retries=1,
        backoff=Backoff(0.01, 0.02),
    )
    with ChatClient(options) as client:
        yield client


@pytest.fixture
def llm_components(redis_server, llm_server, chat_client, tmp_path):
    vector_dir = tmp_path / "vectors"
    with harness.llm_components(
        redis_server.url, llm_server.base_url, vector_dir, chat_client
    ) as c:
        yield c


def poison_fault(llm_server, fault):
    llm_server.fault_for = lambda body: fault if POISON in body["messages"][-1]["content"] else None


def poisoned_calls(llm_server) -> int:
    return sum(POISON in body["messages"][-1]["content"] for body in llm_server.bodies())


def run(components, changes, recovery_dir, retries=None, start=1.0):
    flow = build_flow(TestingSource(events(changes, start)), components, retries=retries)
    recovery = recovery_partitions(recovery_dir).config()
    run_main(flow, epoch_interval=timedelta(0), recovery_config=recovery)


FAULTS = {
    "429": (status(429), "HTTP 429"),
    "500": (status(500), "HTTP 500"),
    "timeout": (stall(TIMEOUT * 4), "timeout after 0.4 s"),
    "body cut": (cut(), "connection error"),
    "garbage": (garbage("As an AI model I cannot list entities."), "not in the extraction format"),
}


@pytest.mark.parametrize(("fault", "reason"), FAULTS.values(), ids=FAULTS.keys())
def test_a_chunk_whose_calls_keep_failing_fails_its_document_and_the_rest_flows(
    llm_components, llm_server, tmp_path, fault, reason
):
    poison_fault(llm_server, fault)
    changes = [DocumentUpsert("bad.md", BAD, "bad.md"), DocumentUpsert("good.md", GOOD, "good.md")]

    run(llm_components, changes, tmp_path / "recovery")

    graph = stored(llm_components).graph
    bad, good = graph.documents["bad.md"], graph.documents["good.md"]
    assert good.status is DocumentStatus.PROCESSED
    assert bad.status is DocumentStatus.FAILED
    assert bad.reason.startswith("extraction failed for 1 chunk(s): LLM call to ")
    assert reason in bad.reason and "after 2 attempt(s)" in bad.reason
    (failed_chunk,) = bad.failed_chunk_ids
    assert POISON in graph.chunks[failed_chunk].text
    assert poisoned_calls(llm_server) == 2  # one try and max_retries=1 retry, no more
    # What the other chunks contributed is there, and nothing of the failed one:
    without_poison = DocumentUpsert("bad.md", BAD.split("\n\n")[0], "bad.md")
    expected = fresh_build([without_poison, changes[1]])
    assert graph.entities == expected.entities
    assert graph.relations == expected.relations
    assert "quillon varga" not in graph.entities


def test_an_edit_that_keeps_a_failed_chunk_leaves_its_document_failed(
    llm_components, llm_server, tmp_path
):
    poison_fault(llm_server, status(500))
    edited = BAD.replace("Tallinn", "Tartu")  # the first paragraph changes, the poisoned one not
    changes = [DocumentUpsert("bad.md", BAD, "bad.md"), DocumentUpsert("bad.md", edited, "bad.md")]

    run(llm_components, changes, tmp_path / "recovery")

    record = stored(llm_components).graph.documents["bad.md"]
    assert record.status is DocumentStatus.FAILED, "the kept chunk was never extracted"
    assert (
        record.reason.startswith("extraction failed for 1 chunk(s): ")
        and "HTTP 500" in record.reason
    )
    assert len(record.failed_chunk_ids) == 1
    assert poisoned_calls(llm_server) == 2  # the edit did not extract the kept chunk again


def test_a_retry_request_re_extracts_only_the_failed_chunks_and_equals_a_fresh_build(
    llm_components, llm_server, tmp_path
):
    poison_fault(llm_server, status(503))
    binary = DocumentUpsert("binary.bin", b"\x00\x01\x02\x03" * 64, "binary.bin")
    changes = [
        DocumentUpsert("bad.md", BAD, "bad.md"),
        DocumentUpsert("good.md", GOOD, "good.md"),
        binary,
    ]
    run(llm_components, changes, tmp_path / "recovery")
    graph_store = llm_components.stores.graph
    assert graph_store.get_documents(["bad.md"])["bad.md"].record.status is DocumentStatus.FAILED

    llm_server.fault_for = None  # the endpoint recovers
    llm_server.reset()
    control = llm_components.stores.control
    control.request_retry(at=50.0)
    control.request_retry(at=51.0)  # two requests read together: one scan, one retry
    retries = RetryRequestSource(graph_store, control, follow=False)
    run(llm_components, [], tmp_path / "recovery", retries=retries, start=100.0)

    graph = stored(llm_components).graph
    assert graph.documents["bad.md"].status is DocumentStatus.PROCESSED
    assert graph.documents["binary.bin"].status is DocumentStatus.FAILED  # permanent: untouched
    expected = fresh_build(changes)
    assert graph == expected
    assert llm_server.chat_calls == 1  # only the failed chunk was extracted again
    assert poisoned_calls(llm_server) == 1


def test_a_summary_the_llm_fails_to_give_falls_back_to_the_extractive_summary(
    llm_components, chat_client, llm_server, tmp_path
):
    summarize = llm_summarizer(chat_client, "English", TOKENIZER.count)
    llm_components.renderer = Renderer(
        TOKENIZER.count, RenderOptions(summarize_over_fragments=2), summarize
    )
    llm_server.fault_for = lambda body: (
        status(500) if "merge descriptions" in body["messages"][0]["content"] else None
    )
    changes = [
        DocumentUpsert(
            f"doc{i}.md", f"Kessler Institute hired Person{i} Example{i} in Lisbon.", f"doc{i}.md"
        )
        for i in range(4)
    ]

    run(llm_components, changes, tmp_path / "recovery")

    graph = stored(llm_components).graph
    assert {d.status for d in graph.documents.values()} == {DocumentStatus.PROCESSED}
    offline = ReferenceIndex(TOKENIZER, extract_offline, CHUNKING)
    offline.apply_all(changes)
    extractive = offline.snapshot(
        Renderer(TOKENIZER.count, RenderOptions(summarize_over_fragments=2))
    )
    assert graph.entities["kessler institute"] == extractive.entities["kessler institute"]
    assert (
        sum("merge descriptions" in b["messages"][0]["content"] for b in llm_server.bodies()) >= 2
    )
