"""The gateway tests' corpus: the default documents indexed once per test module (a module
that needs other documents defines its own `corpus`), and the gateway with its HTTP API
on it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from connectors.redis.graph_store import GraphStore
from gateway.knowledge_graph import Engine
from gateway.server import RunningServer, ServerOptions, serve
from tests.gateway.corpus import Corpus, build_corpus
from tests.support.llm_server import OpenAICompatibleServer
from tests.support.redis import RedisTestServer


@pytest.fixture(scope="module")
def corpus(
    request: pytest.FixtureRequest,
    redis_server: RedisTestServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Corpus]:
    name = request.module.__name__.rpartition(".")[2]
    built = build_corpus(redis_server.url, tmp_path_factory.mktemp(f"{name}-corpus"))
    yield built
    built.close()


@contextlib.contextmanager
def http_gateway(engine: Engine, graph: GraphStore, **options: Any) -> Iterator[RunningServer]:
    """The gateway on free ports, gRPC and HTTP (`RunningServer.http`), over `engine`."""
    server = serve(
        engine, graph, ServerOptions(address="127.0.0.1:0", http_address="127.0.0.1:0", **options)
    )
    try:
        yield server
    finally:
        server.stop(grace=None)


@pytest.fixture
def http_server(corpus: Corpus, llm_server: OpenAICompatibleServer) -> Iterator[RunningServer]:
    """The gateway over the corpus, answering with the test LLM's `ANSWER`."""
    from tests.gateway.test_server import ANSWER, new_engine

    llm_server.default_reply = ANSWER
    with http_gateway(new_engine(corpus, llm_server), corpus.stores.graph) as server:
        yield server
