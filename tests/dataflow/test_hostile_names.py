"""Entity names that collide only after normalisation (invisible characters, a BOM, case,
spacing) are one entity through the real dataflow, and deleting one spelling's document
retracts exactly its contribution: the stores equal a from-scratch build."""

import pytest

from connectors.llm.client import ChatClient, LLMOptions
from connectors.retry import Backoff
from dataflow.core.documents import DocumentDelete, DocumentUpsert
from dataflow.core.index import ReferenceIndex
from dataflow.core.parsing import parse_extraction
from tests.dataflow import harness
from tests.dataflow.harness import CHUNKING, TOKENIZER, events, renderer, run_flow
from tests.dataflow.harness import stored as stored_index

D = "<|#|>"
# Each document's text names its spelling; the scripted model answers with that spelling.
SPELLINGS = {
    "plain": "Zoe Quist",
    "zero-width": "Zo\u200be Quist",
    "bom and case": "\ufeffZOE  QUIST",
    "invisible only": "\u200b\u2060\ufeff",
}


def reply_for(text: str) -> str:
    label = next((label for label in SPELLINGS if f"[{label}]" in text), None)
    if label is None:
        return "<|COMPLETE|>"
    spelling = SPELLINGS[label]
    return "\n".join(
        [
            f"entity{D}{spelling}{D}person{D}A geologist, as the {label} note says.",
            f"entity{D}Basalt Institute{D}organization{D}Where the geologist works.",
            f"relation{D}{spelling}{D}Basalt Institute{D}work{D}Works there ({label}).{D}1",
            "<|COMPLETE|>",
        ]
    )


def document(label: str) -> DocumentUpsert:
    return DocumentUpsert(f"{label}.md", f"[{label}] A note about a geologist.", f"{label}.md")


def fresh_build(changes):
    index = ReferenceIndex(TOKENIZER, lambda text: parse_extraction(reply_for(text)), CHUNKING)
    index.apply_all(changes)
    return index.snapshot(renderer())


@pytest.fixture
def components(redis_server, llm_server, tmp_path):
    llm_server.responder = lambda body: reply_for(body["messages"][-1]["content"])
    options = LLMOptions(llm_server.base_url, "test-chat-model", backoff=Backoff(0.01, 0.02))
    with (
        ChatClient(options) as client,
        harness.llm_components(
            redis_server.url, llm_server.base_url, tmp_path / "vectors", client
        ) as built,
    ):
        yield built


def test_spellings_that_normalise_alike_are_one_entity(components, entry_point):
    upserts = [document(label) for label in SPELLINGS]

    run_flow(components, events(upserts), entry_point)

    merged = stored_index(components).graph
    assert merged == fresh_build(upserts)
    zoe = merged.entities["zoe quist"]
    assert zoe.file_paths == ("bom and case.md", "plain.md", "zero-width.md")
    assert set(merged.entities) == {"zoe quist", "basalt institute"}  # the invisible name dropped
    assert list(merged.relations) == [("basalt institute", "zoe quist")]


def test_deleting_one_spelling_retracts_exactly_its_contribution(components, entry_point):
    upserts = [document(label) for label in SPELLINGS]
    changes = [*upserts, DocumentDelete("plain.md"), DocumentDelete("bom and case.md")]

    run_flow(components, events(changes), entry_point)

    after = stored_index(components).graph
    assert after == fresh_build(changes)
    assert after.entities["zoe quist"].file_paths == ("zero-width.md",)
    assert after.relations[("basalt institute", "zoe quist")].weight == 1.0
