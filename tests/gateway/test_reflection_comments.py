"""What `grpcurl describe` shows: the protos as reflection serves them, read over the real
wire. grpcurl prints a symbol's leading (documentation) comments only, so every comment of
our files is a leading one, and each field with a server-side default says the default the
server applies, in brackets, in that comment."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import grpc
import pytest
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from gateway.knowledge_graph import (
    DEFAULT_PAGE_SIZE,
    DEFAULT_SUBGRAPH_DEPTH,
    DEFAULT_SUBGRAPH_NODES,
)
from gateway.types import DEFAULT_MODE, QueryParams
from tests.gateway.corpus import Corpus, build_corpus
from tests.gateway.test_server import new_engine, running_gateway
from tests.support.redis import RedisTestServer

_QUERY = QueryParams(question="")
# Each field the server fills in when it is unset, with the default the server applies.
DEFAULTS = {
    "kgstream.v1.QueryRequest.mode": f"[{DEFAULT_MODE.name}]",
    "kgstream.v1.QueryRequest.top_k": f"[{_QUERY.top_k}]",
    "kgstream.v1.QueryRequest.chunk_top_k": f"[{_QUERY.chunk_top_k}]",
    "kgstream.v1.QueryRequest.max_entity_tokens": f"[{_QUERY.max_entity_tokens}]",
    "kgstream.v1.QueryRequest.max_relation_tokens": f"[{_QUERY.max_relation_tokens}]",
    "kgstream.v1.QueryRequest.max_total_tokens": f"[{_QUERY.max_total_tokens}]",
    "kgstream.v1.QueryRequest.response_type": f'["{_QUERY.response_type}"]',
    "kgstream.v1.QueryRequest.history": "[none]",
    "kgstream.v1.QueryRequest.user_prompt": "[none]",
    "kgstream.v1.QueryRequest.high_level_keywords": "[extracted]",
    "kgstream.v1.QueryRequest.low_level_keywords": "[extracted]",
    "kgstream.v1.QueryRequest.include_references": f"[{str(_QUERY.include_references).lower()}]",
    "kgstream.v1.QueryRequest.min_index_version": f"[{_QUERY.min_index_version}: no wait]",
    "kgstream.v1.QueryRequest.document_filter": "[all documents]",
    "kgstream.v1.GetSubgraphRequest.depth": f"[{DEFAULT_SUBGRAPH_DEPTH}]",
    "kgstream.v1.GetSubgraphRequest.max_nodes": f"[{DEFAULT_SUBGRAPH_NODES}]",
    "kgstream.v1.ListDocumentsRequest.page_size": f"[{DEFAULT_PAGE_SIZE}]",
    "kgstream.v1.UpsertDocumentRequest.file_path": "[doc_id]",
}


@pytest.fixture(scope="module")
def corpus(
    redis_server: RedisTestServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Corpus]:
    """An empty index: reflection reads no store."""
    built = build_corpus(redis_server.url, tmp_path_factory.mktemp("corpus"), documents={})
    yield built
    built.close()


@pytest.fixture
def served(corpus: Corpus) -> list[descriptor_pb2.FileDescriptorProto]:
    """Our files (package kgstream.v1) as reflection serves the files of both services."""
    with running_gateway(new_engine(corpus, None), corpus.stores.graph) as (_, channel):
        return served_files(channel, ("kgstream.v1.KnowledgeGraph", "kgstream.v1.Ingest"))


def served_files(
    channel: grpc.Channel, symbols: Iterable[str]
) -> list[descriptor_pb2.FileDescriptorProto]:
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    requests = [
        reflection_pb2.ServerReflectionRequest(file_containing_symbol=symbol) for symbol in symbols
    ]
    files: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    for response in stub.ServerReflectionInfo(iter(requests), timeout=5):
        for raw in response.file_descriptor_response.file_descriptor_proto:
            file = descriptor_pb2.FileDescriptorProto.FromString(raw)
            files[file.name] = file
    return [file for _, file in sorted(files.items()) if file.package == "kgstream.v1"]


def element_names(file: descriptor_pb2.FileDescriptorProto) -> dict[tuple[int, ...], str]:
    """Source-info path -> full name of every message, field, enum, value, service and method
    (the field numbers of descriptor.proto: message_type 4, enum_type 5, service 6; in a
    message field 2, nested_type 3, enum_type 4; in an enum value 2; in a service method 2)."""
    names: dict[tuple[int, ...], str] = {}

    def enum(path: tuple[int, ...], scope: str, described: descriptor_pb2.EnumDescriptorProto):
        names[path] = name = f"{scope}.{described.name}"
        for index, value in enumerate(described.value):
            names[(*path, 2, index)] = f"{name}.{value.name}"

    def message(path: tuple[int, ...], scope: str, described: descriptor_pb2.DescriptorProto):
        names[path] = name = f"{scope}.{described.name}"
        for index, field in enumerate(described.field):
            names[(*path, 2, index)] = f"{name}.{field.name}"
        for index, nested in enumerate(described.nested_type):
            message((*path, 3, index), name, nested)
        for index, nested_enum in enumerate(described.enum_type):
            enum((*path, 4, index), name, nested_enum)

    for index, described in enumerate(file.message_type):
        message((4, index), file.package, described)
    for index, described_enum in enumerate(file.enum_type):
        enum((5, index), file.package, described_enum)
    for index, service in enumerate(file.service):
        names[(6, index)] = name = f"{file.package}.{service.name}"
        for method_index, method in enumerate(service.method):
            names[(6, index, 2, method_index)] = f"{name}.{method.name}"
    return names


def leading_comments(files: Iterable[descriptor_pb2.FileDescriptorProto]) -> dict[str, str]:
    comments: dict[str, str] = {}
    for file in files:
        names = element_names(file)
        for location in file.source_code_info.location:
            name = names.get(tuple(location.path))
            if name is not None and location.leading_comments:
                comments[name] = " ".join(location.leading_comments.split())
    return comments


def test_every_comment_of_the_served_protos_is_a_leading_one(
    served: list[descriptor_pb2.FileDescriptorProto],
) -> None:
    assert {file.name for file in served} == {
        "kgstream/v1/events.proto",
        "kgstream/v1/ingest.proto",
        "kgstream/v1/query.proto",
    }
    trailing = [
        f"{file.name}: {element_names(file).get(tuple(location.path), list(location.path))}"
        for file in served
        for location in file.source_code_info.location
        if location.trailing_comments
    ]
    assert not trailing, (
        f"grpcurl describe shows leading comments only; put these on the line above: {trailing}"
    )


def test_each_field_with_a_default_gives_the_servers_default_in_its_leading_comment(
    served: list[descriptor_pb2.FileDescriptorProto],
) -> None:
    comments = leading_comments(served)
    for field, default in DEFAULTS.items():
        assert default in comments.get(field, ""), (
            f"{field}: its leading comment should say {default}; it says {comments.get(field)!r}"
        )


def test_every_optional_field_is_one_whose_default_is_documented(
    served: list[descriptor_pb2.FileDescriptorProto],
) -> None:
    """Explicit presence is there so that the server can tell unset from zero and apply
    its default: each such field belongs in DEFAULTS, so its comment is checked above."""
    optional = {
        name
        for file in served
        for name, field in fields(file.package, file.message_type)
        if field.proto3_optional
    }
    assert optional, "no optional field found"
    assert optional <= DEFAULTS.keys(), sorted(optional - DEFAULTS.keys())


def fields(
    scope: str, messages: Iterable[descriptor_pb2.DescriptorProto]
) -> Iterator[tuple[str, descriptor_pb2.FieldDescriptorProto]]:
    """(full name, field) of each field of `messages`, nested messages included."""
    for message in messages:
        name = f"{scope}.{message.name}"
        for field in message.field:
            yield f"{name}.{field.name}", field
        yield from fields(name, message.nested_type)
