"""The gRPC gateway: kgstream.v1.KnowledgeGraph and kgstream.v1.Ingest over one server.

Queries go to the engine; graph and document look-ups read the Redis graph store
directly; Ingest publishes to Kafka. Health checking (NOT_SERVING while a store cannot be
reached: gateway/health.py) and reflection (v1 and v1alpha, with the protos' comments:
gateway/reflection.py) are always on, so load balancers and `grpcurl` work. The HTTP API,
when on, serves the same servicers as JSON routes and as MCP at /mcp. Binds
127.0.0.1 unless told otherwise: exposing it is a deliberate choice, with TLS (a server
certificate and key: `ServerOptions.tls_cert_path` / `tls_key_path`) and an auth token, or
behind a proxy that terminates TLS.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
from grpc_health.v1 import health, health_pb2_grpc

from connectors.redis.ports import GraphRecords, IndexControl
from gateway.auth import BearerTokenInterceptor
from gateway.health import HealthCheck, ListingHealthServicer, StoreHealth
from gateway.ingest import EventPublisher, IngestService
from gateway.knowledge_graph import Engine, KnowledgeGraphService
from gateway.reflection import enable_reflection
from kgstream_protos.v1 import ingest_pb2, ingest_pb2_grpc, query_pb2, query_pb2_grpc

if TYPE_CHECKING:  # Starlette and uvicorn load only when the HTTP API is served
    from gateway.http.server import RunningHttpServer

KNOWLEDGE_GRAPH_SERVICE = query_pb2.DESCRIPTOR.services_by_name["KnowledgeGraph"].full_name
INGEST_SERVICE = ingest_pb2.DESCRIPTOR.services_by_name["Ingest"].full_name


@dataclass(frozen=True)
class ServerOptions:
    """How the gateway listens. `address` ending in ":0" picks a free port."""

    address: str = "127.0.0.1:50051"
    auth_token: str | None = None
    max_message_bytes: int = 16 * 1024 * 1024  # a 10 MB document fits, with room
    max_workers: int = 16  # concurrent calls; an open QueryStream holds one
    health_interval_seconds: float = 2.0  # how often the stores are probed for health
    tls_cert_path: Path | None = None  # PEM server certificate (chain); with tls_key_path: TLS
    tls_key_path: Path | None = None  # PEM private key of that certificate
    # The HTTP/JSON API (gateway/http/) beside gRPC, over the same services; None: off.
    http_address: str | None = None
    http_cors_origins: tuple[str, ...] = ()  # origins a browser may call it from; none: off
    # Host names the HTTP API answers to without a token (gateway/http/hosts.py); none: the
    # loopback names when it binds loopback, else any.
    http_allowed_hosts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        host, colon, port = self.address.rpartition(":")
        if not colon or not host or not port.isdigit():
            raise ValueError(
                f"ServerOptions.address must be host:port (e.g. 127.0.0.1:50051); "
                f"got {self.address!r}"
            )
        if self.auth_token == "":
            raise ValueError("ServerOptions.auth_token must be non-empty, or None for no auth")
        if self.max_message_bytes < 1024:
            raise ValueError(
                f"ServerOptions.max_message_bytes must be >= 1024; got {self.max_message_bytes}"
            )
        if self.max_workers < 1:
            raise ValueError(f"ServerOptions.max_workers must be >= 1; got {self.max_workers}")
        if (self.tls_cert_path is None) != (self.tls_key_path is None):
            raise ValueError(
                "ServerOptions.tls_cert_path and tls_key_path go together (TLS needs both); "
                f"got cert {self.tls_cert_path}, key {self.tls_key_path}"
            )
        if self.health_interval_seconds <= 0:
            raise ValueError(
                "ServerOptions.health_interval_seconds must be > 0; "
                f"got {self.health_interval_seconds}"
            )


@dataclass(frozen=True)
class RunningServer:
    """A started gateway: `port` is the bound one (useful with address "host:0")."""

    server: grpc.Server
    host: str
    port: int
    health: StoreHealth | None = None
    http: RunningHttpServer | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def stop(self, grace: float | None = None) -> None:
        if self.http is not None:
            self.http.stop()
        if self.health is not None:
            self.health.stop()
        self.server.stop(grace).wait()

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        return bool(self.server.wait_for_termination(timeout))


def serve(
    engine: Engine,
    graph: GraphRecords,
    control: IndexControl,
    options: ServerOptions = ServerOptions(),
    producer: EventPublisher | None = None,
    health_checks: Mapping[str, HealthCheck] | None = None,
) -> RunningServer:
    """Start the gateway and return it; the caller stops it (`RunningServer.stop`).

    `health_checks` (by store name): while one raises, health is NOT_SERVING."""
    interceptors = [BearerTokenInterceptor(options.auth_token)] if options.auth_token else []
    server = grpc.server(
        futures.ThreadPoolExecutor(
            max_workers=options.max_workers, thread_name_prefix="kgstream-grpc"
        ),
        interceptors=interceptors,
        options=[
            ("grpc.max_receive_message_length", options.max_message_bytes),
            ("grpc.max_send_message_length", options.max_message_bytes),
            ("grpc.so_reuseport", 0),
        ],
    )
    knowledge_graph = KnowledgeGraphService(engine, graph)
    ingest = IngestService(graph, producer)
    query_pb2_grpc.add_KnowledgeGraphServicer_to_server(  # type: ignore[no-untyped-call]
        knowledge_graph, server
    )
    ingest_pb2_grpc.add_IngestServicer_to_server(  # type: ignore[no-untyped-call]
        ingest, server
    )
    health_servicer = ListingHealthServicer()
    store_health = StoreHealth(
        health_servicer,
        ("", KNOWLEDGE_GRAPH_SERVICE, INGEST_SERVICE),
        health_checks or {},
        options.health_interval_seconds,
    )
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    enable_reflection(server, (KNOWLEDGE_GRAPH_SERVICE, INGEST_SERVICE, health.SERVICE_NAME))
    try:
        credentials = _server_credentials(options)
        if credentials is None:
            port = server.add_insecure_port(options.address)
        else:
            port = server.add_secure_port(options.address, credentials)
    except RuntimeError as error:
        raise OSError(f"cannot bind the gateway to {options.address}: {error}") from error
    if port == 0:
        raise OSError(f"cannot bind the gateway to {options.address}: address in use or invalid")
    http = None
    if options.http_address is not None:
        from gateway.embeddings import EmbeddingService
        from gateway.http.app import HttpApi, HttpOptions, create_app
        from gateway.http.chat import openai_door
        from gateway.http.embeddings import EmbeddingsRoute
        from gateway.http.hosts import served_hosts
        from gateway.http.lightrag import lightrag_door
        from gateway.http.ollama import ollama_door
        from gateway.http.server import serve_http
        from gateway.mcp.http import MCP_REQUEST_HEADERS, MCP_RESPONSE_HEADERS, mcp_door
        from gateway.mcp.server import build_server
        from gateway.mcp.servicers import LocalServicers
        from gateway.mcp.tools import ToolLimits

        api = HttpApi(knowledge_graph, ingest, graph, control, lambda: not store_health.failing())
        http_options = HttpOptions(
            auth_token=options.auth_token,
            max_body_bytes=options.max_message_bytes,
            cors_origins=options.http_cors_origins,
            allowed_hosts=served_hosts(
                options.http_address.rpartition(":")[0].strip("[]"), options.http_allowed_hosts
            ),
            cors_request_headers=MCP_REQUEST_HEADERS,
            cors_response_headers=MCP_RESPONSE_HEADERS,
        )
        mcp = build_server(
            LocalServicers(knowledge_graph, ingest, graph),
            ToolLimits(knowledge_graph.limits, options.max_message_bytes),
        )
        embeddings = EmbeddingsRoute(EmbeddingService(engine.embedder))
        doors = [
            openai_door(knowledge_graph, embeddings),
            ollama_door(knowledge_graph),
            lightrag_door(api),
            mcp_door(mcp, options.max_message_bytes, options.http_cors_origins),
        ]
        app = create_app(api, http_options, doors)
        try:
            http = serve_http(app, options.http_address)
        except (OSError, ValueError):
            server.stop(None)
            raise
    server.start()
    host = options.address.rpartition(":")[0]
    return RunningServer(
        server=server, host=host, port=port, health=store_health.start(), http=http
    )


def _server_credentials(options: ServerOptions) -> grpc.ServerCredentials | None:
    """TLS credentials from the PEM files `options` names, or None for plaintext."""
    if options.tls_cert_path is None or options.tls_key_path is None:
        return None
    pems = {}
    for name, path in (
        ("tls_cert_path", options.tls_cert_path),
        ("tls_key_path", options.tls_key_path),
    ):
        try:
            pems[name] = Path(path).read_bytes()
        except OSError as error:
            raise OSError(f"cannot read the gateway's {name} {path}: {error}") from error
    return grpc.ssl_server_credentials([(pems["tls_key_path"], pems["tls_cert_path"])])
