"""ChatClient through the real `openai` client against the OpenAI-compatible test server."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
import pytest

from connectors.llm.client import (
    ChatClient,
    InMemoryResponseCache,
    LLMError,
    LLMOptions,
    ResponseCache,
    SqliteResponseCache,
    cache_key,
)
from connectors.retry import Backoff
from dataflow.core.prompts import ChatMessage
from tests.support.llm_server import OpenAICompatibleServer, embed_text
from tests.support.ports import free_port
from tests.support.wait import wait_until

TINY_BACKOFF = Backoff(base=0.01, cap=0.05)
MODEL = "test-chat-model"


def ask(text: str) -> tuple[ChatMessage, ...]:
    return (ChatMessage("system", "You answer briefly."), ChatMessage("user", text))


@pytest.fixture
def make_client(llm_server: OpenAICompatibleServer) -> Iterator[Any]:
    """Build ChatClients against the test server; all are closed after the test."""
    clients: list[ChatClient] = []

    def build(
        *,
        cache: ResponseCache | None = None,
        sleep: Any = None,
        base_url: str | None = None,
        **overrides: Any,
    ) -> ChatClient:
        settings: dict[str, Any] = {"backoff": TINY_BACKOFF, **overrides}
        options = LLMOptions(base_url=base_url or llm_server.base_url, model=MODEL, **settings)
        extra = {} if sleep is None else {"sleep": sleep}
        client = ChatClient(options, cache=cache, **extra)
        clients.append(client)
        return client

    yield build
    for client in clients:
        client.close()


def last_user_text(request: dict[str, Any]) -> str:
    return str(request["messages"][-1]["content"])


# --- plain calls ---------------------------------------------------------------------------


def test_complete_returns_reply_and_sends_messages_model_and_temperature(
    llm_server: OpenAICompatibleServer, make_client: Any
) -> None:
    llm_server.queue_replies("Paris.")
    client = make_client(temperature=0.0)

    assert client.complete(ask("Capital of France?")) == "Paris."

    (request,) = llm_server.bodies()
    assert request["model"] == MODEL
    assert request["temperature"] == 0.0
    assert request["messages"] == [
        {"role": "system", "content": "You answer briefly."},
        {"role": "user", "content": "Capital of France?"},
    ]
    assert llm_server.calls[0].headers["authorization"] == "Bearer not-needed"


def test_options_reject_values_that_cannot_work() -> None:
    with pytest.raises(ValueError, match="max_concurrency must be >= 1; got 0"):
        LLMOptions(base_url="http://127.0.0.1:1/v1", model="m", max_concurrency=0)
    with pytest.raises(ValueError, match="max_retries must be >= 0"):
        LLMOptions(base_url="http://127.0.0.1:1/v1", model="m", max_retries=-1)
    with pytest.raises(ValueError, match="model must name the served model"):
        LLMOptions(base_url="http://127.0.0.1:1/v1", model=" ")


# --- retries -------------------------------------------------------------------------------


def test_one_429_is_retried_and_the_call_succeeds_with_two_requests(
    llm_server: OpenAICompatibleServer, make_client: Any
) -> None:
    llm_server.fail_next(429, count=1)
    llm_server.queue_replies("ok")

    assert make_client(max_retries=3).complete(ask("hi")) == "ok"
    assert llm_server.chat_calls == 2


@pytest.mark.parametrize("status", [408, 409])
def test_request_and_lock_timeouts_are_retried_as_the_openai_client_does(
    llm_server: OpenAICompatibleServer, make_client: Any, status: int
) -> None:
    llm_server.fail_next(status, count=1)
    llm_server.queue_replies("ok")

    assert make_client(max_retries=1).complete(ask("hi")) == "ok"
    assert llm_server.chat_calls == 2


def test_retry_delays_follow_the_backoff_policy(
    llm_server: OpenAICompatibleServer, make_client: Any
) -> None:
    slept: list[float] = []
    llm_server.fail_next(500, count=3)
    llm_server.queue_replies("ok")

    assert make_client(max_retries=3, sleep=slept.append).complete(ask("hi")) == "ok"
    assert slept == [0.01, 0.02, 0.04]
    assert llm_server.chat_calls == 4


def test_retry_after_header_stretches_the_backoff_delay_capped_by_backoff_cap(
    llm_server: OpenAICompatibleServer, make_client: Any
) -> None:
    slept: list[float] = []
    llm_server.fail_next(429, count=1, retry_after=0.03)
    llm_server.fail_next(429, count=1, retry_after=120)
    llm_server.queue_replies("ok")

    assert make_client(max_retries=2, sleep=slept.append).complete(ask("hi")) == "ok"
    assert slept == [0.03, 0.05]


def test_persistent_500s_raise_llm_error_after_max_retries_plus_one_requests(
    llm_server: OpenAICompatibleServer, make_client: Any
) -> None:
    llm_server.fail_next(500, count=100, body="the model crashed")
    client = make_client(max_retries=2)

    with pytest.raises(LLMError) as caught:
        client.complete(ask("hi"))

    assert llm_server.chat_calls == 3
    error = caught.value
    assert (error.attempts, error.status, error.model) == (3, 500, MODEL)
    assert error.endpoint == f"{llm_server.base_url}/chat/completions"
    message = str(error)
    assert f"{llm_server.base_url}/chat/completions" in message
    assert repr(MODEL) in message
    assert "after 3 attempt(s)" in message
    assert "HTTP 500" in message
    assert "the model crashed" in message


def test_client_errors_other_than_429_are_not_retried(
    llm_server: OpenAICompatibleServer, make_client: Any
) -> None:
    llm_server.fail_next(404, count=5, body="model 'test-chat-model' not found")

    with pytest.raises(LLMError, match=r"after 1 attempt\(s\); last error: HTTP 404") as caught:
        make_client(max_retries=3).complete(ask("hi"))

    assert caught.value.status == 404
    assert llm_server.chat_calls == 1


def test_timeout_raises_llm_error_naming_the_timeout_without_waiting_for_the_server(
    llm_server: OpenAICompatibleServer, make_client: Any
) -> None:
    llm_server.delay_seconds = 3.0
    client = make_client(timeout_seconds=0.3, max_retries=1)

    started = time.monotonic()
    with pytest.raises(LLMError, match=r"timeout after 0\.3 s") as caught:
        client.complete(ask("hi"))
    elapsed = time.monotonic() - started

    assert caught.value.attempts == 2
    assert caught.value.status is None
    assert llm_server.chat_calls == 2
    assert elapsed < 2.5, f"two 0.3 s attempts took {elapsed:.2f} s"


def test_unreachable_endpoint_is_retried_then_reported_as_connection_error(
    make_client: Any,
) -> None:
    port = free_port()  # a port nobody listens on once the probe closes
    client = make_client(base_url=f"http://127.0.0.1:{port}/v1", max_retries=1)

    with pytest.raises(LLMError, match="after 2 attempt\\(s\\); last error: connection error"):
        client.complete(ask("hi"))


# --- cache ---------------------------------------------------------------------------------


def test_cached_reply_is_served_without_an_http_request(
    llm_server: OpenAICompatibleServer, make_client: Any
) -> None:
    llm_server.responder = lambda request: f"echo: {last_user_text(request)}"
    cache = InMemoryResponseCache()
    client = make_client(cache=cache)

    first = client.complete(ask("one"))
    again = client.complete(ask("one"))
    other = client.complete(ask("two"))

    assert (first, again, other) == ("echo: one", "echo: one", "echo: two")
    assert llm_server.chat_calls == 2
    assert len(cache) == 2


def test_cache_key_changes_with_the_prompt_and_the_model() -> None:
    key = cache_key(ask("one"), "model-a")
    assert key == cache_key(ask("one"), "model-a")
    assert key != cache_key(ask("two"), "model-a")
    assert key != cache_key(ask("one"), "model-b")
    assert len(key) == 64


def test_failed_calls_are_not_cached(llm_server: OpenAICompatibleServer, make_client: Any) -> None:
    cache = InMemoryResponseCache()
    client = make_client(cache=cache, max_retries=0)
    llm_server.fail_next(500)
    with pytest.raises(LLMError):
        client.complete(ask("hi"))

    llm_server.queue_replies("recovered")
    assert client.complete(ask("hi")) == "recovered"
    assert llm_server.chat_calls == 2


def test_sqlite_cache_survives_reopening(
    llm_server: OpenAICompatibleServer, make_client: Any, tmp_path: Path
) -> None:
    path = tmp_path / "cache" / "llm.sqlite"
    llm_server.queue_replies("stored answer")
    with SqliteResponseCache(path) as cache:
        assert make_client(cache=cache).complete(ask("hi")) == "stored answer"

    with SqliteResponseCache(path) as reopened:
        assert make_client(cache=reopened).complete(ask("hi")) == "stored answer"
        assert reopened.get(cache_key(ask("hi"), MODEL)) == "stored answer"
    assert llm_server.chat_calls == 1


def test_sqlite_cache_is_safe_to_share_between_threads(tmp_path: Path) -> None:
    with SqliteResponseCache(tmp_path / "llm.sqlite") as cache:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: cache.put(f"k{i}", f"v{i}"), range(200)))
        assert [cache.get(f"k{i}") for i in range(200)] == [f"v{i}" for i in range(200)]
        assert cache.get("missing") is None


def buffering_cache(path: Path) -> SqliteResponseCache:
    """A cache that writes its file only when flushed or closed (in these tests' time)."""
    return SqliteResponseCache(path, max_pending=1000, max_delay_seconds=3600)


def rows_in_file(path: Path) -> int:
    """What another process would see in the cache file."""
    with contextlib.closing(sqlite3.connect(path)) as reader:
        return int(reader.execute("SELECT count(*) FROM responses").fetchone()[0])


def wal_frames(path: Path) -> int:
    """Frames in the file's write-ahead log (every transaction appends at least one), which
    this checkpoints, so the next transaction writes the log from its start."""
    with contextlib.closing(sqlite3.connect(path)) as reader:
        return int(reader.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])


def test_sqlite_cache_serves_buffered_replies_before_they_reach_the_file(tmp_path: Path) -> None:
    path = tmp_path / "llm.sqlite"
    with buffering_cache(path) as cache:
        for i in range(100):
            cache.put(f"k{i}", f"v{i}")

        assert [cache.get(f"k{i}") for i in range(100)] == [f"v{i}" for i in range(100)]
        assert rows_in_file(path) == 0
        cache.flush()
        assert rows_in_file(path) == 100


def test_sqlite_cache_writes_a_batch_in_one_transaction(tmp_path: Path) -> None:
    path = tmp_path / "llm.sqlite"
    with buffering_cache(path) as cache:
        wal_frames(path)  # checkpoints the table's creation: the next write restarts the log
        for i in range(200):
            cache.put(f"k{i}", "v")
        cache.flush()

        # 200 transactions would append 200 frames or more; one appends a few pages.
        assert wal_frames(path) < 20


def test_sqlite_cache_flushes_when_the_buffer_is_full(tmp_path: Path) -> None:
    path = tmp_path / "llm.sqlite"
    with SqliteResponseCache(path, max_pending=10, max_delay_seconds=3600) as cache:
        for i in range(9):
            cache.put(f"k{i}", f"v{i}")
        assert rows_in_file(path) == 0

        cache.put("k9", "v9")
        assert rows_in_file(path) == 10


def test_sqlite_cache_flushes_buffered_replies_after_the_delay(tmp_path: Path) -> None:
    path = tmp_path / "llm.sqlite"
    with SqliteResponseCache(path, max_pending=1000, max_delay_seconds=0.05) as cache:
        cache.put("k", "v")
        wait_until(lambda: rows_in_file(path), 30, "the buffered reply in the file", interval=0.01)


def test_sqlite_cache_keeps_buffered_replies_across_close_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "llm.sqlite"
    with buffering_cache(path) as cache:
        cache.put("k", "first")
        cache.put("k", "second")
    cache.close()  # idempotent

    with SqliteResponseCache(path) as reopened:
        assert reopened.get("k") == "second"


def test_closing_the_client_flushes_its_cache(
    llm_server: OpenAICompatibleServer, make_client: Any, tmp_path: Path
) -> None:
    path = tmp_path / "llm.sqlite"
    llm_server.queue_replies("stored answer")
    client = make_client(cache=SqliteResponseCache(path, max_delay_seconds=3600))
    client.complete(ask("hi"))
    assert rows_in_file(path) == 0

    client.close()
    assert rows_in_file(path) == 1


def test_concurrent_puts_and_flushes_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "llm.sqlite"
    with SqliteResponseCache(path, max_pending=7, max_delay_seconds=3600) as cache:

        def put_and_read(i: int) -> str | None:
            cache.put(f"k{i}", f"v{i}")
            return cache.get(f"k{i}")

        with ThreadPoolExecutor(8) as pool:
            seen = list(pool.map(put_and_read, range(500)))
        assert seen == [f"v{i}" for i in range(500)]

    with SqliteResponseCache(path) as reopened:
        assert [reopened.get(f"k{i}") for i in range(500)] == [f"v{i}" for i in range(500)]
    assert rows_in_file(path) == 500


# --- concurrency ---------------------------------------------------------------------------


def test_concurrency_bound_holds_for_callers_on_their_own_threads(
    llm_server: OpenAICompatibleServer, make_client: Any
) -> None:
    llm_server.delay_seconds = 0.2
    client = make_client(max_concurrency=2)

    threads = [threading.Thread(target=client.complete, args=(ask(f"q{i}"),)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    assert llm_server.chat_calls == 6
    assert llm_server.max_in_flight == 2


# --- streaming -----------------------------------------------------------------------------


def test_stream_yields_the_deltas_in_order_and_is_never_cached(
    llm_server: OpenAICompatibleServer, make_client: Any
) -> None:
    deltas = ["The ", "answer", " is", " 42", "."]
    llm_server.queue_replies(deltas, deltas)
    client = make_client(cache=InMemoryResponseCache())

    with client.stream(ask("?")) as first:
        assert list(first) == deltas
    assert list(client.stream(ask("?"))) == deltas

    assert llm_server.chat_calls == 2
    assert all(request["stream"] is True for request in llm_server.bodies())


def test_stream_retries_a_429_before_the_first_delta(
    llm_server: OpenAICompatibleServer, make_client: Any
) -> None:
    llm_server.fail_next(429)
    llm_server.queue_replies(["a", "b"])

    assert list(make_client(max_retries=1).stream(ask("?"))) == ["a", "b"]
    assert llm_server.chat_calls == 2


def test_closing_a_stream_drops_the_response_and_frees_its_slot(
    llm_server: OpenAICompatibleServer, make_client: Any
) -> None:
    llm_server.delta_delay_seconds = 0.02
    llm_server.queue_replies([f"t{i} " for i in range(200)], "after")
    client = make_client(max_concurrency=1)

    stream = client.stream(ask("long answer"))
    assert [next(stream), next(stream)] == ["t0 ", "t1 "]
    stream.close()

    wait_until(lambda: llm_server.aborted_streams == 1, 30, "the stream to be aborted")
    with ThreadPoolExecutor(1) as pool:  # a leaked slot would block here, not hang the suite
        assert pool.submit(client.complete, ask("next")).result(timeout=5) == "after"


def test_stream_reports_a_failure_to_open_as_llm_error(
    llm_server: OpenAICompatibleServer, make_client: Any
) -> None:
    llm_server.fail_next(503, count=5)
    with pytest.raises(LLMError, match="HTTP 503"):
        make_client(max_retries=1).stream(ask("?"))
    assert llm_server.chat_calls == 2


# --- the test server's own contract (embeddings, models) through the real client ---------


def test_server_embeddings_are_deterministic_unit_vectors_in_both_encodings(
    llm_server: OpenAICompatibleServer,
) -> None:
    with openai.OpenAI(base_url=llm_server.base_url, api_key="x", max_retries=0) as client:
        default = client.embeddings.create(model="test-embedding-model", input=["a", "b"])
        floats = client.embeddings.create(
            model="test-embedding-model", input="a", encoding_format="float"
        )
        small = client.embeddings.create(model="test-embedding-model", input="a", dimensions=8)

    first = default.data[0].embedding
    assert len(first) == 384
    assert sum(v * v for v in first) == pytest.approx(1.0, abs=1e-5)
    assert first == pytest.approx(embed_text("a", 384), abs=1e-6)  # base64 is float32
    assert floats.data[0].embedding == embed_text("a", 384)
    assert default.data[1].embedding != pytest.approx(first, abs=1e-3)
    assert len(small.data[0].embedding) == 8
    assert default.usage.total_tokens == 2
    assert llm_server.embedding_calls == 3


def test_server_lists_its_models_and_answers_errors_in_openai_shape(
    llm_server: OpenAICompatibleServer,
) -> None:
    llm_server.fail_next(429, body="slow down", endpoint="chat.completions")
    with openai.OpenAI(base_url=llm_server.base_url, api_key="x", max_retries=0) as client:
        assert [model.id for model in client.models.list()] == list(llm_server.models)
        with pytest.raises(openai.RateLimitError) as caught:
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}])

    assert caught.value.body == {
        "message": "slow down",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
    assert llm_server.count("models") == 1
