"""The short version of bench/gateway_load.py: 4 clients of mixed modes for 5 s against
`kgstream run` while 50 documents are written into its watched folder (a real process,
the real gRPC wire; embeddings from the OpenAI-compatible test server for speed)."""

from __future__ import annotations

import re
from pathlib import Path

from bench.corpus import build_world, generate_corpus
from bench.gateway_load import processed_documents, run_load
from bench.queries import MODES, build_questions
from tests.kgstream.processes import clean_environment, kgstream
from tests.support.llm_server import OpenAICompatibleServer
from tests.support.wait import wait_until


def test_four_clients_of_every_mode_during_ingestion_see_no_error_and_no_version_going_back(
    llm_server: OpenAICompatibleServer, tmp_path: Path
) -> None:
    folder, data = tmp_path / "docs", tmp_path / "data"
    folder.mkdir()
    documents = generate_corpus(50, seed=7)
    questions = build_questions(build_world(7), documents, 40, seed=7)
    running = kgstream(
        "run", "--watch", str(folder), "--data", str(data), "--grpc", "127.0.0.1:0",
        env=clean_environment(llm_server.base_url),
    )  # fmt: skip
    banner = ""
    try:
        assert running.stdout is not None
        while "gateway on" not in banner:
            line = running.stdout.readline()
            assert line, f"kgstream run exited early: {banner}"
            banner += line
        address = re.search(r"gateway on (\S+)", banner).group(1)  # type: ignore[union-attr]

        report = run_load(address, folder, documents, questions, clients=4, seconds=5)

        assert report.errors == []
        assert report.backward_steps == []
        assert report.documents_written == 50
        assert all(report.latencies(mode) for mode in MODES)  # every mode was asked
        versions = report.versions()
        assert max(versions) > min(versions)  # the index grew while the clients asked
        wait_until(lambda: processed_documents(address) == 50, 120, "all 50 documents indexed")
    finally:
        running.terminate()
        running.communicate(timeout=60)
    assert running.returncode == 0
