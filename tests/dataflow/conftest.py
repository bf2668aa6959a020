"""Every flow test runs under one worker and under two, as Bytewax's own suite does; the
flow's components (offline extraction, test-server embeddings) are the harness's."""

import pytest

from tests.dataflow.harness import EntryPoint, entry_point_for, new_components


@pytest.fixture(params=[1, 2], ids=["1-worker", "2-workers"])
def entry_point(request: pytest.FixtureRequest) -> EntryPoint:
    return entry_point_for(request.param)


@pytest.fixture
def components(redis_server, llm_server, tmp_path):
    built = new_components(redis_server.url, llm_server.base_url, tmp_path / "vectors")
    yield built
    built.stores.graph.clear()
    built.stores.vectors.close()
