import json

import pytest

from connectors.kafka.codec import DecodedEvent, MalformedEvent, decode_message, encode_change
from dataflow.core.documents import DocumentDelete, DocumentUpsert
from protos.kgstream.v1.events_pb2 import DocumentEvent


def decoded(key, value) -> DecodedEvent:
    result = decode_message(key, value)
    assert isinstance(result, DecodedEvent), result
    return result


def malformed(key, value) -> str:
    result = decode_message(key, value)
    assert isinstance(result, MalformedEvent), result
    return result.reason


def test_protobuf_round_trip_for_upsert_and_delete():
    upsert = DocumentUpsert("notes/a.md", b"Ada met Bob.", "notes/a.md")
    assert decoded(*encode_change(upsert, 1234)) == DecodedEvent(upsert, 1234)
    assert decoded(*encode_change(DocumentDelete("notes/a.md"))).change == DocumentDelete(
        "notes/a.md"
    )


def test_text_content_is_sent_as_utf8_bytes():
    key, value = encode_change(DocumentUpsert("a", "Zürich", "a"))
    assert decoded(key, value).change == DocumentUpsert("a", "Zürich".encode(), "a")


def test_tombstone_deletes_the_keyed_document():
    assert decoded(b"doc-7", None).change == DocumentDelete("doc-7")


def test_json_value_is_accepted_and_file_path_defaults_to_doc_id():
    value = json.dumps({"doc_id": "a", "op": "upsert", "content": "text"}).encode()
    assert decoded(b"a", value).change == DocumentUpsert("a", b"text", "a")
    assert decoded(None, value).change.doc_id == "a"


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (b"a", b"{not json", "does not parse"),
        (b"a", b"[1, 2]", "must be an object"),
        (b"a", json.dumps({"op": "UPSERT", "content": 5}).encode(), "'content' must be a string"),
        (b"a", json.dumps({"op": "MERGE"}).encode(), "op must be UPSERT or DELETE"),
        (
            b"a",
            json.dumps({"doc_id": "b", "op": "DELETE"}).encode(),
            "differs from the message key",
        ),
        (None, json.dumps({"op": "DELETE"}).encode(), "no doc id"),
        (None, None, "tombstone without a key"),
        (b"\xff", None, "key is not UTF-8"),
        (b"a", b"\xff\xff\xff\xff\xff", "neither JSON nor"),
        (b"a", DocumentEvent(doc_id="a").SerializeToString(), "op must be UPSERT or DELETE"),
    ],
)
def test_malformed_messages_become_a_reason_not_an_exception(key, value, reason):
    assert reason in malformed(key, value)
