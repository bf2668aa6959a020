"""Invariant 6, counted on the OpenAI-compatible test server: only changed chunks cost LLM calls."""

import re

from connectors.llm.client import ChatClient, InMemoryResponseCache, LLMOptions
from connectors.llm.extractor import LLMExtractor, LLMExtractorOptions
from connectors.retry import Backoff
from connectors.tokenizer import TiktokenTokenizer
from dataflow.core.chunking import ChunkingOptions
from dataflow.core.contributions import Renderer
from dataflow.core.documents import DocumentUpsert
from dataflow.core.index import ReferenceIndex

TOKENIZER = TiktokenTokenizer()
RENDERER = Renderer(count_tokens=TOKENIZER.count)
D = "<|#|>"


def paragraph(i: int, version: str = "") -> str:
    return f"Project Topic{i}{version} is run by Station{i} in the northern region. " * 4


def document(versions: dict[int, str] | None = None) -> str:
    versions = versions or {}
    return "\n\n".join(paragraph(i, versions.get(i, "")) for i in range(20))


def reply_naming_the_paragraph(body: dict) -> str:
    """A scripted model: one entity per paragraph, related to its station."""
    text = body["messages"][-1]["content"]
    topic, station = re.search(r"(Topic\d+\w*)", text)[1], re.search(r"(Station\d+)", text)[1]
    return (
        f"entity{D}{topic}{D}category{D}A project topic.\n"
        f"entity{D}{station}{D}organization{D}A station.\n"
        f"relation{D}{topic}{D}{station}{D}runs{D}{station} runs {topic}.\n<|COMPLETE|>"
    )


def make_index(llm_server) -> ReferenceIndex:
    llm_server.responder = reply_naming_the_paragraph
    client = ChatClient(
        LLMOptions(
            base_url=llm_server.base_url, model="test-chat-model", backoff=Backoff(0.01, 0.05)
        ),
        cache=InMemoryResponseCache(),
    )
    extractor = LLMExtractor(client, LLMExtractorOptions(max_gleaning=0))
    chunking = ChunkingOptions(
        chunk_token_size=200, chunk_overlap_tokens=20, split_by_character="\n\n"
    )
    return ReferenceIndex(TOKENIZER, extractor.extract, chunking)


def test_editing_one_paragraph_of_a_20_chunk_document_re_extracts_only_that_chunk(llm_server):
    index = make_index(llm_server)
    index.apply(DocumentUpsert("report.md", document(), "report.md"))
    assert len(index.chunks) == 20
    assert llm_server.chat_calls == 20

    index.apply(DocumentUpsert("report.md", document({7: "b"}), "report.md"))
    assert llm_server.chat_calls == 21
    snapshot = index.snapshot(RENDERER)
    assert "topic7b" in snapshot.entities and "topic7" not in snapshot.entities
    assert ("station7", "topic7b") in snapshot.relations


def test_resending_an_unchanged_document_makes_no_llm_call(llm_server):
    index = make_index(llm_server)
    index.apply(DocumentUpsert("report.md", document(), "report.md"))
    calls = llm_server.chat_calls
    index.apply(DocumentUpsert("report.md", document(), "report.md"))
    index.apply(DocumentUpsert("report.md", "\n" + document() + "\n  ", "report.md"))
    assert llm_server.chat_calls == calls


def test_reverting_an_edit_is_served_from_the_cache(llm_server):
    index = make_index(llm_server)
    index.apply(DocumentUpsert("report.md", document(), "report.md"))
    index.apply(DocumentUpsert("report.md", document({3: "x"}), "report.md"))
    calls = llm_server.chat_calls
    index.apply(DocumentUpsert("report.md", document(), "report.md"))
    assert llm_server.chat_calls == calls
    assert "topic3" in index.snapshot(RENDERER).entities
