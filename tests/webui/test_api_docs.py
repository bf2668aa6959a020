"""The API docs page at /docs in a real browser: node/docs_flow.mjs drives Debian's Chromium
through it on an in-process gateway; Swagger UI renders the gateway's OpenAPI document and
lists its routes, from assets the package ships (no request leaves 127.0.0.1). The page's
screenshot goes to $KGSTREAM_TEST_ARTIFACTS/api-docs (or tests/artifacts/api-docs)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.knowledge_graph import DEFAULT_SUBGRAPH_DEPTH, DEFAULT_SUBGRAPH_NODES
from gateway.server import RunningServer
from tests.gateway.corpus import build_corpus
from tests.gateway.test_server import http_gateway, new_engine
from tests.kgstream.processes import ROOT
from tests.support.redis import RedisTestServer
from tests.webui.browsers import CHROMIUM, artifact_folder, node_flow

COMMITTED = ROOT / "gateway" / "http" / "webui" / "docs"


@pytest.fixture
def gateway(redis_server: RedisTestServer, tmp_path: Path) -> Iterator[RunningServer]:
    corpus = build_corpus(redis_server.url, tmp_path / "corpus", documents={})
    try:
        with http_gateway(new_engine(corpus, None), corpus.stores.graph) as server:
            yield server
    finally:
        corpus.close()


def test_the_docs_page_loads_only_assets_the_package_ships() -> None:
    page = (COMMITTED / "index.html").read_text()
    for name in ("swagger-ui.css", "swagger-ui-bundle.js", "init.js"):
        assert f'"/docs/{name}"' in page and (COMMITTED / name).is_file()
    assert "http://" not in page.replace("http-equiv", "") and "https://" not in page
    assert "validatorUrl: null" in (COMMITTED / "init.js").read_text()
    for licence in ("LICENSE", "NOTICE", "swagger-ui-bundle.js.LICENSE.txt"):
        assert (COMMITTED / licence).is_file()


def test_the_docs_page_renders_and_lists_the_routes_in_chromium(gateway: RunningServer) -> None:
    assert gateway.http is not None
    docs_flow = node_flow("docs_flow.mjs")
    artifacts = artifact_folder("api-docs")
    flow = subprocess.run(
        ["node", str(docs_flow)],
        env={
            **os.environ,
            "KGSTREAM_DOCS_URL": f"{gateway.http.url}/docs",
            "KGSTREAM_ARTIFACTS": str(artifacts),
            "KGSTREAM_CHROMIUM": CHROMIUM,
        },
        capture_output=True,
        text=True,
        timeout=180,
    )
    seen = json.loads(flow.stdout.strip().splitlines()[-1]) if flow.stdout.strip() else {}
    assert flow.returncode == 0, (
        f"docs flow failed (see {artifacts}):\n{flow.stdout}\n{flow.stderr}"
    )
    assert seen["ok"] and seen["title"].startswith("kgstream HTTP API")
    assert not seen["elsewhere"], seen["elsewhere"]
    assert all(url.startswith(gateway.http.url) for url in seen["requests"]), seen["requests"]
    routes = set(seen["routes"])
    for route in (
        "POST /api/v1/query",
        "GET /api/v1/subgraph",
        "PUT /api/v1/documents/{doc_id}",
        "POST /v1/chat/completions",
        "POST /v1/embeddings",
        "POST /api/chat",
        "GET /api/tags",
    ):
        assert route in routes, sorted(routes)
    # an operation's parameters show the defaults of the OpenAPI schema
    parameters = seen["subgraphParameters"]
    assert f"Default value : {DEFAULT_SUBGRAPH_NODES}" in parameters, parameters
    assert f"Default value : {DEFAULT_SUBGRAPH_DEPTH}" in parameters, parameters
