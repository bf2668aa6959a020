"""An OpenAI-compatible HTTP server for tests: every LLM test talks to this over real HTTP.

No usable LLM runs on this machine, so LLM behaviour in tests is scripted here and reached
through the real `openai` client (wire format, status codes, SSE streaming and timeouts are
all real). One server per test (the `llm_server` fixture), on 127.0.0.1 and a free port.

Endpoints (under ``/v1``):

* ``POST /chat/completions``: non-streaming, or SSE streaming (``"stream": true``) in the
  real ``chat.completion.chunk`` format, ending with ``data: [DONE]``.
* ``POST /embeddings``: deterministic unit vectors derived from a hash of each input
  (``float`` or ``base64`` encoding, as the client asks; ``dimensions`` honoured), times
  `embedding_scale` (set it to check that clients normalise), listed in reverse order when
  `reverse_embeddings` is set (each item keeps its ``index``: clients must order by it).
  `embedder` (text, dimension) -> unit vector makes them: `embed_text` unless replaced
  (a benchmark may want vectors whose similarity means something).
* ``GET /models``.

What a chat call answers, first match wins:

1. a scripted failure (`fail_next`), answered as an OpenAI error JSON;
2. the next scripted reply (`queue_replies`, FIFO);
3. `responder(request_json)`, when set;
4. `default_reply` (``"<|COMPLETE|>"``: an extraction with no records).

A reply is a ``str``, or a sequence of ``str`` giving the exact streaming deltas (joined for
a non-streaming answer). Every request is logged and counted (also those answered with a
failure), and the server tracks how many requests were in flight at once. `stall_next`
slows the next requests down (to provoke client timeouts); `hold_next` holds the next
requests until they are all in flight at once (proving a client sends them concurrently).

Fault sequences: `queue_faults` scripts what the next chat requests meet, one fault each,
in order, before anything above: `status(429)`, `stall(seconds)` (then the normal answer,
to a client that may have timed out), `cut()` (half the reply it would give, taken as
usual from the queued replies or the responder, then the connection drops: mid-body, or
mid-stream without the final chunk and ``[DONE]``), `garbage(text)` (a 200
whose text is `text`), or `PASS` (answered normally). `fault_for(request_json)`, when set,
picks the fault of every other chat request (None: no fault), for faults that follow the
content rather than the arrival order.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import pytest

Reply = str | Sequence[str]
Responder = Callable[[dict[str, Any]], Reply]

CHAT = "chat.completions"
EMBEDDINGS = "embeddings"
MODELS = "models"
_ROUTES: dict[tuple[str, str], str] = {
    ("POST", "/v1/chat/completions"): CHAT,
    ("POST", "/v1/embeddings"): EMBEDDINGS,
    ("GET", "/v1/models"): MODELS,
}
_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "not_found"),
    429: ("requests", "rate_limit_exceeded"),
}
_WORD_RE = re.compile(r"\s*\S+\s*|\s+")


@dataclass(frozen=True)
class RecordedCall:
    """One request the server received, in arrival order."""

    endpoint: str
    body: dict[str, Any]
    headers: dict[str, str]  # names lower-cased


@dataclass(frozen=True)
class ChatFault:
    """What one chat request meets (see `queue_faults`); build it with the functions below."""

    kind: str  # "status", "stall", "cut", "garbage" or "pass"
    status: int = 500
    seconds: float = 0.0
    text: str = ""
    retry_after: float | None = None


def status(code: int, *, retry_after: float | None = None) -> ChatFault:
    """Answer with HTTP `code` in the OpenAI error shape."""
    if code < 400:
        raise ValueError(f"status faults need a code >= 400; got {code}")
    return ChatFault("status", status=code, retry_after=retry_after)


def stall(seconds: float) -> ChatFault:
    """Wait `seconds` before answering normally (beyond a client's timeout: it has gone)."""
    return ChatFault("stall", seconds=seconds)


def cut() -> ChatFault:
    """Send half the reply, then drop the connection."""
    return ChatFault("cut")


def garbage(text: str) -> ChatFault:
    """Answer 200 with `text` as the reply (not the extraction format)."""
    return ChatFault("garbage", text=text)


PASS = ChatFault("pass")


@dataclass
class _Failure:
    status: int
    remaining: int
    body: dict[str, Any]
    retry_after: float | None
    endpoint: str | None


def error_body(status: int, message: str) -> dict[str, Any]:
    """Return an error in the OpenAI JSON shape (``{"error": {message, type, param, code}}``)."""
    error_type, code = _ERROR_TYPES.get(status, ("server_error", None))
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


def embed_text(text: str, dimension: int) -> list[float]:
    """Return the deterministic L2-normalised vector the server gives `text`.

    Public so tests can compute the expected vector without a request.
    """
    values: list[float] = []
    counter = 0
    while len(values) < dimension:
        digest = hashlib.sha256(f"{counter}\0{text}".encode()).digest()
        values.extend(n / 2**31 - 1.0 for n in struct.unpack("<8I", digest))
        counter += 1
    vector = values[:dimension]
    norm = sum(v * v for v in vector) ** 0.5 or 1.0
    return [v / norm for v in vector]


def split_deltas(text: str) -> tuple[str, ...]:
    """Split a reply into word-sized streaming deltas that join back to `text` exactly."""
    return tuple(_WORD_RE.findall(text))


def _count_words(text: str) -> int:
    return len(text.split())


class OpenAICompatibleServer:
    """A scripted OpenAI-compatible endpoint on 127.0.0.1 (see the module docstring).

    Use as a context manager (or `start()` / `close()`); `base_url` is what
    ``openai.OpenAI(base_url=...)`` takes. Scripting attributes (`responder`,
    `delay_seconds`, `delta_delay_seconds`, `default_reply`, `embedding_dimension`,
    `embedding_scale`, `embedder`, `reverse_embeddings`, `embedding_body`: a verbatim 200
    reply to every embeddings request, for malformed replies; `embedding_encodings`: the
    `encoding_format`s it takes, another answered 422 as a strict server does;
    `ignore_encoding_format`: numbers whatever was asked, as a lax one does) may be changed at
    any time; they apply to the next request.
    """

    def __init__(
        self,
        *,
        embedding_dimension: int = 384,
        models: Sequence[str] = ("test-chat-model", "test-embedding-model"),
    ) -> None:
        self.responder: Responder | None = None
        # Asked for every chat request no queued fault took: a fault for it, or None.
        self.fault_for: Callable[[dict[str, Any]], ChatFault | None] | None = None
        self.default_reply: Reply = "<|COMPLETE|>"
        self.delay_seconds: float = 0.0
        self.delta_delay_seconds: float = 0.0
        self.embedding_dimension = embedding_dimension
        self.embedding_scale = 1.0
        self.embedder: Callable[[str, int], list[float]] = embed_text
        self.reverse_embeddings = False
        self.embedding_body: bytes | None = None
        self.embedding_encodings: tuple[str, ...] = ("float", "base64")
        self.ignore_encoding_format = False
        self.hold_timeout_seconds = 5.0
        self.models = tuple(models)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._replies: deque[Reply] = deque()
        self._failures: list[_Failure] = []
        self._stalls: deque[float] = deque()
        self._chat_faults: deque[ChatFault] = deque()
        self._hold_count = 0
        self._held = 0
        self._hold_released = True
        self._calls: list[RecordedCall] = []
        self._counts: dict[str, int] = {}
        self._in_flight = 0
        self._max_in_flight = 0
        self._aborted_streams = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._sequence = 0

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> OpenAICompatibleServer:
        """Bind a free port on 127.0.0.1 and serve from a daemon thread."""
        if self._httpd is not None:
            raise RuntimeError("OpenAICompatibleServer is already started; call close() first")
        handler = _make_handler(self)
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        self._stopping.clear()
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"llm-server-{httpd.server_address[1]}",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving; requests still sleeping in a scripted delay end at once."""
        self._stopping.set()
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> OpenAICompatibleServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("OpenAICompatibleServer is not started; use it as a context manager")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, the value for ``openai.OpenAI(base_url=...)``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # ----------------------------------------------------------------- scripting

    def queue_replies(self, *replies: Reply) -> None:
        """Script the next chat replies, answered in order before `responder` is consulted."""
        with self._lock:
            self._replies.extend(replies)

    def fail_next(
        self,
        status: int = 500,
        count: int = 1,
        body: Mapping[str, Any] | str | None = None,
        *,
        retry_after: float | None = None,
        endpoint: str | None = None,
    ) -> None:
        """Answer the next `count` requests (to `endpoint`, or any) with HTTP `status`.

        `body` is the JSON to send, or a message to wrap in the OpenAI error shape;
        `retry_after` adds a ``Retry-After`` header (seconds).
        """
        if status < 400 or count < 1:
            raise ValueError(f"fail_next needs status >= 400 and count >= 1; got {status}, {count}")
        if isinstance(body, Mapping):
            payload = dict(body)
        else:
            payload = error_body(status, body or f"scripted failure: HTTP {status}")
        with self._lock:
            self._failures.append(_Failure(status, count, payload, retry_after, endpoint))

    def queue_faults(self, *faults: ChatFault) -> None:
        """Script what the next chat requests meet, one fault each, in order (the module
        docstring lists them); they come before `fail_next`, `stall_next` and replies."""
        with self._lock:
            self._chat_faults.extend(faults)

    def stall_next(self, seconds: float, count: int = 1) -> None:
        """Make the next `count` requests wait `seconds` (on top of `delay_seconds`)."""
        with self._lock:
            self._stalls.extend([seconds] * count)

    def hold_next(self, count: int) -> None:
        """Hold the next `count` requests until all `count` are in flight at once.

        Proves a client sends them concurrently; after `hold_timeout_seconds` a held request
        goes on anyway (and the test's in-flight assertion fails instead of hanging).
        """
        with self._lock:
            self._hold_count, self._held, self._hold_released = count, 0, count == 0

    # ----------------------------------------------------------------- observations

    @property
    def calls(self) -> list[RecordedCall]:
        """A copy of every request received so far, in arrival order."""
        with self._lock:
            return list(self._calls)

    def bodies(self, endpoint: str = CHAT) -> list[dict[str, Any]]:
        """The JSON bodies received on `endpoint`, in arrival order."""
        return [call.body for call in self.calls if call.endpoint == endpoint]

    def count(self, endpoint: str | None = None) -> int:
        """How many requests `endpoint` received (all endpoints when None)."""
        with self._lock:
            if endpoint is None:
                return len(self._calls)
            return self._counts.get(endpoint, 0)

    @property
    def chat_calls(self) -> int:
        return self.count(CHAT)

    @property
    def embedding_calls(self) -> int:
        return self.count(EMBEDDINGS)

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    @property
    def max_in_flight(self) -> int:
        """The most requests the server was handling at the same moment."""
        with self._lock:
            return self._max_in_flight

    @property
    def aborted_streams(self) -> int:
        """Streams whose client went away before the server finished sending."""
        with self._lock:
            return self._aborted_streams

    def reset(self) -> None:
        """Forget calls, counters, scripted replies, failures, stalls and holds (scripting
        attributes stay)."""
        with self._lock:
            self._replies.clear()
            self._failures.clear()
            self._stalls.clear()
            self._chat_faults.clear()
            self._hold_count, self._held, self._hold_released = 0, 0, True
            self._calls.clear()
            self._counts.clear()
            self._max_in_flight = self._in_flight
            self._aborted_streams = 0

    # ----------------------------------------------------------------- request handling

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        path = urlsplit(handler.path).path.rstrip("/")
        endpoint = _ROUTES.get((method, path), path)
        body, problem = _read_json(handler) if method == "POST" else ({}, None)
        with self._changed:
            headers = {name.lower(): value for name, value in handler.headers.items()}
            self._calls.append(RecordedCall(endpoint, body, headers))
            self._counts[endpoint] = self._counts.get(endpoint, 0) + 1
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            stall = self._stalls.popleft() if self._stalls else 0.0
            fault = self._chat_faults.popleft() if endpoint == CHAT and self._chat_faults else PASS
            if fault is PASS and endpoint == CHAT and self.fault_for is not None:
                fault = self.fault_for(body) or PASS
            if fault.kind == "stall":
                stall += fault.seconds
            if self._held < self._hold_count:
                self._held += 1
                if self._in_flight >= self._hold_count:
                    self._hold_released = True
            self._changed.notify_all()
            self._changed.wait_for(lambda: self._hold_released, self.hold_timeout_seconds)
        try:
            delay = self.delay_seconds + stall
            if delay > 0 and self._stopping.wait(delay):
                return
            failure = self._take_failure(endpoint) if fault is PASS else None
            if fault.kind == "status":
                retry = (
                    {} if fault.retry_after is None else {"Retry-After": f"{fault.retry_after:g}"}
                )
                _send_json(handler, fault.status, error_body(fault.status, "scripted fault"), retry)
            elif failure is not None:
                headers = (
                    {}
                    if failure.retry_after is None
                    else {"Retry-After": f"{failure.retry_after:g}"}
                )
                _send_json(handler, failure.status, failure.body, headers)
            elif problem is not None:
                _send_json(handler, 400, error_body(400, problem))
            elif endpoint == CHAT:
                self._answer_chat(handler, body, fault)
            elif endpoint == EMBEDDINGS:
                self._answer_embeddings(handler, body)
            elif endpoint == MODELS:
                self._answer_models(handler)
            else:
                _send_json(handler, 404, error_body(404, f"no route for {method} {path}"))
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True
        finally:
            with self._changed:
                self._in_flight -= 1
                self._changed.notify_all()

    def _take_failure(self, endpoint: str) -> _Failure | None:
        with self._lock:
            for failure in self._failures:
                if failure.endpoint in (None, endpoint):
                    failure.remaining -= 1
                    if failure.remaining == 0:
                        self._failures.remove(failure)
                    return failure
        return None

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self._replies:
                return self._replies.popleft()
        responder = self.responder
        if responder is not None:
            return responder(body)
        return self.default_reply

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            self._sequence += 1
            return f"{prefix}-{self._sequence}"

    def _answer_chat(
        self, handler: BaseHTTPRequestHandler, body: dict[str, Any], fault: ChatFault = PASS
    ) -> None:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not isinstance(body.get("model"), str):
            _send_json(
                handler,
                400,
                error_body(400, "'model' (str) and 'messages' (non-empty list) are required"),
            )
            return
        try:
            reply = fault.text if fault.kind == "garbage" else self._next_reply(body)
        except Exception as exc:  # a broken responder must show up in the test, not hang it
            _send_json(handler, 500, error_body(500, f"responder raised {exc!r}"))
            return
        deltas = split_deltas(reply) if isinstance(reply, str) else tuple(reply)
        text = "".join(deltas)
        prompt_tokens = sum(
            _count_words(str(m.get("content", ""))) for m in messages if isinstance(m, dict)
        )
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": _count_words(text),
            "total_tokens": prompt_tokens + _count_words(text),
        }
        base = {
            "id": self._next_id("chatcmpl"),
            "created": int(time.time()),
            "model": body["model"],
        }
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream_chat(
                handler, base, deltas, usage if include_usage else None, cut=fault.kind == "cut"
            )
            return
        _send_json(
            handler,
            200,
            cut=fault.kind == "cut",
            payload={
                **base,
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text, "refusal": None},
                        "finish_reason": "stop",
                        "logprobs": None,
                    }
                ],
                "usage": usage,
            },
        )

    def _stream_chat(
        self,
        handler: BaseHTTPRequestHandler,
        base: dict[str, Any],
        deltas: Sequence[str],
        usage: dict[str, int] | None,
        *,
        cut: bool = False,
    ) -> None:
        def chunk(delta: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
            return {**base, "object": "chat.completion.chunk", "choices": [choice]}

        events: list[dict[str, Any]] = [chunk({"role": "assistant", "content": ""}, None)]
        events += [chunk({"content": delta}, None) for delta in deltas]
        events.append(chunk({}, "stop"))
        if usage is not None:
            events.append(
                {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}
            )
        if cut:  # the connection drops mid-stream: no final chunk, no [DONE]
            events = events[: max(1, len(events) // 2)]

        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True
        try:
            for index, event in enumerate(events):
                pause = self.delta_delay_seconds if index > 0 else 0.0
                if pause > 0 and self._stopping.wait(pause):
                    return
                handler.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                handler.wfile.flush()
            if cut:
                return
            handler.wfile.write(b"data: [DONE]\n\n")
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            with self._changed:
                self._aborted_streams += 1
                self._changed.notify_all()

    def _answer_embeddings(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        raw = body.get("input")
        inputs = [raw] if isinstance(raw, str) or _is_token_list(raw) else raw
        if not isinstance(inputs, list) or not inputs or not isinstance(body.get("model"), str):
            _send_json(
                handler, 400, error_body(400, "'model' (str) and 'input' (non-empty) are required")
            )
            return
        encoding = body.get("encoding_format", "float")
        if encoding not in self.embedding_encodings:
            message = f"encoding_format must be one of {list(self.embedding_encodings)}"
            _send_json(handler, 422, error_body(422, message))
            return
        if self.embedding_body is not None:
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(self.embedding_body)))
            handler.end_headers()
            handler.wfile.write(self.embedding_body)
            return
        dimension = body.get("dimensions") or self.embedding_dimension
        embedder = self.embedder
        as_base64 = encoding == "base64" and not self.ignore_encoding_format
        data = []
        for index, item in enumerate(inputs):
            text = item if isinstance(item, str) else json.dumps(item)
            vector = [self.embedding_scale * v for v in embedder(text, int(dimension))]
            encoded: Any = vector
            if as_base64:
                encoded = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        tokens = sum(_count_words(i) if isinstance(i, str) else len(i) for i in inputs)
        _send_json(
            handler,
            200,
            {
                "object": "list",
                "data": data[::-1] if self.reverse_embeddings else data,
                "model": body["model"],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    def _answer_models(self, handler: BaseHTTPRequestHandler) -> None:
        data = [
            {"id": model, "object": "model", "created": 0, "owned_by": "kgstream-tests"}
            for model in self.models
        ]
        _send_json(handler, 200, {"object": "list", "data": data})


def _is_token_list(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, int) for v in value)


def _read_json(handler: BaseHTTPRequestHandler) -> tuple[dict[str, Any], str | None]:
    length = int(handler.headers.get("Content-Length") or 0)
    raw = handler.rfile.read(length) if length else b""
    try:
        body = json.loads(raw or b"{}")
    except ValueError as exc:
        return {}, f"request body is not valid JSON: {exc}"
    if not isinstance(body, dict):
        return {}, f"request body must be a JSON object; got {type(body).__name__}"
    return body, None


def _send_json(
    handler: BaseHTTPRequestHandler,
    status: int,
    payload: Mapping[str, Any],
    headers: Mapping[str, str] | None = None,
    *,
    cut: bool = False,
) -> None:
    """Send `payload`; `cut` sends half of it under the full Content-Length and drops the
    connection."""
    data = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data[: len(data) // 2] if cut else data)
    handler.wfile.flush()
    if cut:
        handler.close_connection = True


def _make_handler(owner: OpenAICompatibleServer) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body leave in separate writes: without TCP_NODELAY, Nagle holds the
        # body until the client acknowledges the headers, which a delayed ACK puts off
        # by 40 ms, so every call took ~48 ms however fast the reply (measured).
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            owner._handle(self, "POST")

        def do_GET(self) -> None:
            owner._handle(self, "GET")

        def log_message(self, format: str, *args: Any) -> None:
            """Keep test output clean; the call log is the record."""

    return _Handler


@pytest.fixture
def llm_server() -> Iterator[OpenAICompatibleServer]:
    """A fresh, started OpenAI-compatible server for one test."""
    with OpenAICompatibleServer() as server:
        yield server


_FENCED_TEXT = re.compile(r"---Text---\n(`{3,})\n(.*?)\n\1", re.DOTALL)


def offline_extraction_reply(body: dict[str, Any]) -> str:
    """A deterministic stand-in model: the offline extractor's records, in LightRAG's format.

    Extraction prompts get the records of the fenced chunk text; gleaning
    ("continue") prompts and anything else get an empty completion.
    """
    from dataflow.core.offline.extractor import extract_offline

    messages = body.get("messages", [])
    match = _FENCED_TEXT.search(messages[-1]["content"]) if len(messages) == 2 else None
    if match is None:
        return "<|COMPLETE|>"
    extraction = extract_offline(match.group(2))
    d = "<|#|>"
    lines = [f"entity{d}{e.name}{d}{e.type}{d}{e.description}" for e in extraction.entities]
    lines += [
        f"relation{d}{r.source}{d}{r.target}{d}{','.join(r.keywords)}{d}{r.description}{d}{r.strength}"
        for r in extraction.relations
    ]
    return "\n".join([*lines, "<|COMPLETE|>"])
