"""What every command shares: the data-directory lock, metrics, cluster flags, the index."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kgstream.errors import UserError
from kgstream.settings import Settings


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


def run_options(args: argparse.Namespace, settings: Settings) -> Any:
    from kgstream.indexer import RunOptions

    addresses = tuple(a for a in (args.addresses or "").split(";") if a)
    if addresses and args.process_id is None:
        raise UserError("--addresses needs --process-id", "give each process its index, from 0")
    if len(addresses) > 1 and not settings.redis_url:
        raise UserError(
            "a cluster of several processes needs one Redis server that they all write to",
            "point every process at the same one with KGSTREAM_REDIS_URL "
            "(and the vectors at a Qdrant server with KGSTREAM_QDRANT_URL)",
        )
    try:
        return RunOptions(args.workers, args.process_id, addresses, settings.epoch_seconds)
    except ValueError as error:
        raise UserError(str(error), "see `kgstream run --help`") from None


def require_index(settings: Settings) -> None:
    if not settings.redis_url and not (settings.data_dir / "redis").exists():
        raise UserError(
            f"no index in {settings.data_dir}",
            "run `kgstream index DIR --data DATA` first, or pass the right --data",
        )


def open_index_graph(settings: Settings) -> Any:
    """The index's graph records, its control plane, and the embedded Redis started for them
    (None when a server holds them or a running kgstream's was attached to): stop it."""
    from connectors.redis.index_control import RedisIndexControl
    from connectors.stores import open_graph_store
    from kgstream.assembly import store_locations

    require_index(settings)
    graph, embedded = open_graph_store(store_locations(settings))
    return graph, RedisIndexControl(graph.client, graph.workspace), embedded
