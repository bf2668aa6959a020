"""The OpenAPI 3.1 document of the HTTP API, generated from the code: the route table
(`gateway/http/routes.py` `ApiRoute`s) and the protobuf descriptors with their comments (the
.proto files are the API's one definition; `descriptors.binpb` keeps their comments).

Message schemas follow `gateway/http/messages.py`'s JSON: proto field names, every field,
64-bit integers as numbers, enums as names. The few bodies that are not protobuf messages
(health, version, chat completions) are described in `EXTRA_SCHEMAS`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from importlib import resources
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from gateway.http.auth import is_guarded
from gateway.http.messages import enum_names
from gateway.http.routes import ApiRoute

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
    "ModelList": {
        "type": "object",
        "description": "OpenAI's model list: one model per query mode (kgstream-mix, ...)",
        "properties": {"object": {"const": "list"}, "data": {"type": "array"}},
    },
    "ChatCompletion": {
        "type": "object",
        "description": "OpenAI's chat completion (or, with stream: true, server-sent "
        "chat.completion.chunk objects ending with [DONE]); plus `references` and "
        "`index_version`. The request is OpenAI's: model, messages, stream, stream_options.",
        "properties": {
            "id": {"type": "string"},
            "object": {"type": "string"},
            "model": {"type": "string"},
            "choices": {"type": "array"},
            "usage": {"type": "object"},
            "references": _array_of("kgstream.v1.Reference"),
            "index_version": _INDEX_VERSION,
        },
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


def openapi_document(routes: Sequence[ApiRoute], extra: dict[str, Any] | None = None) -> Any:
    """The document for `routes` (`extra`: more named schemas, e.g. the chat endpoint's)."""
    comments = _proto_comments()
    schemas: dict[str, Any] = {**EXTRA_SCHEMAS, **(extra or {})}
    paths: dict[str, Any] = {}
    for route in routes:
        for message in (route.body, route.query, route.response):
            if isinstance(message, type) and issubclass(message, Message):
                _add_schemas(message.DESCRIPTOR, schemas, comments)
        path = route.path.replace(":path}", "}")
        paths.setdefault(path, {})[route.method.lower()] = _operation(route, comments)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "kgstream HTTP API",
            "version": "v1",
            "description": "The kgstream gateway over HTTP/JSON: the gRPC services "
            "(kgstream.v1.KnowledgeGraph, kgstream.v1.Ingest) as routes, server-sent events, "
            "and an OpenAI-compatible chat endpoint. Errors are {error: {code, message, field}}.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
        },
    }


def _operation(route: ApiRoute, comments: dict[str, str]) -> dict[str, Any]:
    operation: dict[str, Any] = {"summary": route.summary, "responses": {}}
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in route.path_fields
    ]
    if route.query is not None:
        descriptor = route.query.DESCRIPTOR
        for field in descriptor.fields:
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                continue
            parameters.append(
                {
                    "name": field.name,
                    "in": "query",
                    "schema": _field_schema(field),
                    "description": comments.get(f"{descriptor.full_name}.{field.name}", ""),
                }
            )
    if route.path.startswith("/api/"):
        parameters.append(
            {
                "name": "timeout_ms",
                "in": "query",
                "schema": {"type": "integer", "minimum": 0},
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
    media = "text/event-stream" if route.streams else "application/json"
    content = {media: {"schema": _ref(route.response)}} if route.response is not None else {}
    operation["responses"]["200"] = {"description": "OK", "content": content}
    operation["responses"]["default"] = {
        "description": "an error (4xx, 5xx)",
        "content": {"application/json": {"schema": _ref("Error")}},
    }
    if is_guarded(route.path):
        operation["security"] = [{"bearerAuth": []}]
    return operation


def _ref(target: type[Message] | str | None) -> dict[str, Any]:
    if isinstance(target, type) and issubclass(target, Message):
        return {"$ref": f"#/components/schemas/{target.DESCRIPTOR.full_name}"}
    return {"$ref": f"#/components/schemas/{target}"}


def _add_schemas(descriptor: Descriptor, schemas: dict[str, Any], comments: dict[str, str]) -> None:
    if descriptor.full_name in schemas:
        return
    schemas[descriptor.full_name] = {}  # reserved first: messages may refer to each other
    properties = {}
    for field in descriptor.fields:
        schema = _field_schema(field)
        comment = comments.get(f"{descriptor.full_name}.{field.name}")
        if comment:
            schema = {**schema, "description": comment}
        properties[field.name] = schema
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            _add_schemas(field.message_type, schemas, comments)
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
