"""Fuzzing the Kafka event decoder: `decode_message` never raises, whatever the bytes, and
every event it accepts can be indexed (a usable doc id, an event time that fits int64)."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from connectors.kafka.codec import DecodedEvent, MalformedEvent, decode_message, encode_change
from dataflow.core.documents import MAX_DOC_ID_BYTES, DocumentDelete, DocumentUpsert

INT64 = range(-(2**63), 2**63)


def assert_usable(result: DecodedEvent | MalformedEvent) -> None:
    assert isinstance(result, DecodedEvent | MalformedEvent)
    if isinstance(result, MalformedEvent):
        assert result.reason
        return
    change = result.change
    assert change.doc_id
    assert len(change.doc_id.encode("utf-8")) <= MAX_DOC_ID_BYTES  # strict: no lone surrogate
    if isinstance(change, DocumentUpsert):
        change.file_path.encode("utf-8")
    assert result.event_time_ms in INT64
    assert result.event_time_ms / 1000 is not None  # the source turns it into seconds


KEYS = st.one_of(st.none(), st.binary(max_size=64), st.text(max_size=64).map(str.encode))


@settings(max_examples=300, deadline=None)
@given(KEYS, st.one_of(st.none(), st.binary(max_size=512)))
def test_arbitrary_bytes_never_raise(key: bytes | None, value: bytes | None) -> None:
    assert_usable(decode_message(key, value))


JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**300, max_value=10**310),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.sampled_from(["UPSERT", "DELETE", "upsert", "\ud800", "a\udfffb", "", "x" * 1100]),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
FIELDS = [
    "doc_id",
    "op",
    "content",
    "file_path",
    "event_time_ms",
    "docId",
    "filePath",
    "eventTimeMs",
]


EVENTS = st.one_of(
    st.dictionaries(st.sampled_from(FIELDS), JSON_VALUES, max_size=6),
    st.fixed_dictionaries(
        {"op": st.sampled_from(["UPSERT", "DELETE"])},
        optional=dict.fromkeys(["doc_id", "content", "file_path", "event_time_ms"], JSON_VALUES),
    ),
)


@settings(max_examples=400, deadline=None)
@given(KEYS, EVENTS)
@example(None, {"doc_id": "\ud800", "op": "DELETE"})
@example(b"a", {"doc_id": "a", "op": "UPSERT", "content": "x", "file_path": "b\udfff"})
@example(b"a", {"doc_id": "a", "op": "UPSERT", "content": "x", "event_time_ms": 10**300})
@example(b"a", {"doc_id": "a", "op": "UPSERT", "content": "x", "event_time_ms": True})
@example(b"1", {"doc_id": 1, "op": "UPSERT", "content": "x"})
def test_json_events_with_any_field_values_never_raise(key: bytes | None, event: dict) -> None:
    value = json.dumps(event).encode()
    assert_usable(decode_message(key, value))


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 100_000), st.sampled_from([b"[", b'{"a":', b'{"doc_id":', b'{"docId": [']))
def test_deep_json_never_raises(depth: int, opener: bytes) -> None:
    assert isinstance(decode_message(b"doc", opener * depth), MalformedEvent)


@settings(max_examples=30, deadline=None)
@given(st.integers(MAX_DOC_ID_BYTES - 2, 400_000), st.sampled_from([b"k", "\u00e9".encode()]))
def test_huge_keys_are_refused_past_the_doc_id_limit(size: int, unit: bytes) -> None:
    key = unit * (size // len(unit))
    for value in (None, b'{"doc_id": "", "op": "UPSERT", "content": "text"}'):
        result = decode_message(key, value)
        assert_usable(result)
        assert isinstance(result, MalformedEvent) == (len(key) > MAX_DOC_ID_BYTES)


@settings(max_examples=30, deadline=None)
@given(st.integers(4301, 20_000))
def test_numbers_too_long_to_read_are_a_reason(digits: int) -> None:
    value = (
        b'{"doc_id": "a", "op": "UPSERT", "content": "x", "event_time_ms": ' + b"9" * digits + b"}"
    )
    assert isinstance(decode_message(b"a", value), MalformedEvent)


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=1, max_size=40), st.binary(max_size=100), st.integers(0, 2**63 - 1))
def test_encoded_events_decode_back(doc_id: str, content: bytes, event_time_ms: int) -> None:
    for change in (DocumentUpsert(doc_id, content, doc_id), DocumentDelete(doc_id)):
        key, value = encode_change(change, event_time_ms)
        decoded = decode_message(key, value)
        if doc_id.strip() and "\ud800" not in doc_id:
            assert decoded == DecodedEvent(change, event_time_ms), decoded


@pytest.mark.parametrize("length", [9, 10, 13, 32])
@pytest.mark.parametrize("opening", ["[", "{"])
def test_a_protobuf_event_whose_bytes_look_like_json_decodes(opening: str, length: int) -> None:
    # Field 1's tag is 0x0A (a newline) and these lengths are whitespace bytes, so the value
    # begins, after whitespace, with the doc id's "[" or "{" (found by the property above).
    doc_id = opening + "x" * (length - 1)
    for change in (DocumentUpsert(doc_id, b"", doc_id), DocumentDelete(doc_id)):
        key, value = encode_change(change, 0)
        assert value.lstrip().startswith(opening.encode())
        assert decode_message(key, value) == DecodedEvent(change, 0)
