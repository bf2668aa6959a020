"""LLM call accounting through the real dataflow, counted on the OpenAI-compatible test server."""

import time
from collections import Counter
from datetime import timedelta

import pytest
from bytewax.testing import TestingSource, run_main

from connectors.llm.client import ChatClient, LLMOptions
from connectors.retry import Backoff
from dataflow.core.contributions import Renderer, RenderOptions
from dataflow.core.documents import DocumentUpsert
from kgstream.assembly import llm_summarizer
from tests.dataflow import harness
from tests.dataflow.harness import TOKENIZER, events, run_flow, stored
from tests.support.llm_server import offline_extraction_reply


def paragraph(i: int, version: str = "") -> str:
    return f"Kessler Institute studied Topic{i}{version} with Station{i} in Lisbon. " * 3


def document(versions: dict[int, str] | None = None) -> str:
    versions = versions or {}
    return "\n\n".join(paragraph(i, versions.get(i, "")) for i in range(20))


@pytest.fixture
def llm_components(redis_server, llm_server, tmp_path):
    llm_server.responder = offline_extraction_reply
    # No response cache: the counts below prove the dataflow itself skips unchanged chunks.
    options = LLMOptions(llm_server.base_url, "test-chat-model", backoff=Backoff(0.01, 0.05))
    with (
        ChatClient(options) as client,
        harness.llm_components(
            redis_server.url, llm_server.base_url, tmp_path / "vectors", client
        ) as components,
    ):
        yield components, client


def summary_calls(llm_server) -> Counter:
    """Summary requests per summarised entity or relation (the user message's first line)."""
    return Counter(
        body["messages"][1]["content"].splitlines()[0]
        for body in llm_server.bodies()
        if "merge descriptions" in body["messages"][0]["content"]
    )


def test_unchanged_resend_costs_nothing_and_an_edit_costs_only_its_chunk(
    llm_components, llm_server, entry_point
):
    components, _ = llm_components
    changes = [
        DocumentUpsert("report.md", document(), "report.md"),
        DocumentUpsert("report.md", document(), "report.md"),
        DocumentUpsert("report.md", document({7: "b"}), "report.md"),
    ]
    run_flow(components, events(changes), entry_point)
    chunks = stored(components).graph.chunks
    assert len(chunks) == 20
    assert llm_server.chat_calls == 21
    assert "topic7b" in stored(components).graph.entities


def test_a_burst_of_edits_to_one_entity_costs_two_summaries_at_most(
    llm_components, llm_server, entry_point
):
    # The first render due a summary goes at once (nothing was rendered a window before it);
    # the rest of the burst is held and rendered once.
    components, client = llm_components
    components.renderer = Renderer(
        TOKENIZER.count,
        RenderOptions(summarize_over_fragments=2),
        llm_summarizer(client, "English", TOKENIZER.count),
    )
    components.coalesce_seconds = 2.0
    llm_server.responder = lambda body: (
        "A summary."
        if "merge descriptions" in body["messages"][0]["content"]
        else offline_extraction_reply(body)
    )
    changes = [
        DocumentUpsert(
            f"doc{i}.md", f"Kessler Institute hired Person{i} Example{i} in Lisbon.", f"doc{i}.md"
        )
        for i in range(6)
    ]
    source = TestingSource(events(changes), batch_size=1)
    run_flow(components, source, entry_point)
    hub = stored(components).graph.entities["kessler institute"]
    assert hub.description == "A summary."
    assert len(hub.source_chunk_ids) == 6
    calls = summary_calls(llm_server)
    assert "Entity: Kessler Institute" in calls
    assert set(calls.values()) <= {1, 2}, calls


def test_an_edit_that_needs_no_summary_waits_for_no_coalescing_window(llm_components):
    # The window holds only renders that would call the LLM for a summary: a short document's
    # entities (one description each) commit at once, long before the window ends.
    components, client = llm_components
    components.renderer = Renderer(
        TOKENIZER.count, RenderOptions(), llm_summarizer(client, "en", TOKENIZER.count)
    )
    components.coalesce_seconds = 30.0
    committed: list[float] = []
    components.on_commit = lambda batch: committed.extend(time.monotonic() for _ in batch.completed)
    change = DocumentUpsert("note.md", "Kessler Institute hired Ada Byrne in Lisbon.", "note.md")
    started = time.monotonic()
    pause = 8.0  # the source stays open this long: a held render would commit only at its end
    run_flow(
        components,
        TestingSource([*events([change]), TestingSource.PAUSE(timedelta(seconds=pause))]),
        run_main,
    )
    assert committed and committed[0] - started < pause - 2, committed
    assert "kessler institute" in stored(components).graph.entities


def test_a_lone_edit_to_a_summarised_entity_is_not_held_for_the_window(llm_components, llm_server):
    # The window holds a render due a summary only while the key was rendered within it: an
    # edit to a hub after a quiet spell is summarised and committed at once (a burst right
    # after it still waits, as the burst test shows).
    components, client = llm_components
    components.renderer = Renderer(
        TOKENIZER.count,
        RenderOptions(summarize_over_fragments=2),
        llm_summarizer(client, "English", TOKENIZER.count),
    )
    # The first documents' renders end by one window after they arrive (a trailing render
    # of the ones held); the edit comes a window after that, with 3 s to spare for a slow
    # start, and has window - 1 s to commit.
    window = 4.0
    quiet = 2 * window + 3
    components.coalesce_seconds = window
    llm_server.responder = lambda body: (
        "A summary."
        if "merge descriptions" in body["messages"][0]["content"]
        else offline_extraction_reply(body)
    )
    commits: list[tuple[str, float]] = []
    components.on_commit = lambda batch: commits.extend(
        (done.ticket.doc_id, time.monotonic()) for done in batch.completed
    )
    hired = "Kessler Institute hired Person{0} Example{0} in {1}."
    first = [
        DocumentUpsert(f"doc{i}.md", hired.format(i, "Lisbon"), f"doc{i}.md") for i in range(4)
    ]
    edit = DocumentUpsert("doc0.md", hired.format(0, "Porto"), "doc0.md")
    started = time.monotonic()
    run_flow(
        components,
        TestingSource(
            [
                *events(first),
                TestingSource.PAUSE(timedelta(seconds=quiet)),
                *events([edit]),
                TestingSource.PAUSE(timedelta(seconds=window)),
            ]
        ),
        run_main,
    )
    edited = [at - started for doc_id, at in commits if doc_id == "doc0.md"]
    assert len(edited) == 2, commits
    # Held for the window, the edit would commit at quiet + window at the earliest (at the
    # end of the input, if sooner); released at once, it commits soon after `quiet`.
    assert quiet <= edited[1] < quiet + window - 1, edited
    hub = stored(components).graph.entities["kessler institute"]
    assert hub.description == "A summary."
    assert summary_calls(llm_server)["Entity: Kessler Institute"] == 2
