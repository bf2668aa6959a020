"""The protobuf messages as the HTTP API's JSON, both ways.

Responses are the proto3 JSON of `google.protobuf.json_format` with three choices made for
clients that are browsers and `curl`: proto field names (snake_case, as in the .proto
files), every field present (an empty list or a 0 score is shown, not left out), and
64-bit integers as JSON numbers rather than strings (index versions and Unix milliseconds
stay far below 2**53). Enums are their names ("QUERY_MODE_MIX").

Requests are checked field by field against the message's descriptor before
`json_format.ParseDict` reads them, so an error names the field where it is
(`history[0].content`), what the field takes and what came; enums also accept the short
lower-case forms a person types ("failed"), and an unknown one is refused listing them. The
query mode is parsed as every door parses it (`gateway/convert.py` `mode_from_json`): by the
modes' names ("mix"), or the enum's names and numbers.
"""

from __future__ import annotations

import base64
import difflib
import functools
import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message

from gateway.convert import mode_from_json
from gateway.types import MODE_NAMES, InvalidQuery, shown
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
_QUERY_MODE = query_pb2.QueryMode.DESCRIPTOR.full_name


class BadJson(ValueError):
    """A request body or parameter that does not make the message; `field` names where."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.detail = message  # what is wrong, without the field's name


def parse_json(raw: bytes) -> Any:
    """A request body's JSON value; `ValueError` saying why when it is not JSON, or is
    nested deeper than the parser's recursion allows (`[[[...]]]` would otherwise escape as
    a RecursionError, a 500)."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError("it is nested too deeply to parse") from None


def to_json(message: Message) -> dict[str, Any]:
    """`message` as the API's JSON object (see the module docstring)."""
    return {
        name: convert(getattr(message, name))
        for name, convert, in_oneof in _converters(message.DESCRIPTOR)
        if not in_oneof or message.HasField(name)
    }


@functools.cache
def _converters(
    descriptor: Descriptor,
) -> tuple[tuple[str, Callable[[Any], Any], bool], ...]:
    """Per field of a message type: its name, what turns its value into JSON, and whether
    it is in a oneof (then shown only when set). Worked out once per type: a retrieval's
    reply holds thousands of values, and most are strings that stay as they are."""
    return tuple(
        (field.name, _field_converter(field), field.containing_oneof is not None)
        for field in descriptor.fields
    )


def _field_converter(field: FieldDescriptor) -> Callable[[Any], Any]:
    convert = _value_converter(field)
    if not field.is_repeated:
        return convert
    if convert is _as_is:
        return list
    return lambda values: [convert(value) for value in values]


def _as_is(value: Any) -> Any:
    return value


def _value_converter(field: FieldDescriptor) -> Callable[[Any], Any]:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return to_json
    if field.type == FieldDescriptor.TYPE_ENUM:
        values = field.enum_type.values_by_number

        def enum_to_json(value: Any) -> Any:
            named = values.get(value)
            return named.name if named is not None else value

        return enum_to_json
    if field.type == FieldDescriptor.TYPE_BYTES:
        return lambda value: base64.b64encode(value).decode("ascii")  # proto3 JSON's bytes
    if field.type in _INT64_TYPES:
        return int
    return _as_is


def from_json(body: Any, message_type: type[M]) -> M:
    """Parse a JSON object into `message_type`; BadJson names the field it cannot take
    (`history[0].content`), says what the field takes and what it got."""
    if not isinstance(body, dict):
        raise BadJson("", f"the body must be a JSON object; got {type(body).__name__}")
    message: M = message_type()
    checked = _checked_message(body, message_type.DESCRIPTOR, "")
    try:
        json_format.ParseDict(checked, message, ignore_unknown_fields=False)
    except json_format.ParseError as error:  # what the checks above let through
        raise BadJson("", str(error).split("\n")[0]) from None
    return message


def _checked_message(body: dict[str, Any], descriptor: Descriptor, path: str) -> dict[str, Any]:
    """`body` checked against `descriptor`, field by field, with enum values turned into the
    enum's names (the query mode parsed as every door parses it); `path`: where `body` is."""
    checked: dict[str, Any] = {}
    for name, value in body.items():
        field = descriptor.fields_by_name.get(name) or _by_json_name(descriptor, name)
        if field is None:
            raise BadJson(path + name, _not_a_field(descriptor, name))
        where = path + name
        if value is None and field.type != FieldDescriptor.TYPE_ENUM:
            checked[name] = value  # JSON's null: the field's default
        elif field.is_repeated:
            if not isinstance(value, list):
                raise BadJson(where, f"must be a list of {_items(field)}; got {shown(value)}")
            checked[name] = [
                _checked_value(field, item, f"{where}[{index}]") for index, item in enumerate(value)
            ]
        else:
            checked[name] = _checked_value(field, value, where)
    return checked


def _by_json_name(descriptor: Descriptor, name: str) -> FieldDescriptor | None:
    """The field proto3 JSON also names in lowerCamelCase ("topK")."""
    return next((f for f in descriptor.fields if f.json_name == name), None)


def _not_a_field(descriptor: Descriptor, name: str) -> str:
    names = [field.name for field in descriptor.fields]
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"did you mean {close[0]}?" if close else f"its fields are {', '.join(names)}"
    return f"is not a field of {descriptor.name}; {hint}"


def _items(field: FieldDescriptor) -> str:
    """What a repeated field's items are, in words: "strings", "ConversationTurn objects"."""
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return f"{field.message_type.name} objects"
    return f"{_KINDS[field.type]}s"


_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}
_KINDS = {
    **dict.fromkeys(_INT_RANGES, "integer"),
    FieldDescriptor.TYPE_DOUBLE: "number",
    FieldDescriptor.TYPE_FLOAT: "number",
    FieldDescriptor.TYPE_BOOL: "boolean",
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BYTES: "base64 string",
    FieldDescriptor.TYPE_ENUM: "enum value name",
}
_INTEGER_TEXT = re.compile(r"^-?[0-9]+$")
_NUMBER_TEXT = re.compile(r"^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$")
_BOOLEANS = {True: True, False: False, "true": True, "false": False}


def _checked_value(field: FieldDescriptor, value: Any, where: str) -> Any:
    """One value of `field` as ParseDict takes it, or BadJson saying what the field takes.
    Integers and booleans may come as text too: query parameters are text."""
    kind = field.type
    if kind == FieldDescriptor.TYPE_MESSAGE:
        if not isinstance(value, dict):
            raise BadJson(where, f"must be a {field.message_type.name} object; got {shown(value)}")
        return _checked_message(value, field.message_type, where + ".")
    if kind == FieldDescriptor.TYPE_ENUM:
        return _enum_value(field.enum_type, value, where)
    if kind in _INT_RANGES:
        number = _integer(value)
        low, high = _INT_RANGES[kind]
        if number is None:
            raise BadJson(where, f"must be an integer; got {shown(value)}")
        if not low <= number <= high:
            raise BadJson(where, f"must be an integer from {low} to {high}; got {number}")
        return number
    if kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        numeric = isinstance(value, int | float) and not isinstance(value, bool)
        if not (numeric or (isinstance(value, str) and _NUMBER_TEXT.match(value))):
            raise BadJson(where, f"must be a number; got {shown(value)}")
        return value
    if kind == FieldDescriptor.TYPE_BOOL:
        if not isinstance(value, bool | str) or value not in _BOOLEANS:
            raise BadJson(where, f"must be true or false; got {shown(value)}")
        return _BOOLEANS[value]
    if not isinstance(value, str):  # a string, or bytes as base64 text
        raise BadJson(where, f"must be a {_KINDS[kind]}; got {shown(value)}")
    return value


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INTEGER_TEXT.match(value):
        return int(value)
    return None


def _enum_value(enum: EnumDescriptor, value: Any, where: str) -> Any:
    """The enum value's name for one of the forms a request may give it; the query mode by
    the modes' names (`gateway/convert.py` `mode_from_json`), others by their short names
    ("failed"), their names or their numbers. Anything else is refused listing the short
    names, once."""
    if enum.full_name == _QUERY_MODE:
        try:
            return mode_from_json(value)
        except InvalidQuery as error:
            raise BadJson(where, error.detail) from None
    if value is None or (isinstance(value, str) and value in enum.values_by_name):
        return value
    if type(value) is int and value in enum.values_by_number:  # a bool is no number
        return enum.values_by_number[value].name
    shorts = short_enum_names(enum)
    if isinstance(value, str) and value.lower() in shorts:
        return shorts[value.lower()]
    raise BadJson(
        where, f"must be one of {', '.join(shorts)} (or leave it unset); got {shown(value)}"
    )


def short_enum_names(enum: EnumDescriptor) -> dict[str, str]:
    """The short lower-case form of each set value of `enum`, to its name: the name without
    the prefix of the enum's zero value, by proto3's naming ("DOCUMENT_STATUS_UNSPECIFIED":
    "DOCUMENT_STATUS_FAILED" -> "failed")."""
    prefix = enum.values_by_number[0].name.removesuffix("UNSPECIFIED")
    return {
        value.name.removeprefix(prefix).lower(): value.name for value in enum.values if value.number
    }


def enum_names(enum: EnumDescriptor) -> list[str]:
    """The names a request may give `enum`'s values by (the OpenAPI document lists them):
    the query mode's are the modes' own names, others their short names, before the enum's
    own names."""
    own = list(MODE_NAMES) if enum.full_name == _QUERY_MODE else list(short_enum_names(enum))
    return [*own, *(value.name for value in enum.values)]
