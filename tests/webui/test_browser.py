"""The web UI in a real browser: `kgstream run` watches a copy of the sample corpus and
serves the UI; node/browser_flow.mjs drives Debian's Chromium through it (search,
expand, a mix query with references, a live update after a file edit and after its undo, a
document containing <script> shown as text, retry failed and delete), with auth on.
Screenshots of each step go to $KGSTREAM_TEST_ARTIFACTS/webui (or tests/artifacts/webui)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.kgstream.processes import ROOT, Output, clean_environment, kgstream
from tests.support.wait import wait_until
from tests.webui.browsers import CHROMIUM, artifact_folder, node_flow

MARKUP_DOCUMENT = "notes/markup.md"
MARKUP = "<script>alert(1)</script> Markup Notes: the Harbour Summit page had a script in it.\n"
# Auth is on, so the flow also proves the UI takes `?token=` and sends it (header and SSE).
TOKEN = "webui-test-token-7Qm2"


@pytest.fixture
def browser_flow() -> Path:
    return node_flow("browser_flow.mjs")


def get_json(url: str) -> dict:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def test_the_web_ui_searches_expands_queries_and_updates_live_in_chromium(
    llm_server, tmp_path, browser_flow
):
    folder, data = tmp_path / "docs", tmp_path / "data"
    shutil.copytree(ROOT / "examples", folder)
    (folder / MARKUP_DOCUMENT).parent.mkdir()
    (folder / MARKUP_DOCUMENT).write_text(MARKUP)
    documents = sum(1 for path in folder.rglob("*.md"))
    env = {
        **clean_environment(llm_server.base_url),
        "KGSTREAM_METRICS_ADDRESS": "127.0.0.1:0",
        "KGSTREAM_GRPC_AUTH_TOKEN": TOKEN,
    }
    running = kgstream(
        "run",
        "--watch",
        str(folder),
        "--data",
        str(data),
        "--grpc",
        "127.0.0.1:0",
        "--http",
        "127.0.0.1:0",
        env=env,
    )
    output = Output(running)
    try:
        web = re.compile(r"web:\s+(http://\S+?)/?\s")
        wait_until(
            lambda: web.search(output.text()) is not None or running.poll() is not None,
            60,
            "the web UI's address in kgstream's banner",
        )
        found = web.search(output.text())
        assert found, f"kgstream printed no web UI address:\n{output.text()}"
        url = found.group(1)

        def indexed() -> bool:
            counts = get_json(f"{url}/api/v1/version")["documents"]
            return counts["processed"] >= documents and not counts["pending"] + counts["processing"]

        wait_until(indexed, 120, f"{documents} documents indexed")

        artifacts = artifact_folder("webui")
        flow = subprocess.run(
            ["node", str(browser_flow)],
            env={
                **os.environ,
                "KGSTREAM_UI_URL": f"{url}/?token={TOKEN}",
                "KGSTREAM_WATCH_DIR": str(folder),
                "KGSTREAM_ARTIFACTS": str(artifacts),
                "KGSTREAM_CHROMIUM": CHROMIUM,
            },
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert flow.returncode == 0, (
            f"browser flow failed (screenshots in {artifacts}):\n{flow.stdout}\n{flow.stderr}\n"
            f"kgstream:\n{output.text()[-4000:]}"
        )
        seen = json.loads(flow.stdout.strip().splitlines()[-1])
        assert seen["ok"] and seen["references"] > 0
        assert seen["shownAfterExpand"] > seen["shownAfterSearch"]
        assert not (folder / MARKUP_DOCUMENT).exists(), "the UI's delete left the file"
        assert sorted(path.name for path in artifacts.glob("*.png")) == [
            "01-loaded.png",
            "02-search.png",
            "03-expand.png",
            "04-query.png",
            "05-live-update.png",
            "06-live-removal.png",
            "07-documents.png",
        ]
    finally:
        running.terminate()
        try:
            running.wait(timeout=30)
        except subprocess.TimeoutExpired:
            running.kill()
            running.wait()
