"""The OpenAPI 3.1 document of the HTTP API, generated from the code: the route table
(`gateway/http/routes.py` `ApiRoute`s) and the protobuf descriptors with their comments (the
.proto files are the API's one definition; `descriptors.binpb` keeps their comments).

Message schemas follow `gateway/http/messages.py`'s JSON: proto field names, every field,
64-bit integers as numbers, enums as names. The few bodies that are not protobuf messages
(health, version, ...) are described in `EXTRA_SCHEMAS`, the doors' (OpenAI's, Ollama's) by
the doors themselves. What the servicers accept of each request field (ranges, defaults,
lengths: `field_constraints`) comes from the constants and limits they check against, so
the document cannot promise what the server refuses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from dataflow.core.documents import MAX_DOC_ID_BYTES
from gateway.engine import MAX_TOP_K
from gateway.http.auth import is_guarded
from gateway.http.calls import MAX_TIMEOUT_MS
from gateway.http.errors import API_PREFIX
from gateway.http.messages import enum_names
from gateway.http.routes import ApiRoute
from gateway.knowledge_graph import (
    DEFAULT_PAGE_SIZE,
    DEFAULT_SUBGRAPH_DEPTH,
    DEFAULT_SUBGRAPH_NODES,
    MAX_PAGE_SIZE,
    MAX_SUBGRAPH_DEPTH,
    MAX_SUBGRAPH_NODES,
)
from gateway.types import DEFAULT_MODE, HISTORY_ROLES, QueryParams, RequestLimits

_SCALARS: dict[int, dict[str, Any]] = {
    FieldDescriptor.TYPE_DOUBLE: {"type": "number", "format": "double"},
    FieldDescriptor.TYPE_FLOAT: {"type": "number", "format": "float"},
    FieldDescriptor.TYPE_INT64: {"type": "integer", "format": "int64"},
    FieldDescriptor.TYPE_UINT64: {"type": "integer", "format": "int64", "minimum": 0},
    FieldDescriptor.TYPE_INT32: {"type": "integer", "format": "int32"},
    FieldDescriptor.TYPE_UINT32: {"type": "integer", "format": "int32", "minimum": 0},
    FieldDescriptor.TYPE_BOOL: {"type": "boolean"},
    FieldDescriptor.TYPE_STRING: {"type": "string"},
    FieldDescriptor.TYPE_BYTES: {"type": "string", "contentEncoding": "base64"},
}

_ERROR = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "the gRPC status name"},
                "message": {"type": "string"},
                "field": {"type": "string", "description": "the bad field, for a 400"},
            },
        }
    },
}
_INDEX_VERSION = {"type": "integer", "format": "int64"}


def _array_of(schema: str) -> dict[str, Any]:
    return {"type": "array", "items": {"$ref": f"#/components/schemas/{schema}"}}


_COUNTS = {"type": "object", "additionalProperties": {"type": "integer"}}
EXTRA_SCHEMAS: dict[str, dict[str, Any]] = {
    "Error": _ERROR,
    "Health": {
        "type": "object",
        "properties": {"status": {"type": "string", "enum": ["SERVING", "NOT_SERVING"]}},
    },
    "Version": {
        "type": "object",
        "properties": {
            "index_version": _INDEX_VERSION,
            "changed_at_ms": {
                "type": "integer",
                "format": "int64",
                "description": "when this server first saw the version (Unix ms)",
            },
            "documents": {**_COUNTS, "description": "documents by status"},
        },
    },
    "EntitySearch": {
        "type": "object",
        "properties": {
            "entities": _array_of("kgstream.v1.RetrievedEntity"),
            "index_version": _INDEX_VERSION,
        },
    },
    "Chunk": {
        "type": "object",
        "properties": {
            name: {"type": "integer"} if name in ("order", "index_version") else {"type": "string"}
            for name in ("chunk_id", "doc_id", "file_path", "order", "text", "index_version")
        },
    },
    "DocumentUpsert": {
        "type": "object",
        "required": ["content"],
        "properties": {
            "content": {"type": "string", "description": "the document's text"},
            "file_path": {"type": "string", "description": "for references [doc_id]"},
        },
        "additionalProperties": False,
    },
    "RetryFailed": {
        "type": "object",
        "properties": {
            "retried": {"type": "array", "items": {"type": "string"}},
            "not_retried": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"doc_id": {"type": "string"}, "reason": {"type": "string"}},
                },
            },
        },
    },
}


def field_constraints(limits: RequestLimits) -> dict[str, dict[str, Any]]:
    """JSON Schema keywords for request fields, by full name ("kgstream.v1.QueryRequest.top_k"):
    the ranges, defaults and lengths the servicers and the engine check and apply, from
    their own constants and `limits` (the engine's, from the settings)."""
    defaults = {
        field.name: field.default
        for field in dataclasses.fields(QueryParams)
        if field.default is not dataclasses.MISSING
    }
    query = "kgstream.v1.QueryRequest"
    keywords = {"maxItems": limits.max_keywords, "items": {"maxLength": limits.max_keyword_chars}}
    constraints: dict[str, dict[str, Any]] = {
        f"{query}.question": {"maxLength": limits.max_question_chars},
        f"{query}.mode": {"default": DEFAULT_MODE.value},
        f"{query}.response_type": {
            "default": defaults["response_type"],
            "maxLength": limits.max_user_prompt_chars,
        },
        f"{query}.user_prompt": {"maxLength": limits.max_user_prompt_chars},
        f"{query}.history": {"maxItems": limits.max_history_turns},
        f"{query}.high_level_keywords": keywords,
        f"{query}.low_level_keywords": keywords,
        f"{query}.include_references": {"default": defaults["include_references"]},
        f"{query}.min_index_version": {"minimum": 0, "default": defaults["min_index_version"]},
        "kgstream.v1.ConversationTurn.role": {"enum": list(HISTORY_ROLES)},
        "kgstream.v1.GetSubgraphRequest.depth": {
            "minimum": 0,
            "maximum": MAX_SUBGRAPH_DEPTH,
            "default": DEFAULT_SUBGRAPH_DEPTH,
        },
        "kgstream.v1.GetSubgraphRequest.max_nodes": {
            "minimum": 1,
            "maximum": MAX_SUBGRAPH_NODES,
            "default": DEFAULT_SUBGRAPH_NODES,
        },
        "kgstream.v1.ListDocumentsRequest.page_size": {
            "minimum": 1,
            "maximum": MAX_PAGE_SIZE,
            "default": DEFAULT_PAGE_SIZE,
        },
    }
    for name in ("top_k", "chunk_top_k"):
        constraints[f"{query}.{name}"] = {
            "minimum": 1,
            "maximum": MAX_TOP_K,
            "default": defaults[name],
        }
    for name in ("max_entity_tokens", "max_relation_tokens", "max_total_tokens"):
        constraints[f"{query}.{name}"] = {"minimum": 1, "default": defaults[name]}
    return constraints


# Path parameters, by name: a doc id is at most MAX_DOC_ID_BYTES bytes of UTF-8, so at
# most that many characters.
PATH_CONSTRAINTS: dict[str, dict[str, Any]] = {
    "doc_id": {
        "minLength": 1,
        "maxLength": MAX_DOC_ID_BYTES,
        "description": f"at most {MAX_DOC_ID_BYTES} bytes of UTF-8; may hold '/'",
    },
}


def openapi_document(
    routes: Sequence[ApiRoute],
    limits: RequestLimits,
    extra: Mapping[str, Any] | None = None,
) -> Any:
    """The document for `routes`, with the engine's `limits` (`extra`: more named schemas,
    the doors')."""
    comments = _proto_comments()
    constraints = field_constraints(limits)
    schemas: dict[str, Any] = {**EXTRA_SCHEMAS, **(extra or {})}
    paths: dict[str, Any] = {}
    for route in routes:
        for message in (route.body, route.query, route.response):
            if isinstance(message, type) and issubclass(message, Message):
                _add_schemas(message.DESCRIPTOR, schemas, comments, constraints)
        path = route.path.replace(":path}", "}")
        paths.setdefault(path, {})[route.method.lower()] = _operation(route, comments, constraints)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "kgstream HTTP API",
            "version": "v1",
            "description": "The kgstream gateway over HTTP/JSON: the gRPC services "
            "(kgstream.v1.KnowledgeGraph, kgstream.v1.Ingest) as routes, server-sent events, "
            "OpenAI's chat and embeddings API under /v1/ and Ollama's under /api/. Errors are "
            "{error: {code, message, field}}; under /v1/ OpenAI's {error: {message, type, "
            "param, code}}, under Ollama's /api/ routes {error: message}.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
        },
    }


def _operation(
    route: ApiRoute, comments: dict[str, str], constraints: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    operation: dict[str, Any] = {"summary": route.summary, "responses": {}}
    parameters = [
        {
            "name": name,
            "in": "path",
            "required": True,
            "schema": {"type": "string", **PATH_CONSTRAINTS.get(name, {})},
        }
        for name in route.path_fields
    ]
    if route.query is not None:
        descriptor = route.query.DESCRIPTOR
        for field in descriptor.fields:
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                continue
            full_name = f"{descriptor.full_name}.{field.name}"
            parameters.append(
                {
                    "name": field.name,
                    "in": "query",
                    "schema": _constrained(_field_schema(field), constraints.get(full_name)),
                    "description": comments.get(full_name, ""),
                }
            )
    parameters.extend(
        {
            "name": param.name,
            "in": "query",
            "schema": dict(param.schema),
            "description": param.description,
        }
        for param in route.params
    )
    if route.path.startswith(API_PREFIX) and "timeout_ms" not in {p.name for p in route.params}:
        parameters.append(
            {
                "name": "timeout_ms",
                "in": "query",
                "schema": {"type": "integer", "minimum": 0, "maximum": MAX_TIMEOUT_MS},
                "description": "the call's deadline in milliseconds [none]",
            }
        )
    if parameters:
        operation["parameters"] = parameters
    if route.body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _ref(route.body)}},
        }
    elif route.method == "PUT":
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": _ref("DocumentUpsert")}},
        }
    media = route.media or ("text/event-stream" if route.streams else "application/json")
    content = {media: {"schema": _ref(route.response)}} if route.response is not None else {}
    operation["responses"]["200"] = {"description": "OK", "content": content}
    operation["responses"]["default"] = {
        "description": "an error (4xx, 5xx), in the error shape of the path",
        "content": {"application/json": {"schema": _ref(route.error)}},
    }
    if is_guarded(route.path):
        operation["security"] = [{"bearerAuth": []}]
    return operation


def _constrained(schema: dict[str, Any], constraint: Mapping[str, Any] | None) -> dict[str, Any]:
    """`schema` with a field's constraints; an array's item constraints go to its items."""
    if not constraint:
        return schema
    items = constraint.get("items")
    merged = {**schema, **{k: v for k, v in constraint.items() if k != "items"}}
    if items is not None:
        merged["items"] = {**schema["items"], **items}
    return merged


def _ref(target: type[Message] | str | None) -> dict[str, Any]:
    if isinstance(target, type) and issubclass(target, Message):
        return {"$ref": f"#/components/schemas/{target.DESCRIPTOR.full_name}"}
    return {"$ref": f"#/components/schemas/{target}"}


def _add_schemas(
    descriptor: Descriptor,
    schemas: dict[str, Any],
    comments: dict[str, str],
    constraints: dict[str, dict[str, Any]],
) -> None:
    if descriptor.full_name in schemas:
        return
    schemas[descriptor.full_name] = {}  # reserved first: messages may refer to each other
    properties = {}
    for field in descriptor.fields:
        full_name = f"{descriptor.full_name}.{field.name}"
        schema = _constrained(_field_schema(field), constraints.get(full_name))
        comment = comments.get(full_name)
        if comment:
            schema = {**schema, "description": comment}
        properties[field.name] = schema
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            _add_schemas(field.message_type, schemas, comments, constraints)
    schemas[descriptor.full_name] = {
        "type": "object",
        "description": comments.get(descriptor.full_name, ""),
        "properties": properties,
    }


def _field_schema(field: FieldDescriptor) -> dict[str, Any]:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        item: dict[str, Any] = {"$ref": f"#/components/schemas/{field.message_type.full_name}"}
    elif field.type == FieldDescriptor.TYPE_ENUM:
        item = {"type": "string", "enum": enum_names(field.enum_type)}
    else:
        item = dict(_SCALARS[field.type])
    if field.is_repeated:
        return {"type": "array", "items": item}
    return item


def _proto_comments() -> dict[str, str]:
    """The comments of our messages and fields, by full name ("kgstream.v1.Entity.key")."""
    data = resources.files("kgstream_protos.v1").joinpath("descriptors.binpb").read_bytes()
    comments: dict[str, str] = {}
    for file in descriptor_pb2.FileDescriptorSet.FromString(data).file:
        names = dict(_message_paths(file.package, file.message_type, (4,)))
        for location in file.source_code_info.location:
            name = names.get(tuple(location.path))
            text = (location.leading_comments or location.trailing_comments).strip()
            if name is not None and text:
                comments[name] = " ".join(text.split())
    return comments


def _message_paths(
    scope: str, messages: Iterable[descriptor_pb2.DescriptorProto], path: tuple[int, ...]
) -> Iterable[tuple[tuple[int, ...], str]]:
    """(source-info path, full name) of each message and field, nested ones too."""
    for index, message in enumerate(messages):
        name = f"{scope}.{message.name}"
        yield (*path, index), name
        for field_index, field in enumerate(message.field):
            yield (*path, index, 2, field_index), f"{name}.{field.name}"
        yield from _message_paths(name, message.nested_type, (*path, index, 3))
