"""A document in flight shows its progress wherever documents are shown: `kgstream status`
and the gateway's Document (gRPC, and the HTTP API's JSON of it)."""

import itertools
from collections.abc import Iterator

import pytest

from connectors.redis.graph_store import GraphStore
from connectors.redis.index_control import RedisIndexControl
from dataflow.core.commit import GraphBatch
from dataflow.core.documents import DocumentRecord, DocumentStatus
from gateway.convert import document_to_proto
from kgstream.commands.inspection import print_status, status_data

_workspaces = itertools.count()


@pytest.fixture
def graph(redis_server) -> Iterator[GraphStore]:
    store = GraphStore.from_url(redis_server.url, f"progress{next(_workspaces)}")
    yield store
    store.clear()


def test_status_and_the_gateway_show_a_large_document_s_progress(graph, capsys) -> None:
    streaming = DocumentRecord(
        "big.md", DocumentStatus.PROCESSING, "docs/big.md", chunks_settled=120, chunks_changed=2048
    )
    graph.apply(GraphBatch(document_upserts=(streaming,)))

    control = RedisIndexControl(graph.client, graph.workspace)

    (shown,) = status_data(graph, control)["in_progress"]
    assert shown == {
        "doc_id": "big.md",
        "file_path": "docs/big.md",
        "chunks_settled": 120,
        "chunks_changed": 2048,
    }
    print_status(graph, control, as_json=False)
    assert "PROCESSING big.md: 120 of 2048 changed chunks done" in capsys.readouterr().out
    message = document_to_proto(graph.get_documents(["big.md"])["big.md"])
    assert (message.chunks_settled, message.chunks_changed) == (120, 2048)
