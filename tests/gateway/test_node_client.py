"""Cross-language: a Node.js client (@grpc/grpc-js + proto-loader, no generated code) calls
the Python gateway over the real wire and sees what the Python engine returns."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.gateway.corpus import Corpus
from tests.gateway.cross_language import (
    REQUEST,
    assert_query_and_stream_match,
    expected_retrieval,
    run_client,
)
from tests.gateway.test_server import ANSWER, new_engine, running_gateway
from tests.support.llm_server import OpenAICompatibleServer

NODE_DIR = Path(__file__).resolve().parent / "node"


@pytest.fixture(scope="module")
def node_client() -> Path:
    """client.js with its pinned packages installed (`npm ci`, once, offline afterwards)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    assert node and npm, "node and npm must be on PATH (Node 20+) for the cross-language test"
    if not (NODE_DIR / "node_modules" / "@grpc" / "grpc-js").is_dir():
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=NODE_DIR,
            check=True,
            capture_output=True,
            timeout=300,
        )
    return NODE_DIR / "client.js"


def test_node_client_gets_the_python_engines_results_and_streams_references_first(
    node_client: Path, corpus: Corpus, llm_server: OpenAICompatibleServer
) -> None:
    llm_server.default_reply = ANSWER
    engine = new_engine(corpus, llm_server)
    with running_gateway(engine, corpus.stores.graph) as (server, _):
        result = run_client(["node", str(node_client), server.address, json.dumps(REQUEST)])

    kinds = [event["event"] for event in result["stream"]]  # proto-loader names the oneof
    assert_query_and_stream_match(
        result, expected_retrieval(engine), corpus.stores.graph.version(), kinds
    )
