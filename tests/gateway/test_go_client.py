"""Cross-language: a Go client (stubs from protoc-gen-go and protoc-gen-go-grpc, generated
from protos/ with no M flags) calls the Python gateway over the real wire and sees what the
Python engine returns, and grpc-go's v1 reflection client sees the protos' comments."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kgstream_protos.v1 import query_pb2 as pb
from kgstream_protos.v1 import query_pb2_grpc
from tests.gateway.corpus import Corpus
from tests.gateway.cross_language import (
    REQUEST,
    as_json,
    assert_query_and_stream_match,
    expected_retrieval,
    run_client,
)
from tests.gateway.test_server import ANSWER, new_engine, running_gateway
from tests.support.llm_server import OpenAICompatibleServer

GO_DIR = Path(__file__).resolve().parent / "go"


@pytest.fixture(scope="module")
def go_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client binary: tests/gateway/go/build generates the stubs and runs `go build`
    (the pinned Go tools and modules come from the Go module proxy once, into .cache/go)."""
    assert shutil.which("go"), "go must be on PATH (Go 1.26+) for the cross-language test"
    binary = tmp_path_factory.mktemp("go-client") / "client"
    done = subprocess.run(
        [str(GO_DIR / "build"), str(binary)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, f"tests/gateway/go/build failed:\n{done.stdout}\n{done.stderr}"
    return binary


def test_go_client_gets_the_engines_results_streams_to_eof_walks_a_subgraph_and_reflects(
    go_client: Path, corpus: Corpus, llm_server: OpenAICompatibleServer
) -> None:
    llm_server.default_reply = ANSWER
    engine = new_engine(corpus, llm_server)
    subgraph_request = {"seed": "Carla Diaz", "depth": 1}
    with running_gateway(engine, corpus.stores.graph) as (server, channel):
        result = run_client(
            [str(go_client), server.address, json.dumps(REQUEST), json.dumps(subgraph_request)]
        )
        python_subgraph = query_pb2_grpc.KnowledgeGraphStub(channel).GetSubgraph(
            pb.GetSubgraphRequest(seed="Carla Diaz", depth=1), timeout=10
        )

    graph = corpus.stores.graph
    kinds = [next(iter(event)) for event in result["stream"]]  # the oneof field that is set
    assert_query_and_stream_match(result, expected_retrieval(engine), graph.version(), kinds)

    subgraph = result["subgraph"]
    neighbours = {key for key, _ in graph.get_neighbours(["carla diaz"])["carla diaz"]}
    assert subgraph["entities"][0]["key"] == "carla diaz"  # the seed first
    assert {e["key"] for e in subgraph["entities"]} == {"carla diaz"} | neighbours
    assert subgraph["relations"] and subgraph["truncated"] is False
    assert subgraph["index_version"] == str(graph.version())
    assert subgraph == as_json(python_subgraph)

    # grpc-go's v1 reflection client: the services, and the comments of the protos.
    reflection = result["reflection"]
    assert {
        "kgstream.v1.KnowledgeGraph",
        "kgstream.v1.Ingest",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    } <= set(reflection["services"])
    assert reflection["top_k_comment"].strip() == (
        "entities (local) / relations (global) to retrieve [40]"
    )
