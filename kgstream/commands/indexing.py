"""The commands that run the indexer: `index` (one-shot), `run` (live) and `replay`."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from kgstream.commands.common import data_dir_lock, run_options, telemetry
from kgstream.commands.inspection import print_status
from kgstream.commands.serving import start_gateway
from kgstream.errors import UserError
from kgstream.settings import Settings


def _progress_printer(label: str) -> Any:
    from tqdm import tqdm

    bar = tqdm(unit=" docs", desc=label, disable=None)

    def on_commit(batch: Any) -> None:
        if batch.completed:
            bar.update(len(batch.completed))

    return bar, on_commit


def command_index(settings: Settings, args: argparse.Namespace) -> int:
    from connectors.folder.source import FolderSource, FolderSourceOptions
    from connectors.redis.retry_requests import RetryRequestSource
    from kgstream.assembly import build_components
    from kgstream.indexer import run_indexer

    folder: Path = args.folder
    if not folder.is_dir():
        raise UserError(f"{folder} is not a folder", "give the path of a folder of documents")
    options = run_options(args, settings)
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
                ),
                components.codec,
            )
            run_indexer(
                components,
                source,
                settings.data_dir,
                options,
                on_commit,
                retries=RetryRequestSource(
                    components.stores.graph, components.stores.control, follow=False
                ),
            )
            bar.close()
            print_status(components.stores.graph, components.stores.control, as_json=False)
        finally:
            components.close()
    return 0


def command_run(settings: Settings, args: argparse.Namespace) -> int:
    from connectors.redis.retry_requests import RetryRequestSource
    from kgstream.assembly import build_chat_client, build_components, build_engine
    from kgstream.indexer import run_indexer

    options = run_options(args, settings)
    with data_dir_lock(settings.data_dir), telemetry(settings) as metrics:
        client = build_chat_client(settings, metrics)  # one LLM budget for indexing and answers
        components = build_components(settings, metrics, client)
        gateway = lag = None
        if metrics is not None:
            metrics.watch_index(
                components.stores.graph, components.stores.control, settings.kafka_topic
            )
        try:
            source = _live_source(settings, args, components, metrics)
            if not args.no_serve:
                stores, embedder = components.stores, components.embedder
                engine = build_engine(
                    settings, stores, embedder, metrics, client, beside_indexer=True
                )
                gateway = start_gateway(settings, engine, stores, _watched_folder(settings, args))
            if settings.kafka_bootstrap_servers and args.watch is None:
                from kgstream.telemetry import ConsumerLagReporter

                lag = ConsumerLagReporter(
                    source,
                    settings.kafka_bootstrap_servers,
                    settings.kafka_topic,
                    components.stores.control,
                    metrics,
                ).start()
            retries = RetryRequestSource(
                components.stores.graph,
                components.stores.control,
                follow=not args.until_caught_up,
            )
            run_indexer(components, source, settings.data_dir, options, retries=retries)
        finally:
            if lag is not None:
                lag.stop()
            if gateway is not None:
                gateway.stop(grace=2)
            components.close()
    return 0


def _live_source(
    settings: Settings, args: argparse.Namespace, components: Any, metrics: Any = None
) -> Any:
    control = components.stores.control
    if settings.kafka_bootstrap_servers and args.watch is None:
        from connectors.kafka.source import KafkaDocumentSource, KafkaSourceOptions

        reachable_topic(settings.kafka_bootstrap_servers, settings.kafka_topic)
        options = KafkaSourceOptions(
            settings.kafka_bootstrap_servers,
            settings.kafka_topic,
            stop_at_end=args.until_caught_up,
            dlq_topic=settings.dlq_topic,
        )
        print(
            f"kgstream: consuming {settings.kafka_topic} at {settings.kafka_bootstrap_servers} "
            f"(data in {settings.data_dir})",
            flush=True,
        )
        from kgstream.telemetry import record_dead_letter

        return KafkaDocumentSource(options, record_dead_letter(control, metrics))
    from connectors.folder.source import FolderSource, FolderSourceOptions
    from kgstream.telemetry import record_source_hold

    folder = _watched_folder(settings, args)
    assert folder is not None  # no Kafka: a folder, ./docs by default
    if not folder.is_dir():
        raise UserError(f"{folder} is not a folder", "pass --watch DIR (or --kafka HOST:PORT)")
    print(f"kgstream: watching {folder.resolve()} (data in {settings.data_dir})", flush=True)
    on_hold = record_source_hold(control, metrics)
    on_hold(None)  # a hold recorded by a run that was killed is over
    return FolderSource(
        FolderSourceOptions(root=folder.resolve(), max_document_bytes=settings.max_document_bytes),
        components.codec,
        on_hold,
    )


def command_replay(settings: Settings, args: argparse.Namespace) -> int:
    from connectors.kafka.source import KafkaDocumentSource, KafkaSourceOptions, measure_replay
    from kgstream.assembly import build_components
    from kgstream.indexer import run_indexer

    if not settings.kafka_bootstrap_servers:
        raise UserError("replay needs a Kafka topic", "pass --kafka HOST:PORT [--topic NAME]")
    if (settings.data_dir / "recovery").exists():
        raise UserError(
            f"{settings.data_dir} already holds an index",
            "replay rebuilds into empty stores: give --data a new directory",
        )
    options = run_options(args, settings)
    with data_dir_lock(settings.data_dir):
        components = build_components(settings)
        try:
            if components.stores.graph.version() != 0:
                raise UserError(
                    "the stores are not empty",
                    "replay into a new workspace (KGSTREAM_WORKSPACE) or clear it first",
                )
            bootstrap, topic = settings.kafka_bootstrap_servers, settings.kafka_topic
            reachable_topic(bootstrap, topic)
            progress = measure_replay(bootstrap, topic)
            source = KafkaDocumentSource(KafkaSourceOptions(bootstrap, topic, stop_at_end=True))
            stop = threading.Event()
            watcher = threading.Thread(
                target=_show_replay_progress, args=(source, progress, stop), daemon=True
            )
            watcher.start()
            try:
                run_indexer(components, source, settings.data_dir, options)
            finally:
                stop.set()
                watcher.join()
            print_status(components.stores.graph, components.stores.control, as_json=False)
        finally:
            components.close()
    return 0


def reachable_topic(bootstrap_servers: str, topic: str) -> None:
    """Waits for a broker of `bootstrap_servers` to answer, saying so in one line while none
    does (the dataflow would otherwise fail in its start-up with a panic); a topic that
    does not exist is a `UserError`."""
    from connectors.kafka.source import wait_for_topic

    def away(reason: str) -> None:
        print(f"kgstream: {reason}", file=sys.stderr, flush=True)

    def stop(signum: int, frame: object) -> None:
        raise _StoppedWaiting(signal.Signals(signum).name)

    handlers = {number: signal.signal(number, stop) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        wait_for_topic(bootstrap_servers, topic, away)
    except ValueError:  # topic_partitions: the topic has no partitions
        raise UserError(
            f"Kafka topic {topic!r} does not exist or has no partitions",
            f"create it first (kafka-topics.sh --create --topic {topic} ...) or fix --topic",
        ) from None
    except _StoppedWaiting as stopped:  # nothing was read yet: a clean stop
        print(f"kgstream: {stopped}: stopping while waiting for Kafka", file=sys.stderr)
        raise SystemExit(0) from None
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)


class _StoppedWaiting(Exception):
    """A stop signal while waiting for a broker (its name)."""


def _show_replay_progress(source: Any, progress: Any, stop: threading.Event) -> None:
    from tqdm import tqdm

    with tqdm(total=progress.total, unit=" events", desc="replaying", disable=None) as bar:
        while not stop.wait(0.2):
            bar.n = progress.done(source.positions())
            bar.refresh()
        bar.n = progress.done(source.positions())
        bar.refresh()


def _watched_folder(settings: Settings, args: argparse.Namespace) -> Path | None:
    """The folder `kgstream run` indexes (--watch, else ./docs), or None when it reads Kafka."""
    if args.watch is not None:
        return Path(args.watch)
    return None if settings.kafka_bootstrap_servers else Path("docs")
