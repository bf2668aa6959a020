"""OpenAI's API under /v1/, called by the official `openai` client (and httpx for what the
client hides): models, chat answers with references, streaming, the index's embeddings, and
OpenAI's error shape for every error there (401, 404, 405, 413 included)."""

from __future__ import annotations

import array
import base64
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from connectors.embeddings.base import embedding_space_name
from gateway.embeddings import MAX_EMBEDDING_INPUT_CHARS, MAX_EMBEDDING_INPUTS
from gateway.server import RunningServer
from tests.gateway.corpus import Corpus
from tests.gateway.test_server import ANSWER, http_gateway, new_engine
from tests.support.llm_server import OpenAICompatibleServer

QUESTION = "Who leads the Atlas Project?"
# Instructions, one earlier exchange, then the question.
CONVERSATION: list[Any] = [
    {"role": "system", "content": "Answer in one sentence."},
    {"role": "user", "content": "Tell me about Northwind Labs."},
    {"role": "assistant", "content": "Northwind Labs is in Lisbon."},
    {"role": "user", "content": QUESTION},
]


def assert_the_conversation_reached_the_llm(llm_server: OpenAICompatibleServer) -> None:
    """The answering LLM's last prompt held `CONVERSATION`'s history and instructions."""
    prompt = str(llm_server.bodies()[-1]["messages"])
    assert "Northwind Labs is in Lisbon." in prompt and "Answer in one sentence." in prompt


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
    completion = client.chat.completions.create(model="kgstream-mix", messages=CONVERSATION)
    text = completion.choices[0].message.content or ""
    assert text.startswith(ANSWER)
    assert "References:" in text and "projects/atlas.md" in text
    extra = completion.model_extra or {}
    assert any(r["file_path"] == "projects/atlas.md" for r in extra["references"])
    assert isinstance(extra["index_version"], int)
    assert completion.usage is not None and completion.usage.total_tokens > 0
    assert_the_conversation_reached_the_llm(llm_server)


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


# -- models, embeddings and OpenAI's error shape everywhere under /v1/ ----------------------


def test_a_model_is_retrieved_by_its_id(client: openai.OpenAI, corpus: Corpus) -> None:
    assert client.models.retrieve("kgstream-local").id == "kgstream-local"
    embedding_model = embedding_space_name(corpus.embedder)
    assert client.models.retrieve(embedding_model).id == embedding_model
    with pytest.raises(openai.NotFoundError) as raised:
        client.models.retrieve("gpt-4o")
    assert raised.value.code == "model_not_found" and "kgstream-mix" in raised.value.message


@pytest.mark.parametrize("encoding", ["float", "base64", None])
def test_embeddings_are_the_index_s_own_vectors(
    client: openai.OpenAI, corpus: Corpus, encoding: str | None
) -> None:
    texts = ["Who leads the Atlas Project?", "Northwind Labs"]
    model = embedding_space_name(corpus.embedder)
    extra = {} if encoding is None else {"encoding_format": encoding}
    # without encoding_format the client asks for base64 and decodes it itself
    reply = client.embeddings.create(model=model, input=texts, **extra)  # type: ignore[arg-type]
    assert reply.model == model and [item.index for item in reply.data] == [0, 1]
    expected = corpus.embedder.embed(texts)
    for item, vector in zip(reply.data, expected, strict=True):
        # asked for explicitly, base64 comes as it is: little-endian float32
        embedding = (
            list(array.array("f", base64.b64decode(item.embedding)))
            if isinstance(item.embedding, str)
            else item.embedding
        )
        assert len(embedding) == corpus.embedder.dimension
        assert embedding == pytest.approx(vector, abs=1e-7)
    single = client.embeddings.create(model=model, input=texts[0], encoding_format="float")
    assert single.data[0].embedding == pytest.approx(expected[0], abs=1e-7)


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"model": "text-embedding-3-small", "input": "q"}, 404, "model"),
        ({"input": "q"}, 400, "model"),
        ({"input": [[1, 2, 3]]}, 400, "input"),
        ({"input": [1, 2, 3]}, 400, "input"),
        ({"input": ""}, 400, "input[0]"),
        ({"input": []}, 400, "input"),
        ({"input": ["q"] * (MAX_EMBEDDING_INPUTS + 1)}, 400, "input"),
        ({"input": "x" * (MAX_EMBEDDING_INPUT_CHARS + 1)}, 400, "input[0]"),
        ({"input": "q", "encoding_format": "int8"}, 400, "encoding_format"),
        ({"input": "q", "dimensions": 64}, 400, "dimensions"),
    ],
)
def test_bad_embedding_requests_are_openai_errors_naming_the_param(
    http_server: RunningServer, corpus: Corpus, body: dict[str, Any], status: int, param: str
) -> None:
    assert http_server.http is not None
    if "model" not in body and param != "model":
        body = {**body, "model": embedding_space_name(corpus.embedder)}
    reply = httpx.post(f"{http_server.http.url}/v1/embeddings", json=body)
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error", error
    if "encoding_format" in body:
        assert error["message"].count("float, base64") == 1


def test_the_token_is_asked_for_in_openai_s_shape(corpus: Corpus) -> None:
    with http_gateway(new_engine(corpus, None), corpus.stores.graph, auth_token="t0k") as server:
        assert server.http is not None
        base = f"{server.http.url}/v1"
        wrong = openai.OpenAI(base_url=base, api_key="wrong", max_retries=0)
        with wrong, pytest.raises(openai.AuthenticationError) as raised:
            wrong.models.list()
        with openai.OpenAI(base_url=base, api_key="t0k", max_retries=0) as right:
            listed = [model.id for model in right.models.list()]
            with pytest.raises(openai.NotFoundError) as unknown_path:
                right.get("/nope", cast_to=object)
            with pytest.raises(openai.APIStatusError) as wrong_method:
                right.get("/chat/completions", cast_to=object)
    assert raised.value.code == "invalid_api_key" and raised.value.type == "invalid_request_error"
    assert "t0k" not in raised.value.message
    assert listed[0] == "kgstream-mix"
    assert unknown_path.value.type == "invalid_request_error"
    assert wrong_method.value.status_code == 405
    assert wrong_method.value.response.headers["allow"] == "POST"


def test_a_body_over_the_limit_is_413_in_openai_s_shape(corpus: Corpus) -> None:
    with http_gateway(
        new_engine(corpus, None), corpus.stores.graph, max_message_bytes=4096
    ) as server:
        assert server.http is not None
        reply = httpx.post(
            f"{server.http.url}/v1/chat/completions",
            json={"model": "kgstream-mix", "messages": [{"role": "user", "content": "x" * 9000}]},
        )
    assert reply.status_code == 413
    assert set(reply.json()["error"]) == {"message", "type", "param", "code"}
