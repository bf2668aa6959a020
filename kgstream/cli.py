"""The `kgstream` command: argument parsing and one function per command.

Errors a user can fix print one line and a hint, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from kgstream.settings import Settings, SettingsError, load_settings


class UserError(Exception):
    """A problem the user can fix; `hint` says how."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


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
    run.add_argument(
        "--until-caught-up",
        action="store_true",
        help="with --kafka: stop once every partition reaches the end it saw at start",
    )

    serve = command("serve", "serve the gRPC gateway over the stores (no indexing)")
    serve.add_argument("--grpc", default=None, help="HOST:PORT to listen on")

    query = command("query", "ask a question (of a running gateway, or of the stores directly)")
    query.add_argument("question")
    query.add_argument(
        "--mode", choices=("local", "global", "hybrid", "naive", "mix"), default="mix"
    )
    query.add_argument("--context-only", action="store_true", help="retrieve only, no answer")
    query.add_argument("--json", action="store_true", help="print JSON")
    query.add_argument("--grpc", default=None, help="HOST:PORT of a running gateway")
    query.add_argument("--top-k", type=int, default=None)

    replay = command("replay", "rebuild the index from a Kafka topic, from offset 0, then exit")
    replay.add_argument("--kafka", default=None, help="Kafka bootstrap address")
    replay.add_argument("--topic", default=None)
    cluster_flags(replay)

    status = command("status", "documents by status, index version and failures")
    status.add_argument("--json", action="store_true")

    command("rebuild-vectors", "re-embed every chunk, entity and relation (after a model change)")

    export = command("export", "write the graph as JSON or GraphML")
    export.add_argument("--format", choices=("json", "graphml"), default="json")
    export.add_argument("--output", type=Path, required=True)
    return parser


def settings_from(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {"data_dir": getattr(args, "data", None)}
    if getattr(args, "kafka", None):
        overrides["kafka_bootstrap_servers"] = args.kafka
    if getattr(args, "topic", None):
        overrides["kafka_topic"] = args.topic
    if getattr(args, "grpc", None) and args.command in ("run", "serve"):
        overrides["grpc_address"] = args.grpc
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

        configure_logging(settings.log_format)
        handler = COMMANDS[args.command]
        return handler(settings, args)
    except (SettingsError, UserError) as error:
        print(f"kgstream: {error}", file=sys.stderr)
        hint = getattr(error, "hint", "") or "run `kgstream config` to see the effective settings"
        print(f"hint: {hint}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


# -- commands -----------------------------------------------------------------


def command_config(settings: Settings, args: argparse.Namespace) -> int:
    print(json.dumps(settings.masked(), indent=2))
    return 0


def command_preview(settings: Settings, args: argparse.Namespace) -> int:
    """A first look at what kgstream finds in a folder, with nothing installed or running."""
    from connectors.folder_scan import iter_document_paths, read_document
    from connectors.tokenizer import TiktokenTokenizer
    from dataflow.core.contributions import Renderer
    from dataflow.core.documents import DocumentStatus
    from dataflow.core.index import ReferenceIndex
    from dataflow.core.offline_extractor import extract_offline

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


@contextlib.contextmanager
def telemetry(settings: Settings) -> Iterator[Any]:
    """Metrics for the command's lifetime when `metrics_address` is set (else None)."""
    if not settings.metrics_address:
        yield None
        return
    from kgstream.metrics import Metrics, start_metrics_server

    metrics = Metrics()
    try:
        server = start_metrics_server(settings.metrics_address, metrics)
    except OSError as error:
        raise UserError(
            f"cannot serve metrics on {settings.metrics_address}: {error}",
            "set KGSTREAM_METRICS_ADDRESS to a free HOST:PORT",
        ) from None
    print(f"kgstream: metrics on http://{server.host}:{server.port}/metrics", flush=True)
    try:
        yield metrics
    finally:
        server.stop()


@contextlib.contextmanager
def data_dir_lock(data_dir: Path) -> Iterator[None]:
    """One writer per data directory (its recovery database and vector files)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with (data_dir / "kgstream.lock").open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(
                f"another kgstream process is using {data_dir}",
                "ask it with `kgstream query ... --grpc HOST:PORT`; "
                "`kgstream status` and `kgstream export` may run beside it",
            ) from None
        yield


def run_options(args: argparse.Namespace) -> Any:
    from kgstream.indexer import RunOptions

    addresses = tuple(a for a in (args.addresses or "").split(";") if a)
    if addresses and args.process_id is None:
        raise UserError("--addresses needs --process-id", "give each process its index, from 0")
    try:
        return RunOptions(args.workers, args.process_id, addresses)
    except ValueError as error:
        raise UserError(str(error), "see `kgstream run --help`") from None


def _progress_printer(label: str) -> Any:
    from tqdm import tqdm

    bar = tqdm(unit=" docs", desc=label, disable=None)

    def on_commit(batch: Any) -> None:
        if batch.completed:
            bar.update(len(batch.completed))

    return bar, on_commit


def command_index(settings: Settings, args: argparse.Namespace) -> int:
    from connectors.folder_source import FolderSource, FolderSourceOptions
    from kgstream.assembly import build_components
    from kgstream.indexer import run_indexer

    folder: Path = args.folder
    if not folder.is_dir():
        raise UserError(f"{folder} is not a folder", "give the path of a folder of documents")
    with data_dir_lock(settings.data_dir):
        components = build_components(settings)
        bar, on_commit = _progress_printer("indexing")
        try:
            source = FolderSource(
                FolderSourceOptions(
                    root=folder.resolve(),
                    stop_after_scan=True,
                    watch=False,
                    max_document_bytes=settings.max_document_bytes,
                )
            )
            run_indexer(
                components,
                source,
                settings.data_dir,
                run_options(args),
                on_commit,
            )
            bar.close()
            print_status(components.stores.graph, as_json=False)
        finally:
            components.close()
    return 0


def command_run(settings: Settings, args: argparse.Namespace) -> int:
    from kgstream.assembly import build_components, build_engine
    from kgstream.indexer import run_indexer

    with data_dir_lock(settings.data_dir), telemetry(settings) as metrics:
        components = build_components(settings, metrics)
        gateway = lag = None
        try:
            source = _live_source(settings, args, metrics)
            if not args.no_serve:
                engine = build_engine(settings, components.stores, components.embedder, metrics)
                gateway = _start_gateway(settings, engine, components.stores.graph)
            if settings.kafka_bootstrap_servers and args.watch is None:
                from kgstream.telemetry import ConsumerLagReporter

                lag = ConsumerLagReporter(
                    source,
                    settings.kafka_bootstrap_servers,
                    settings.kafka_topic,
                    components.stores.graph,
                    metrics,
                ).start()
            run_indexer(components, source, settings.data_dir, run_options(args))
        finally:
            if lag is not None:
                lag.stop()
            if gateway is not None:
                gateway.stop(grace=2)
            components.close()
    return 0


def _start_gateway(settings: Settings, engine: Any, graph: Any) -> Any:
    from kgstream.assembly import serve_gateway

    try:
        gateway = serve_gateway(settings, engine, graph)
    except OSError as error:
        raise UserError(
            str(error), "is another gateway running there? pass --grpc HOST:PORT (or --no-serve)"
        ) from None
    _print_serving(gateway.address)
    return gateway


def _print_serving(address: str) -> None:
    print(
        f"kgstream: gateway on {address} (gRPC; health and reflection on)\n"
        f'  ask:   kgstream query "your question" --grpc {address}\n'
        "  yours: kgstream run --watch YOUR_FOLDER --data YOUR_DATA_DIR\n"
        "  LLM:   set OPENAI_BASE_URL, OPENAI_API_KEY and KGSTREAM_LLM_MODEL for answers and "
        "LLM extraction\n"
        "  servers: set KGSTREAM_REDIS_URL, KGSTREAM_QDRANT_URL (and --kafka HOST:PORT)\n"
        "  stop:  Ctrl-C",
        flush=True,
    )


def command_serve(settings: Settings, args: argparse.Namespace) -> int:
    from kgstream.assembly import build_embedder, build_engine, open_settings_stores

    embedded = not (settings.redis_url and settings.qdrant_url)
    lock = data_dir_lock(settings.data_dir) if embedded else contextlib.nullcontext()
    with lock, telemetry(settings) as metrics:
        embedder = build_embedder(settings)
        stores = open_settings_stores(settings, embedder)
        try:
            engine = build_engine(settings, stores, embedder, metrics)
            gateway = _start_gateway(settings, engine, stores.graph)
            try:
                _wait_for_stop_signal()
            finally:
                gateway.stop(grace=2)
        finally:
            stores.close()
    return 0


def _wait_for_stop_signal() -> None:
    """Block until SIGINT or SIGTERM (a container stop)."""
    import signal

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(1.0):
            pass
    except KeyboardInterrupt:
        return


def _live_source(settings: Settings, args: argparse.Namespace, metrics: Any = None) -> Any:
    if settings.kafka_bootstrap_servers and args.watch is None:
        from connectors.kafka_source import KafkaDocumentSource, KafkaSourceOptions

        options = KafkaSourceOptions(
            settings.kafka_bootstrap_servers,
            settings.kafka_topic,
            stop_at_end=args.until_caught_up,
        )
        print(
            f"kgstream: consuming {settings.kafka_topic} at {settings.kafka_bootstrap_servers} "
            f"(data in {settings.data_dir})",
            flush=True,
        )
        from kgstream.telemetry import count_dead_letter

        on_dead_letter = count_dead_letter(metrics) if metrics is not None else None
        return KafkaDocumentSource(options, on_dead_letter)
    from connectors.folder_source import FolderSource, FolderSourceOptions

    folder: Path = args.watch or Path("docs")
    if not folder.is_dir():
        raise UserError(f"{folder} is not a folder", "pass --watch DIR (or --kafka HOST:PORT)")
    print(f"kgstream: watching {folder.resolve()} (data in {settings.data_dir})", flush=True)
    return FolderSource(
        FolderSourceOptions(root=folder.resolve(), max_document_bytes=settings.max_document_bytes)
    )


def command_replay(settings: Settings, args: argparse.Namespace) -> int:
    from connectors.kafka_source import KafkaDocumentSource, KafkaSourceOptions, measure_replay
    from kgstream.assembly import build_components
    from kgstream.indexer import run_indexer

    if not settings.kafka_bootstrap_servers:
        raise UserError("replay needs a Kafka topic", "pass --kafka HOST:PORT [--topic NAME]")
    if (settings.data_dir / "recovery").exists():
        raise UserError(
            f"{settings.data_dir} already holds an index",
            "replay rebuilds into empty stores: give --data a new directory",
        )
    with data_dir_lock(settings.data_dir):
        components = build_components(settings)
        try:
            if components.stores.graph.version() != 0:
                raise UserError(
                    "the stores are not empty",
                    "replay into a new workspace (KGSTREAM_WORKSPACE) or clear it first",
                )
            bootstrap, topic = settings.kafka_bootstrap_servers, settings.kafka_topic
            progress = measure_replay(bootstrap, topic)
            source = KafkaDocumentSource(KafkaSourceOptions(bootstrap, topic, stop_at_end=True))
            stop = threading.Event()
            watcher = threading.Thread(
                target=_show_replay_progress, args=(source, progress, stop), daemon=True
            )
            watcher.start()
            try:
                run_indexer(components, source, settings.data_dir, run_options(args))
            finally:
                stop.set()
                watcher.join()
            print_status(components.stores.graph, as_json=False)
        finally:
            components.close()
    return 0


def _show_replay_progress(source: Any, progress: Any, stop: threading.Event) -> None:
    from tqdm import tqdm

    with tqdm(total=progress.total, unit=" events", desc="replaying", disable=None) as bar:
        while not stop.wait(0.2):
            bar.n = progress.done(source.positions())
            bar.refresh()
        bar.n = progress.done(source.positions())
        bar.refresh()


def _require_index(settings: Settings) -> None:
    if not settings.redis_url and not (settings.data_dir / "redis").exists():
        raise UserError(
            f"no index in {settings.data_dir}",
            "run `kgstream index DIR --data DATA` first, or pass the right --data",
        )


def _graph_store(settings: Settings) -> Any:
    from connectors.stores import StoreLocations, open_graph_store

    _require_index(settings)
    locations = StoreLocations(settings.data_dir, settings.workspace, settings.redis_url)
    return open_graph_store(locations)


def command_status(settings: Settings, args: argparse.Namespace) -> int:
    graph, embedded = _graph_store(settings)
    try:
        print_status(graph, as_json=args.json)
    finally:
        if embedded is not None:
            embedded.stop()
    return 0


def status_data(graph: Any) -> dict[str, Any]:
    from dataflow.core.documents import DocumentStatus

    counts = graph.status_counts()
    failed_ids, _ = graph.documents_by_status(DocumentStatus.FAILED, 0, 1000)
    failed = graph.get_documents(failed_ids)
    return {
        "documents": {status.value: counts.get(status, 0) for status in DocumentStatus},
        "index_version": graph.version(),
        "consumer_lag": {str(p): n for p, n in graph.consumer_lag().items()},
        "failures": [
            {
                "doc_id": doc_id,
                "file_path": failed[doc_id].record.file_path,
                "reason": failed[doc_id].record.reason,
            }
            for doc_id in failed_ids
            if doc_id in failed
        ],
    }


def print_status(graph: Any, as_json: bool) -> None:
    data = status_data(graph)
    if as_json:
        print(json.dumps(data, indent=2))
        return
    counts = ", ".join(f"{name} {count}" for name, count in data["documents"].items())
    print(f"index version {data['index_version']}; documents: {counts}")
    if data["consumer_lag"]:
        lag = ", ".join(f"partition {p}: {n}" for p, n in data["consumer_lag"].items())
        print(f"consumer lag: {lag}")
    for failure in data["failures"]:
        print(f"  FAILED {failure['doc_id']}: {failure['reason']}")


def command_export(settings: Settings, args: argparse.Namespace) -> int:
    from kgstream.export import export_data, write_graphml, write_json

    graph, embedded = _graph_store(settings)
    try:
        data = export_data(graph)
    finally:
        if embedded is not None:
            embedded.stop()
    if args.format == "json":
        write_json(data, args.output)
    else:
        write_graphml(data, args.output)
    print(
        f"wrote {len(data['entities'])} entities and {len(data['relations'])} relations "
        f"to {args.output}"
    )
    return 0


def command_rebuild_vectors(settings: Settings, args: argparse.Namespace) -> int:
    from connectors.stores import StoreLocations, open_graph_store, open_vector_store
    from kgstream.assembly import build_embedder
    from kgstream.maintenance import rebuild_vectors

    _require_index(settings)
    with data_dir_lock(settings.data_dir):
        locations = StoreLocations(
            settings.data_dir, settings.workspace, settings.redis_url, settings.qdrant_url
        )
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

    from protos.kgstream.v1 import query_pb2_grpc

    metadata = []
    if settings.grpc_auth_token:
        metadata.append(("authorization", f"Bearer {settings.grpc_auth_token}"))
    with grpc.insecure_channel(address) as channel:
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


def _query_stores(settings: Settings, request: Any, context_only: bool) -> Any:
    from gateway.convert import query_params_from, retrieval_to_proto
    from gateway.types import InvalidQuery
    from kgstream.assembly import build_embedder, build_engine, open_settings_stores

    _require_index(settings)
    embedded = not (settings.redis_url and settings.qdrant_url)
    with data_dir_lock(settings.data_dir) if embedded else contextlib.nullcontext():
        embedder = build_embedder(settings)
        stores = open_settings_stores(settings, embedder)
        try:
            engine = build_engine(settings, stores, embedder)
            params = query_params_from(request)
            if context_only:
                return retrieval_to_proto(engine.retrieve(params, None)), None
            answer = engine.answer(params, None)
            return retrieval_to_proto(answer.retrieval), answer.text
        except InvalidQuery as error:
            raise UserError(str(error), "see `kgstream query --help`") from None
        finally:
            stores.close()


COMMANDS = {
    "config": command_config,
    "preview": command_preview,
    "index": command_index,
    "run": command_run,
    "replay": command_replay,
    "status": command_status,
    "export": command_export,
    "rebuild-vectors": command_rebuild_vectors,
    "serve": command_serve,
    "query": command_query,
}


if __name__ == "__main__":
    sys.exit(main())
