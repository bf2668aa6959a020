"""Cross-language: a Node.js client (@grpc/grpc-js + proto-loader, no generated code) calls
the Python gateway over the real wire and sees what the Python engine returns."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

from gateway import convert
from gateway.types import QueryParams
from tests.gateway.corpus import Corpus, build_corpus
from tests.gateway.test_server import ANSWER, QUESTION, new_engine, running_gateway
from tests.support.llm_server import OpenAICompatibleServer
from tests.support.redis import RedisTestServer

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


@pytest.fixture(scope="module")
def corpus(
    redis_server: RedisTestServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Corpus]:
    built = build_corpus(redis_server.url, tmp_path_factory.mktemp("gateway-node-corpus"))
    yield built
    built.close()


def run_client(client: Path, address: str, request: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        ["node", str(client), address, json.dumps(request)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"client.js failed:\n{done.stdout}\n{done.stderr}"
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def as_json(message: Any) -> dict[str, Any]:
    """A message as proto-loader prints it (field names kept, every field, int64 as text)."""
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


def test_node_client_gets_the_python_engines_results_and_streams_references_first(
    node_client: Path, corpus: Corpus, llm_server: OpenAICompatibleServer
) -> None:
    llm_server.default_reply = ANSWER
    engine = new_engine(corpus, llm_server)
    request = {"question": QUESTION, "top_k": 10, "chunk_top_k": 3}
    with running_gateway(engine, corpus.stores.graph) as (server, _):
        result = run_client(node_client, server.address, request)

    expected = as_json(
        convert.retrieval_to_proto(
            engine.retrieve(QueryParams(question=QUESTION, top_k=10, chunk_top_k=3))
        )
    )
    assert expected["entities"] and expected["relations"] and expected["chunks"]
    assert len(expected["chunks"]) == 3  # the knob set in JavaScript reached the engine
    assert result["retrieve"] == expected
    assert result["query"]["context"] == expected
    assert result["query"]["answer"] == ANSWER
    assert result["query"]["index_version"] == str(corpus.stores.graph.version())

    stream = result["stream"]
    kinds = [event["event"] for event in stream]
    assert kinds[0] == "context" and kinds[-1] == "done"
    assert set(kinds[1:-1]) == {"delta"}
    assert stream[0]["context"] == expected
    assert stream[0]["context"]["references"]
    assert "".join(event["delta"]["text"] for event in stream[1:-1]) == ANSWER
    assert stream[-1]["done"]["index_version"] == expected["index_version"]
