"""Kafka message <-> document change.

The value is a `kgstream.v1.DocumentEvent` (protobuf, see protos/), or JSON in one of two
forms, told apart by their field names:

- the plain form, for producers without protobuf: ``{"doc_id": "...", "op": "UPSERT"|"DELETE",
  "content": "text", "file_path": "...", "event_time_ms": 123}`` (content is the text itself);
- canonical proto3 JSON, what protobuf's JSON printers write: ``{"docId": "...", "op":
  "UPSERT", "content": "<base64>", "filePath": "...", "eventTimeMs": "123"}``, decoded with
  protobuf's own JSON mapping (``json_format``).

A JSON value with names of both forms, or with content but no doc id field of either form (so
nothing says whether the content is text or base64), is ambiguous. The key is the doc id; a
null value (tombstone) deletes the document. Anything else is a `MalformedEvent` with a reason,
for the dead-letter path.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from google.protobuf import json_format
from google.protobuf.message import DecodeError

from dataflow.core.documents import (
    MAX_DOC_ID_BYTES,
    DocumentChange,
    DocumentDelete,
    DocumentUpsert,
    doc_id_problem,
)
from kgstream_protos.v1.events_pb2 import DocumentEvent


@dataclass(frozen=True)
class MalformedEvent:
    reason: str


@dataclass(frozen=True)
class DecodedEvent:
    change: DocumentChange
    event_time_ms: int = 0


def encode_change(change: DocumentChange, event_time_ms: int = 0) -> tuple[bytes, bytes]:
    """The (key, value) of the Kafka message for a change (protobuf value)."""
    if isinstance(change, DocumentDelete):
        event = DocumentEvent(
            doc_id=change.doc_id, op=DocumentEvent.DELETE, event_time_ms=event_time_ms
        )
    else:
        content = (
            change.content.encode("utf-8") if isinstance(change.content, str) else change.content
        )
        event = DocumentEvent(
            doc_id=change.doc_id,
            op=DocumentEvent.UPSERT,
            content=content,
            file_path=change.file_path,
            event_time_ms=event_time_ms,
        )
    return change.doc_id.encode("utf-8"), event.SerializeToString()


def decode_message(key: bytes | None, value: bytes | None) -> DecodedEvent | MalformedEvent:
    """Decode one Kafka message; never raises."""
    try:
        key_id = key.decode("utf-8") if key is not None else ""
    except UnicodeDecodeError:
        return MalformedEvent("message key is not UTF-8; the key must be the doc id")
    if value is None:
        if not key_id:
            return MalformedEvent("tombstone without a key: cannot tell which document to delete")
        return _too_long(key_id) or DecodedEvent(DocumentDelete(key_id))
    if not value:
        return MalformedEvent(
            "value is empty (0 bytes), which is neither JSON nor a DocumentEvent; to delete the "
            "keyed document send a tombstone (a null value, not an empty one) or op DELETE"
        )
    stripped = value.lstrip()
    if stripped.startswith((b"{", b"[")):
        return _decode_json(key_id, value)
    return _decode_protobuf(key_id, value)


_INT64 = range(-(2**63), 2**63)
_PLAIN_NAMES = frozenset({"doc_id", "file_path", "event_time_ms"})
_PROTO3_NAMES = frozenset({"docId", "filePath", "eventTimeMs"})
_FORMS_HINT = (
    'use the plain form {"doc_id": ..., "content": "text"} or proto3 JSON '
    '{"docId": ..., "content": "<base64>"}'
)


def _decode_protobuf(key_id: str, value: bytes) -> DecodedEvent | MalformedEvent:
    event = DocumentEvent()
    try:
        event.ParseFromString(value)
    except DecodeError as error:
        return MalformedEvent(f"value is neither JSON nor a kgstream.v1.DocumentEvent: {error}")
    op = DocumentEvent.Op.Name(event.op) if event.op in DocumentEvent.Op.values() else str(event.op)
    return _build(key_id, event.doc_id, op, event.content, event.file_path, event.event_time_ms)


def _protobuf_or(
    key_id: str, value: bytes, malformed: MalformedEvent
) -> DecodedEvent | MalformedEvent:
    """`value` as a DocumentEvent when it is one, else `malformed`. An event's bytes can look
    like JSON: its first field's tag is 0x0A (a newline), its length byte can be whitespace
    too (9, 10, 13 or 32 bytes), and a doc id may begin with "{" or "["."""
    decoded = _decode_protobuf(key_id, value)
    return decoded if isinstance(decoded, DecodedEvent) else malformed


def _decode_json(key_id: str, value: bytes) -> DecodedEvent | MalformedEvent:
    try:
        data = json.loads(value)
    except ValueError as error:  # not UTF-8, not JSON, or a number too long to read
        unparsable = MalformedEvent(f"value looks like JSON but does not parse: {error}")
        return _protobuf_or(key_id, value, unparsable)
    except RecursionError:
        return MalformedEvent("JSON value is nested too deeply to parse")
    if not isinstance(data, dict):
        return MalformedEvent("JSON value must be an object with doc_id, op and content")
    plain, proto3 = _PLAIN_NAMES.intersection(data), _PROTO3_NAMES.intersection(data)
    if plain and proto3:
        return MalformedEvent(
            f"JSON value mixes plain names {sorted(plain)} and proto3 JSON names "
            f"{sorted(proto3)}; {_FORMS_HINT}"
        )
    if proto3:
        return _decode_proto3_json(key_id, value)
    if "content" in data and "doc_id" not in data:
        return MalformedEvent(
            "JSON value has content but no doc id field, so its form is ambiguous (text or "
            f"base64?); {_FORMS_HINT}"
        )
    for name in ("doc_id", "op", "content", "file_path"):
        if not isinstance(data.get(name, ""), str):
            return MalformedEvent(f"JSON field {name!r} must be a string")
    event_time = data.get("event_time_ms", 0)
    if not isinstance(event_time, int) or isinstance(event_time, bool) or event_time not in _INT64:
        return MalformedEvent("JSON field 'event_time_ms' must be an integer (int64 milliseconds)")
    return _build(
        key_id,
        data.get("doc_id", ""),
        data.get("op", "").upper(),
        data.get("content", "").encode("utf-8", "surrogatepass"),
        data.get("file_path", ""),
        event_time,
    )


def _decode_proto3_json(key_id: str, value: bytes) -> DecodedEvent | MalformedEvent:
    event = DocumentEvent()
    try:
        json_format.Parse(value, event)
    except (json_format.ParseError, ValueError) as error:
        return MalformedEvent(f"proto3 JSON value does not map onto DocumentEvent: {error}")
    except RecursionError:
        return MalformedEvent("JSON value is nested too deeply to parse")
    op = DocumentEvent.Op.Name(event.op)
    return _build(key_id, event.doc_id, op, event.content, event.file_path, event.event_time_ms)


def _build(
    key_id: str, doc_id: str, op: str, content: bytes, file_path: str, event_time_ms: int
) -> DecodedEvent | MalformedEvent:
    for name, text in (("doc_id", doc_id), ("file_path", file_path)):
        if not _is_unicode(text):
            return MalformedEvent(
                f"{name} holds a lone surrogate (an escape like \\ud800 that is not a "
                "character); send valid Unicode"
            )
    if key_id and doc_id and key_id != doc_id:
        return MalformedEvent(f"doc_id {doc_id!r} differs from the message key {key_id!r}")
    doc_id = doc_id or key_id
    if not doc_id:
        return MalformedEvent("no doc id: set the message key or the doc_id field")
    too_long = _too_long(doc_id)
    if too_long is not None:
        return too_long
    if op == "DELETE":
        return DecodedEvent(DocumentDelete(doc_id), event_time_ms)
    if op == "UPSERT":
        return DecodedEvent(DocumentUpsert(doc_id, content, file_path or doc_id), event_time_ms)
    return MalformedEvent(f"op must be UPSERT or DELETE; got {op or 'nothing'!r}")


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _too_long(doc_id: str) -> MalformedEvent | None:
    if len(doc_id.encode("utf-8", "surrogatepass")) <= MAX_DOC_ID_BYTES:
        return None
    return MalformedEvent(f"{doc_id_problem(doc_id)} (the message key or doc_id field)")
