"""A tiny OpenAI-compatible ``POST /v1/embeddings`` server for tests (stdlib only).

Vectors are a pure function of the text (``vector_for``), deliberately *not* unit length,
so tests can check that clients normalise. The server counts calls and batch sizes, can be
scripted to answer error statuses or stall before answering normally, can hold the first
requests until several are in flight (proving concurrency), and lists ``data`` in reverse
order (each item keeps its ``index``) so clients must order by index, not by position.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def vector_for(text: str, dimension: int) -> list[float]:
    """Deterministic, unnormalised vector for ``text``: sha256 bytes mapped to [-1, 1], x3."""
    values: list[float] = []
    counter = 0
    while len(values) < dimension:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        values.extend(3.0 * (byte / 127.5 - 1.0) for byte in digest)
        counter += 1
    return values[:dimension]


@dataclass(frozen=True)
class _Scripted:
    status: int  # 200 = answer normally (after stalling)
    stall_s: float = 0.0
    retry_after: str | None = None


class OpenAIEmbeddingsServer:
    """Start with ``with OpenAIEmbeddingsServer(dimension=16) as server:``; point a client at
    ``server.base_url``."""

    def __init__(self, dimension: int = 16, hold_first: int = 0, hold_timeout_s: float = 5.0):
        self.dimension = dimension
        self._hold_first = hold_first
        self._hold_timeout_s = hold_timeout_s
        self._state = threading.Condition()
        self._script: deque[_Scripted] = deque()
        self._calls = 0
        self._batch_sizes: list[int] = []
        self._models: list[str] = []
        self._in_flight = 0
        self._max_in_flight = 0
        self._arrived = 0
        self._released = hold_first == 0
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False  # a client's idle keep-alive must not block stop()
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    # lifecycle -----------------------------------------------------------------------------
    def start(self) -> OpenAIEmbeddingsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> OpenAIEmbeddingsServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    # scripting -----------------------------------------------------------------------------
    def fail_next(self, statuses: Iterable[int], retry_after: str | None = None) -> None:
        """Answer the next requests with these HTTP error statuses, one each, in order."""
        with self._state:
            self._script.extend(_Scripted(status, retry_after=retry_after) for status in statuses)

    def stall_next(self, seconds: float) -> None:
        """Make the next request wait ``seconds`` before answering (to provoke a timeout)."""
        with self._state:
            self._script.append(_Scripted(200, stall_s=seconds))

    # observations --------------------------------------------------------------------------
    @property
    def calls(self) -> int:
        with self._state:
            return self._calls

    @property
    def batch_sizes(self) -> list[int]:
        """Sizes of the batches answered with vectors, in arrival order."""
        with self._state:
            return list(self._batch_sizes)

    @property
    def models(self) -> list[str]:
        with self._state:
            return list(self._models)

    @property
    def max_in_flight(self) -> int:
        with self._state:
            return self._max_in_flight

    # request handling ----------------------------------------------------------------------
    def _handle(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        with self._state:
            self._calls += 1
            self._arrived += 1
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            scripted = self._script.popleft() if self._script else _Scripted(200)
            if self._arrived <= self._hold_first:
                if self._in_flight >= self._hold_first:
                    self._released = True
                    self._state.notify_all()
                self._state.wait_for(lambda: self._released, timeout=self._hold_timeout_s)
        try:
            if scripted.stall_s:
                time.sleep(scripted.stall_s)  # simulated slow endpoint, not synchronisation
            if scripted.status != 200:
                headers = {"retry-after": scripted.retry_after} if scripted.retry_after else {}
                error = {"message": f"scripted {scripted.status}", "type": "server_error"}
                return scripted.status, {"error": error}, headers
            return 200, self._embeddings(body), {}
        finally:
            with self._state:
                self._in_flight -= 1

    def _embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        raw = body.get("input")
        texts = [raw] if isinstance(raw, str) else list(raw or [])
        dimension = int(body.get("dimensions") or self.dimension)
        base64_format = body.get("encoding_format") == "base64"
        data = []
        for index, text in enumerate(texts):
            vector = vector_for(text, dimension)
            encoded: Any = vector
            if base64_format:
                encoded = base64.b64encode(struct.pack(f"<{dimension}f", *vector)).decode()
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        with self._state:
            self._batch_sizes.append(len(texts))
            self._models.append(str(body.get("model")))
        tokens = sum(len(text.split()) for text in texts)
        return {
            "object": "list",
            "data": list(reversed(data)),
            "model": body.get("model"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                payload = self.rfile.read(length)
                headers: dict[str, str] = {}
                if self.path.rstrip("/") != "/v1/embeddings":
                    status, body = 404, {"error": {"message": "not found"}}
                else:
                    status, body, headers = server._handle(json.loads(payload))
                encoded = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(encoded)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(encoded)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and went away; that is the point of a stall

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

        return Handler
