"""One real `kgstream run --watch FOLDER` for the LightRAG API tests of this package: the
test corpus in its watched folder (so inserts and uploads go through the folder sink), the
embedded stores, embeddings from the test server, no LLM (answers are extractive)."""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway.corpus import DOCUMENTS
from tests.kgstream.processes import clean_environment, kgstream
from tests.support.llm_server import OpenAICompatibleServer
from tests.support.wait import wait_until


@dataclass(frozen=True)
class RunningKgstream:
    url: str
    folder: Path
    output: list[str]


def _read_until(process: subprocess.Popen[str], marker: str, lines: list[str]) -> str:
    while not lines or marker not in lines[-1]:
        line = process.stdout.readline() if process.stdout else ""
        assert line, f"kgstream exited early: {''.join(lines)}"
        lines.append(line)
    return lines[-1]


@pytest.fixture(scope="package")
def lightrag_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningKgstream]:
    """`kgstream run` with the corpus indexed; its HTTP URL and watched folder."""
    root = tmp_path_factory.mktemp("lightrag-api")
    folder = root / "docs"
    for name, text in DOCUMENTS.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    with OpenAICompatibleServer() as embeddings:
        env = clean_environment(embeddings.base_url)
        process = kgstream(
            "run",
            "--watch",
            str(folder),
            "--data",
            str(root / "data"),
            "--grpc",
            "127.0.0.1:0",
            env=env,
        )
        lines: list[str] = []
        try:
            web = _read_until(process, "web:", lines)
            url = re.search(r"(http://\S+?)/ ", web).group(1)  # type: ignore[union-attr]
            with httpx.Client(base_url=url, timeout=30) as http:
                wait_until(
                    lambda: (
                        http.get("/documents/pipeline_status").json()["documents"]["processed"]
                        == len(DOCUMENTS)
                    ),
                    120,
                    "the corpus to be indexed",
                )
            yield RunningKgstream(url, folder, lines)
        finally:
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=60)


@pytest.fixture
def lightrag(lightrag_server: RunningKgstream) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=lightrag_server.url, timeout=60) as client:
        yield client


def settled(lightrag: httpx.Client, track_id: str, count: int) -> dict[str, Any]:
    """The track once its `count` documents are all PROCESSED or FAILED."""

    def done() -> dict[str, Any] | None:
        body: dict[str, Any] = lightrag.get(f"/documents/track_status/{track_id}").json()
        statuses = [d["status"] for d in body["documents"]]
        finished = len(statuses) == count and set(statuses) <= {"processed", "failed"}
        return body if finished else None

    return wait_until(done, 60, f"track {track_id} to settle")
