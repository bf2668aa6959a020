"""Every flow test runs under one worker and under two, as Bytewax's own suite does."""

import pytest

from tests.dataflow.harness import EntryPoint, entry_point_for


@pytest.fixture(params=[1, 2], ids=["1-worker", "2-workers"])
def entry_point(request: pytest.FixtureRequest) -> EntryPoint:
    return entry_point_for(request.param)
