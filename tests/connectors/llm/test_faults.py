"""LLM endpoint faults through the real `openai` client: each is retried a bounded number of
times, and what still fails is one chunk's reason, never an exception out of `extract_many`.

Faults come from the OpenAI-compatible test server's fault sequences (`queue_faults`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from connectors.llm.client import ChatClient, InMemoryResponseCache, LLMError, LLMOptions
from connectors.llm.extractor import LLMExtractor, LLMExtractorOptions
from connectors.retry import Backoff
from dataflow.core.extraction import Extraction
from dataflow.core.prompts import ChatMessage
from tests.support.llm_server import (
    PASS,
    ChatFault,
    OpenAICompatibleServer,
    cut,
    garbage,
    stall,
    status,
)

D = "<|#|>"
REPLY = f"entity{D}Ada Lovelace{D}person{D}Ada Lovelace wrote the first program.\n<|COMPLETE|>"
TIMEOUT = 0.4
FAULTS = {
    "429": status(429),
    "500": status(500),
    "503 with Retry-After": status(503, retry_after=0.01),
    "timeout": stall(TIMEOUT * 4),
    "body cut": cut(),
    "garbage": garbage("I'm sorry, I can't help with that."),
    "empty reply": garbage(""),
}


@pytest.fixture
def client(llm_server: OpenAICompatibleServer) -> Iterator[ChatClient]:
    options = LLMOptions(
        llm_server.base_url,
        "test-chat-model",
        timeout_seconds=TIMEOUT,
        max_retries=2,
        backoff=Backoff(0.01, 0.02),
    )
    with ChatClient(options, cache=InMemoryResponseCache()) as chat:
        yield chat


def extractor(client: ChatClient) -> LLMExtractor:
    return LLMExtractor(client, LLMExtractorOptions(max_gleaning=0))


@pytest.mark.parametrize("fault", FAULTS.values(), ids=FAULTS.keys())
def test_a_fault_within_the_retry_budget_is_retried_and_the_chunk_extracts(
    llm_server: OpenAICompatibleServer, client: ChatClient, fault: ChatFault
) -> None:
    llm_server.queue_faults(fault, fault)
    llm_server.responder = lambda body: REPLY  # a cut sends half of this reply

    (result,) = extractor(client).extract_many(["Ada Lovelace wrote the first program."])

    assert isinstance(result, Extraction), result
    assert [entity.name for entity in result.entities] == ["Ada Lovelace"]
    assert llm_server.chat_calls == 3


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        (status(429), "HTTP 429"),
        (status(500), "HTTP 500"),
        (stall(TIMEOUT * 4), "timeout after 0.4 s"),
        (cut(), "connection error"),
        (garbage("Sure! Here are the entities: Ada."), "unusable reply: the reply is not in the"),
    ],
    ids=["429", "500", "timeout", "body cut", "garbage"],
)
def test_a_fault_past_the_retry_budget_is_that_chunks_reason_and_the_others_extract(
    llm_server: OpenAICompatibleServer, client: ChatClient, fault: ChatFault, reason: str
) -> None:
    poison = "Poisoned paragraph about Babbage."
    llm_server.fault_for = lambda body: fault if poison in str(body["messages"]) else None
    llm_server.responder = lambda body: REPLY

    failed, extracted = extractor(client).extract_many([poison, "Ada wrote a program."])

    assert isinstance(failed, str) and reason in failed, failed
    assert "after 3 attempt(s)" in failed
    assert isinstance(extracted, Extraction) and extracted.entities
    poisoned_calls = [b for b in llm_server.bodies() if poison in str(b["messages"])]
    assert len(poisoned_calls) == 3  # the first try and max_retries=2 retries, no more


def test_a_mixed_fault_sequence_is_retried_in_order_until_the_reply(
    llm_server: OpenAICompatibleServer, llm_server_fast_client: ChatClient
) -> None:
    llm_server.queue_faults(status(429), status(502), cut(), garbage("no records here"), PASS)
    llm_server.responder = lambda body: REPLY

    result = extractor(llm_server_fast_client).extract("Ada Lovelace wrote the first program.")

    assert [entity.name for entity in result.entities] == ["Ada Lovelace"]
    assert llm_server.chat_calls == 5


@pytest.fixture
def llm_server_fast_client(llm_server: OpenAICompatibleServer) -> Iterator[ChatClient]:
    options = LLMOptions(
        llm_server.base_url, "test-chat-model", max_retries=4, backoff=Backoff(0.01, 0.02)
    )
    with ChatClient(options) as chat:
        yield chat


def test_a_garbage_reply_is_never_cached(
    llm_server: OpenAICompatibleServer, client: ChatClient
) -> None:
    llm_server.queue_faults(garbage("Let me think about it."))
    llm_server.queue_replies(REPLY)
    chunk = "Ada Lovelace wrote the first program."

    first = extractor(client).extract(chunk)
    again = extractor(client).extract(chunk)

    assert first == again and first.entities
    assert llm_server.chat_calls == 2  # the garbage and the reply; the second extract is cached


def test_a_reply_in_the_format_with_no_record_is_an_empty_extraction_not_garbage(
    llm_server: OpenAICompatibleServer, client: ChatClient
) -> None:
    llm_server.queue_replies("<|COMPLETE|>", '{"entities": [], "relations": []}')

    assert extractor(client).extract("Nothing to see.") == Extraction()
    assert extractor(client).extract("Nothing else.") == Extraction()
    assert llm_server.chat_calls == 2


def test_a_stream_cut_mid_way_raises_llm_error_instead_of_ending_quietly(
    llm_server: OpenAICompatibleServer, client: ChatClient
) -> None:
    llm_server.queue_faults(cut())
    llm_server.queue_replies("The first program was written by Ada Lovelace in 1843.")
    messages = (ChatMessage("user", "Who wrote the first program?"),)

    received: list[str] = []
    cut_off = pytest.raises(LLMError, match="the stream ended before the model's final chunk")
    with cut_off, client.stream(messages) as deltas:
        received.extend(deltas)
    assert received, "the deltas before the cut are delivered"
    assert "".join(received) != "The first program was written by Ada Lovelace in 1843."


def test_a_whole_stream_ends_normally(
    llm_server: OpenAICompatibleServer, client: ChatClient
) -> None:
    llm_server.queue_replies("Ada Lovelace, in 1843.")
    messages = (ChatMessage("user", "Who wrote the first program?"),)

    with client.stream(messages) as deltas:
        assert "".join(deltas) == "Ada Lovelace, in 1843."
