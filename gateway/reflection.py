"""Server reflection that shows the protos' comments, as grpc.reflection.v1 and v1alpha.

grpcio-reflection (1.85) serves each file as the generated module's descriptor, which
protoc strips of comments, so `grpcurl describe` would show no defaults or ranges; and it
serves only v1alpha, while current clients ask for v1 first. This servicer answers from
the same descriptor pool (so every symbol the server knows resolves), but hands out our
files as `kgstream_protos/v1/descriptors.binpb` has them: with their source info (written
by scripts/gen-protos, and checked against the .proto files by tests/protos). v1 and
v1alpha are the same protocol (v1 copied the messages field for field), so one servicer
with v1alpha's message classes serves both names.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from importlib import resources
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool
from grpc_reflection.v1alpha import reflection_pb2 as pb

V1_SERVICE = "grpc.reflection.v1.ServerReflection"
V1ALPHA_SERVICE = "grpc.reflection.v1alpha.ServerReflection"
SERVICE_NAMES = (V1_SERVICE, V1ALPHA_SERVICE)


def commented_files() -> dict[str, bytes]:
    """Our files' serialized FileDescriptorProtos, with comments, by file name."""
    data = resources.files("kgstream_protos.v1").joinpath("descriptors.binpb").read_bytes()
    files = descriptor_pb2.FileDescriptorSet.FromString(data).file
    return {file.name: file.SerializeToString() for file in files}


class ReflectionServicer:
    """ServerReflectionInfo over `pool`, serving the files in `commented` as given."""

    def __init__(
        self,
        service_names: Iterable[str],
        commented: dict[str, bytes],
        pool: descriptor_pool.DescriptorPool | None = None,
    ) -> None:
        self._services = tuple(sorted(service_names))
        self._commented = commented
        self._pool = pool or descriptor_pool.Default()

    def ServerReflectionInfo(
        self, requests: Iterator[pb.ServerReflectionRequest], context: grpc.ServicerContext
    ) -> Iterator[pb.ServerReflectionResponse]:
        for request in requests:
            yield self._answer(request)

    def _answer(self, request: pb.ServerReflectionRequest) -> pb.ServerReflectionResponse:
        kind = request.WhichOneof("message_request")
        try:
            if kind == "list_services":
                listed = [pb.ServiceResponse(name=name) for name in self._services]
                return pb.ServerReflectionResponse(
                    original_request=request,
                    list_services_response=pb.ListServiceResponse(service=listed),
                )
            if kind == "file_by_filename":
                return self._files(request, self._pool.FindFileByName(request.file_by_filename))
            if kind == "file_containing_symbol":
                symbol = request.file_containing_symbol
                return self._files(request, self._pool.FindFileContainingSymbol(symbol))
            if kind == "file_containing_extension":
                wanted = request.file_containing_extension
                message = self._pool.FindMessageTypeByName(wanted.containing_type)
                extension = self._pool.FindExtensionByNumber(message, wanted.extension_number)
                return self._files(request, extension.file)
            if kind == "all_extension_numbers_of_type":
                message = self._pool.FindMessageTypeByName(request.all_extension_numbers_of_type)
                numbers = sorted(ext.number for ext in self._pool.FindAllExtensions(message))
                return pb.ServerReflectionResponse(
                    original_request=request,
                    all_extension_numbers_response=pb.ExtensionNumberResponse(
                        base_type_name=message.full_name, extension_number=numbers
                    ),
                )
        except KeyError:
            return _error(request, grpc.StatusCode.NOT_FOUND, "not found")
        return _error(request, grpc.StatusCode.INVALID_ARGUMENT, "no request kind set")

    def _files(self, request: pb.ServerReflectionRequest, file: Any) -> pb.ServerReflectionResponse:
        """`file` and everything it imports, ours with their comments."""
        found: dict[str, bytes] = {}
        pending = [file]
        while pending:
            current = pending.pop()
            if current.name in found:
                continue
            found[current.name] = self._commented.get(current.name) or _serialized(current)
            pending.extend(current.dependencies)
        return pb.ServerReflectionResponse(
            original_request=request,
            file_descriptor_response=pb.FileDescriptorResponse(
                file_descriptor_proto=list(found.values())
            ),
        )


def _serialized(file: Any) -> bytes:
    proto = descriptor_pb2.FileDescriptorProto()
    file.CopyToProto(proto)
    data: bytes = proto.SerializeToString()
    return data


def _error(
    request: pb.ServerReflectionRequest, code: grpc.StatusCode, message: str
) -> pb.ServerReflectionResponse:
    return pb.ServerReflectionResponse(
        original_request=request,
        error_response=pb.ErrorResponse(error_code=code.value[0], error_message=message),
    )


def enable_reflection(server: grpc.Server, service_names: Iterable[str]) -> None:
    """Serve reflection for `service_names` (plus both reflection services) on `server`."""
    servicer = ReflectionServicer((*service_names, *SERVICE_NAMES), commented_files())
    handler = grpc.stream_stream_rpc_method_handler(
        servicer.ServerReflectionInfo,
        request_deserializer=pb.ServerReflectionRequest.FromString,
        response_serializer=pb.ServerReflectionResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        [
            grpc.method_handlers_generic_handler(name, {"ServerReflectionInfo": handler})
            for name in SERVICE_NAMES
        ]
    )
