"""The commands that answer questions: `serve` (the gateway) and `query`."""

from __future__ import annotations

import argparse
import contextlib
import threading
from typing import Any

from kgstream.commands.common import data_dir_lock, require_index, telemetry
from kgstream.errors import UserError
from kgstream.settings import Settings


def start_gateway(settings: Settings, engine: Any, stores: Any, folder: Any = None) -> Any:
    """Serve `engine` over gRPC (and HTTP), and read the vector keys its searches will need
    ahead. `folder`: the watched folder, where Ingest writes."""
    from kgstream.assembly import serve_gateway

    try:
        gateway = serve_gateway(settings, engine, stores, folder)
    except OSError as error:
        raise UserError(
            str(error),
            "is another gateway running there? pass --grpc HOST:PORT and --http HOST:PORT "
            "(or --no-http, --no-serve)",
        ) from None
    stores.vectors.start_key_warmup()
    http_url = gateway.http.url if gateway.http is not None else None
    _print_serving(gateway.address, http_url, tls=settings.grpc_tls_cert_path is not None)
    return gateway


def _print_serving(address: str, http_url: str | None, tls: bool = False) -> None:
    transport = "gRPC over TLS" if tls else "gRPC"
    web = (
        f"  web:   {http_url}/ (graph, queries, documents; HTTP API {http_url}/docs)\n"
        f"  chat:  OpenAI clients at {http_url}/v1, Ollama clients at {http_url}\n"
        if http_url
        else ""
    )
    print(
        f"kgstream: gateway on {address} ({transport}; health and reflection on)\n"
        f"{web}"
        f'  ask:   kgstream query "your question" --grpc {address}\n'
        "  yours: kgstream run --watch YOUR_FOLDER --data YOUR_DATA_DIR\n"
        "  LLM:   set OPENAI_BASE_URL, OPENAI_API_KEY and KGSTREAM_LLM_MODEL for answers and "
        "LLM extraction\n"
        "  servers: set KGSTREAM_REDIS_URL, KGSTREAM_QDRANT_URL (and --kafka HOST:PORT)\n"
        "  stop:  Ctrl-C",
        flush=True,
    )


def command_serve(settings: Settings, args: argparse.Namespace) -> int:
    from kgstream.assembly import (
        build_chat_client,
        build_embedder,
        build_engine,
        open_settings_stores,
    )

    embedded = not (settings.redis_url and settings.qdrant_url)
    lock = data_dir_lock(settings.data_dir) if embedded else contextlib.nullcontext()
    with lock, telemetry(settings) as metrics:
        embedder = build_embedder(settings)
        stores = open_settings_stores(settings, embedder)
        if metrics is not None:
            metrics.watch_index(stores.graph, stores.control, settings.kafka_topic)
        client = build_chat_client(settings, metrics)
        try:
            engine = build_engine(settings, stores, embedder, metrics, client)
            stop = _stop_on_signal()  # before the banner: a signal after it is a clean stop
            gateway = start_gateway(settings, engine, stores)
            try:
                while not stop.wait(1.0):
                    pass
            finally:
                gateway.stop(grace=2)
        finally:
            if client is not None:
                client.close()  # flushes the LLM cache's buffered replies
            stores.close()
    return 0


def _stop_on_signal() -> threading.Event:
    """An event that SIGINT (Ctrl-C) and SIGTERM (a container stop) set from now on."""
    import signal

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    return stop


def command_query(settings: Settings, args: argparse.Namespace) -> int:
    from kgstream.query_command import build_request, print_result, query_json

    request = build_request(args.question, args.mode, args.top_k)
    if args.grpc:
        result, answer = _query_gateway(args.grpc, request, args.context_only, settings)
    else:
        result, answer = _query_stores(settings, request, args.context_only)
    print_result(query_json(result, answer), args.json)
    return 0


def _query_gateway(address: str, request: Any, context_only: bool, settings: Settings) -> Any:
    import grpc

    from kgstream_protos.v1 import query_pb2_grpc

    metadata = []
    if settings.grpc_auth_token:
        metadata.append(("authorization", f"Bearer {settings.grpc_auth_token}"))
    with gateway_channel(address, settings) as channel:
        stub = query_pb2_grpc.KnowledgeGraphStub(channel)  # type: ignore[no-untyped-call]
        try:
            if context_only:
                return stub.Retrieve(request, metadata=metadata, timeout=120), None
            response = stub.Query(request, metadata=metadata, timeout=600)
            return response.context, response.answer
        except grpc.RpcError as error:
            raise UserError(
                f"the gateway at {address} answered {error.code().name}: {error.details()}",
                "is `kgstream run` (or `kgstream serve`) running there?",
            ) from None


def gateway_channel(address: str, settings: Settings) -> Any:
    """A channel to the gateway: TLS when the gateway's certificate is set (trusted as the
    root: a self-signed one works), plaintext otherwise."""
    import grpc

    if settings.grpc_tls_cert_path is None:
        return grpc.insecure_channel(address)
    try:
        root = settings.grpc_tls_cert_path.read_bytes()
    except OSError as error:
        raise UserError(
            f"cannot read grpc_tls_cert_path {settings.grpc_tls_cert_path}: {error}",
            "set KGSTREAM_GRPC_TLS_CERT_PATH to the gateway's certificate (PEM)",
        ) from None
    return grpc.secure_channel(address, grpc.ssl_channel_credentials(root_certificates=root))


def _query_stores(settings: Settings, request: Any, context_only: bool) -> Any:
    from gateway.convert import query_params_from, retrieval_to_proto
    from gateway.types import InvalidQuery
    from kgstream.assembly import (
        build_chat_client,
        build_embedder,
        build_engine,
        open_settings_stores,
    )

    require_index(settings)
    embedded = not (settings.redis_url and settings.qdrant_url)
    with data_dir_lock(settings.data_dir) if embedded else contextlib.nullcontext():
        embedder = build_embedder(settings)
        stores = open_settings_stores(settings, embedder)
        client = build_chat_client(settings)
        try:
            engine = build_engine(settings, stores, embedder, client=client)
            params = query_params_from(request)
            if context_only:
                return retrieval_to_proto(engine.retrieve(params, None)), None
            answer = engine.answer(params, None)
            return retrieval_to_proto(answer.retrieval), answer.text
        except InvalidQuery as error:
            raise UserError(str(error), "see `kgstream query --help`") from None
        finally:
            if client is not None:
                client.close()  # flushes the LLM cache's buffered replies
            stores.close()
