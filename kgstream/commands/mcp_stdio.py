"""`kgstream mcp`: the MCP server over stdio, for desktop agents (Claude Desktop, Cursor...),
which start it as a child and talk JSON-RPC over its stdin and stdout.

Like `kgstream query`, it asks a running gateway (`--grpc HOST:PORT`: its servicers over
gRPC, with the bearer token and TLS certificate of the settings) or opens the stores
itself (`--data DIR`: the servicers in this process, over the engine, as `kgstream serve`
runs them; Ingest then writes into `--watch FOLDER` or publishes to `--kafka`). Stdout
carries the protocol alone: while the stores open, anything written to it goes to stderr,
and the SDK keeps it so while serving; logs go to stderr. The server stops when the client
closes stdin.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

from kgstream.commands.common import data_dir_lock, require_index
from kgstream.settings import Settings


def command_mcp(settings: Settings, args: argparse.Namespace) -> int:
    import anyio

    with contextlib.ExitStack() as stack:
        with _stdout_on_stderr():
            servicers = (
                _gateway_servicers(stack, args.grpc, settings)
                if args.grpc
                else _local_servicers(stack, settings, args)
            )
        anyio.run(_serve_stdio, servicers, settings)
    return 0


async def _serve_stdio(servicers: Any, settings: Settings) -> None:
    from mcp.server.stdio import stdio_server

    from gateway.mcp.server import build_server
    from gateway.mcp.tools import ToolLimits

    server = build_server(servicers, ToolLimits(settings.request_limits()))
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _gateway_servicers(stack: contextlib.ExitStack, address: str, settings: Settings) -> Any:
    from gateway.mcp.servicers import GatewayServicers
    from kgstream.commands.serving import gateway_channel

    channel = stack.enter_context(gateway_channel(address, settings))
    return GatewayServicers(channel, settings.grpc_auth_token)


def _local_servicers(
    stack: contextlib.ExitStack, settings: Settings, args: argparse.Namespace
) -> Any:
    from gateway.ingest import IngestService
    from gateway.knowledge_graph import KnowledgeGraphService
    from gateway.mcp.servicers import LocalServicers
    from kgstream.assembly import (
        build_chat_client,
        build_embedder,
        build_engine,
        build_publisher,
        open_settings_stores,
    )

    require_index(settings)
    if not (settings.redis_url and settings.qdrant_url):  # embedded stores: one user at a time
        stack.enter_context(data_dir_lock(settings.data_dir))
    embedder = build_embedder(settings)
    stores = open_settings_stores(settings, embedder)
    stack.callback(stores.close)
    client = build_chat_client(settings)
    if client is not None:
        stack.callback(client.close)  # flushes the LLM cache's buffered replies
    engine = build_engine(settings, stores, embedder, client=client)
    publisher = build_publisher(settings, args.watch)
    close = getattr(publisher, "close", None)
    if close is not None:
        stack.callback(close)
    return LocalServicers(
        KnowledgeGraphService(engine, stores.graph),
        IngestService(stores.graph, publisher),
        stores.graph,
    )


@contextlib.contextmanager
def _stdout_on_stderr() -> Iterator[None]:
    """File descriptor 1 points at stderr meanwhile (a child's or a library's stray output
    must not reach the client, which reads JSON-RPC there)."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
