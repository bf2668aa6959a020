"""The gateway tests' corpus: the default documents indexed once per test module (a module
that needs other documents defines its own `corpus`), and the gateway with its HTTP API
on it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from gateway.server import RunningServer
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


@pytest.fixture
def http_server(corpus: Corpus, llm_server: OpenAICompatibleServer) -> Iterator[RunningServer]:
    """The gateway over the corpus, answering with the test LLM's `ANSWER`."""
    from tests.gateway.test_server import ANSWER, http_gateway, new_engine

    llm_server.default_reply = ANSWER
    with http_gateway(new_engine(corpus, llm_server), corpus.stores.graph) as server:
        yield server


@pytest.fixture
def http(http_server: RunningServer) -> Iterator[httpx.Client]:
    """An HTTP client of `http_server`'s HTTP API."""
    assert http_server.http is not None
    with httpx.Client(base_url=http_server.http.url, timeout=60) as client:
        yield client
