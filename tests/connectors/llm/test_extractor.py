"""LLMExtractor through ChatClient and the real `openai` client against the test server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from connectors.llm.client import (
    ChatClient,
    InMemoryResponseCache,
    LLMError,
    LLMOptions,
    ResponseCache,
    SqliteResponseCache,
)
from connectors.llm.extractor import LLMExtractor, LLMExtractorOptions
from connectors.retry import Backoff
from dataflow.core.extraction import DropCounts, ExtractedEntity, ExtractedRelation, Extraction
from dataflow.core.prompts import (
    ExtractionPromptOptions,
    build_continue_messages,
    build_extraction_messages,
)
from tests.support.llm_server import OpenAICompatibleServer

D = "<|#|>"
DONE = "<|COMPLETE|>"
CHUNK = "Ada Lovelace wrote a program for Charles Babbage's Analytical Engine."
PROMPT = ExtractionPromptOptions()


def entity(name: str, kind: str, description: str) -> str:
    return f"entity{D}{name}{D}{kind}{D}{description}"


def relation(source: str, target: str, keywords: str, description: str, strength: float) -> str:
    return f"relation{D}{source}{D}{target}{D}{keywords}{D}{description}{D}{strength}"


def reply(*records: str) -> str:
    return "\n".join((*records, DONE))


ADA = entity("Ada Lovelace", "person", "Ada Lovelace wrote a program.")
ENGINE = entity("Analytical Engine", "category", "A mechanical computer.")
ADA_ENGINE = relation(
    "Ada Lovelace", "Analytical Engine", "programming, design", "Ada programmed the engine.", 0.9
)


@pytest.fixture
def make_extractor(llm_server: OpenAICompatibleServer) -> Iterator[Any]:
    clients: list[ChatClient] = []

    def build(
        *, max_gleaning: int = 1, cache: ResponseCache | None = None, **overrides: Any
    ) -> LLMExtractor:
        settings: dict[str, Any] = {"backoff": Backoff(base=0.01, cap=0.05), **overrides}
        options = LLMOptions(base_url=llm_server.base_url, model="test-chat-model", **settings)
        client = ChatClient(options, cache=cache)
        clients.append(client)
        return LLMExtractor(client, LLMExtractorOptions(prompt=PROMPT, max_gleaning=max_gleaning))

    yield build
    for client in clients:
        client.close()


def sent_messages(request: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in request["messages"]]


def as_pairs(messages: Any) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages]


def test_extraction_parses_the_scripted_reply_into_exact_records(
    llm_server: OpenAICompatibleServer, make_extractor: Any
) -> None:
    llm_server.queue_replies(reply(ADA, ENGINE, ADA_ENGINE))

    result = make_extractor(max_gleaning=0).extract(CHUNK)

    assert result == Extraction(
        entities=(
            ExtractedEntity("Ada Lovelace", "person", "Ada Lovelace wrote a program."),
            ExtractedEntity("Analytical Engine", "category", "A mechanical computer."),
        ),
        relations=(
            ExtractedRelation(
                "Ada Lovelace",
                "Analytical Engine",
                ("programming", "design"),
                "Ada programmed the engine.",
                0.9,
            ),
        ),
        dropped=DropCounts(),
    )
    (request,) = llm_server.bodies()
    assert sent_messages(request) == as_pairs(build_extraction_messages(CHUNK, PROMPT))


def test_gleaning_makes_one_plus_n_calls_and_keeps_the_longer_description(
    llm_server: OpenAICompatibleServer, make_extractor: Any
) -> None:
    first = reply(ADA, ENGINE, ADA_ENGINE)
    longer_ada = entity(
        "Ada Lovelace", "person", "Ada Lovelace wrote the first published computer program."
    )
    second = reply(entity("Charles Babbage", "person", "Designed the engine."), longer_ada)
    third = reply(
        relation("Charles Babbage", "Analytical Engine", "invention", "Babbage designed it.", 0.8)
    )
    llm_server.queue_replies(first, second, third)

    result = make_extractor(max_gleaning=2).extract(CHUNK)

    assert llm_server.chat_calls == 3
    assert [(e.name, e.description) for e in result.entities] == [
        ("Ada Lovelace", "Ada Lovelace wrote the first published computer program."),
        ("Analytical Engine", "A mechanical computer."),
        ("Charles Babbage", "Designed the engine."),
    ]
    assert [(r.source, r.target) for r in result.relations] == [
        ("Ada Lovelace", "Analytical Engine"),
        ("Charles Babbage", "Analytical Engine"),
    ]
    # Each gleaning pass replays the conversation with the model's previous reply.
    bodies = llm_server.bodies()
    opening = build_extraction_messages(CHUNK, PROMPT)
    glean_1 = build_continue_messages(opening, first, PROMPT)
    glean_2 = build_continue_messages(glean_1, second, PROMPT)
    assert [sent_messages(b) for b in bodies] == [
        as_pairs(opening),
        as_pairs(glean_1),
        as_pairs(glean_2),
    ]


def test_gleaning_stops_early_when_a_pass_adds_nothing_new(
    llm_server: OpenAICompatibleServer, make_extractor: Any
) -> None:
    longer_engine = entity(
        "analytical engine", "category", "A mechanical general-purpose computer."
    )
    llm_server.queue_replies(reply(ADA, ENGINE, ADA_ENGINE), reply(longer_engine), "unused")

    result = make_extractor(max_gleaning=3).extract(CHUNK)

    assert llm_server.chat_calls == 2
    assert [e.description for e in result.entities] == [
        "Ada Lovelace wrote a program.",
        "A mechanical general-purpose computer.",
    ]
    assert len(result.relations) == 1


def test_second_extract_of_the_same_chunk_makes_no_http_call(
    llm_server: OpenAICompatibleServer, make_extractor: Any
) -> None:
    llm_server.queue_replies(reply(ADA, ENGINE), reply(ADA_ENGINE))
    extractor = make_extractor(max_gleaning=1, cache=InMemoryResponseCache())

    first = extractor.extract(CHUNK)
    calls_after_first = llm_server.chat_calls
    again = extractor.extract(CHUNK)

    assert calls_after_first == 2
    assert llm_server.chat_calls == 2
    assert again == first
    assert len(first.relations) == 1


def test_sqlite_cached_extraction_survives_a_restart(
    llm_server: OpenAICompatibleServer, make_extractor: Any, tmp_path: Path
) -> None:
    llm_server.queue_replies(reply(ADA, ENGINE, ADA_ENGINE), reply())
    path = tmp_path / "llm-cache.sqlite"
    with SqliteResponseCache(path) as cache:
        before = make_extractor(cache=cache).extract(CHUNK)

    with SqliteResponseCache(path) as reopened:
        after = make_extractor(cache=reopened).extract(CHUNK)

    assert after == before
    assert llm_server.chat_calls == 2


def test_llm_error_propagates_out_of_extract(
    llm_server: OpenAICompatibleServer, make_extractor: Any
) -> None:
    llm_server.fail_next(500, count=10)

    with pytest.raises(LLMError, match=r"after 2 attempt\(s\); last error: HTTP 500"):
        make_extractor(max_retries=1).extract(CHUNK)
    assert llm_server.chat_calls == 2


def test_malformed_reply_is_counted_not_raised(
    llm_server: OpenAICompatibleServer, make_extractor: Any
) -> None:
    llm_server.queue_replies(reply(ADA, f"entity{D}only a name"))

    result = make_extractor(max_gleaning=0).extract(CHUNK)

    assert [e.name for e in result.entities] == ["Ada Lovelace"]
    assert result.dropped.malformed_entities == 1


def test_extract_many_returns_results_in_input_order_within_the_concurrency_bound(
    llm_server: OpenAICompatibleServer, make_extractor: Any
) -> None:
    names = ["Alpha Corp", "Beta Labs", "Gamma Group", "Delta Works", "Epsilon Inc"]

    def respond(request: dict[str, Any]) -> str:
        if len(request["messages"]) > 2:  # a gleaning pass: nothing more to add
            return reply()
        name = next(n for n in names if n in request["messages"][1]["content"])
        return reply(entity(name, "organization", f"{name} is a company."))

    llm_server.responder = respond
    llm_server.delay_seconds = 0.05
    extractor = make_extractor(max_gleaning=1, max_concurrency=2)

    results = extractor.extract_many([f"{name} opened an office." for name in names])

    assert [[e.name for e in r.entities] for r in results] == [[name] for name in names]
    assert llm_server.chat_calls == 10
    assert llm_server.max_in_flight == 2


def test_extract_many_reports_a_failed_chunk_as_its_reason_and_extracts_the_others(
    llm_server: OpenAICompatibleServer, make_extractor: Any
) -> None:
    llm_server.fail_next(400, count=1, body="bad prompt")
    llm_server.queue_replies(reply(ADA))

    first, second = make_extractor(max_gleaning=0, max_concurrency=1).extract_many(
        [CHUNK, CHUNK + " Again."]
    )

    assert isinstance(first, str) and "bad prompt" in first
    assert not isinstance(second, str) and [e.name for e in second.entities] == ["Ada Lovelace"]


def test_extractor_options_reject_negative_gleaning() -> None:
    with pytest.raises(ValueError, match="max_gleaning must be >= 0"):
        LLMExtractorOptions(max_gleaning=-1)
