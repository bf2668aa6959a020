"""The Python code generated from protos/ by scripts/gen-protos (never edit it by hand).

`kgstream_protos.v1` holds the modules of the proto package `kgstream.v1`: the messages
(`query_pb2`, `ingest_pb2`, `events_pb2`), the gRPC stubs and servicer bases (`*_pb2_grpc`),
and `descriptors.binpb`, the files' descriptors with their comments. protoc would name the
modules `kgstream.v1`, which the application package `kgstream` shadows, hence this name.
"""
