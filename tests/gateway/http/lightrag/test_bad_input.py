"""Bad input to LightRAG's routes on a real `kgstream run`: refused with LightRAG's error
shapes, naming the field and the limit, as the servicers refuse it over gRPC; a binary
upload becomes a FAILED document with its reason; an upload's name never reaches outside
the watched folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.http.lightrag.conftest import RunningKgstream, settled

pytestmark = pytest.mark.services  # the package's fixture runs `kgstream run`

GRPC_MESSAGE_LIMIT = 16 * 1024 * 1024  # the gateway's body limit, as its gRPC message limit


def refused_field(reply: httpx.Response) -> tuple[list[Any], str]:
    """The location and message of a 422's only error (FastAPI's shape)."""
    assert reply.status_code == 422, reply.text
    (error,) = reply.json()["detail"]
    assert error["type"] == "value_error"
    return error["loc"], error["msg"]


def test_an_over_long_question_is_refused_with_the_limit(lightrag: httpx.Client) -> None:
    location, message = refused_field(lightrag.post("/query", json={"query": "why? " * 1000}))
    assert location == ["body", "query"]
    assert "5000 characters long; the limit is 4000" in message


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("query", 42),
        ("top_k", "5"),
        ("top_k", True),
        ("max_total_tokens", 0),
        ("chunk_top_k", 1001),
        ("stream", "yes"),
        ("hl_keywords", "RAG"),
        ("response_type", ""),
    ],
)
def test_a_field_of_the_wrong_type_or_range_is_named(
    lightrag: httpx.Client, field: str, value: Any
) -> None:
    request = {"query": "Who leads the Atlas Project?", field: value}
    location, _ = refused_field(lightrag.post("/query", json=request))
    assert location == ["body", field]


def test_every_bad_field_is_listed_at_once(lightrag: httpx.Client) -> None:
    reply = lightrag.post("/query", json={"query": "x", "top_k": "5", "mode": "fast"})
    assert reply.status_code == 422
    assert [e["loc"] for e in reply.json()["detail"]] == [["body", "mode"], ["body", "top_k"]]


def test_a_history_turn_is_checked_by_the_engine(lightrag: httpx.Client) -> None:
    history = [{"role": "user", "content": "hi"}, {"role": "wizard", "content": "hello"}]
    request = {"query": "And then?", "conversation_history": history}
    location, message = refused_field(lightrag.post("/query", json=request))
    assert location == ["body", "conversation_history", 1, "role"]
    assert "must be one of user, assistant" in message
    bad_turn = {"query": "And then?", "conversation_history": [{"role": "user"}]}
    assert refused_field(lightrag.post("/query", json=bad_turn))[0] == [
        "body",
        "conversation_history",
        0,
        "content",
    ]


def test_an_unknown_mode_lists_the_modes(lightrag: httpx.Client) -> None:
    location, message = refused_field(lightrag.post("/query", json={"query": "x", "mode": "fast"}))
    assert location == ["body", "mode"]
    assert "local, global, hybrid, naive, mix" in message


def test_bypass_is_refused_because_answers_come_from_the_index(lightrag: httpx.Client) -> None:
    for path in ("/query", "/query/stream"):
        location, message = refused_field(
            lightrag.post(path, json={"query": "x", "mode": "bypass"})
        )
        assert location == ["body", "mode"] and "without the index" in message


def test_query_data_refuses_with_its_failure_shape(lightrag: httpx.Client) -> None:
    reply = lightrag.post("/query/data", json={"query": "x" * 4001})
    assert reply.status_code == 400
    body = reply.json()
    assert body["status"] == "failure" and body["data"] == {} and body["metadata"] == {}
    assert body["message"].startswith("Validation error: body -> query: is 4001 characters")


def test_a_body_that_is_not_a_json_object_is_a_422(lightrag: httpx.Client) -> None:
    for body in (b"{not json", b"[1, 2]"):
        reply = lightrag.post("/query", content=body, headers={"content-type": "application/json"})
        assert reply.status_code == 422, reply.text


def test_a_huge_upload_is_refused_with_the_limit(
    lightrag: httpx.Client, lightrag_server: RunningKgstream
) -> None:
    huge = b"a" * (GRPC_MESSAGE_LIMIT + 1)
    reply = lightrag.post("/documents/upload", files={"file": ("huge.md", huge)})
    assert reply.status_code == 413
    assert f"limit of {GRPC_MESSAGE_LIMIT} bytes" in reply.json()["detail"]
    assert not (lightrag_server.folder / "huge.md").exists()
    text = lightrag.post("/documents/text", json={"text": "b" * (GRPC_MESSAGE_LIMIT + 1)})
    assert text.status_code == 413


def test_a_binary_upload_fails_alone_with_its_reason(lightrag: httpx.Client) -> None:
    before = lightrag.get("/documents/pipeline_status").json()["documents"]
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01" + bytes(range(256))
    reply = lightrag.post("/documents/upload", files={"file": ("pixel.png", png, "image/png")})
    assert reply.status_code == 200, reply.text
    (document,) = settled(lightrag, reply.json()["track_id"], 1)["documents"]
    assert document["status"] == "failed"
    assert document["error_msg"] == "content is binary, not text"
    assert document["metadata"]["failure_kind"] == "FAILURE_KIND_BINARY"
    after = lightrag.get("/documents/pipeline_status").json()["documents"]
    assert after["processed"] >= before["processed"]  # nothing else harmed
    assert after["failed"] == before["failed"] + 1
    assert lightrag.get("/graph/entity/exists", params={"name": "Carla Diaz"}).json()["exists"]


@pytest.mark.parametrize(
    "name",
    ["../escape.md", "notes/../../escape.md", "..", ".", "/etc/escape.md", "..\\escape.md"],
)
def test_an_upload_name_that_climbs_out_is_refused(
    lightrag: httpx.Client, lightrag_server: RunningKgstream, name: str
) -> None:
    reply = lightrag.post("/documents/upload", files={"file": (name, b"Mallory was here.")})
    assert reply.status_code == 400, reply.text
    assert "Unsafe filename" in reply.json()["detail"]
    assert not (lightrag_server.folder.parent / "escape.md").exists()
    assert not list(lightrag_server.folder.rglob("*escape*"))


@pytest.mark.parametrize("name", ["nul\x00.md", "tab\there.md", " spaced.md"])
def test_an_upload_name_with_nul_or_control_characters_is_refused(
    lightrag: httpx.Client, lightrag_server: RunningKgstream, name: str
) -> None:
    body, boundary = _multipart(name, b"Mallory was here.")
    reply = lightrag.post(
        "/documents/upload",
        content=body,
        headers={"content-type": f"multipart/form-data; boundary={boundary}"},
    )
    assert reply.status_code == 400, reply.text
    assert "Invalid filename" in reply.json()["detail"]
    assert not [p for p in lightrag_server.folder.rglob("*") if "Mallory" in _text(p)]


def test_a_hidden_or_temporary_name_is_refused_by_the_folder(lightrag: httpx.Client) -> None:
    for name in (".hidden.md", "draft.md.tmp"):
        reply = lightrag.post("/documents/upload", files={"file": (name, b"Hidden notes.")})
        location, message = refused_field(reply)
        assert location == ["body", "file"] and "does not index" in message


def test_a_text_source_that_climbs_out_is_refused(
    lightrag: httpx.Client, lightrag_server: RunningKgstream
) -> None:
    reply = lightrag.post(
        "/documents/text", json={"text": "Mallory was here.", "file_source": "../escape.md"}
    )
    location, message = refused_field(reply)
    assert location == ["body", "file_source"] and "without . or .. parts" in message
    nul = lightrag.post("/documents/text", json={"text": "x", "file_source": "a\x00.md"})
    assert refused_field(nul) == (["body", "file_source"], "must not contain the character U+0000")
    assert not (lightrag_server.folder.parent / "escape.md").exists()


def test_a_source_or_delete_through_a_linked_folder_is_refused_and_nothing_outside_changes(
    lightrag: httpx.Client, lightrag_server: RunningKgstream, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "victim.md").write_text("outside")
    link = lightrag_server.folder / "linked"
    link.symlink_to(elsewhere)
    try:
        text = {"text": "Mallory was here.", "file_source": "linked/escape.md"}
        location, message = refused_field(lightrag.post("/documents/text", json=text))
        assert location == ["body", "file_source"] and "'linked', a symbolic link" in message
        delete = {"doc_ids": ["linked/victim.md"]}
        reply = lightrag.request("DELETE", "/documents/delete_document", json=delete)
        location, message = refused_field(reply)
        assert location == ["body", "doc_ids", 0] and "'linked', a symbolic link" in message
    finally:
        link.unlink()
    assert [p.name for p in elsewhere.iterdir()] == ["victim.md"]
    assert (elsewhere / "victim.md").read_text() == "outside"


def test_a_third_bad_source_says_the_first_two_were_published(lightrag: httpx.Client) -> None:
    request = {
        "texts": ["Pia Lund rows on Lake Vanern.", "Quentin Roux bakes in Lyon.", "Mallory."],
        "file_sources": ["rowing.md", "baking.md", "../escape.md"],
    }
    location, message = refused_field(lightrag.post("/documents/texts", json=request))
    assert location == ["body", "file_sources", 2]
    assert "the 2 before it were published: track insert_" in message


@pytest.mark.parametrize(
    "body",
    [{}, {"doc_ids": []}, {"doc_ids": ["a.md", "a.md"]}, {"doc_ids": [""]}, {"doc_ids": "a.md"}],
)
def test_a_bad_delete_request_deletes_nothing(lightrag: httpx.Client, body: dict[str, Any]) -> None:
    reply = lightrag.request("DELETE", "/documents/delete_document", json=body)
    assert reply.status_code == 422, reply.text
    assert reply.json()["detail"][0]["loc"][:2] == ["body", "doc_ids"]


def test_a_bad_page_request_is_a_422(lightrag: httpx.Client) -> None:
    for request, field in (
        ({"page_size": 5}, "page_size"),
        ({"sort_field": "size"}, "sort_field"),
        ({"status_filters": ["done"]}, "status_filters"),
    ):
        assert refused_field(lightrag.post("/documents/paginated", json=request))[0][:2] == [
            "body",
            field,
        ]


def test_bad_graph_parameters_name_the_query_parameter(lightrag: httpx.Client) -> None:
    location, message = refused_field(
        lightrag.get("/graphs", params={"label": "Carla Diaz", "max_depth": 20})
    )
    assert location == ["query", "max_depth"] and message == "must be between 0 and 10; got 20"
    assert refused_field(lightrag.get("/graphs"))[0] == ["query", "label"]
    assert refused_field(lightrag.get("/graphs", params={"label": "x", "max_nodes": "many"}))[
        0
    ] == ["query", "max_nodes"]
    assert refused_field(lightrag.get("/graph/entity/exists"))[0] == ["query", "name"]
    whole = lightrag.get("/graphs", params={"label": "*", "max_nodes": 10_001})
    assert refused_field(whole) == (
        ["query", "max_nodes"],
        "must be between 1 and 10000; got 10001",
    )
    empty = lightrag.post("/documents/text", json={"text": "  \n "})
    assert refused_field(empty) == (["body", "text"], "must not be empty or whitespace only")


def _multipart(file_name: str, content: bytes) -> tuple[bytes, str]:
    """A multipart body whose file name is sent as it is (a client library would refuse or
    escape a control character)."""
    boundary = "kgstream-test-boundary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
        f'filename="{file_name}"\r\nContent-Type: text/plain\r\n\r\n'
    ).encode()
    return head + content + f"\r\n--{boundary}--\r\n".encode(), boundary


def _text(path: Any) -> str:
    return path.read_text(errors="replace") if path.is_file() else ""
