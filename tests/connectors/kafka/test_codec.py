import json

import pytest
from google.protobuf import json_format

from connectors.kafka.codec import DecodedEvent, MalformedEvent, decode_message, encode_change
from dataflow.core.documents import MAX_DOC_ID_BYTES, DocumentDelete, DocumentUpsert
from kgstream_protos.v1.events_pb2 import DocumentEvent


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
        (
            b"a",
            json.dumps({"doc_id": "a", "op": "UPSERT", "content": 5}).encode(),
            "'content' must be a string",
        ),
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


def test_canonical_proto3_json_is_decoded_with_protobufs_own_mapping():
    # What protobuf's JSON printers write: camelCase names, content as base64 bytes (here not
    # even UTF-8: the document then fails alone, as a binary protobuf value would), int64 as a
    # string.
    event = DocumentEvent(
        doc_id="wiki/ü.md",
        op=DocumentEvent.UPSERT,
        content=b"caf\xe9 \x00",
        file_path="wiki/ü.md",
        event_time_ms=2**40,
    )
    value = json_format.MessageToJson(event).encode()
    assert b'"docId"' in value and b'"eventTimeMs": "1099511627776"' in value
    assert decoded("wiki/ü.md".encode(), value) == DecodedEvent(
        DocumentUpsert("wiki/ü.md", b"caf\xe9 \x00", "wiki/ü.md"), 2**40
    )
    delete = json_format.MessageToJson(DocumentEvent(doc_id="a", op=DocumentEvent.DELETE))
    assert decoded(b"a", delete.encode()).change == DocumentDelete("a")


def test_the_plain_json_form_keeps_its_text_content():
    value = json.dumps({"doc_id": "a", "op": "UPSERT", "content": "aGVsbG8="}).encode()
    assert decoded(b"a", value).change == DocumentUpsert("a", b"aGVsbG8=", "a")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (
            {"op": "UPSERT", "content": "aGVsbG8="},
            "no doc id field, so its form is ambiguous (text or base64?); use the plain form",
        ),
        ({"doc_id": "a", "docId": "a", "op": "DELETE"}, "mixes plain names ['doc_id']"),
        ({"docId": "a", "op": "UPSERT", "content": "abcde"}, "Invalid base64"),
        ({"docId": "a", "op": "UPSERT", "colour": "red"}, "does not map onto DocumentEvent"),
    ],
)
def test_json_whose_form_cannot_be_told_or_trusted_is_a_dead_letter_saying_why(value, reason):
    assert reason in malformed(b"a", json.dumps(value).encode())


def test_an_empty_value_is_not_a_tombstone_and_the_reason_says_so():
    assert "send a tombstone (a null value, not an empty one)" in malformed(b"a", b"")


@pytest.mark.parametrize("value", [b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 50_000 + b"1}"])
def test_json_nested_too_deeply_is_a_reason_not_a_recursion_error(value):
    assert "nested too deeply" in malformed(b"a", value)


def test_a_doc_id_over_the_limit_is_a_dead_letter_and_one_at_it_is_indexed():
    at_limit = "d" * MAX_DOC_ID_BYTES
    assert decoded(at_limit.encode(), None).change == DocumentDelete(at_limit)
    reason = malformed((at_limit + "d").encode(), None)
    assert (
        reason
        == "doc_id is 1025 bytes, over the limit of 1024 bytes (the message key or doc_id field)"
    )
    plain = json.dumps({"doc_id": "k" * 200_000, "op": "DELETE"}).encode()
    assert "doc_id is 200000 bytes" in malformed(None, plain)
