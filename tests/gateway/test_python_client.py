"""The Python client of docs/grpc-api.md, run as a user runs it: a script of its own in
kgstream's venv, importing the shipped stubs (`kgstream_protos.v1`) and calling Retrieve over
the real wire."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.engine import QueryEngine
from tests.gateway.corpus import DOCUMENTS, Corpus
from tests.gateway.test_server import new_engine, running_gateway

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTED_ADDRESS = "127.0.0.1:50051"


def documented_client() -> str:
    """The first Python block under the "Python client" heading of docs/grpc-api.md."""
    page = (ROOT / "docs" / "grpc-api.md").read_text()
    section = page.split("\n## Python client\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "docs/grpc-api.md: no python block under '## Python client'"
    return match.group(1)


@pytest.fixture
def engine(corpus: Corpus) -> QueryEngine:
    return new_engine(corpus, None)


@pytest.mark.services
def test_the_documented_python_client_imports_the_shipped_stubs_and_retrieves(
    engine: QueryEngine, corpus: Corpus, tmp_path: Path
) -> None:
    script = documented_client()
    assert DOCUMENTED_ADDRESS in script
    with running_gateway(engine, corpus.stores.graph) as (server, _):
        client = tmp_path / "client.py"
        client.write_text(script.replace(DOCUMENTED_ADDRESS, server.address))
        # From a folder of its own, so only what is installed in the venv is importable.
        ran = subprocess.run(
            [sys.executable, str(client)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert ran.returncode == 0, ran.stderr
    *references, last = ran.stdout.splitlines()
    assert last == f"index version {corpus.stores.graph.version()}"
    assert references, "Retrieve returned no references"
    for number, line in enumerate(references, 1):
        reference_id, file_path = line.split(" ", 1)
        assert int(reference_id) == number
        assert file_path in DOCUMENTS
