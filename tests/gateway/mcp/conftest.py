"""The gateway the MCP tests call: over the indexed corpus, answering with the test LLM's
`ANSWER`, its Ingest writing into a watched folder of the test's own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.folder.publisher import FolderPublisher
from gateway.server import RunningServer
from tests.gateway.corpus import Corpus
from tests.gateway.test_server import ANSWER, http_gateway, new_engine
from tests.support.llm_server import OpenAICompatibleServer


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    watched = tmp_path / "watched"
    watched.mkdir()
    return watched


@pytest.fixture
def gateway(
    corpus: Corpus, llm_server: OpenAICompatibleServer, folder: Path
) -> Iterator[RunningServer]:
    llm_server.default_reply = ANSWER
    engine = new_engine(corpus, llm_server)
    with http_gateway(engine, corpus.stores.graph, FolderPublisher(folder)) as server:
        yield server
