"""The protobuf messages as the HTTP API's JSON, both ways.

Responses are the proto3 JSON of `google.protobuf.json_format` with three choices made for
clients that are browsers and `curl`: proto field names (snake_case, as in the .proto
files), every field present (an empty list or a 0 score is shown, not left out), and
64-bit integers as JSON numbers rather than strings (index versions and Unix milliseconds
stay far below 2**53). Enums are their names ("QUERY_MODE_MIX").

Requests are parsed by `json_format.ParseDict`, which names the field it cannot take;
enums also accept the short lower-case forms a person types ("failed"). The query mode is
parsed as every door parses it (`gateway/convert.py` `mode_from_json`): by the modes'
names ("mix"), or the enum's names and numbers.
"""

from __future__ import annotations

import base64
import re
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message

from gateway.convert import mode_from_json
from gateway.types import MODE_NAMES, InvalidQuery
from kgstream_protos.v1 import query_pb2

M = TypeVar("M", bound=Message)

_INT64_TYPES = frozenset(
    {
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_UINT64,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_FIXED64,
        FieldDescriptor.TYPE_SFIXED64,
    }
)
# json_format's messages name the field: 'Failed to parse top_k field: ...',
# 'Message type "kgstream.v1.QueryRequest" has no field named "topk"'.
_FIELD_PATH = re.compile(r"Failed to parse (\w+) field")
_UNKNOWN_FIELD = re.compile(r'has no field named "([^"]+)"')
_QUERY_MODE = query_pb2.QueryMode.DESCRIPTOR.full_name


class BadJson(ValueError):
    """A request body or parameter that does not make the message; `field` names where."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.detail = message  # what is wrong, without the field's name


def to_json(message: Message) -> dict[str, Any]:
    """`message` as the API's JSON object (see the module docstring)."""
    return {
        field.name: _field_to_json(field, getattr(message, field.name))
        for field in message.DESCRIPTOR.fields
        if field.containing_oneof is None or message.HasField(field.name)
    }


def _field_to_json(field: FieldDescriptor, value: Any) -> Any:
    if field.is_repeated:
        return [_value_to_json(field, item) for item in value]
    return _value_to_json(field, value)


def _value_to_json(field: FieldDescriptor, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return to_json(value)
    if field.type == FieldDescriptor.TYPE_ENUM:
        named = field.enum_type.values_by_number.get(value)
        return named.name if named is not None else value
    if field.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64encode(value).decode("ascii")  # proto3 JSON's form for bytes
    if field.type in _INT64_TYPES:
        return int(value)
    return value


def from_json(body: Any, message_type: type[M]) -> M:
    """Parse a JSON object into `message_type`; BadJson names the field it cannot take."""
    if not isinstance(body, dict):
        raise BadJson("", f"the body must be a JSON object; got {type(body).__name__}")
    message: M = message_type()
    try:
        json_format.ParseDict(
            _with_enum_names(body, message_type.DESCRIPTOR), message, ignore_unknown_fields=False
        )
    except InvalidQuery as error:
        raise BadJson(error.field, error.detail) from None
    except json_format.ParseError as error:
        text = str(error)
        path = _FIELD_PATH.findall(text)
        unknown = _UNKNOWN_FIELD.search(text)
        field = ".".join(path + ([unknown.group(1)] if unknown else []))
        raise BadJson(field, text.split("\n")[0]) from None
    return message


def _with_enum_names(
    body: dict[str, Any], descriptor: Descriptor, path: str = ""
) -> dict[str, Any]:
    """`body` with short enum forms ("failed") replaced by the enum's names
    (DOCUMENT_STATUS_FAILED) and the query mode parsed, in nested messages too;
    `InvalidQuery` names the field (`path`: where `body` is) of a mode that is none."""
    fixed = dict(body)
    for name, value in body.items():
        field = descriptor.fields_by_name.get(name)
        if field is None:
            continue
        if field.type == FieldDescriptor.TYPE_ENUM and field.enum_type.full_name == _QUERY_MODE:
            try:
                fixed[name] = mode_from_json(value)
            except InvalidQuery as error:
                raise InvalidQuery(path + name, error.detail) from None
        elif field.type == FieldDescriptor.TYPE_ENUM:
            fixed[name] = (
                [enum_name(field.enum_type, item) for item in value]
                if isinstance(value, list)
                else enum_name(field.enum_type, value)
            )
        elif field.type == FieldDescriptor.TYPE_MESSAGE and isinstance(value, dict):
            fixed[name] = _with_enum_names(value, field.message_type, f"{path}{name}.")
        elif field.type == FieldDescriptor.TYPE_MESSAGE and isinstance(value, list):
            fixed[name] = [
                _with_enum_names(item, field.message_type, f"{path}{name}.")
                if isinstance(item, dict)
                else item
                for item in value
            ]
    return fixed


def enum_names(enum: EnumDescriptor) -> list[str]:
    """The names a request may give `enum`'s values by (the OpenAPI document lists them):
    the query mode's are the modes' own names before the enum's."""
    own = list(MODE_NAMES) if enum.full_name == _QUERY_MODE else []
    return [*own, *(value.name for value in enum.values)]


def enum_name(enum: EnumDescriptor, value: Any) -> Any:
    """The enum value's name for a short form ("failed" -> "DOCUMENT_STATUS_FAILED");
    anything else (a full name, a number, garbage for ParseDict to refuse) as it is."""
    if not isinstance(value, str) or value in enum.values_by_name:
        return value
    for named in enum.values:
        if named.name.lower().endswith("_" + value.lower()) and named.number != 0:
            return named.name
    return value
