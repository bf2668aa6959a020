"""Chat calls to any OpenAI-compatible endpoint: retries, bounded concurrency, a response cache.

The `openai` client does the wire work with its own retries switched off
(``max_retries=0``): retrying here (`connectors.openai_errors.openai_retry`, the policy the
embeddings client uses too) lets cached answers skip the network entirely and lets the
final error say which endpoint, model and status failed after how many attempts.

Retried: 408, 409, 429, 5xx, timeouts, connection errors (a reply cut mid-body is one) and
unusable replies (no text, or text the caller's `check` rejects, such as an extraction
reply that is not the extraction format); a ``Retry-After`` header stretches the backoff
delay, capped by ``backoff.cap``. Not retried: other 4xx (bad request, auth, unknown
model): retrying cannot fix them. Only usable replies are cached.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Protocol, cast

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessageParam

from connectors.openai_errors import UnusableReplyError, is_transient, openai_retry, without_key
from connectors.retry import Backoff
from dataflow.core.prompts import ChatMessage, prompt_fingerprint

Messages = Sequence[ChatMessage]


class LLMError(RuntimeError):
    """A chat call failed for good (after its retries, or with a non-retryable error)."""

    def __init__(
        self, message: str, *, endpoint: str, model: str, attempts: int, status: int | None
    ) -> None:
        super().__init__(message)
        self.endpoint = endpoint
        self.model = model
        self.attempts = attempts
        self.status = status


@dataclass(frozen=True)
class LLMOptions:
    """Where and how to call the chat model."""

    base_url: str
    model: str
    api_key: str = "not-needed"
    timeout_seconds: float = 60.0
    max_concurrency: int = 4
    max_retries: int = 3
    backoff: Backoff = field(default_factory=lambda: Backoff(base=1.0, cap=30.0))
    temperature: float = 0.0

    def __post_init__(self) -> None:
        if not self.base_url.strip():
            raise ValueError(
                "LLMOptions.base_url must be an OpenAI-compatible URL such as "
                f"'http://127.0.0.1:8000/v1'; got {self.base_url!r}"
            )
        if not self.model.strip():
            raise ValueError(f"LLMOptions.model must name the served model; got {self.model!r}")
        if not self.timeout_seconds > 0:
            raise ValueError(
                f"LLMOptions.timeout_seconds must be > 0; got {self.timeout_seconds!r}"
            )
        if self.max_concurrency < 1:
            raise ValueError(
                f"LLMOptions.max_concurrency must be >= 1; got {self.max_concurrency!r}"
            )
        if self.max_retries < 0:
            raise ValueError(
                f"LLMOptions.max_retries must be >= 0 (0 = no retry); got {self.max_retries!r}"
            )


# ----------------------------------------------------------------------------- caches


class ResponseCache(Protocol):
    """Where finished chat replies are kept, keyed by `cache_key`."""

    def get(self, key: str) -> str | None: ...

    def put(self, key: str, value: str) -> None: ...

    def close(self) -> None:
        """Make what was put durable (if the cache is) and let go of its resources."""
        ...


class InMemoryResponseCache:
    """A process-local cache (tests, one-off runs)."""

    def __init__(self) -> None:
        self._values: dict[str, str] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> str | None:
        with self._lock:
            return self._values.get(key)

    def put(self, key: str, value: str) -> None:
        with self._lock:
            self._values[key] = value

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)

    def close(self) -> None:
        pass


class SqliteResponseCache:
    """A cache file that survives restarts, so re-indexing never pays for the same prompt twice.

    Writes are buffered: `put` keeps the reply in memory, where `get` sees it at once, and
    the buffer goes to the file in one transaction (one executemany) when it holds
    `max_pending` replies, `max_delay_seconds` after the first of them, and on `close`
    (`ChatClient.close` calls it). A transaction per reply would make every reply wait for a
    commit; a batch costs about what one reply's transaction does. A crash loses at most the
    unflushed replies, and those are only asked of the model again.

    One connection shared by all threads behind a lock; the buffer has its own, so a hit
    in the buffer never waits on a flush. WAL so that readers in other processes are not
    blocked by our writes. The file holds one table, `responses`.
    """

    def __init__(
        self, path: str | Path, *, max_pending: int = 64, max_delay_seconds: float = 2.0
    ) -> None:
        if max_pending < 1:
            raise ValueError(f"SqliteResponseCache max_pending must be >= 1; got {max_pending!r}")
        if not max_delay_seconds > 0:
            raise ValueError(
                f"SqliteResponseCache max_delay_seconds must be > 0; got {max_delay_seconds!r}"
            )
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.max_pending = max_pending
        self.max_delay_seconds = max_delay_seconds
        self._db_lock = threading.Lock()
        self._pending_lock = threading.Lock()
        # Replies not yet in the file; they leave only once committed, so `get` always
        # finds a reply in one place or the other.
        self._pending: dict[str, str] = {}
        self._timer: threading.Timer | None = None
        self._closed = False
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )

    def get(self, key: str) -> str | None:
        with self._pending_lock:
            value = self._pending.get(key)
        if value is not None:
            return value
        with self._db_lock:
            row = self._db.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def put(self, key: str, value: str) -> None:
        with self._pending_lock:
            self._pending[key] = value
            full = len(self._pending) >= self.max_pending
            if not full and self._timer is None:
                self._timer = threading.Timer(self.max_delay_seconds, self.flush)
                self._timer.daemon = True
                self._timer.start()
        if full:
            self.flush()

    def flush(self) -> None:
        """Write the buffered replies to the file in one transaction."""
        with self._db_lock:
            if not self._closed:
                self._write_pending()

    def close(self) -> None:
        """Flush, then close the file (idempotent)."""
        with self._db_lock:
            if self._closed:
                return
            self._write_pending()
            self._closed = True
            self._db.close()

    def _write_pending(self) -> None:
        """The flush itself; the caller holds the connection's lock."""
        with self._pending_lock:
            batch = dict(self._pending)
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        if not batch:
            return
        self._db.execute("BEGIN")
        try:
            self._db.executemany(
                "INSERT OR REPLACE INTO responses (key, value) VALUES (?, ?)", batch.items()
            )
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        with self._pending_lock:
            for key, value in batch.items():
                if self._pending.get(key) is value:  # not replaced while we wrote
                    del self._pending[key]

    def __enter__(self) -> SqliteResponseCache:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def cache_key(messages: Messages, model: str) -> str:
    """sha256 of the prompt fingerprint and the model: same prompt, same model, same reply."""
    return hashlib.sha256(f"{prompt_fingerprint(messages)}\0{model}".encode()).hexdigest()


# ----------------------------------------------------------------------------- client


class ChatClient:
    """Thread-safe chat calls with retries, a concurrency bound and an optional cache.

    `sleep` is injectable so tests can observe retry delays without waiting.
    """

    def __init__(
        self,
        options: LLMOptions,
        *,
        cache: ResponseCache | None = None,
        sleep: Callable[[float], None] = time.sleep,
        observer: Callable[[str, bool], None] | None = None,
    ) -> None:
        self.options = options
        self.cache = cache
        # Told (kind, served_from_cache) for every call: the hook for metrics.
        self.observer = observer
        self._retry = openai_retry(options.backoff, options.max_retries, sleep)
        self._slots = threading.BoundedSemaphore(options.max_concurrency)
        self._endpoint = options.base_url.rstrip("/") + "/chat/completions"
        self._openai = openai.OpenAI(
            base_url=options.base_url,
            api_key=options.api_key,
            timeout=options.timeout_seconds,
            max_retries=0,
        )

    @property
    def max_concurrency(self) -> int:
        return self.options.max_concurrency

    def complete(
        self,
        messages: Messages,
        kind: str = "other",
        check: Callable[[str], str | None] | None = None,
    ) -> str:
        """Return the model's reply to `messages` (from the cache when it has it).

        `kind` (extract, summary, answer, keywords) only labels the call for the
        observer. `check` says why a reply is unusable (None: usable); an unusable
        reply is retried like a 5xx and never cached. Raises `LLMError` when the call
        fails for good.
        """
        key = cache_key(messages, self.options.model) if self.cache is not None else ""
        if self.cache is not None:
            cached = self.cache.get(key)
            if cached is not None:
                self._observe(kind, True)
                return cached
        self._observe(kind, False)

        def complete_once() -> str:
            with self._slots:  # held only while a request is on the wire, never while asleep
                completion = self._complete_once(messages)
            text = _reply_text(completion)
            if text is None:
                raise UnusableReplyError(f"no text (choices={len(completion.choices)})")
            problem = check(text) if check is not None else None
            if problem is not None:
                raise UnusableReplyError(problem)
            return text

        reply = self._retry.call_with_retry(complete_once, self._final_error)
        if self.cache is not None:
            self.cache.put(key, reply)
        return reply

    def _observe(self, kind: str, cached: bool) -> None:
        if self.observer is not None:
            self.observer(kind, cached)

    def stream(self, messages: Messages, kind: str = "answer") -> DeltaStream:
        """Stream the reply as text deltas (never cached).

        Opening the stream is retried like `complete`; once deltas flow, an error
        raises `LLMError` at once (text already yielded cannot be taken back), and so
        does a stream that ends without the model's final chunk (a cut connection).
        The stream holds one concurrency slot from opening (retries included) until
        it is exhausted or closed: close it (or leave its ``with`` block) to drop the
        HTTP response early and free the slot.
        """
        self._observe(kind, False)
        self._slots.acquire()
        try:
            chunks = self._retry.call_with_retry(
                lambda: self._open_stream(messages), self._final_error
            )
        except BaseException:
            self._slots.release()
            raise
        return DeltaStream(chunks, release=self._slots.release, wrap_error=self._stream_error)

    def close(self) -> None:
        """Close the HTTP connection pool and the cache (which flushes its buffered replies)."""
        self._openai.close()
        if self.cache is not None:
            self.cache.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------------- internals

    def _complete_once(self, messages: Messages) -> ChatCompletion:
        return self._openai.chat.completions.create(
            model=self.options.model,
            messages=_to_openai(messages),
            temperature=self.options.temperature,
        )

    def _open_stream(self, messages: Messages) -> openai.Stream[ChatCompletionChunk]:
        return self._openai.chat.completions.create(
            model=self.options.model,
            messages=_to_openai(messages),
            temperature=self.options.temperature,
            stream=True,
        )

    def _stream_error(self, exc: openai.OpenAIError) -> LLMError:
        return self._final_error(exc, 1, during="while streaming")

    def _final_error(self, exc: Exception, attempts: int, during: str = "") -> LLMError:
        status: int | None = None
        if isinstance(exc, openai.APITimeoutError):
            reason = f"timeout after {self.options.timeout_seconds:g} s"
            hint = "raise llm_timeout_seconds (KGSTREAM_LLM_TIMEOUT_SECONDS) or check the load"
        elif isinstance(exc, openai.APIConnectionError):
            reason = "connection error"
            hint = "check that the endpoint is running and reachable"
        elif isinstance(exc, UnusableReplyError):
            status = 200
            reason = "unusable reply"
            hint = "check that the model follows the prompt's format (or serves chat completions)"
        elif isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            reason = f"HTTP {status}"
            hint = (
                "check the model name, the API key and the request"
                if not is_transient(exc)
                else "the server is overloaded or failing; retry later or raise "
                "llm_max_retries (KGSTREAM_LLM_MAX_RETRIES)"
            )
        else:
            reason = type(exc).__name__
            hint = "check that the endpoint is OpenAI-compatible"
        where = f" {during}" if during else ""
        return LLMError(
            f"LLM call to {self._endpoint} (model {self.options.model!r}) failed{where} after "
            f"{attempts} attempt(s); last error: {reason}: "
            f"{without_key(exc, self.options.api_key)}. Hint: {hint}.",
            endpoint=self._endpoint,
            model=self.options.model,
            attempts=attempts,
            status=status,
        )


class DeltaStream:
    """Text deltas of one streamed reply, in order.

    Holds one concurrency slot of its client until exhausted or closed; `close()`
    (or leaving its ``with`` block) drops the HTTP response early and frees the slot.
    """

    def __init__(
        self,
        chunks: openai.Stream[ChatCompletionChunk],
        *,
        release: Callable[[], None],
        wrap_error: Callable[[openai.OpenAIError], LLMError],
    ) -> None:
        self._chunks = chunks
        self._release = release
        self._wrap_error = wrap_error
        self._closed = False
        self._finished = False  # a chunk with a finish_reason arrived
        self._lock = threading.Lock()

    def __iter__(self) -> DeltaStream:
        return self

    def __next__(self) -> str:
        while not self._closed:
            try:
                chunk = next(self._chunks)
            except StopIteration:
                self.close()
                if not self._finished:  # the connection dropped before the last chunk
                    raise self._wrap_error(
                        openai.APIConnectionError(
                            message="the stream ended before the model's final chunk "
                            "(no finish_reason): the reply is cut",
                            request=self._chunks.response.request,
                        )
                    ) from None
                raise
            except openai.OpenAIError as exc:
                self.close()
                raise self._wrap_error(exc) from exc
            if chunk.choices and chunk.choices[0].finish_reason is not None:
                self._finished = True
            if chunk.choices and chunk.choices[0].delta.content:
                return chunk.choices[0].delta.content
        raise StopIteration

    def close(self) -> None:
        """Close the HTTP response and free the concurrency slot (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._chunks.close()
        finally:
            self._release()

    def __enter__(self) -> DeltaStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        # Safety net for a stream dropped without close(): never leak a concurrency slot.
        if not getattr(self, "_closed", True):
            self.close()


def _reply_text(completion: ChatCompletion) -> str | None:
    if not completion.choices:
        return None
    return completion.choices[0].message.content


def _to_openai(messages: Messages) -> list[ChatCompletionMessageParam]:
    return [
        cast(ChatCompletionMessageParam, {"role": m.role, "content": m.content}) for m in messages
    ]
