"""The extraction pool's gate on the sources: a source reads nothing while the backlog is
full, wakes on the dataflow's clock, and ends only once the backlog is empty."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from bytewax.testing import TestingSource

from dataflow.extraction_pool import GATE_POLL, ExtractionPool, GatedSource

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def unused(texts: Any) -> list[Any]:
    raise AssertionError("nothing is submitted to the pool here")


def gated(items: list[str], pool: ExtractionPool) -> Any:
    source = GatedSource(TestingSource(items, batch_size=1), pool, lambda: NOW, limit=2)
    (part,) = source.list_parts()
    return source.build_part("events", part, None)


def test_a_full_backlog_holds_the_source_and_it_wakes_on_the_dataflows_clock() -> None:
    pool = ExtractionPool(unused, unused, threads=1)
    partition = gated(["a", "b"], pool)
    pool.report_backlog("extract-0", 2)
    assert list(partition.next_batch()) == []
    assert partition.next_awake() == NOW + GATE_POLL
    pool.report_backlog("extract-0", 1)
    assert list(partition.next_batch()) == ["a"]
    assert partition.next_awake() is None  # the inner source's own wake-up


def test_the_source_ends_only_once_the_backlog_is_empty() -> None:
    pool = ExtractionPool(unused, unused, threads=1)
    partition = gated(["a"], pool)
    assert list(partition.next_batch()) == ["a"]
    pool.report_backlog("extract-0", 1)
    assert list(partition.next_batch()) == []  # the inner source has ended; work is left
    assert partition.next_awake() == NOW + GATE_POLL
    pool.report_backlog("extract-0", 0)
    with pytest.raises(StopIteration):
        partition.next_batch()
