"""A small Bytewax dataflow with recovery, run in its own process by the recovery tests so
that it can be killed with -9 between any two instructions, as `kgstream run` can.

    python -m tests.kgstream.counting_flow RECOVERY_DIR KEY [COUNT]

The input sends KEY over and over (COUNT times, then the input ends; forever without
COUNT), in epochs of 20 ms, to a step that counts each key's items; each new count
of KEY is printed as `KEY COUNT`. Each KEY comes with one item of each of `PADDING` other
keys, so that closing an epoch writes many snapshots, as the indexer's epochs do. Two
workers, each reading one input partition, so each epoch's snapshots go to two recovery
partitions.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
from bytewax.outputs import DynamicSink, StatelessSinkPartition
from bytewax.recovery import RecoveryConfig
from bytewax.run import cli_main

WORKERS = 2
EPOCH = timedelta(milliseconds=20)
PADDING = 200


class _Repeat(StatefulSourcePartition[str, int]):
    def __init__(self, items: list[str], count: int | None) -> None:
        self.items, self.count, self.sent = items, count, 0

    def next_batch(self) -> list[str]:
        if self.count is not None and self.sent >= self.count:
            raise StopIteration
        self.sent += 1
        return self.items

    def next_awake(self) -> datetime:
        return datetime.now(UTC) + timedelta(milliseconds=2)

    def snapshot(self) -> int:
        return self.sent


class Repeat(FixedPartitionedSource[str, int]):
    def __init__(self, key: str, count: int | None) -> None:
        self.key, self.count = key, count

    def list_parts(self) -> list[str]:
        return [f"repeat-{n}" for n in range(WORKERS)]  # one for each worker

    def build_part(self, step_id: str, for_part: str, resume_state: int | None) -> _Repeat:
        # Partition 0 sends the key and partition n the padding keys n, n + WORKERS, ...
        n = int(for_part.removeprefix("repeat-"))
        padding = [f"{self.key}/{m}" for m in range(n, PADDING, WORKERS)]
        items = [self.key, *padding] if n == 0 else padding
        return _Repeat(items, self.count)  # each run sends its own items anew: no resume


class _Print(StatelessSinkPartition[tuple[str, int]]):  # (key, its count)
    def write_batch(self, items: list[tuple[str, int]]) -> None:
        for key, count in items:
            if "/" not in key:
                print(key, count, flush=True)


class Print(DynamicSink[tuple[str, int]]):
    def build(self, step_id: str, worker_index: int, worker_count: int) -> _Print:
        return _Print()


def count(state: int | None, item: str) -> tuple[int, int]:
    new = (state or 0) + 1
    return new, new


def counting_flow(key: str, count_to: int | None) -> Dataflow:
    flow = Dataflow("counting")
    items = op.input("items", flow, Repeat(key, count_to))
    counts = op.stateful_map("count", op.key_on("key", items, lambda item: item), count)
    op.output("print", counts, Print())
    return flow


if __name__ == "__main__":
    directory, key, *limit = sys.argv[1:]
    cli_main(  # type: ignore[no-untyped-call]
        counting_flow(key, int(limit[0]) if limit else None),
        workers_per_process=WORKERS,
        epoch_interval=EPOCH,
        recovery_config=RecoveryConfig(Path(directory)),
    )
