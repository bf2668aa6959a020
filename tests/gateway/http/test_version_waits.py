"""HTTP waits for an index version, over real sockets: bounded as gRPC's are (at most
`max_version_waits` at once, none past `version_wait_seconds`), ended when the client
leaves, and holding no worker thread, so a storm of waiting clients leaves every other
route answering and health honest.

Each waiting client is a raw HTTP/1.1 request on a socket of its own, so a client that
leaves is one whose connection closes, as a real one's does."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx

from connectors.llm.client import ChatClient, LLMOptions
from dataflow.core.commit import GraphBatch
from gateway.engine import EngineOptions, QueryEngine
from gateway.keywords import OfflineKeywordExtractor
from gateway.server import RunningServer
from tests.dataflow.harness import TOKENIZER
from tests.gateway.corpus import Corpus
from tests.gateway.test_server import ANSWER, QUESTION, http_gateway
from tests.support.llm_server import OpenAICompatibleServer
from tests.support.wait import wait_until

WAITERS = 100
# More places than the HTTP server has worker threads (40): a wait that held a thread
# could not fill them all while other routes answer.
PLACES = 60
UNREACHABLE = 999_999_999
HOUR_MS = 3_600_000


class RawClient:
    """One HTTP/1.1 request on a connection of its own, its reply read as it arrives."""

    def __init__(self, server: RunningServer, path: str, body: Any = None) -> None:
        assert server.http is not None
        payload = b"" if body is None else json.dumps(body).encode()
        head = [
            f"{'GET' if body is None else 'POST'} {path} HTTP/1.1",
            f"Host: {server.http.host}:{server.http.port}",
            "Connection: close",
        ]
        if body is not None:
            head += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
        self.sock = socket.create_connection((server.http.host, server.http.port), timeout=10)
        self.sock.sendall("\r\n".join(head).encode() + b"\r\n\r\n" + payload)
        self.sock.setblocking(False)
        self.received = b""
        self.done = False  # the server sent its whole reply and closed

    def answered(self) -> bool:
        """Whether the whole reply has arrived (read what has come so far)."""
        while not self.done:
            try:
                chunk = self.sock.recv(65536)
            except BlockingIOError:
                break
            self.received += chunk
            self.done = not chunk
        return self.done

    @property
    def status(self) -> int:
        return int(self.received.split(b" ", 2)[1])

    def json(self) -> Any:
        return json.loads(self.received.partition(b"\r\n\r\n")[2])

    def leave(self) -> None:
        self.sock.close()


@contextlib.contextmanager
def waiting_gateway(
    corpus: Corpus, llm_server: OpenAICompatibleServer, **options: Any
) -> Iterator[tuple[RunningServer, QueryEngine]]:
    """The gateway, gRPC and HTTP, with `options` (EngineOptions) for its version waits."""
    llm_server.default_reply = ANSWER
    llm = ChatClient(
        LLMOptions(base_url=llm_server.base_url, model="test-chat-model", max_retries=0)
    )
    engine = QueryEngine(
        corpus.stores,
        corpus.embedder,
        TOKENIZER,
        OfflineKeywordExtractor(),
        llm=llm,
        options=EngineOptions(**options),
    )
    with http_gateway(engine, corpus.stores.graph) as server:
        yield server, engine


def version_waiter(server: RunningServer, minimum: int = UNREACHABLE) -> RawClient:
    return RawClient(server, f"/api/v1/version?min_index_version={minimum}&timeout_ms={HOUR_MS}")


def retrieve_waiter(server: RunningServer, minimum: int = UNREACHABLE) -> RawClient:
    return RawClient(
        server,
        f"/api/v1/retrieve?timeout_ms={HOUR_MS}",
        {"question": QUESTION, "min_index_version": minimum},
    )


def redis_gets(corpus: Corpus) -> int:
    stats = corpus.stores.graph.client.info("commandstats")
    return int(stats.get("cmdstat_get", {}).get("calls", 0))


OTHER_ROUTES: list[tuple[str, str, Any]] = [
    ("GET", "/healthz", None),
    ("GET", "/api/v1/documents", None),
    ("POST", "/api/v1/retrieve", {"question": QUESTION}),
    (
        "POST",
        "/v1/chat/completions",
        {"model": "kgstream-mix", "messages": [{"role": "user", "content": QUESTION}]},
    ),
    ("GET", "/api/v1/version", None),
]


def test_a_hundred_version_waits_leave_every_route_answering_and_leavers_free_their_places(
    corpus: Corpus, llm_server: OpenAICompatibleServer
) -> None:
    with waiting_gateway(
        corpus, llm_server, max_version_waits=PLACES, version_wait_seconds=600
    ) as (server, engine):
        assert server.http is not None
        began = time.monotonic()
        waiters = [
            (version_waiter if n % 2 == 0 else retrieve_waiter)(server) for n in range(WAITERS)
        ]
        refused = lambda: [w for w in waiters if w.answered()]  # noqa: E731
        wait_until(
            lambda: len(refused()) == WAITERS - PLACES and engine.version_waits.waiting == PLACES,
            10,
            f"{PLACES} clients waiting and {WAITERS - PLACES} refused at once",
        )
        refused_within = time.monotonic() - began
        for waiter in refused():
            assert waiter.status == 429, waiter.received
            error = waiter.json()["error"]
            assert error["code"] == "RESOURCE_EXHAUSTED"
            assert f"{PLACES} calls wait for min_index_version already" in error["message"]
            assert "max_version_waits" in error["message"]

        # LightRAG's door refuses one more in its own shape.
        for path in ("/query", "/query/stream"):
            lightrag = httpx.post(
                f"{server.http.url}{path}",
                json={"query": QUESTION, "min_index_version": UNREACHABLE},
                timeout=10,
            )
            assert lightrag.status_code == 429, lightrag.text
            assert "max_version_waits" in lightrag.json()["detail"]

        # Every other route answers within a second while they wait, health saying so.
        gets_before, watched_from = redis_gets(corpus), time.monotonic()
        slowest = 0.0
        with httpx.Client(base_url=server.http.url, timeout=30) as http:
            for method, path, body in OTHER_ROUTES * 3:
                started = time.monotonic()
                reply = http.request(method, path, json=body)
                took = time.monotonic() - started
                assert reply.status_code == 200, (path, reply.text)
                assert took < 1.0, f"{method} {path} took {took:.2f} s with {PLACES} waiting"
                slowest = max(slowest, took)
            assert http.get("/healthz").json() == {"status": "SERVING"}
        gets_per_second = (redis_gets(corpus) - gets_before) / (time.monotonic() - watched_from)
        # One poller reads the version for every waiter (about 200 reads a second at its
        # 5 ms), not one poll each (about 12,000 a second for 60).
        assert gets_per_second < 1000, gets_per_second
        assert engine.version_waits.waiting == PLACES
        assert not any(w.answered() for w in waiters if w not in refused())

        # Clients that leave free their places at once: as many newcomers wait again.
        waiting = [w for w in waiters if not w.answered()]
        for waiter in waiting[:30]:
            waiter.leave()
        wait_until(
            lambda: engine.version_waits.waiting == PLACES - 30,
            10,
            "the 30 clients that left to free their places",
        )
        newcomers = [(version_waiter if n % 2 == 0 else retrieve_waiter)(server) for n in range(30)]
        wait_until(lambda: engine.version_waits.waiting == PLACES, 10, "30 newcomers waiting")
        assert not any(w.answered() for w in newcomers)
        one_more = version_waiter(server)
        wait_until(one_more.answered, 10, "one more than the places refused at once")
        assert one_more.status == 429
        for waiter in [*waiting[30:], *newcomers]:
            waiter.leave()
        wait_until(lambda: engine.version_waits.waiting == 0, 10, "every place freed")
        print(
            f"\n{WAITERS - PLACES} refused within {refused_within:.2f} s; slowest other route "
            f"{slowest * 1000:.0f} ms; {gets_per_second:.0f} version reads/s with {PLACES} waiting"
        )


def test_a_version_wait_stops_at_the_servers_maximum_whatever_timeout_ms_asks(
    corpus: Corpus, llm_server: OpenAICompatibleServer
) -> None:
    with waiting_gateway(corpus, llm_server, version_wait_seconds=0.5) as (server, engine):
        assert server.http is not None
        with httpx.Client(base_url=server.http.url, timeout=30) as http:
            for method, path, body in (
                (
                    "GET",
                    f"/api/v1/version?min_index_version={UNREACHABLE}&timeout_ms={HOUR_MS}",
                    None,
                ),
                (
                    "POST",
                    "/api/v1/retrieve",
                    {"question": QUESTION, "min_index_version": UNREACHABLE},
                ),
                (
                    "POST",
                    f"/api/v1/query?timeout_ms={HOUR_MS}",
                    {"question": QUESTION, "min_index_version": UNREACHABLE},
                ),
            ):
                started = time.monotonic()
                reply = http.request(method, path, json=body)
                assert reply.status_code == 504, reply.text
                error = reply.json()["error"]
                assert error["code"] == "DEADLINE_EXCEEDED"
                assert "the wait stopped at the server's maximum, 0.5 s" in error["message"]
                assert "(version_wait_seconds)" in error["message"]
                assert time.monotonic() - started < 5
        assert engine.version_waits.waiting == 0


def test_a_version_wait_answers_once_the_index_reaches_the_version(
    corpus: Corpus, llm_server: OpenAICompatibleServer
) -> None:
    with waiting_gateway(corpus, llm_server) as (server, engine):
        target = corpus.stores.graph.version() + 1
        waiters = [version_waiter(server, target), retrieve_waiter(server, target)]
        wait_until(lambda: engine.version_waits.waiting == 2, 10, "both clients waiting")
        assert not any(w.answered() for w in waiters)
        corpus.stores.graph.apply(GraphBatch())  # an empty batch still moves the version
        for waiter in waiters:
            wait_until(waiter.answered, 10, "the wait to end with the version")
            assert waiter.status == 200, waiter.received
            assert waiter.json()["index_version"] >= target
        assert engine.version_waits.waiting == 0
