"""One route of the HTTP API, with what the OpenAPI document says of it: the rows of the
table `gateway/http/app.py` serves and `gateway/http/openapi.py` describes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import Message


@dataclass(frozen=True)
class ApiRoute:
    """One route of the API, with what the OpenAPI document says of it."""

    method: str
    path: str
    endpoint: Callable[..., Any]
    summary: str
    body: type[Message] | None = None  # the JSON body's message
    query: type[Message] | None = None  # the query parameters' message (its scalar fields)
    response: type[Message] | str | None = None  # a message, or a schema name in openapi.py
    streams: bool = False  # text/event-stream
    path_fields: tuple[str, ...] = field(default=())
