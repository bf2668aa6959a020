"""The `kgstream` command.

Errors a user can fix print one line and a hint, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from kgstream.settings import Settings, SettingsError, load_settings


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kgstream",
        description=(
            "A live LightRAG-style knowledge-graph index: documents in, "
            "entities, relations and chunks out, exact after every edit and deletion."
        ),
    )
    parser.add_argument(
        "--config", type=Path, default=None, help="a TOML settings file (keys = setting names)"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    config = commands.add_parser("config", help="print the effective settings (secrets masked)")
    config.add_argument("--data", type=Path, default=None, help="data directory")
    preview = commands.add_parser(
        "preview",
        help="build the graph of a folder in memory with the offline extractor and print it",
    )
    preview.add_argument("folder", type=Path, help="the folder of documents")
    preview.add_argument("--top", type=int, default=15, help="how many entities to list")
    return parser


def settings_from(args: argparse.Namespace) -> Settings:
    overrides = {"data_dir": getattr(args, "data", None)}
    return load_settings(os.environ, args.config, overrides)


def preview_folder(settings: Settings, folder: Path, top: int) -> int:
    """A first look at what kgstream finds in a folder, with nothing installed or running."""
    from connectors.folder_scan import iter_document_paths, read_document
    from connectors.tokenizer import TiktokenTokenizer
    from dataflow.core.contributions import Renderer
    from dataflow.core.documents import DocumentStatus
    from dataflow.core.index import ReferenceIndex
    from dataflow.core.offline_extractor import extract_offline

    if not folder.is_dir():
        raise SettingsError(f"{folder} is not a folder")
    tokenizer = TiktokenTokenizer(settings.tokenizer_encoding)
    index = ReferenceIndex(
        tokenizer, extract_offline, settings.chunking_options(), settings.document_limits()
    )
    index.apply_all(read_document(folder, path) for path in iter_document_paths(folder))
    snapshot = index.snapshot(Renderer(tokenizer.count, settings.render_options()))
    failed = [d for d in snapshot.documents.values() if d.status is DocumentStatus.FAILED]
    print(
        f"{len(snapshot.documents)} documents ({len(failed)} failed), "
        f"{len(snapshot.chunks)} chunks, {len(snapshot.entities)} entities, "
        f"{len(snapshot.relations)} relations"
    )
    for document in failed:
        print(f"  FAILED {document.doc_id}: {document.reason}")
    degree: dict[str, int] = {}
    for source, target in snapshot.relations:
        degree[source] = degree.get(source, 0) + 1
        degree[target] = degree.get(target, 0) + 1
    ranked = sorted(snapshot.entities.values(), key=lambda e: (-degree.get(e.key, 0), e.key))
    print(f"\nTop {min(top, len(ranked))} entities by degree:")
    for entity in ranked[:top]:
        print(f"  {entity.name} ({entity.type}, {degree.get(entity.key, 0)} relations)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        settings = settings_from(args)
        if args.command == "config":
            print(json.dumps(settings.masked(), indent=2))
            return 0
        if args.command == "preview":
            return preview_folder(settings, args.folder, args.top)
    except SettingsError as error:
        print(f"kgstream: {error}", file=sys.stderr)
        print("hint: run `kgstream config` to see the effective settings", file=sys.stderr)
        return 2
    parser.error(f"unknown command {args.command!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
