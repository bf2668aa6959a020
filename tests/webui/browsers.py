"""What the browser tests share: Debian's Chromium, and the node scripts that drive it with
playwright-core (node/, installed from its lockfile on first use; scripts/test runs `npm ci`)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

NODE_DIR = Path(__file__).resolve().parent / "node"
CHROMIUM = os.environ.get("KGSTREAM_CHROMIUM", "/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]


def artifact_folder(name: str) -> Path:
    """An empty $KGSTREAM_TEST_ARTIFACTS/`name` (or tests/artifacts/`name`) for screenshots."""
    base = os.environ.get("KGSTREAM_TEST_ARTIFACTS")
    folder = (Path(base) if base else ROOT / "tests" / "artifacts") / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def node_flow(name: str) -> Path:
    """node/`name`, with node, Chromium and playwright-core there to run it."""
    assert shutil.which("node"), "node (20+) must be on PATH for the browser tests"
    assert Path(CHROMIUM).is_file(), f"{CHROMIUM} is missing: apt-get install chromium"
    if not (NODE_DIR / "node_modules" / "playwright-core").is_dir():
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--prefer-offline"],
            cwd=NODE_DIR,
            check=True,
            capture_output=True,
            timeout=300,
        )
    return NODE_DIR / name
