"""The gateway tests' corpus: the default documents indexed once per test module (a module
that needs other documents defines its own `corpus`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.gateway.corpus import Corpus, build_corpus
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
