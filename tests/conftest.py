"""Fixtures shared by the whole suite live in tests/support/ and are registered here."""

pytest_plugins = [
    "tests.support.llm_server",
    "tests.support.kafka",
    "tests.support.redis",
]
