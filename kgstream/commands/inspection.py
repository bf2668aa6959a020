"""The commands that look at an index: `status`, `export`, `preview`, `config`; and
those that maintain a stopped one: `rebuild-vectors`, `compact`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgstream.commands.common import data_dir_lock, open_index_graph, require_index
from kgstream.errors import UserError
from kgstream.settings import Settings

if TYPE_CHECKING:
    from connectors.redis.ports import GraphRecords, IndexControl
    from dataflow.core.documents import FailureKind


def command_config(settings: Settings, args: argparse.Namespace) -> int:
    print(json.dumps(settings.masked(), indent=2))
    return 0


def command_preview(settings: Settings, args: argparse.Namespace) -> int:
    """A first look at what kgstream finds in a folder, with nothing installed or running."""
    from connectors.folder.scan import iter_document_paths, read_document
    from connectors.tokenizer import TiktokenTokenizer
    from dataflow.core.contributions import Renderer
    from dataflow.core.documents import DocumentStatus
    from dataflow.core.index import ReferenceIndex
    from dataflow.core.offline.extractor import extract_offline

    folder: Path = args.folder
    if not folder.is_dir():
        raise UserError(f"{folder} is not a folder", "give the path of a folder of documents")
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
    print(f"\nTop {min(args.top, len(ranked))} entities by degree:")
    for entity in ranked[: args.top]:
        print(f"  {entity.name} ({entity.type}, {degree.get(entity.key, 0)} relations)")
    return 0


def command_status(settings: Settings, args: argparse.Namespace) -> int:
    graph, control, embedded = open_index_graph(settings)
    try:
        print_status(graph, control, as_json=args.json)
    finally:
        if embedded is not None:
            embedded.stop()
    return 0


def status_data(graph: GraphRecords, control: IndexControl) -> dict[str, Any]:
    from dataflow.core.documents import DocumentStatus

    counts = graph.status_counts()
    failed_ids, _ = graph.documents_by_status(DocumentStatus.FAILED, 0, 1000)
    failed = graph.get_documents(failed_ids)
    processing_ids, _ = graph.documents_by_status(DocumentStatus.PROCESSING, 0, 10)
    processing = graph.get_documents(processing_ids)
    dead_count, newest = control.dead_letters(limit=5)
    return {
        "documents": {status.value: counts.get(status, 0) for status in DocumentStatus},
        "index_version": graph.version(),
        "records": graph.record_counts(),
        "consumer_lag": {str(p): n for p, n in control.consumer_lag().items()},
        "source_hold": control.source_hold(),
        "dead_letters": {
            "count": dead_count,
            "newest": [
                {"origin": origin, "reason": reason, "at": at} for origin, reason, at in newest
            ],
        },
        "in_progress": [
            {
                "doc_id": doc_id,
                "file_path": processing[doc_id].record.file_path,
                "chunks_settled": processing[doc_id].record.chunks_settled,
                "chunks_changed": processing[doc_id].record.chunks_changed,
            }
            for doc_id in processing_ids
            if doc_id in processing
        ],
        "failures": [
            {
                "doc_id": doc_id,
                "file_path": failed[doc_id].record.file_path,
                "reason": failed[doc_id].record.reason,
                "failure_kind": _kind_name(failed[doc_id].record.failure_kind),
                "retryable": failed[doc_id].record.retryable,
            }
            for doc_id in failed_ids
            if doc_id in failed
        ],
    }


def _kind_name(kind: FailureKind | None) -> str | None:
    return None if kind is None else kind.value


def print_status(graph: GraphRecords, control: IndexControl, as_json: bool) -> None:
    data = status_data(graph, control)
    if as_json:
        print(json.dumps(data, indent=2))
        return
    counts = ", ".join(f"{name} {count}" for name, count in data["documents"].items())
    print(f"index version {data['index_version']}; documents: {counts}")
    print(", ".join(f"{count} {name}" for name, count in data["records"].items()))
    if data["consumer_lag"]:
        lag = ", ".join(f"partition {p}: {n}" for p, n in data["consumer_lag"].items())
        print(f"consumer lag: {lag}")
    if data["source_hold"]:
        print(f"source holding: {data['source_hold']}; its documents are kept until it is back")
    for document in data["in_progress"]:
        print(
            f"  PROCESSING {document['doc_id']}: {document['chunks_settled']} of "
            f"{document['chunks_changed']} changed chunks done"
        )
    for failure in data["failures"]:
        print(f"  FAILED {failure['doc_id']}: {failure['reason']}")
    if any(failure["retryable"] for failure in data["failures"]):
        print("hint: `kgstream retry-failed` extracts the chunks that failed again")
    dead = data["dead_letters"]
    if dead["count"]:
        print(f"dead letters (messages that could not be decoded): {dead['count']}, newest:")
        for letter in dead["newest"]:
            print(f"  {letter['origin']}: {letter['reason']}")


def command_export(settings: Settings, args: argparse.Namespace) -> int:
    from kgstream.export import export_data, write_graphml, write_json, write_node_link

    graph, _, embedded = open_index_graph(settings)
    try:
        data = export_data(graph, with_times=args.with_times)
    finally:
        if embedded is not None:
            embedded.stop()
    writers = {"json": write_json, "node-link": write_node_link, "graphml": write_graphml}
    writers[args.format](data, args.output)
    print(
        f"wrote {len(data['entities'])} entities and {len(data['relations'])} relations "
        f"to {args.output}"
    )
    return 0


def command_rebuild_vectors(settings: Settings, args: argparse.Namespace) -> int:
    from connectors.stores import open_graph_store, open_vector_store
    from kgstream.assembly import build_embedder, store_locations
    from kgstream.maintenance import rebuild_vectors

    require_index(settings)
    with data_dir_lock(settings.data_dir):
        locations = store_locations(settings)
        graph, embedded = open_graph_store(locations)
        vectors = open_vector_store(locations)
        try:
            counts = rebuild_vectors(graph, vectors, build_embedder(settings))
        finally:
            vectors.close()
            if embedded is not None:
                embedded.stop()
    print(", ".join(f"{count} {kind}" for kind, count in counts.items()) + " re-embedded")
    return 0


def command_compact(settings: Settings, args: argparse.Namespace) -> int:
    from connectors.redis.index_control import RedisIndexControl
    from connectors.stores import open_graph_store, open_vector_store
    from connectors.vectors.edge import EdgeVectorStore
    from kgstream.assembly import store_locations
    from kgstream.maintenance import compact

    if settings.redis_url or settings.qdrant_url:
        raise UserError(
            "compact rewrites the embedded stores' files under --data; Redis and Qdrant "
            "servers keep their own files",
            "on a Redis server run BGREWRITEAOF and SAVE; Qdrant's optimizer vacuums deletes",
        )
    require_index(settings)
    with data_dir_lock(settings.data_dir):
        before = _bytes_under(settings.data_dir)
        graph, embedded = open_graph_store(store_locations(settings))
        vectors = open_vector_store(store_locations(settings))
        assert embedded is not None and isinstance(vectors, EdgeVectorStore)  # not servers
        try:
            dictionary = RedisIndexControl(graph.client, graph.workspace).snapshot_dictionary()
            compact(embedded, vectors, settings.data_dir / "recovery", dictionary)
        finally:
            vectors.close()
            embedded.stop()
        after = _bytes_under(settings.data_dir)
    print(
        f"compacted {settings.data_dir}: {before:,} -> {after:,} bytes; what deleted "
        "documents held is gone from its files"
    )
    return 0


def _bytes_under(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file())
