import subprocess
import sys

import pytest


def test_a_test_that_requests_a_service_fixture_is_marked_services(request, llm_server) -> None:
    assert request.node.get_closest_marker("services") is not None


def test_a_test_without_the_marker_cannot_start_a_program(request) -> None:
    assert request.node.get_closest_marker("services") is None
    with pytest.raises(RuntimeError, match=r"starts a program .* not marked `services`"):
        subprocess.run([sys.executable, "-c", "pass"], check=False)


@pytest.mark.services
def test_a_test_with_the_marker_may_start_one() -> None:
    assert subprocess.run([sys.executable, "-c", "pass"], check=False).returncode == 0
