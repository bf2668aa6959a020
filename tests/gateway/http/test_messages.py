"""The HTTP API's JSON of the protobuf messages: every field, numbers for 64-bit integers,
enum names out; short enum forms in, and errors that name the field."""

import pytest

from gateway.http.messages import BadJson, from_json, to_json
from kgstream_protos.v1 import query_pb2 as pb


def test_replies_show_every_field_with_int64_as_numbers_and_enum_names() -> None:
    reply = pb.RetrievalResult(
        mode=pb.QUERY_MODE_LOCAL,
        chunks=[pb.RetrievedChunk(chunk_id="c1", score=0.5)],
        index_version=2**40,
    )
    body = to_json(reply)
    assert body["mode"] == "QUERY_MODE_LOCAL"
    assert body["index_version"] == 2**40 and isinstance(body["index_version"], int)
    assert body["entities"] == [] and body["references"] == []
    assert body["keywords"] == {"high_level": [], "low_level": []}
    assert body["chunks"] == [
        {"chunk_id": "c1", "doc_id": "", "file_path": "", "text": "", "score": 0.5}
    ]


def test_a_oneof_shows_only_the_member_set() -> None:
    event = pb.QueryEvent(delta=pb.AnswerDelta(text="hi"))
    assert to_json(event) == {"delta": {"text": "hi"}}


def test_requests_take_short_enum_forms_in_nested_messages_too() -> None:
    request = from_json({"mode": "global", "top_k": 7}, pb.QueryRequest)
    assert request.mode == pb.QUERY_MODE_GLOBAL and request.top_k == 7
    assert request.HasField("top_k") and not request.HasField("chunk_top_k")
    listing = from_json({"status": "failed", "page_size": "5"}, pb.ListDocumentsRequest)
    assert listing.status == pb.DOCUMENT_STATUS_FAILED and listing.page_size == 5


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"nope": 1}, "nope"),
        ({"top_k": "x"}, "top_k"),
        ({"mode": "unspecified"}, "mode"),
        ({"history": [{"role": "user", "content": 3}]}, "history[0].content"),
        ({"document_filter": {"doc_ids": "a"}}, "document_filter.doc_ids"),
    ],
)
def test_bad_requests_name_the_field(body: dict, field: str) -> None:
    with pytest.raises(BadJson) as raised:
        from_json(body, pb.QueryRequest)
    assert raised.value.field == field
