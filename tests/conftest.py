"""Fixtures shared by the whole suite live in tests/support/ and are registered here."""

import os

import pytest

from dataflow.core.snapshots import use_dictionary

# `kgstream run` and `serve` called in-process serve the HTTP API on 127.0.0.1:9621 by
# default; tests run side by side, so they take a free port instead.
os.environ.setdefault("KGSTREAM_HTTP_ADDRESS", "127.0.0.1:0")

pytest_plugins = [
    "tests.support.llm_server",
    "tests.support.kafka",
    "tests.support.redis",
]


@pytest.fixture(autouse=True)
def _no_snapshot_dictionary():
    """Every test starts packing snapshots without a dictionary, whatever an in-process
    `kgstream index` before it trained (the dictionary is process-wide: one process, one
    index)."""
    use_dictionary(None)
