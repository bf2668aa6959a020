"""The backends every Redis contract test runs against."""

import pytest

BACKENDS = {"tcp": "redis_server", "embedded": "embedded_redis", "cluster": "redis_cluster"}


@pytest.fixture(params=list(BACKENDS))
def redis_url(request: pytest.FixtureRequest) -> str:
    """The URL of each backend (fixtures from tests/support/redis.py, via tests/conftest.py):
    a TCP redis-server, the embedded default on a unix socket, and a three-node Redis
    Cluster."""
    return str(request.getfixturevalue(BACKENDS[request.param]).url)
