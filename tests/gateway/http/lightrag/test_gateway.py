"""LightRAG's routes on a gateway started in-process over the indexed test corpus (real HTTP,
real servicers): answers written by the (test) LLM, streamed; the auth token; clearing every
document with the confirmation, through a watched folder's sink."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from connectors.folder.publisher import FolderPublisher
from tests.gateway.corpus import DOCUMENTS, Corpus
from tests.gateway.http.lightrag import examples as ex
from tests.gateway.test_server import ANSWER, QUESTION, http_gateway, new_engine
from tests.support.llm_server import OpenAICompatibleServer, cut

TOKEN = "lightrag-test-token"


def test_query_returns_the_llms_answer(http: httpx.Client) -> None:
    reply = http.post("/query", json={"query": QUESTION, "mode": "mix"})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert ex.same_shape(body, ex.QUERY_RESPONSE_WITHOUT_REFERENCES) == []
    assert body["response"] == ANSWER and body["llm_generated"] is True
    assert "projects/atlas.md" in [r["file_path"] for r in body["references"]]


def test_query_stream_streams_the_llms_answer_in_chunks(
    http: httpx.Client, llm_server: OpenAICompatibleServer
) -> None:
    llm_server.default_reply = ["Carla Diaz ", "leads the ", "Atlas Project."]
    with http.stream("POST", "/query/stream", json={"query": QUESTION}) as reply:
        assert reply.status_code == 200
        lines = [json.loads(line) for line in reply.iter_lines() if line]
    assert "references" in lines[0]
    assert [line["response"] for line in lines[1:]] == [
        "Carla Diaz ",
        "leads the ",
        "Atlas Project.",
    ]


def test_an_llm_failure_mid_stream_is_an_error_line(
    http: httpx.Client, llm_server: OpenAICompatibleServer
) -> None:
    llm_server.queue_faults(cut())
    with http.stream("POST", "/query/stream", json={"query": QUESTION}) as reply:
        lines = [json.loads(line) for line in reply.iter_lines() if line]
    assert reply.status_code == 200
    assert set(lines[-1]) == {"error"} and "LLM" in lines[-1]["error"]


def test_the_token_guards_lightrags_routes_but_not_health(corpus: Corpus) -> None:
    engine = new_engine(corpus, None)
    with http_gateway(engine, corpus.stores.graph, auth_token=TOKEN) as server:
        assert server.http is not None
        url = server.http.url
        request = {"query": QUESTION}
        bare = httpx.post(f"{url}/query", json=request)
        assert bare.status_code == 401
        assert bare.headers["www-authenticate"].startswith("Bearer")
        assert "authorization: Bearer" in bare.json()["detail"]
        api_key = httpx.post(f"{url}/query", json=request, headers={"X-API-Key": TOKEN})
        assert api_key.status_code == 401
        assert api_key.json()["detail"].startswith("X-API-Key is not accepted")
        bearer = httpx.post(
            f"{url}/query", json=request, headers={"authorization": f"Bearer {TOKEN}"}
        )
        assert bearer.status_code == 200, bearer.text
        for path in (
            "/documents",
            "/graphs?label=x",
            "/graph/label/list",
            "/documents/track_status/t",
        ):
            assert httpx.get(f"{url}{path}").status_code == 401, path
        health = httpx.get(f"{url}/health")
        assert health.status_code == 200 and health.json()["auth_mode"] == "enabled"
        assert TOKEN not in bare.text + api_key.text


def test_clearing_with_the_confirmation_deletes_every_document_through_the_sink(
    corpus: Corpus, tmp_path: Path
) -> None:
    for name, text in DOCUMENTS.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    engine = new_engine(corpus, None)
    with http_gateway(engine, corpus.stores.graph, FolderPublisher(tmp_path)) as server:
        assert server.http is not None
        url = server.http.url
        reply = httpx.delete(f"{url}/documents", params={"confirm": "delete-all-documents"})
        assert reply.status_code == 200, reply.text
        assert ex.same_shape(reply.json(), ex.CLEAR_DOCUMENTS_RESPONSE) == []
        assert f"all {len(DOCUMENTS)} documents" in reply.json()["message"]
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_without_a_sink_an_insert_says_why(corpus: Corpus) -> None:
    with http_gateway(new_engine(corpus, None), corpus.stores.graph) as server:
        assert server.http is not None
        reply = httpx.post(f"{server.http.url}/documents/text", json={"text": "Hello there."})
    assert reply.status_code == 400
    assert "no event log is configured" in reply.json()["detail"]


def test_a_small_body_limit_is_the_limit_of_uploads(corpus: Corpus, tmp_path: Path) -> None:
    engine = new_engine(corpus, None)
    publisher = FolderPublisher(tmp_path)
    with http_gateway(engine, corpus.stores.graph, publisher, max_message_bytes=4096) as server:
        assert server.http is not None
        files = {"file": ("big.md", b"x" * 5000)}
        reply = httpx.post(f"{server.http.url}/documents/upload", files=files)
    assert reply.status_code == 413
    assert "limit of 4096 bytes" in reply.json()["detail"]
    assert not (tmp_path / "big.md").exists()
