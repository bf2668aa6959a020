"""The HTTP/JSON API over a real socket, with a real HTTP client (httpx), on the indexed
test corpus: every route, the server-sent event streams, bad input, auth, CORS and the
OpenAPI document. The same servicers answer as over gRPC (gateway/http/calls.py), so these
tests check the HTTP side: routing, JSON both ways, statuses, streaming and safety."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from dataflow.core.commit import GraphBatch
from tests.gateway.corpus import Corpus
from tests.gateway.test_server import ANSWER, http_gateway, new_engine

TOKEN = "http-test-token"


def sse_events(lines: Iterator[str]) -> Iterator[tuple[str, Any]]:
    """(event, data) pairs of a text/event-stream, comments skipped."""
    event, data = "message", []
    for line in lines:
        if line == "":
            if data:
                yield event, json.loads("\n".join(data))
            event, data = "message", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            event = line.partition(":")[2].strip()
        elif line.startswith("data:"):
            data.append(line.partition(":")[2].strip())


# -- queries -------------------------------------------------------------------


def test_retrieve_returns_the_context_as_json(http: httpx.Client) -> None:
    reply = http.post(
        "/api/v1/retrieve", json={"question": "Who leads the Atlas Project?", "mode": "mix"}
    )
    assert reply.status_code == 200, reply.text
    result = reply.json()
    assert result["mode"] == "QUERY_MODE_MIX"
    assert isinstance(result["index_version"], int) and result["index_version"] > 0
    assert result["chunks"][0]["doc_id"] == "projects/atlas.md"
    assert "Carla Diaz" in result["chunks"][0]["text"]
    assert any(r["file_path"] == "projects/atlas.md" for r in result["references"])
    # every field is present, defaults included
    assert set(result["keywords"]) == {"high_level", "low_level"}


@pytest.mark.parametrize("mode", ["local", "global", "hybrid", "naive", "QUERY_MODE_MIX", 5])
def test_every_mode_is_served(http: httpx.Client, mode: Any) -> None:
    reply = http.post("/api/v1/retrieve", json={"question": "Atlas Project", "mode": mode})
    assert reply.status_code == 200, reply.text
    assert reply.json()["mode"].startswith("QUERY_MODE_")


def test_query_answers_with_the_llm(http: httpx.Client) -> None:
    reply = http.post("/api/v1/query", json={"question": "Who leads the Atlas Project?"})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["answer"] == ANSWER
    assert body["llm_configured"] is True
    assert body["context"]["chunks"]


def test_query_stream_sends_context_then_deltas_then_done(http: httpx.Client) -> None:
    with http.stream(
        "POST", "/api/v1/query/stream", json={"question": "Who leads the Atlas Project?"}
    ) as reply:
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        events = list(sse_events(reply.iter_lines()))
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "context" and kinds[-1] == "done", kinds
    assert set(kinds[1:-1]) == {"delta"}
    assert "".join(data["text"] for kind, data in events if kind == "delta") == ANSWER
    assert events[0][1]["chunks"][0]["doc_id"] == "projects/atlas.md"
    assert events[-1][1]["index_version"] == events[0][1]["index_version"]


# -- graph and documents -----------------------------------------------------------


def test_entity_search_puts_the_exact_name_first(http: httpx.Client) -> None:
    reply = http.get("/api/v1/entities", params={"q": "Carla Diaz", "limit": 5})
    assert reply.status_code == 200, reply.text
    entities = reply.json()["entities"]
    assert entities[0]["entity"]["key"] == "carla diaz"
    assert len(entities) <= 5


def test_entity_relation_and_subgraph(http: httpx.Client) -> None:
    entity = http.get("/api/v1/entities/Carla Diaz").json()
    assert entity["entity"]["name"] == "Carla Diaz"
    assert entity["entity"]["doc_ids"] == ["projects/atlas.md"]
    subgraph = http.get("/api/v1/subgraph", params={"seed": "Carla Diaz", "depth": 1}).json()
    keys = {e["key"] for e in subgraph["entities"]}
    assert {"carla diaz", "atlas project"} <= keys
    relation = http.get(
        "/api/v1/relations", params={"source": "Carla Diaz", "target": "Atlas Project"}
    )
    assert relation.status_code == 200, relation.text
    assert relation.json()["relation"]["doc_ids"] == ["projects/atlas.md"]


def test_documents_and_their_chunks(http: httpx.Client) -> None:
    listed = http.get("/api/v1/documents", params={"status": "processed", "page_size": 2}).json()
    assert listed["total"] == 4 and len(listed["documents"]) == 2 and listed["next_page_token"]
    document = http.get("/api/v1/documents/projects/atlas.md")  # the doc id holds a "/"
    assert document.status_code == 200, document.text
    stored = document.json()["document"]
    assert stored["status"] == "DOCUMENT_STATUS_PROCESSED"
    chunk = http.get(f"/api/v1/chunks/{stored['chunk_ids'][0]}").json()
    assert chunk["doc_id"] == "projects/atlas.md" and "Carla Diaz" in chunk["text"]


def test_unknown_things_are_404_with_the_error_body(http: httpx.Client) -> None:
    for path in (
        "/api/v1/entities/Nobody Atall",
        "/api/v1/documents/no/such.md",
        "/api/v1/chunks/no-such-chunk",
    ):
        reply = http.get(path)
        assert reply.status_code == 404, path
        assert reply.json()["error"]["code"] == "NOT_FOUND"


def test_version_waits_for_a_later_index_version(http: httpx.Client, corpus: Corpus) -> None:
    now = http.get("/api/v1/version").json()
    assert now["documents"]["processed"] == 4
    late = http.get(
        "/api/v1/version",
        params={"min_index_version": now["index_version"] + 100, "timeout_ms": 200},
    )
    assert late.status_code == 504
    assert late.json()["error"]["code"] == "DEADLINE_EXCEEDED"


def test_events_announce_a_new_index_version(http: httpx.Client, corpus: Corpus) -> None:
    graph = corpus.stores.graph
    with http.stream("GET", "/api/v1/events") as reply:
        assert reply.status_code == 200
        events = sse_events(reply.iter_lines())
        kind, first = next(events)
        assert kind == "version" and first["index_version"] == graph.version()
        graph.apply(GraphBatch())  # an empty batch still moves the version
        kind, second = next(events)
    assert kind == "version" and second["index_version"] == first["index_version"] + 1


def test_ingest_without_an_event_log_says_what_to_do(http: httpx.Client) -> None:
    reply = http.put("/api/v1/documents/notes/new.md", json={"content": "Ada wrote notes."})
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["code"] == "FAILED_PRECONDITION" and "watched folder" in error["message"]


# -- bad input -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"{not json", "body"),
        (b"[1, 2]", "body"),
        (json.dumps({"question": "q", "topk": 3}).encode(), "topk"),
        (json.dumps({"question": "q", "top_k": "many"}).encode(), "top_k"),
        (json.dumps({"question": "q", "mode": "sideways"}).encode(), "mode"),
        (json.dumps({"question": "q", "top_k": 0}).encode(), "top_k"),
        (json.dumps({"question": "x" * 10_000}).encode(), "question"),
        (json.dumps({"question": "q", "document_filter": {"doc_ids": "a"}}).encode(),
         "document_filter.doc_ids"),
    ],
)  # fmt: skip
def test_bad_requests_are_400_naming_the_field(http: httpx.Client, body: bytes, field: str) -> None:
    reply = http.post(
        "/api/v1/retrieve", content=body, headers={"content-type": "application/json"}
    )
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["code"] == "INVALID_ARGUMENT"
    assert error["field"] == field, error


def test_bad_query_parameters_are_400(http: httpx.Client) -> None:
    reply = http.get("/api/v1/subgraph", params={"seed": "Carla Diaz", "depth": 99})
    assert reply.status_code == 400 and reply.json()["error"]["field"] == "depth"
    reply = http.get("/api/v1/entities", params={"q": "x", "limit": "lots"})
    assert reply.status_code == 400 and reply.json()["error"]["field"] == "limit"
    reply = http.put("/api/v1/documents/a.md", json={"content": 3})
    assert reply.status_code == 400 and reply.json()["error"]["field"] == "content"


def test_a_body_over_the_limit_is_413(corpus: Corpus) -> None:
    engine = new_engine(corpus, None)
    with http_gateway(engine, corpus.stores.graph, max_message_bytes=4096) as server:
        assert server.http is not None
        reply = httpx.post(
            f"{server.http.url}/api/v1/retrieve",
            json={"question": "q", "user_prompt": "x" * 10_000},
        )
    assert reply.status_code == 413
    assert reply.json()["error"]["code"] == "RESOURCE_EXHAUSTED"


# -- auth and CORS ---------------------------------------------------------------


def test_auth_token_guards_the_api_but_not_health_ui_or_schema(corpus: Corpus) -> None:
    engine = new_engine(corpus, None)
    with http_gateway(engine, corpus.stores.graph, auth_token=TOKEN) as server:
        assert server.http is not None
        url = server.http.url
        bare = httpx.get(f"{url}/api/v1/version")
        wrong = httpx.get(f"{url}/api/v1/version", headers={"authorization": "Bearer nope"})
        right = httpx.get(f"{url}/api/v1/version", headers={"authorization": f"bearer {TOKEN}"})
        chat = httpx.get(f"{url}/v1/models")
        open_paths = [
            httpx.get(f"{url}{path}").status_code for path in ("/healthz", "/openapi.json")
        ]
        with httpx.stream("GET", f"{url}/api/v1/events", params={"access_token": TOKEN}) as events:
            events_status = events.status_code
        query_token_elsewhere = httpx.get(f"{url}/api/v1/version", params={"access_token": TOKEN})
    assert bare.status_code == 401 and bare.json()["error"]["code"] == "UNAUTHENTICATED"
    assert wrong.status_code == 401 and right.status_code == 200
    assert chat.status_code == 401
    assert open_paths == [200, 200]
    assert events_status == 200
    assert query_token_elsewhere.status_code == 401
    assert TOKEN not in bare.text + wrong.text


def test_cors_is_off_unless_origins_are_configured(corpus: Corpus, http: httpx.Client) -> None:
    preflight = {
        "origin": "http://example.org",
        "access-control-request-method": "POST",
    }
    assert (
        "access-control-allow-origin"
        not in http.options("/api/v1/query", headers=preflight).headers
    )
    engine = new_engine(corpus, None)
    with http_gateway(
        engine, corpus.stores.graph, http_cors_origins=("http://example.org",)
    ) as server:
        assert server.http is not None
        allowed = httpx.options(f"{server.http.url}/api/v1/query", headers=preflight)
        other = httpx.options(
            f"{server.http.url}/api/v1/query", headers={**preflight, "origin": "http://evil.test"}
        )
    assert allowed.headers["access-control-allow-origin"] == "http://example.org"
    assert "access-control-allow-origin" not in other.headers


# -- the OpenAPI document ---------------------------------------------------------------


def test_openapi_document_is_generated_from_the_routes_and_protos(http: httpx.Client) -> None:
    document = http.get("/openapi.json").json()
    assert document["openapi"].startswith("3.1")
    paths = document["paths"]
    for path, method in [
        ("/api/v1/query", "post"),
        ("/api/v1/query/stream", "post"),
        ("/api/v1/retrieve", "post"),
        ("/api/v1/subgraph", "get"),
        ("/api/v1/documents/{doc_id}", "put"),
        ("/api/v1/documents/{doc_id}", "delete"),
        ("/v1/chat/completions", "post"),
    ]:
        assert method in paths[path], (path, method)
    schemas = document["components"]["schemas"]
    top_k = schemas["kgstream.v1.QueryRequest"]["properties"]["top_k"]
    assert top_k["type"] == "integer" and "entities" in top_k["description"]
    mode = schemas["kgstream.v1.QueryRequest"]["properties"]["mode"]
    assert "QUERY_MODE_MIX" in mode["enum"]
    depth = [p for p in paths["/api/v1/subgraph"]["get"]["parameters"] if p["name"] == "depth"]
    assert depth and depth[0]["in"] == "query"
    # every reference resolves
    refs = re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', json.dumps(document))
    assert refs and set(refs) <= set(schemas), set(refs) - set(schemas)


def test_health_follows_the_stores(http: httpx.Client) -> None:
    assert http.get("/healthz").json() == {"status": "SERVING"}


def test_a_stream_refused_before_it_starts_is_an_http_error(http: httpx.Client) -> None:
    reply = http.post("/api/v1/query/stream", json={"question": "x" * 10_000})
    assert reply.status_code == 400
    assert reply.headers["content-type"].startswith("application/json")
    assert reply.json()["error"]["field"] == "question"
