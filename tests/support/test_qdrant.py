"""Where the tests find the Qdrant server binary (tests/support/qdrant.py), and the server
fixture itself."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.support.qdrant import QdrantBinaryNotFound, QdrantTestServer, qdrant_binary


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_the_environment_variable_comes_first(tmp_path: Path) -> None:
    named = executable(tmp_path / "elsewhere" / "my-qdrant")
    executable(tmp_path / "shared" / "bin" / "qdrant")
    repository = tmp_path / "clone"
    on_path = executable(tmp_path / "path" / "qdrant")

    environ = {"KGSTREAM_QDRANT_BINARY": str(named), "PATH": str(on_path.parent)}
    assert qdrant_binary(environ, repository) == str(named)


def test_a_named_binary_that_is_not_there_fails_saying_so(tmp_path: Path) -> None:
    executable(tmp_path / "shared" / "bin" / "qdrant")
    environ = {"KGSTREAM_QDRANT_BINARY": str(tmp_path / "missing"), "PATH": ""}
    with pytest.raises(QdrantBinaryNotFound, match=r"KGSTREAM_QDRANT_BINARY=.*missing"):
        qdrant_binary(environ, tmp_path / "clone")


def test_shared_bin_in_the_nearest_ancestor_comes_next_then_path(tmp_path: Path) -> None:
    repository = tmp_path / "a" / "b" / "clone"
    repository.mkdir(parents=True)
    far = executable(tmp_path / "shared" / "bin" / "qdrant")
    near = executable(tmp_path / "a" / "shared" / "bin" / "qdrant")
    on_path = executable(tmp_path / "path" / "qdrant")
    environ = {"PATH": str(on_path.parent)}

    assert qdrant_binary(environ, repository) == str(near)
    near.unlink()
    assert qdrant_binary(environ, repository) == str(far)
    far.unlink()
    assert qdrant_binary(environ, repository) == str(on_path)


def test_no_binary_fails_naming_where_it_looked_and_the_variable_to_set(tmp_path: Path) -> None:
    repository = tmp_path / "clone"
    with pytest.raises(QdrantBinaryNotFound) as raised:
        qdrant_binary({"PATH": str(tmp_path)}, repository)
    message = str(raised.value)
    assert str(tmp_path / "shared" / "bin" / "qdrant") in message
    assert "`qdrant` on PATH" in message
    assert "Set KGSTREAM_QDRANT_BINARY to the path of a Qdrant server binary" in message


def test_the_session_server_is_ready_on_loopback(qdrant_server: QdrantTestServer) -> None:
    assert qdrant_server.url.startswith("http://127.0.0.1:")
    assert httpx.get(f"{qdrant_server.url}/readyz", timeout=5).status_code == 200
