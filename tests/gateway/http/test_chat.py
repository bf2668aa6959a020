"""The OpenAI-compatible chat endpoint, called by the official `openai` client (and httpx for
what the client hides): models, answers with references, streaming, errors."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from gateway.server import RunningServer
from tests.gateway.test_server import ANSWER
from tests.support.llm_server import OpenAICompatibleServer

QUESTION = "Who leads the Atlas Project?"


@pytest.fixture
def client(http_server: RunningServer) -> Iterator[openai.OpenAI]:
    assert http_server.http is not None
    with openai.OpenAI(
        base_url=f"{http_server.http.url}/v1", api_key="unused", max_retries=0
    ) as client:
        yield client


def test_models_are_the_query_modes(client: openai.OpenAI) -> None:
    ids = sorted(model.id for model in client.models.list())
    assert ids == sorted(f"kgstream-{m}" for m in ("mix", "hybrid", "local", "global", "naive"))


def test_a_completion_answers_with_references(
    client: openai.OpenAI, llm_server: OpenAICompatibleServer
) -> None:
    completion = client.chat.completions.create(
        model="kgstream-mix",
        messages=[
            {"role": "system", "content": "Answer in one sentence."},
            {"role": "user", "content": "Tell me about Northwind Labs."},
            {"role": "assistant", "content": "Northwind Labs is in Lisbon."},
            {"role": "user", "content": QUESTION},
        ],
    )
    text = completion.choices[0].message.content or ""
    assert text.startswith(ANSWER)
    assert "References:" in text and "projects/atlas.md" in text
    extra = completion.model_extra or {}
    assert any(r["file_path"] == "projects/atlas.md" for r in extra["references"])
    assert isinstance(extra["index_version"], int)
    assert completion.usage is not None and completion.usage.total_tokens > 0
    # the conversation reached the answering LLM: history and the system instructions
    prompt = str(llm_server.bodies()[-1]["messages"])
    assert "Northwind Labs is in Lisbon." in prompt and "Answer in one sentence." in prompt


def test_a_streamed_completion_joins_to_the_answer(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="kgstream-local",
        messages=[{"role": "user", "content": QUESTION}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith(ANSWER) and "References:" in text
    assert chunks[0].model_extra and chunks[0].model_extra["references"]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_an_unknown_model_is_not_found(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as raised:
        client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": QUESTION}]
        )
    assert "kgstream-mix" in str(raised.value)


@pytest.mark.parametrize(
    "body",
    [
        {"model": "kgstream-mix", "messages": []},
        {"model": "kgstream-mix", "messages": [{"role": "assistant", "content": "hi"}]},
        {"model": "kgstream-mix", "messages": [{"role": "robot", "content": "hi"}]},
        {"model": "kgstream-mix", "messages": [{"role": "user", "content": 3}]},
        {"model": "kgstream-mix", "messages": [{"role": "user", "content": "q"}], "stream": "y"},
        {"messages": [{"role": "user", "content": "q"}]},
    ],
)
def test_bad_requests_get_openai_shaped_errors(http_server: RunningServer, body: object) -> None:
    assert http_server.http is not None
    reply = httpx.post(f"{http_server.http.url}/v1/chat/completions", json=body)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_question_over_the_limit_is_a_bad_request(client: openai.OpenAI, stream: bool) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(
            model="kgstream-mix",
            messages=[{"role": "user", "content": "x" * 10_000}],
            stream=stream,
        )
    assert "question" in str(raised.value)
