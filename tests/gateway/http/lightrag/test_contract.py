"""LightRAG's server API on a real `kgstream run`, route by route, against LightRAG 1.5.7's
own request and response examples (`examples.py`): each documented request is answered,
and every key of LightRAG's response is there with its JSON type (`same_shape`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.http.lightrag import examples as ex
from tests.gateway.http.lightrag.conftest import RunningKgstream, settled
from tests.support.wait import wait_until

pytestmark = pytest.mark.services  # the package's fixture runs `kgstream run`


def shaped(reply: httpx.Response, example: Any, status: int = 200) -> Any:
    assert reply.status_code == status, reply.text
    body = reply.json()
    assert ex.same_shape(body, example) == [], body
    return body


def without_content(example: dict[str, Any]) -> dict[str, Any]:
    references = [{k: v for k, v in r.items() if k != "content"} for r in example["references"]]
    return {**example, "references": references}


def ndjson_lines(reply: httpx.Response) -> list[dict[str, Any]]:
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in reply.text.splitlines() if line.strip()]


# -- /query, /query/stream, /query/data ------------------------------------------------


@pytest.mark.parametrize("name", list(ex.QUERY_REQUESTS))
def test_query_answers_each_documented_request(lightrag: httpx.Client, name: str) -> None:
    body = shaped(
        lightrag.post("/query", json=ex.QUERY_REQUESTS[name]),
        without_content(ex.QUERY_RESPONSE_WITH_CHUNK_CONTENT),
    )
    assert body["references"], body  # the corpus always offers some context
    assert body["llm_generated"] is False  # no LLM: the extractive answer


def test_query_finds_the_entity_its_keywords_name(lightrag: httpx.Client) -> None:
    reply = lightrag.post(
        "/query",
        json={
            "query": "Who leads the Atlas Project?",
            "mode": "local",
            "ll_keywords": ["Carla Diaz"],
        },
    )
    body = shaped(reply, without_content(ex.QUERY_RESPONSE_WITH_CHUNK_CONTENT))
    assert "projects/atlas.md" in [r["file_path"] for r in body["references"]]
    assert "Carla Diaz" in body["response"]


def test_query_with_chunk_content_lists_each_sources_chunks(lightrag: httpx.Client) -> None:
    request = {**ex.QUERY_REQUESTS["basic"], "include_chunk_content": True}
    body = shaped(lightrag.post("/query", json=request), ex.QUERY_RESPONSE_WITH_CHUNK_CONTENT)
    assert all(isinstance(text, str) for r in body["references"] for text in r["content"])


def test_query_without_references_answers_null_references(lightrag: httpx.Client) -> None:
    request = {**ex.QUERY_REQUESTS["basic"], "include_references": False}
    body = shaped(lightrag.post("/query", json=request), ex.QUERY_RESPONSE_WITHOUT_REFERENCES)
    assert body["references"] is None


@pytest.mark.parametrize("flag", ["only_need_context", "only_need_prompt"])
def test_only_need_context_or_prompt_returns_what_the_llm_would_see(
    lightrag: httpx.Client, flag: str
) -> None:
    request = {"query": "Who leads the Atlas Project?", "ll_keywords": ["Carla Diaz"], flag: True}
    body = shaped(
        lightrag.post("/query", json=request), without_content(ex.QUERY_RESPONSE_WITH_CHUNK_CONTENT)
    )
    assert body["llm_generated"] is False
    assert "Knowledge Graph Data (Entity)" in body["response"]
    assert '"entity": "Carla Diaz"' in body["response"]
    prompt = flag == "only_need_prompt"
    assert ("---User Query---\n\nWho leads the Atlas Project?" in body["response"]) is prompt


def test_query_stream_sends_references_then_response_chunks(lightrag: httpx.Client) -> None:
    lines = ndjson_lines(lightrag.post("/query/stream", json=ex.STREAM_REQUESTS["streaming"]))
    assert ex.same_shape(lines[0], ex.STREAM_REFERENCES_LINE) == [], lines[0]
    assert len(lines) > 1
    for line in lines[1:]:
        assert ex.same_shape(line, ex.STREAM_RESPONSE_LINE) == [], line
        assert set(line) == {"response"}


def test_query_stream_without_streaming_sends_one_complete_line(lightrag: httpx.Client) -> None:
    lines = ndjson_lines(lightrag.post("/query/stream", json=ex.STREAM_REQUESTS["complete"]))
    assert len(lines) == 1
    assert ex.same_shape(lines[0], ex.STREAM_COMPLETE_LINE) == [], lines[0]


def test_query_stream_with_progress_ends_with_the_response_time(lightrag: httpx.Client) -> None:
    lines = ndjson_lines(lightrag.post("/query/stream", json=ex.STREAM_REQUESTS["progress"]))
    assert ex.same_shape(lines[-1], ex.STREAM_TIME_LINE) == [], lines[-1]
    assert any("response" in line for line in lines[:-1])


@pytest.mark.parametrize("name", list(ex.DATA_REQUESTS))
def test_query_data_answers_each_documented_request(lightrag: httpx.Client, name: str) -> None:
    body = shaped(lightrag.post("/query/data", json=ex.DATA_REQUESTS[name]), ex.QUERY_DATA_RESPONSE)
    assert body["metadata"]["query_mode"] == ex.DATA_REQUESTS[name]["mode"]


def test_query_data_numbers_every_item_by_its_reference(lightrag: httpx.Client) -> None:
    request = {
        "query": "Who leads the Atlas Project?",
        "mode": "local",
        "ll_keywords": ["Carla Diaz"],
    }
    data = shaped(lightrag.post("/query/data", json=request), ex.QUERY_DATA_RESPONSE)["data"]
    assert "Carla Diaz" in [e["entity_name"] for e in data["entities"]]
    numbers = {r["reference_id"]: r["file_path"] for r in data["references"]}
    for chunk in data["chunks"]:
        assert numbers[chunk["reference_id"]] == chunk["file_path"]
    assert all(e["reference_id"] in numbers for e in data["entities"])


def test_query_data_refuses_in_its_own_failure_shape(lightrag: httpx.Client) -> None:
    body = shaped(lightrag.post("/query/data", json={"query": 42}), ex.QUERY_DATA_FAILURE, 400)
    assert body["message"].startswith("Validation error: body -> query: must be a string")


# -- /documents ------------------------------------------------------------------------


def test_inserted_text_is_tracked_until_processed_then_deleted(
    lightrag: httpx.Client, lightrag_server: RunningKgstream
) -> None:
    inserted = shaped(
        lightrag.post("/documents/text", json=ex.INSERT_TEXT_REQUEST), ex.INSERT_RESPONSE
    )
    assert inserted["track_id"].startswith("insert_")
    doc_id = ex.INSERT_TEXT_REQUEST["file_source"]
    assert (lightrag_server.folder / doc_id).read_text() == ex.INSERT_TEXT_REQUEST["text"]
    track = settled(lightrag, inserted["track_id"], 1)
    assert ex.same_shape(track, ex.TRACK_STATUS_RESPONSE) == [], track
    assert track["documents"][0]["id"] == doc_id
    assert track["documents"][0]["status"] == "processed"
    assert track["status_summary"] == {"processed": 1}

    request = {**ex.DELETE_DOCUMENT_REQUEST, "doc_ids": [doc_id]}
    deleted = shaped(
        lightrag.request("DELETE", "/documents/delete_document", json=request),
        ex.DELETE_DOCUMENT_RESPONSE,
    )
    assert deleted["doc_id"] == doc_id
    assert not (lightrag_server.folder / doc_id).exists()
    wait_until(
        lambda: (
            doc_id
            not in [
                d["id"] for d in lightrag.get("/documents").json()["statuses"].get("processed", [])
            ]
        ),
        60,
        "the deletion to be indexed",
    )


def test_texts_need_one_source_each_or_none(lightrag: httpx.Client) -> None:
    # LightRAG 1.5.7 answers its own example (two texts, one source) with 400 too
    refused = lightrag.post("/documents/texts", json=ex.INSERT_TEXTS_REQUEST)
    assert refused.status_code == 400, refused.text
    assert "file_source" in refused.json()["detail"]
    texts = ["Nadia Petrova sails from Varna.", "Omar Haddad paints in Tangier."]
    inserted = shaped(lightrag.post("/documents/texts", json={"texts": texts}), ex.INSERT_RESPONSE)
    track = settled(lightrag, inserted["track_id"], 2)
    # without sources, LightRAG's content ids
    assert [d["id"] for d in track["documents"]] == [
        "doc-" + hashlib.md5(text.encode()).hexdigest() for text in texts
    ]
    assert [d["content_summary"] for d in track["documents"]] == texts


def test_an_uploaded_file_lands_in_the_watched_folder(
    lightrag: httpx.Client, lightrag_server: RunningKgstream
) -> None:
    content = b"Ingrid Holm restores violins in Bergen."
    reply = lightrag.post(
        "/documents/upload", files={"file": ("violins.md", content, "text/markdown")}
    )
    uploaded = shaped(reply, ex.INSERT_RESPONSE)
    assert (lightrag_server.folder / "violins.md").read_bytes() == content
    track = settled(lightrag, uploaded["track_id"], 1)
    assert track["documents"][0]["status"] == "processed"
    assert lightrag.get("/graph/entity/exists", params={"name": "Ingrid Holm"}).json() == {
        "exists": True
    }


def test_scan_has_nothing_to_do(lightrag: httpx.Client) -> None:
    before = lightrag.get("/documents/pipeline_status").json()["documents"]
    shaped(lightrag.post("/documents/scan"), ex.SCAN_RESPONSE)
    assert lightrag.get("/documents/pipeline_status").json()["documents"] == before


def test_documents_are_listed_by_status(lightrag: httpx.Client) -> None:
    body = shaped(lightrag.get("/documents"), ex.DOCS_STATUSES_RESPONSE)
    assert "projects/atlas.md" in [d["id"] for d in body["statuses"]["processed"]]


def test_the_documented_page_request_is_answered(lightrag: httpx.Client) -> None:
    body = shaped(
        lightrag.post("/documents/paginated", json=ex.DOCUMENTS_REQUEST), ex.PAGINATED_RESPONSE
    )
    assert body["documents"] == []  # kgstream has no parsing, analyzing or preprocessed stage
    assert body["status_counts"]["all"] == sum(
        v for k, v in body["status_counts"].items() if k != "all"
    )


def test_pages_are_filtered_sorted_and_counted(lightrag: httpx.Client) -> None:
    request = {
        "status_filter": "processed",
        "page_size": 10,
        "sort_field": "id",
        "sort_direction": "asc",
    }
    body = shaped(lightrag.post("/documents/paginated", json=request), ex.PAGINATED_RESPONSE)
    ids = [d["id"] for d in body["documents"]]
    assert ids == sorted(ids) and {"companies/helios.md", "projects/atlas.md"} <= set(ids)
    assert {d["status"] for d in body["documents"]} == {"processed"}
    pages = body["pagination"]
    assert pages["total_count"] == body["status_counts"]["processed"]
    assert pages["page"] == 1 and pages["has_prev"] is False


def test_status_counts_count_every_lightrag_status(lightrag: httpx.Client) -> None:
    counts = shaped(lightrag.get("/documents/status_counts"), ex.STATUS_COUNTS_RESPONSE)
    assert counts["status_counts"]["parsing"] == 0 and counts["status_counts"]["processed"] >= 4


def test_pipeline_status_says_whether_the_indexer_has_work(lightrag: httpx.Client) -> None:
    body = shaped(lightrag.get("/documents/pipeline_status"), ex.PIPELINE_STATUS_RESPONSE)
    assert body["busy"] == (body["docs"] > 0)


def test_reprocess_failed_asks_the_indexer_to_retry(lightrag: httpx.Client) -> None:
    shaped(lightrag.post("/documents/reprocess_failed"), ex.REPROCESS_RESPONSE)


def test_an_unknown_track_has_no_documents(lightrag: httpx.Client) -> None:
    body = shaped(
        lightrag.get("/documents/track_status/insert_20990101_000000_nothing"),
        {**ex.TRACK_STATUS_RESPONSE, "status_summary": {}},
    )
    assert body["documents"] == [] and body["total_count"] == 0


def test_clearing_without_the_confirmation_deletes_nothing(
    lightrag: httpx.Client, lightrag_server: RunningKgstream
) -> None:
    reply = lightrag.delete("/documents")
    assert reply.status_code == 400
    assert "confirm=delete-all-documents" in reply.json()["detail"]
    assert lightrag.delete("/documents", params={"confirm": "yes"}).status_code == 400
    assert (lightrag_server.folder / "projects" / "atlas.md").exists()


# -- /graphs, /graph/... ---------------------------------------------------------------


def test_graphs_answers_an_entitys_neighbourhood(lightrag: httpx.Client) -> None:
    reply = lightrag.get(
        "/graphs", params={"label": "Carla Diaz", "max_depth": 1, "max_nodes": 1000}
    )
    graph = shaped(reply, ex.KNOWLEDGE_GRAPH)
    names = [node["id"] for node in graph["nodes"]]
    assert names[0] == "Carla Diaz" and "Atlas Project" in names
    assert all(e["source"] in names and e["target"] in names for e in graph["edges"])
    assert all(e["id"] == f"{e['source']}-{e['target']}" for e in graph["edges"])


def test_graphs_of_star_keeps_the_best_connected_entities(lightrag: httpx.Client) -> None:
    graph = shaped(
        lightrag.get("/graphs", params={"label": "*", "max_nodes": 3}), ex.KNOWLEDGE_GRAPH
    )
    assert len(graph["nodes"]) == 3 and graph["is_truncated"] is True


def test_graphs_of_an_unknown_label_is_empty(lightrag: httpx.Client) -> None:
    graph = shaped(lightrag.get("/graphs", params={"label": "Nobody Atall"}), ex.KNOWLEDGE_GRAPH)
    assert graph == {"nodes": [], "edges": [], "is_truncated": False}


def test_label_list_names_every_entity(lightrag: httpx.Client) -> None:
    reply = lightrag.get("/graph/label/list")
    assert reply.status_code == 200
    labels = reply.json()
    assert labels == sorted(labels) and {"Carla Diaz", "Northwind Labs"} <= set(labels)


def test_entity_exists(lightrag: httpx.Client) -> None:
    shaped(lightrag.get("/graph/entity/exists", params={"name": "Carla Diaz"}), ex.ENTITY_EXISTS)
    assert lightrag.get("/graph/entity/exists", params={"name": "Nobody Atall"}).json() == {
        "exists": False
    }


@pytest.mark.parametrize(("method", "path"), list(ex.GRAPH_EDITS))
def test_editing_the_graph_by_hand_is_refused(
    lightrag: httpx.Client, method: str, path: str
) -> None:
    before = lightrag.get("/graphs", params={"label": "Carla Diaz"}).json()
    reply = lightrag.request(method, path, json=ex.GRAPH_EDITS[(method, path)])
    assert reply.status_code == 400
    assert "derives its knowledge graph from the documents" in reply.json()["detail"]
    assert lightrag.get("/graphs", params={"label": "Carla Diaz"}).json() == before


# -- /health ---------------------------------------------------------------------------


def test_health(lightrag: httpx.Client) -> None:
    body = shaped(lightrag.get("/health"), ex.HEALTH_RESPONSE)
    assert body["status"] == "healthy" and body["auth_mode"] == "disabled"


def test_nothing_was_written_outside_the_watched_folder(lightrag_server: RunningKgstream) -> None:
    outside = sorted(p.name for p in Path(lightrag_server.folder).parent.iterdir())
    assert outside == ["data", "docs"]
