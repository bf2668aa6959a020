"""The `kgstream` command: argument parsing and dispatch (the commands live in kgstream/commands/).

Errors a user can fix print one line and a hint, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from redis.exceptions import MovedError

from connectors.errors import StoreUnavailable, store_outages
from connectors.redis.clients import moved_message
from connectors.redis.ports import GraphFormatError
from connectors.redis.projection_control import GraphModuleMissing, ProjectionFailed
from connectors.vectors.port import VectorSpaceMismatchError
from gateway.types import DEFAULT_MODE, MODE_NAMES, InvalidQuery, Mode, parse_mode
from kgstream.commands.indexing import command_index, command_replay, command_run
from kgstream.commands.inspection import (
    command_compact,
    command_config,
    command_export,
    command_preview,
    command_rebuild_vectors,
    command_status,
)
from kgstream.commands.mcp_stdio import command_mcp
from kgstream.commands.retrying import command_retry_failed
from kgstream.commands.serving import command_query, command_serve
from kgstream.errors import RunCannotGoOn, UserError
from kgstream.settings import Settings, SettingsError, load_settings


def mode_argument(text: str) -> Mode:
    """`--mode`, parsed and refused as every door of the gateway parses a mode."""
    try:
        return parse_mode(text)
    except InvalidQuery as error:
        raise argparse.ArgumentTypeError(error.detail) from None


def installed_version() -> str:
    """kgstream's version as installed (the package metadata pip wrote from pyproject.toml)."""
    try:
        return importlib.metadata.version("kgstream")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed: run scripts/bootstrap, or pip install .)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kgstream",
        description=(
            "A live LightRAG-style knowledge-graph index: documents in, "
            "entities, relations and chunks out, exact after every edit and deletion."
        ),
    )
    parser.add_argument("--version", action="version", version=f"kgstream {installed_version()}")
    parser.add_argument(
        "--config", type=Path, default=None, help="a TOML settings file (keys = setting names)"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, help_text: str, data: bool = True) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        if data:
            sub.add_argument("--data", type=Path, default=None, help="the data directory")
        return sub

    def cluster_flags(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--workers", "-w", type=int, default=1, help="Bytewax workers per process")
        sub.add_argument(
            "--process-id", "-i", type=int, default=None, help="this process's index in --addresses"
        )
        sub.add_argument(
            "--addresses",
            "-a",
            default=None,
            help="HOST:PORT;HOST:PORT;... of every process of a Bytewax cluster (Kafka input, "
            "Redis and Qdrant servers; each process its own --data)",
        )

    command("config", "print the effective settings (secrets masked)")

    preview = command(
        "preview", "build the graph of a folder in memory (offline extractor) and print it", False
    )
    preview.add_argument("folder", type=Path)
    preview.add_argument("--top", type=int, default=15, help="how many entities to list")

    index = command("index", "bring the index to a folder's current content, then exit")
    index.add_argument("folder", type=Path)
    cluster_flags(index)

    run = command("run", "watch a folder (or consume Kafka), index continuously")
    run.add_argument("--watch", type=Path, default=None, help="the folder to watch")
    run.add_argument("--kafka", default=None, help="consume this Kafka bootstrap address instead")
    run.add_argument("--topic", default=None, help="the Kafka topic (default from settings)")
    cluster_flags(run)
    run.add_argument("--grpc", default=None, help="serve the gateway here (default from settings)")
    run.add_argument("--no-serve", action="store_true", help="index only; run no gateway")
    run.add_argument("--http", default=None, help="serve the HTTP API and web UI here")
    run.add_argument("--no-http", action="store_true", help="serve gRPC only")
    run.add_argument(
        "--until-caught-up",
        action="store_true",
        help="with --kafka: stop once every partition reaches the end it saw at start",
    )

    serve = command("serve", "serve the gRPC gateway over the stores (no indexing)")
    serve.add_argument("--grpc", default=None, help="HOST:PORT to listen on")
    serve.add_argument("--http", default=None, help="HOST:PORT for the HTTP API and web UI")
    serve.add_argument("--no-http", action="store_true", help="serve gRPC only")

    query = command("query", "ask a question (of a running gateway, or of the stores directly)")
    query.add_argument("question")
    query.add_argument(
        "--mode", type=mode_argument, default=DEFAULT_MODE, metavar="{" + ",".join(MODE_NAMES) + "}"
    )
    query.add_argument("--context-only", action="store_true", help="retrieve only, no answer")
    query.add_argument("--json", action="store_true", help="print JSON")
    query.add_argument("--grpc", default=None, help="HOST:PORT of a running gateway")
    query.add_argument("--top-k", type=int, default=None)

    mcp = command(
        "mcp",
        "serve MCP over stdio for a desktop agent (of a running gateway, or of the stores)",
    )
    mcp.add_argument("--grpc", default=None, help="HOST:PORT of a running gateway")
    mcp.add_argument(
        "--watch", type=Path, default=None, help="with --data: upserts write into this folder"
    )
    mcp.add_argument(
        "--kafka", default=None, help="with --data: upserts publish to this Kafka bootstrap"
    )
    mcp.add_argument("--topic", default=None, help="the Kafka topic (default from settings)")

    replay = command("replay", "rebuild the index from a Kafka topic, from offset 0, then exit")
    replay.add_argument("--kafka", default=None, help="Kafka bootstrap address")
    replay.add_argument("--topic", default=None)
    cluster_flags(replay)

    status = command("status", "documents by status, index version and failures")
    status.add_argument("--json", action="store_true")

    command(
        "retry-failed",
        "re-extract the documents whose extraction failed (the indexer running now, or the next)",
    )

    command("rebuild-vectors", "re-embed every chunk, entity and relation (after a model change)")
    command("compact", "rewrite the stores' files so that deleted documents leave no trace")

    export = command("export", "write the graph as JSON, NetworkX node-link JSON or GraphML")
    export.add_argument("--format", choices=("json", "node-link", "graphml"), default="json")
    export.add_argument("--output", type=Path, required=True)
    export.add_argument(
        "--with-times",
        action="store_true",
        help="add the index version and document times (then exports of equal indexes differ)",
    )
    return parser


def settings_from(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {"data_dir": getattr(args, "data", None)}
    if getattr(args, "kafka", None):
        overrides["kafka_bootstrap_servers"] = args.kafka
    if getattr(args, "topic", None):
        overrides["kafka_topic"] = args.topic
    if getattr(args, "grpc", None) and args.command in ("run", "serve"):
        overrides["grpc_address"] = args.grpc
    if args.command in ("run", "serve"):
        if getattr(args, "http", None):
            overrides["http_address"] = args.http
        if getattr(args, "no_http", False):
            overrides["http_address"] = ""
    return load_settings(os.environ, args.config, overrides)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        settings = settings_from(args)
        from kgstream.logs import configure_logging

        configure_logging(
            settings.log_format, settings.log_level, library_level=settings.library_log_level
        )
        handler = COMMANDS[args.command]
        with store_outages():
            try:
                return handler(settings, args)
            except MovedError as error:
                raise UserError(
                    moved_message(error),
                    "set redis_url to redis+cluster://HOST:PORT (any node; more, "
                    "comma-separated, for a start while one is down)",
                ) from error
    except (SettingsError, UserError) as error:
        print(f"kgstream: {error}", file=sys.stderr)
        hint = getattr(error, "hint", "") or "run `kgstream config` to see the effective settings"
        print(f"hint: {hint}", file=sys.stderr)
        return 2
    except StoreUnavailable as error:
        print(f"kgstream: {error}", file=sys.stderr)
        print(
            "hint: start the store, or point redis_url / qdrant_url at a running one "
            "(`kgstream config` shows them)",
            file=sys.stderr,
        )
        return 1
    except VectorSpaceMismatchError as error:
        print(f"kgstream: {error}", file=sys.stderr)
        print("hint: kgstream rebuild-vectors --data DIR (re-embeds from Redis)", file=sys.stderr)
        return 2
    except (GraphModuleMissing, ProjectionFailed) as error:
        print(f"kgstream: {error}", file=sys.stderr)
        print("hint: graph_projection=auto writes it only where it can", file=sys.stderr)
        return 2
    except GraphFormatError as error:
        print(f"kgstream: {error}", file=sys.stderr)
        print(
            "hint: kgstream index DIR --data NEW (or kgstream replay --data NEW)", file=sys.stderr
        )
        return 2
    except RunCannotGoOn:
        return 1  # its line is printed, and stderr is closed by now
    except KeyboardInterrupt:
        return 130


# -- commands -----------------------------------------------------------------


COMMANDS = {
    "config": command_config,
    "preview": command_preview,
    "index": command_index,
    "run": command_run,
    "replay": command_replay,
    "status": command_status,
    "export": command_export,
    "rebuild-vectors": command_rebuild_vectors,
    "compact": command_compact,
    "retry-failed": command_retry_failed,
    "serve": command_serve,
    "query": command_query,
    "mcp": command_mcp,
}


if __name__ == "__main__":
    sys.exit(main())
