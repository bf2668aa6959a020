"""Every flow test runs under one worker and under two, as Bytewax's own suite does; the
flow's components (offline extraction, test-server embeddings) are the harness's."""

import pytest

from connectors.redis.projection_control import ProjectionMode
from tests.dataflow.harness import EntryPoint, entry_point_for, new_components


@pytest.fixture(params=[1, 2], ids=["1-worker", "2-workers"])
def entry_point(request: pytest.FixtureRequest) -> EntryPoint:
    return entry_point_for(request.param)


@pytest.fixture
def components(falkordb_server, llm_server, tmp_path):
    """Components on a Redis with the FalkorDB module, writing the graph projection (the
    records alone run on Redis 7 too: tests/connectors/redis/)."""
    built = new_components(
        falkordb_server.url, llm_server.base_url, tmp_path / "vectors", projection=ProjectionMode.ON
    )
    yield built
    built.stores.graph.clear()
    built.stores.vectors.close()
