"""The HTTP/JSON API over a real socket, with a real HTTP client (httpx), on the indexed
test corpus: every route, the server-sent event streams, bad input, routing (404, 405 with
Allow) and the error shape of each path, auth, CORS and the OpenAPI document with the limits
the servicers enforce. The same servicers answer as over gRPC (gateway/http/calls.py), so these
tests check the HTTP side: routing, JSON both ways, statuses, streaming and safety."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from dataflow.core.commit import GraphBatch
from dataflow.core.documents import MAX_DOC_ID_BYTES
from gateway.embeddings import MAX_EMBEDDING_INPUTS
from gateway.engine import MAX_TOP_K, EngineOptions, QueryEngine
from gateway.http.app import DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT
from gateway.http.calls import MAX_TIMEOUT_MS
from gateway.http.hosts import host_name, served_hosts
from gateway.keywords import OfflineKeywordExtractor
from gateway.knowledge_graph import DEFAULT_SUBGRAPH_DEPTH, MAX_PAGE_SIZE, MAX_SUBGRAPH_DEPTH
from gateway.types import (
    DEFAULT_MODE,
    HISTORY_ROLES,
    MAX_KEYWORD_CHARS,
    MAX_KEYWORDS,
    MAX_QUESTION_CHARS,
    QueryParams,
    RequestLimits,
)
from tests.dataflow.harness import TOKENIZER
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


NESTED = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/v1/retrieve"),
        ("PUT", "/api/v1/documents/a.md"),
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/embeddings"),
        ("POST", "/api/chat"),
        ("POST", "/api/generate"),
        ("POST", "/query"),
        ("POST", "/documents/text"),
        ("POST", "/mcp"),
    ],
)
@pytest.mark.parametrize("body", [NESTED, b'{"question": ' + NESTED + b"}"], ids=["bare", "field"])
def test_a_body_nested_too_deeply_is_refused_on_every_door_never_a_500(
    http: httpx.Client, method: str, path: str, body: bytes
) -> None:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    reply = http.request(method, path, content=body, headers=headers)
    assert 400 <= reply.status_code < 500, (reply.status_code, reply.text[:300])
    reply.json()  # in the door's error shape, not a plain-text traceback
    if path != "/mcp":  # the MCP SDK says a parse error in its own words
        assert "nested too deeply" in reply.text, reply.text[:300]


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


# -- routing: 404 for an unknown path, 405 with Allow for a wrong method ------------------


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("GET", "/api/v1/query", {"POST"}),
        ("POST", "/api/v1/documents/notes/a.md", {"GET", "HEAD", "PUT", "DELETE"}),
        ("DELETE", "/api/v1/version", {"GET", "HEAD"}),
        ("POST", "/openapi.json", {"GET", "HEAD"}),
        ("POST", "/", {"GET", "HEAD"}),
        ("POST", "/docs", {"GET", "HEAD"}),
    ],
)
def test_a_known_path_with_a_wrong_method_is_405_naming_the_methods_it_takes(
    http: httpx.Client, method: str, path: str, allowed: set[str]
) -> None:
    reply = http.request(method, path)
    assert reply.status_code == 405, reply.text
    assert reply.headers["allow"] == ", ".join(sorted(allowed))
    error = reply.json()["error"]
    assert method in error["message"] and reply.headers["allow"] in error["message"]


def test_head_is_answered_on_every_path_that_takes_get(http: httpx.Client) -> None:
    for path in ("/api/v1/version", "/api/v1/documents/projects/atlas.md", "/docs", "/"):
        reply = http.head(path)
        assert reply.status_code == 200, path
        assert reply.content == b""


def test_a_web_ui_file_with_a_wrong_method_is_405_too(http: httpx.Client) -> None:
    page = http.get("/").text
    script = re.search(r'src="(/assets/[^"]+)"', page)
    assert script, page
    assert http.get(script.group(1)).status_code == 200
    reply = http.post(script.group(1))
    assert reply.status_code == 405 and reply.headers["allow"] == "GET, HEAD"


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/nope"), ("GET", "/nope"), ("GET", "/api/v1/nope"), ("GET", "/assets/nope.js")],
)
def test_an_unknown_path_is_404_whatever_the_method(
    http: httpx.Client, method: str, path: str
) -> None:
    reply = http.request(method, path)
    assert reply.status_code == 404, reply.text
    assert "allow" not in reply.headers
    assert reply.json()["error"]["code"] == "NOT_FOUND"


def test_errors_the_app_writes_take_the_shape_of_the_api_of_their_path(http: httpx.Client) -> None:
    """kgstream's shape under /api/v1/, OpenAI's under /v1/, Ollama's under its /api/."""
    kgstream = http.get("/api/v1/query").json()["error"]
    assert kgstream["code"] == "UNIMPLEMENTED" and "field" in kgstream
    for reply in (http.get("/v1/chat/completions"), http.get("/v1/nope")):
        error = reply.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}, error
        assert error["type"] == "invalid_request_error"
    assert http.get("/v1/chat/completions").headers["allow"] == "POST"
    for reply in (http.get("/api/chat"), http.get("/api/nope"), http.post("/api/tags")):
        assert reply.status_code in (404, 405)
        assert isinstance(reply.json()["error"], str), reply.text


def test_a_bad_timeout_is_400_in_the_shape_of_its_path(http: httpx.Client) -> None:
    kgstream = http.post("/api/v1/retrieve?timeout_ms=soon", json={"question": "q"})
    assert kgstream.status_code == 400 and kgstream.json()["error"]["field"] == "timeout_ms"
    chat = http.post(
        "/v1/chat/completions?timeout_ms=soon",
        json={"model": "kgstream-mix", "messages": [{"role": "user", "content": "q"}]},
    )
    assert chat.status_code == 400 and chat.json()["error"]["param"] == "timeout_ms"


# -- enum fields: an unknown value is refused listing the values once -------------------


@pytest.mark.parametrize(
    ("method", "path", "request_kwargs", "field", "values"),
    [
        ("POST", "/api/v1/retrieve", {"json": {"question": "q", "mode": "sideways"}}, "mode",
         "local, global, hybrid, naive, mix"),
        ("GET", "/api/v1/documents", {"params": {"status": "sideways"}}, "status",
         "pending, processing, processed, failed"),
        ("POST", "/api/v1/retrieve",
         {"json": {"question": "q", "history": [{"role": "robot", "content": "x"}]}},
         "history[0].role", "user, assistant"),
    ],
)  # fmt: skip
def test_an_unknown_enum_value_is_refused_listing_the_values_once(
    http: httpx.Client,
    method: str,
    path: str,
    request_kwargs: dict[str, Any],
    field: str,
    values: str,
) -> None:
    reply = http.request(method, path, **request_kwargs)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["field"] == field
    assert error["message"].startswith(f"{field}: must be ")
    assert error["message"].count(field) == 1, error["message"]
    assert error["message"].count(values) == 1
    assert "Failed to parse" not in error["message"]


# -- the Host check (DNS rebinding) -----------------------------------------------


def test_without_a_token_a_loopback_server_answers_only_its_loopback_names(
    http: httpx.Client,
) -> None:
    port = http.base_url.port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "localhost"):
        assert http.get("/api/v1/version", headers={"Host": host}).status_code == 200, host
    rebound = {"Host": f"attacker.example:{port}"}
    for path, read in (
        ("/api/v1/version", lambda body: body["error"]["message"]),
        ("/v1/models", lambda body: body["error"]["message"]),
        ("/api/tags", lambda body: body["error"]),
        ("/graph/label/list", lambda body: body["detail"]),
        ("/", lambda body: body["error"]["message"]),
    ):
        reply = http.get(path, headers=rebound)
        assert reply.status_code == 403, (path, reply.text)
        assert "http_allowed_hosts" in read(reply.json()), path
    refused = http.post("/api/v1/retrieve", json={"question": "Who?"}, headers=rebound)
    assert refused.status_code == 403


def test_allowed_hosts_are_a_setting_and_a_token_makes_the_check_moot(corpus: Corpus) -> None:
    engine = new_engine(corpus, None)
    with http_gateway(
        engine, corpus.stores.graph, http_allowed_hosts=("kg.example.org",)
    ) as server:
        assert server.http is not None
        url = server.http.url + "/api/v1/version"
        assert httpx.get(url, headers={"Host": "kg.example.org"}).status_code == 200
        assert httpx.get(url, headers={"Host": "KG.example.org:443"}).status_code == 200
        assert httpx.get(url).status_code == 403  # 127.0.0.1 is no longer listed
    with http_gateway(engine, corpus.stores.graph, auth_token="t0ken") as server:
        assert server.http is not None
        url = server.http.url + "/api/v1/version"
        rebound = {"Host": "attacker.example"}
        assert httpx.get(url, headers=rebound).status_code == 401  # a page has no token
        authorised = {**rebound, "Authorization": "Bearer t0ken"}
        assert httpx.get(url, headers=authorised).status_code == 200


def test_the_hosts_a_server_answers_to_follow_its_bind_address() -> None:
    assert served_hosts("127.0.0.1", ()) == {"localhost", "127.0.0.1", "::1"}
    assert served_hosts("::1", ()) == {"localhost", "127.0.0.1", "::1"}
    assert served_hosts("localhost", ()) == {"localhost", "127.0.0.1", "::1"}
    assert served_hosts("0.0.0.0", ()) is None  # reached by whatever name points at it
    assert served_hosts("0.0.0.0", ("[::1]", "Kg.Example")) == {"::1", "kg.example"}
    assert host_name("[::1]:9621") == "::1" and host_name("Example.org:80") == "example.org"


# -- auth and CORS ---------------------------------------------------------------


def test_auth_token_guards_the_api_but_not_health_ui_schema_or_docs(corpus: Corpus) -> None:
    engine = new_engine(corpus, None)
    with http_gateway(engine, corpus.stores.graph, auth_token=TOKEN) as server:
        assert server.http is not None
        url = server.http.url
        bare = httpx.get(f"{url}/api/v1/version")
        wrong = httpx.get(f"{url}/api/v1/version", headers={"authorization": "Bearer nope"})
        right = httpx.get(f"{url}/api/v1/version", headers={"authorization": f"bearer {TOKEN}"})
        chat = httpx.get(f"{url}/v1/models")
        open_paths = [
            httpx.get(f"{url}{path}").status_code
            for path in ("/healthz", "/openapi.json", "/docs", "/docs/swagger-ui-bundle.js")
        ]
        with httpx.stream("GET", f"{url}/api/v1/events", params={"access_token": TOKEN}) as events:
            events_status = events.status_code
        query_token_elsewhere = httpx.get(f"{url}/api/v1/version", params={"access_token": TOKEN})
    assert bare.status_code == 401 and bare.json()["error"]["code"] == "UNAUTHENTICATED"
    assert wrong.status_code == 401 and right.status_code == 200
    assert chat.status_code == 401
    assert open_paths == [200, 200, 200, 200]
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


def _schema_of(document: dict[str, Any], path: str, name: str) -> dict[str, Any]:
    """A request field's schema: a query parameter of `path`'s GET, else a property of the
    JSON body of its POST."""
    operation = document["paths"][path].get("get") or document["paths"][path]["post"]
    for parameter in operation.get("parameters", []):
        if parameter["name"] == name:
            return dict(parameter["schema"])
    body = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    schema = document["components"]["schemas"][body.rpartition("/")[2]]
    return dict(schema["properties"][name])


def test_openapi_states_the_limits_and_defaults_the_servicers_apply(http: httpx.Client) -> None:
    document = http.get("/openapi.json").json()
    schemas = document["components"]["schemas"]
    query = schemas["kgstream.v1.QueryRequest"]["properties"]
    defaults = QueryParams(question="")
    assert query["question"]["maxLength"] == MAX_QUESTION_CHARS
    assert query["mode"]["default"] == DEFAULT_MODE.value
    for name in ("top_k", "chunk_top_k"):
        assert (query[name]["minimum"], query[name]["maximum"]) == (1, MAX_TOP_K)
        assert query[name]["default"] == getattr(defaults, name)
    assert query["max_total_tokens"]["default"] == defaults.max_total_tokens
    assert query["include_references"]["default"] is True
    keywords = query["low_level_keywords"]
    assert keywords["maxItems"] == MAX_KEYWORDS
    assert keywords["items"] == {"type": "string", "maxLength": MAX_KEYWORD_CHARS}
    turn = schemas["kgstream.v1.ConversationTurn"]["properties"]
    assert turn["role"]["enum"] == list(HISTORY_ROLES)
    depth = _schema_of(document, "/api/v1/subgraph", "depth")
    assert (depth["minimum"], depth["maximum"]) == (0, MAX_SUBGRAPH_DEPTH)
    assert depth["default"] == DEFAULT_SUBGRAPH_DEPTH
    assert _schema_of(document, "/api/v1/documents", "page_size")["maximum"] == MAX_PAGE_SIZE
    status = _schema_of(document, "/api/v1/documents", "status")["enum"]
    assert {"pending", "processing", "processed", "failed"} <= set(status)
    limit = _schema_of(document, "/api/v1/entities", "limit")
    assert (limit["maximum"], limit["default"]) == (MAX_SEARCH_LIMIT, DEFAULT_SEARCH_LIMIT)
    assert _schema_of(document, "/api/v1/retrieve", "timeout_ms")["maximum"] == MAX_TIMEOUT_MS
    doc_id = document["paths"]["/api/v1/documents/{doc_id}"]["put"]["parameters"][0]
    assert doc_id["schema"]["maxLength"] == MAX_DOC_ID_BYTES
    embedding = schemas["EmbeddingRequest"]["properties"]
    assert embedding["input"]["oneOf"][1]["maxItems"] == MAX_EMBEDDING_INPUTS
    assert embedding["encoding_format"]["enum"] == ["float", "base64"]
    assert schemas["ChatCompletionRequest"]["properties"]["model"]["enum"][0] == "kgstream-mix"
    assert "/api/chat" in document["paths"] and "/v1/embeddings" in document["paths"]
    error = document["paths"]["/v1/embeddings"]["post"]["responses"]["default"]
    assert error["content"]["application/json"]["schema"]["$ref"].endswith("/OpenAIError")


# What else each route needs, beside the field tried.
_BESIDE = {
    "/api/v1/retrieve": {"question": "Atlas Project"},
    "/api/v1/subgraph": {"seed": "Carla Diaz"},
    "/api/v1/documents": {},
    "/api/v1/entities": {"q": "Carla Diaz"},
}


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/v1/retrieve", "top_k"),
        ("/api/v1/retrieve", "chunk_top_k"),
        ("/api/v1/subgraph", "depth"),
        ("/api/v1/subgraph", "max_nodes"),
        ("/api/v1/documents", "page_size"),
        ("/api/v1/entities", "limit"),
    ],
)
def test_the_servicers_refuse_just_outside_the_documented_range(
    http: httpx.Client, path: str, field: str
) -> None:
    schema = _schema_of(http.get("/openapi.json").json(), path, field)

    def ask(value: int) -> httpx.Response:
        given = {**_BESIDE[path], field: value}
        if path == "/api/v1/retrieve":
            return http.post(path, json=given)
        return http.get(path, params=given)

    for value in (schema["minimum"] - 1, schema["maximum"] + 1):
        reply = ask(value)
        assert reply.status_code == 400, (field, value, reply.text)
        assert reply.json()["error"]["field"] == field
    for value in (schema["minimum"], schema["maximum"]):
        assert ask(value).status_code == 200, (field, value)


def test_openapi_states_the_server_s_configured_limits(corpus: Corpus) -> None:
    options = EngineOptions(limits=RequestLimits(max_question_chars=123, max_keywords=7))
    engine = QueryEngine(
        corpus.stores, corpus.embedder, TOKENIZER, OfflineKeywordExtractor(), options=options
    )
    with http_gateway(engine, corpus.stores.graph) as server:
        assert server.http is not None
        document = httpx.get(f"{server.http.url}/openapi.json").json()
        too_long = httpx.post(f"{server.http.url}/api/v1/retrieve", json={"question": "x" * 124})
    query = document["components"]["schemas"]["kgstream.v1.QueryRequest"]["properties"]
    assert query["question"]["maxLength"] == 123 and query["high_level_keywords"]["maxItems"] == 7
    assert too_long.status_code == 400 and "123" in too_long.json()["error"]["message"]


def test_health_follows_the_stores(http: httpx.Client) -> None:
    assert http.get("/healthz").json() == {"status": "SERVING"}


def test_a_stream_refused_before_it_starts_is_an_http_error(http: httpx.Client) -> None:
    reply = http.post("/api/v1/query/stream", json={"question": "x" * 10_000})
    assert reply.status_code == 400
    assert reply.headers["content-type"].startswith("application/json")
    assert reply.json()["error"]["field"] == "question"
