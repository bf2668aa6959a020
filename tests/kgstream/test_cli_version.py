"""`kgstream --version` as a user types it: the installed console script prints the version
pip recorded from pyproject.toml, and exits 0 without reading settings or stores."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.services  # runs the kgstream program
def test_version_prints_the_installed_version_and_exits_zero(tmp_path: Path) -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert importlib.metadata.version("kgstream") == declared
    script = Path(sys.executable).parent / "kgstream"  # the console script pip installed
    ran = subprocess.run(
        [str(script), "--version"],
        cwd=tmp_path,
        env={"PATH": str(script.parent)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, f"kgstream {declared}\n", "")
