"""One route of the HTTP API, with what the OpenAPI document says of it: the rows of the
table `gateway/http/app.py` serves and `gateway/http/openapi.py` describes; and a `Door`, the
routes that speak another API (OpenAI's, Ollama's, LightRAG's, MCP) with their schemas and
error shapes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import Message
from starlette.routing import BaseRoute

from gateway.http.errors import ErrorBody


@dataclass(frozen=True)
class Param:
    """A query parameter a route reads itself (not a message field), as OpenAPI says it."""

    name: str
    schema: Mapping[str, Any]
    description: str = ""


@dataclass(frozen=True)
class ApiRoute:
    """One route of the API, with what the OpenAPI document says of it."""

    method: str
    path: str
    endpoint: Callable[..., Any]
    summary: str
    body: type[Message] | str | None = None  # the JSON body's message, or a schema's name
    query: type[Message] | None = None  # the query parameters' message (its scalar fields)
    response: type[Message] | str | None = None  # a message, or a schema's name
    streams: bool = False  # text/event-stream (or `media`)
    path_fields: tuple[str, ...] = field(default=())
    params: tuple[Param, ...] = field(default=())
    media: str = ""  # the reply's media type when not JSON or server-sent events
    error: str = "Error"  # the schema of its error replies (a door's API has its own)


@dataclass(frozen=True)
class Door:
    """Routes that speak another API on the same port: the routes, the JSON schemas their
    `body` and `response` name, and the error body of each of the API's path prefixes
    (`gateway/http/errors.py`), so that every error there is one the API's clients read."""

    routes: tuple[ApiRoute, ...]
    schemas: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    error_shapes: Mapping[str, ErrorBody] = field(default_factory=dict)
    # ASGI endpoints of their own (MCP's), outside the OpenAPI document, and what they need
    # running while the app serves.
    mounts: tuple[BaseRoute, ...] = ()
    lifespan: Callable[[Any], AbstractAsyncContextManager[None]] | None = None
