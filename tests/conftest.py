"""Fixtures shared by the whole suite live in tests/support/ and are registered here."""

import os

# `kgstream run` and `serve` called in-process serve the HTTP API on 127.0.0.1:9621 by
# default; tests run side by side, so they take a free port instead.
os.environ.setdefault("KGSTREAM_HTTP_ADDRESS", "127.0.0.1:0")

pytest_plugins = [
    "tests.support.llm_server",
    "tests.support.kafka",
    "tests.support.redis",
]
