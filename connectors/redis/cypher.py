"""Cypher for the FalkorDB module over plain redis-py: parameters, and replies as values.

FalkorDB takes a query's parameters in a header before its text, `CYPHER name=value ...`,
each value a Cypher literal, and binds them as parameters: the query text itself never holds a
value, so it stays the same from call to call and a value cannot change what it means.
`with_parameters` writes that header from Python values (`literal`).

Replies are asked for in the compact form (`--compact`), whose every value carries its type,
so that lists, maps and numbers come back as they were stored (the verbose form prints them as
text); `rows` turns one into rows of Python values.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

QUERY = "GRAPH.QUERY"
READ_ONLY_QUERY = "GRAPH.RO_QUERY"
COMPACT = "--compact"

# A compact reply's value types (FalkorDB's `ValueType`).
_NULL, _STRING, _INTEGER, _BOOLEAN, _DOUBLE, _ARRAY, _MAP = 1, 2, 3, 4, 5, 6, 10
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def literal(value: object) -> str:
    """`value` as a Cypher literal: None, bool, int, float (finite), str, a list or tuple of
    them, or a mapping from names to them."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"a Cypher parameter must be a finite number; got {value!r}")
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(literal(item) for item in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_name(k)}: {literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(
        f"a Cypher parameter must be None, bool, int, float, str, a list or a mapping; "
        f"got {type(value).__name__}"
    )


def with_parameters(query: str, parameters: Mapping[str, object]) -> str:
    """The text GRAPH.QUERY takes for `query` with `parameters` bound (`$name` in `query`)."""
    if not parameters:
        return query
    header = " ".join(f"{_name(name)}={literal(value)}" for name, value in parameters.items())
    return f"CYPHER {header} {query}"


def rows(reply: Sequence[Any]) -> list[list[Any]]:
    """The rows of a compact reply to a query that returns columns, as Python values."""
    if len(reply) < 3:  # a query that returns nothing replies with its statistics alone
        return []
    return [[value(cell) for cell in row] for row in reply[1]]


def value(cell: Sequence[Any]) -> Any:
    """One compact value: [type, payload]."""
    kind, payload = cell[0], cell[1]
    if kind == _NULL:
        return None
    if kind == _STRING:
        return payload
    if kind == _INTEGER:
        return int(payload)
    if kind == _BOOLEAN:
        return payload == "true"
    if kind == _DOUBLE:
        return float(payload)
    if kind == _ARRAY:
        return [value(item) for item in payload]
    if kind == _MAP:
        return {payload[i]: value(payload[i + 1]) for i in range(0, len(payload), 2)}
    raise ValueError(f"a compact FalkorDB value of type {kind} is not read here: {cell!r}")


def _name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValueError(f"a Cypher parameter or map key must be a plain name; got {name!r}")
    return name
