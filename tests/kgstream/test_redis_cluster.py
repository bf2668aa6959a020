"""kgstream on a Redis Cluster, as a user runs it: `KGSTREAM_REDIS_URL=redis+cluster://...`
(three nodes, tests/support/redis.py), the vectors embedded as usual.

`kgstream run --watch` follows a create, an edit and a delete while its gateway answers
Retrieve over gRPC from the cluster; afterwards the cluster-backed index exports byte for
byte what a fresh `kgstream index` of the same folder on the embedded default exports, and
answers every query mode with the same context."""

from __future__ import annotations

import itertools
import json
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from connectors.index_export import read_graph
from connectors.redis.graph_store import GraphStore
from dataflow.core.index import IndexSnapshot
from kgstream.cli import main
from kgstream_protos.v1 import query_pb2 as pb
from kgstream_protos.v1 import query_pb2_grpc
from tests.kgstream.processes import Output, clean_environment, kgstream
from tests.kgstream.test_cli_watch import fresh_build
from tests.support.redis import RedisTestCluster
from tests.support.wait import wait_until

DOCS = {
    "team/alice.md": "Alice Moreau founded Northwind Labs in Lisbon. She leads the Atlas Project.",
    "team/bob.md": "Bob Tanaka joined Helios Corp after the Geneva Summit.",
    "projects/atlas.md": "The Atlas Project at Northwind Labs is funded by Helios Corp.",
}
MODES = {
    "local": pb.QUERY_MODE_LOCAL,
    "global": pb.QUERY_MODE_GLOBAL,
    "hybrid": pb.QUERY_MODE_HYBRID,
    "naive": pb.QUERY_MODE_NAIVE,
    "mix": pb.QUERY_MODE_MIX,
}
QUESTION = "Who leads the Atlas Project at Northwind Labs?"

_workspaces = itertools.count()


@pytest.fixture
def workspace(redis_cluster: RedisTestCluster) -> Iterator[str]:
    name = f"cluster{next(_workspaces)}"
    yield name
    with GraphStore.from_url(redis_cluster.url, name) as graph:
        graph.clear()


def write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def stored(graph: GraphStore) -> IndexSnapshot | None:
    try:
        return read_graph(graph)
    except (KeyError, ValueError):
        return None  # a record read between its writes: read again


def test_run_on_a_redis_cluster_follows_every_change_and_serves_retrieve(
    redis_cluster: RedisTestCluster,
    workspace: str,
    llm_server,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder, data, fresh = tmp_path / "docs", tmp_path / "data", tmp_path / "fresh"
    write(folder, DOCS)
    cluster_env = {  # the password joined to the URL by the settings, escaped
        "KGSTREAM_REDIS_URL": f"redis+cluster://{redis_cluster.hosts}",
        "KGSTREAM_REDIS_PASSWORD": str(redis_cluster.password),
        "KGSTREAM_WORKSPACE": workspace,
    }
    env = {**clean_environment(llm_server.base_url), **cluster_env}
    running = kgstream(
        "run", "--watch", str(folder), "--data", str(data), "--grpc", "127.0.0.1:0", env=env
    )
    output = Output(running)
    graph = GraphStore.from_url(redis_cluster.url, workspace)
    assert graph.is_cluster
    try:
        wait_until(lambda: output.has("gateway on"), 120, "the gateway banner")
        address = re.search(r"gateway on (\S+)", output.text())
        assert address is not None
        stub = query_pb2_grpc.KnowledgeGraphStub(grpc.insecure_channel(address.group(1)))

        def caught_up(step: str) -> None:
            wait_until(lambda: stored(graph) == fresh_build(folder), 60, f"the index after {step}")

        def retrieve(mode: str, question: str = QUESTION) -> pb.RetrievalResult:
            request = pb.QueryRequest(question=question, mode=MODES[mode])
            return stub.Retrieve(request, timeout=30)

        caught_up("start")
        for mode in MODES:
            result = retrieve(mode)
            assert result.index_version == graph.version()
            assert {c.doc_id for c in result.chunks} >= {"team/alice.md"}, mode
            if mode != "naive":
                assert "alice moreau" in {e.entity.key for e in result.entities}, mode
                assert result.relations, mode
        expected = fresh_build(folder)
        found = stub.GetEntity(pb.GetEntityRequest(name="Alice Moreau"), timeout=30)
        assert found.degree == sum("alice moreau" in pair for pair in expected.relations)
        subgraph = stub.GetSubgraph(pb.GetSubgraphRequest(seed="Northwind Labs"), timeout=30)
        assert subgraph.entities[0].key == "northwind labs" and len(subgraph.entities) > 2
        assert {(r.source, r.target) for r in subgraph.relations} <= set(expected.relations)
        assert len(subgraph.relations) > 1

        write(folder, {"team/alice.md": DOCS["team/alice.md"].replace("Lisbon", "Porto")})
        caught_up("an edit")
        texts = [c.text for c in retrieve("naive", "Where did Alice Moreau found it?").chunks]
        assert any("Porto" in text for text in texts) and not any("Lisbon" in t for t in texts)

        (folder / "team/bob.md").unlink()
        caught_up("a delete")
        with pytest.raises(grpc.RpcError) as gone:
            stub.GetDocument(pb.GetDocumentRequest(doc_id="team/bob.md"), timeout=30)
        assert gone.value.code() == grpc.StatusCode.NOT_FOUND
        assert "bob tanaka" not in {e.entity.key for e in retrieve("local", "Bob Tanaka").entities}

        write(folder, {"people/carla.md": "Carla Diaz joined Northwind Labs in Porto."})
        caught_up("a create")
        assert "carla diaz" in {
            e.entity.key for e in retrieve("mix", "Who is Carla Diaz?").entities
        }
    finally:
        running.send_signal(signal.SIGINT)
        running.wait(timeout=60)
        graph.close()
    assert running.returncode == 0, output.text()

    for name in cluster_env:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KGSTREAM_EMBEDDING_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("KGSTREAM_EMBEDDING_MODEL", "test-embedding-model")
    assert main(["index", str(folder), "--data", str(fresh)]) == 0
    expected_export = export(fresh, tmp_path / "fresh.json")
    expected_answers = {mode: query(fresh, mode, capsys) for mode in MODES}

    expected_status = status(fresh, capsys)
    for name, value in cluster_env.items():
        monkeypatch.setenv(name, value)
    assert export(data, tmp_path / "cluster.json") == expected_export
    for mode in MODES:
        assert query(data, mode, capsys) == expected_answers[mode], mode
    assert status(data, capsys) == expected_status


def status(data: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    """`kgstream status --json`, the index version left out (the runs took other paths)."""
    capsys.readouterr()
    assert main(["status", "--data", str(data), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    found.pop("index_version")
    assert found["documents"]["PROCESSED"] == 3 and found["records"]["entities"] > 0
    return dict(found)


def export(data: Path, output: Path) -> bytes:
    command = ["export", "--data", str(data), "--format", "json", "--output", str(output)]
    assert main(command) == 0
    return output.read_bytes()


def query(data: Path, mode: str, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    """`kgstream query --data` in this process: the retrieved context, version left out."""
    capsys.readouterr()
    command = ["query", QUESTION, "--data", str(data), "--mode", mode, "--context-only", "--json"]
    assert main(command) == 0
    result = json.loads(capsys.readouterr().out)
    result.pop("index_version")
    assert result["chunks"], f"{mode} found nothing: the comparison would prove little"
    return dict(result)


def test_a_plain_redis_url_pointed_at_a_cluster_node_says_to_use_the_cluster_scheme(
    redis_cluster: RedisTestCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KGSTREAM_REDIS_URL", redis_cluster.node_url(0))
    capsys.readouterr()
    assert main(["status", "--data", str(tmp_path / "data")]) == 2
    error = capsys.readouterr().err
    assert "is a Redis Cluster node" in error and "hint: set redis_url to redis+cluster://" in error
    assert "Traceback" not in error
