"""Ollama's API, called by the official `ollama` client over a real socket: the models (one per
query mode), a model's details, chat and generate, streamed and not, a model that is none,
and the token. The answers come from the same path as the OpenAI chat endpoint's (`Query`,
`QueryStream`); httpx checks what the client hides (the references, the error shapes)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import httpx
import ollama
import pytest

from gateway.server import RunningServer
from tests.gateway.corpus import Corpus
from tests.gateway.http.test_chat import (
    CONVERSATION,
    QUESTION,
    assert_the_conversation_reached_the_llm,
)
from tests.gateway.test_server import ANSWER, http_gateway, new_engine
from tests.support.llm_server import OpenAICompatibleServer, cut
from tests.support.wait import wait_until

MODES = ("mix", "local", "global", "hybrid", "naive")
TOKEN = "ollama-test-token"


@pytest.fixture
def url(http_server: RunningServer) -> str:
    assert http_server.http is not None
    return http_server.http.url


@pytest.fixture
def client(url: str) -> Iterator[ollama.Client]:
    client = ollama.Client(host=url)
    yield client
    client.close()


def test_the_models_are_the_query_modes_the_default_first(client: ollama.Client) -> None:
    models = client.list().models
    assert models[0].model == "kgstream-mix:latest"
    assert sorted(model.model or "" for model in models) == sorted(
        f"kgstream-{mode}:latest" for mode in MODES
    )
    for model in models:
        assert model.details is not None and model.details.family == "kgstream"
        assert re.fullmatch(r"[0-9a-f]{64}", model.digest or "")
        assert model.modified_at is not None  # parsed as a datetime by the client
    assert len({model.digest for model in models}) == len(models)


def test_show_describes_a_model_named_with_or_without_its_tag(client: ollama.Client) -> None:
    for name in ("kgstream-local", "kgstream-local:latest"):
        shown = client.show(name)
        assert shown.details is not None and shown.details.family == "kgstream"
        assert shown.capabilities == ["completion"]
        assert shown.modelinfo is not None and shown.modelinfo["kgstream.query_mode"] == "local"


def test_version_answers(url: str) -> None:
    reply = httpx.get(f"{url}/api/version")
    assert reply.status_code == 200 and isinstance(reply.json()["version"], str)


def test_chat_answers_with_references_and_sends_the_history(
    client: ollama.Client, llm_server: OpenAICompatibleServer
) -> None:
    reply = client.chat(model="kgstream-mix", messages=CONVERSATION)
    text = reply.message.content or ""
    assert text.startswith(ANSWER)
    assert "References:" in text and "projects/atlas.md" in text
    assert reply.done and reply.done_reason == "stop"
    assert reply.model == "kgstream-mix:latest"
    assert (reply.eval_count or 0) > 0 and (reply.total_duration or 0) > 0
    assert_the_conversation_reached_the_llm(llm_server)


def test_a_streamed_chat_joins_to_the_same_answer(client: ollama.Client) -> None:
    parts = list(
        client.chat(
            model="kgstream-local:latest",
            messages=[{"role": "user", "content": QUESTION}],
            stream=True,
        )
    )
    assert len(parts) > 2
    assert [part.done for part in parts] == [False] * (len(parts) - 1) + [True]
    assert parts[-1].done_reason == "stop" and (parts[-1].eval_count or 0) > 0
    # the whole answer to the same question (from the answer cache now) reads the same
    whole = client.chat(model="kgstream-local", messages=[{"role": "user", "content": QUESTION}])
    assert "".join(part.message.content or "" for part in parts) == whole.message.content


def test_the_stream_is_ndjson_with_references_first(url: str) -> None:
    body = {"model": "kgstream-mix", "messages": [{"role": "user", "content": QUESTION}]}
    with httpx.stream("POST", f"{url}/api/chat", json=body, timeout=60) as reply:
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in reply.iter_lines() if line]
    assert any(r["file_path"] == "projects/atlas.md" for r in lines[0]["references"])
    assert isinstance(lines[0]["index_version"], int)
    assert lines[-1]["done"] is True


def test_generate_answers_the_prompt_from_the_index(
    client: ollama.Client, llm_server: OpenAICompatibleServer
) -> None:
    reply = client.generate(model="kgstream-naive", prompt=QUESTION, system="Be brief.")
    assert (reply.response or "").startswith(ANSWER) and reply.done
    assert reply.context == []
    assert "Be brief." in str(llm_server.bodies()[-1]["messages"])
    parts = list(client.generate(model="kgstream-naive", prompt=QUESTION, stream=True))
    assert "".join(part.response or "" for part in parts) == reply.response
    assert parts[-1].done and parts[-1].done_reason == "stop"


def test_a_request_without_a_question_loads_the_model(client: ollama.Client) -> None:
    assert client.chat(model="kgstream-mix", messages=[]).done_reason == "load"
    assert client.generate(model="kgstream-mix", prompt="").done_reason == "load"


@pytest.mark.parametrize("call", ["chat", "generate", "show"])
def test_a_model_that_is_no_mode_is_not_found(client: ollama.Client, call: str) -> None:
    with pytest.raises(ollama.ResponseError) as raised:
        if call == "chat":
            client.chat(model="llama3", messages=[{"role": "user", "content": QUESTION}])
        elif call == "generate":
            client.generate(model="llama3", prompt=QUESTION)
        else:
            client.show("llama3")
    assert raised.value.status_code == 404
    assert "kgstream-mix:latest" in raised.value.error and "llama3" in raised.value.error


@pytest.mark.parametrize("stream", [False, True])
def test_bad_requests_are_ollama_errors_naming_the_field(
    client: ollama.Client, stream: bool
) -> None:
    with pytest.raises(ollama.ResponseError) as raised:
        reply = client.chat(
            model="kgstream-mix",
            messages=[{"role": "user", "content": "x" * 10_000}],
            stream=stream,
        )
        if stream:
            next(iter(reply))  # a stream's error comes with its first line
    assert raised.value.status_code == 400 and raised.value.error.startswith("question: ")
    with pytest.raises(ollama.ResponseError) as raised:
        client.chat(model="kgstream-mix", messages=[{"role": "assistant", "content": "hi"}])
    assert raised.value.status_code == 400 and "user" in raised.value.error


@pytest.mark.parametrize(
    "body",
    [
        {"model": "kgstream-mix", "messages": [{"role": "tool", "content": "x"}]},
        {"model": "kgstream-mix", "messages": [{"role": "user", "content": 3}]},
        {"model": "kgstream-mix", "messages": [{"role": "user", "content": "q", "images": ["x"]}]},
        {"model": "kgstream-mix", "messages": "q"},
        {"model": "kgstream-mix", "messages": [], "stream": "yes"},
    ],
)
def test_malformed_chats_are_400_in_ollamas_shape(url: str, body: object) -> None:
    reply = httpx.post(f"{url}/api/chat", json=body)
    assert reply.status_code == 400, reply.text
    assert isinstance(reply.json()["error"], str)


def test_the_token_guards_ollamas_routes_in_ollamas_error_shape(corpus: Corpus) -> None:
    with http_gateway(new_engine(corpus, None), corpus.stores.graph, auth_token=TOKEN) as server:
        assert server.http is not None
        url = server.http.url
        with pytest.raises(ollama.ResponseError) as raised:
            ollama.Client(host=url).list()
        bare = httpx.post(f"{url}/api/chat", json={"model": "kgstream-mix", "messages": []})
        with_token = ollama.Client(host=url, headers={"Authorization": f"Bearer {TOKEN}"})
        models = with_token.list().models
        answer = with_token.chat(
            model="kgstream-mix", messages=[{"role": "user", "content": QUESTION}]
        )
    assert raised.value.status_code == 401 and "authorization" in raised.value.error
    assert bare.status_code == 401 and isinstance(bare.json()["error"], str)
    assert len(models) == len(MODES)
    assert "Carla Diaz" in (answer.message.content or "")  # the extractive answer, no LLM


def test_a_failure_after_the_stream_started_is_an_error_line_the_client_raises(
    client: ollama.Client, llm_server: OpenAICompatibleServer
) -> None:
    llm_server.queue_replies(("Carla Diaz ", "leads ", "the Atlas ", "Project."))
    llm_server.queue_faults(cut())  # the LLM's stream breaks half-way
    parts = []
    with pytest.raises(ollama.ResponseError) as raised:
        for part in client.chat(
            model="kgstream-hybrid",
            messages=[{"role": "user", "content": "Which lab is Carla Diaz at?"}],
            stream=True,
        ):
            parts.append(part)
    assert parts and not any(part.done for part in parts)  # the answer had started
    assert "LLM" in raised.value.error


def test_a_client_that_leaves_a_stream_stops_the_llm_stream(
    corpus: Corpus, llm_server: OpenAICompatibleServer
) -> None:
    llm_server.default_reply = " ".join(f"word{i}" for i in range(300))
    llm_server.delta_delay_seconds = 0.2
    body = {"model": "kgstream-mix", "messages": [{"role": "user", "content": QUESTION}]}
    with http_gateway(new_engine(corpus, llm_server), corpus.stores.graph) as server:
        assert server.http is not None
        with httpx.stream("POST", f"{server.http.url}/api/chat", json=body, timeout=60) as reply:
            lines = reply.iter_lines()
            assert "references" in json.loads(next(lines))
            assert json.loads(next(lines))["message"]["content"] == "word0 "
        # the connection is closed: the call finishes, and with it the LLM's stream
        wait_until(lambda: llm_server.aborted_streams == 1, 30, "the LLM stream to be aborted")
        wait_until(lambda: llm_server.in_flight == 0, 30, "no LLM call in flight")


def test_a_body_over_the_limit_is_413_in_ollama_s_shape(corpus: Corpus) -> None:
    engine = new_engine(corpus, None)
    with http_gateway(engine, corpus.stores.graph, max_message_bytes=4096) as server:
        assert server.http is not None
        reply = httpx.post(
            f"{server.http.url}/api/generate", json={"model": "kgstream-mix", "prompt": "x" * 9000}
        )
    assert reply.status_code == 413
    assert "4096" in reply.json()["error"]
