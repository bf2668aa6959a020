"""Fixtures shared by the whole suite live in tests/support/ and are registered here, with
the `services` marker (tests/support/services.py)."""

import os

from hypothesis import settings

# `kgstream run` and `serve` called in-process serve the HTTP API on 127.0.0.1:9621 by
# default; tests run side by side, so they take a free port instead.
os.environ.setdefault("KGSTREAM_HTTP_ADDRESS", "127.0.0.1:0")

pytest_plugins = [
    "tests.support.llm_server",
    "tests.support.kafka",
    "tests.support.qdrant",
    "tests.support.redis",
    "tests.support.services",
]

# Hypothesis's deadline (200 ms an example) times the machine, not the code: on two cores
# shared with other work a first example can take longer. The examples run stay the same.
settings.register_profile("kgstream", deadline=None)
settings.load_profile("kgstream")
