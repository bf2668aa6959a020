"""The MCP tools' arguments, each declared once (`Param`): its JSON schema (what an agent
reads in `tools/list`, with the limits, the enum and the default) and the check of its JSON
type both come from that one declaration.

Only the JSON types are checked here, because only they stand between the arguments and
the request message; the limits a schema states (lengths, ranges, the modes) are enforced
by the servicers, so that a value over one gets the servicers' own message, the same as
over gRPC and HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gateway.types import shown

JsonType = Literal["string", "integer", "boolean", "string_list"]
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "boolean": "true or false",
    "string_list": "a list of strings",
}


@dataclass(frozen=True)
class Param:
    """One argument of a tool. `minimum`, `maximum`, `max_length` (of a string, or of each
    string of a list) and `enum` are stated in the schema; `wire` is the range of the
    protobuf field it fills (an integer outside it cannot be sent at all)."""

    name: str
    type: JsonType
    description: str
    required: bool = False
    default: object = None
    enum: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    max_length: int | None = None
    wire: tuple[int, int] = INT32

    def schema(self) -> dict[str, Any]:
        item: dict[str, Any] = {"type": "string"}
        if self.max_length is not None:
            item["maxLength"] = self.max_length
        if self.type == "string_list":
            schema: dict[str, Any] = {"type": "array", "items": item}
        elif self.type == "string":
            schema = dict(item)
        else:
            schema = {"type": self.type}
        schema["description"] = self.description
        if self.enum:
            schema["enum"] = list(self.enum)
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        if self.default is not None:
            schema["default"] = self.default
        return schema


def input_schema(params: Sequence[Param]) -> dict[str, Any]:
    """The tool's `inputSchema`: an object of `params`, nothing else."""
    return {
        "type": "object",
        "properties": {param.name: param.schema() for param in params},
        "required": [param.name for param in params if param.required],
        "additionalProperties": False,
    }


class BadArgument(ValueError):
    """An argument of the wrong JSON type, missing or unknown; the message names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def checked_arguments(
    tool: str, params: Sequence[Param], arguments: Mapping[str, Any] | None
) -> dict[str, Any]:
    """`arguments` with each one's JSON type checked (integral numbers as int); an argument
    that is absent or null is left out, so the servicer applies its default."""
    given = dict(arguments or {})
    known = {param.name: param for param in params}
    for name in given:
        if name not in known:
            names = ", ".join(known) or "no arguments"
            raise BadArgument(name, f"is not an argument of {tool} (it takes {names})")
    result: dict[str, Any] = {}
    for param in params:
        value = given.get(param.name)
        if value is None:
            if param.required:
                raise BadArgument(param.name, f"is required: {param.description}")
            continue
        result[param.name] = _typed(param, value)
    return result


def _typed(param: Param, value: Any) -> Any:
    if param.type == "string" and isinstance(value, str):
        return value
    if param.type == "boolean" and isinstance(value, bool):
        return value
    if param.type == "string_list" and isinstance(value, list):
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise BadArgument(f"{param.name}[{index}]", f"must be a string; got {shown(item)}")
        return list(value)
    if param.type == "integer" and not isinstance(value, bool):
        number = value
        if isinstance(value, float) and value.is_integer():
            number = int(value)
        if isinstance(number, int):
            low, high = param.wire
            if not low <= number <= high:
                bits = 32 if param.wire == INT32 else 64
                raise BadArgument(param.name, f"must be a {bits}-bit integer; got {number}")
            return number
    raise BadArgument(param.name, f"must be {_TYPE_NAMES[param.type]}; got {shown(value)}")
