"""Installing kgstream on a Python it does not support says so (build_backend/).

pip before 25.1 checks a checkout's Requires-Python after its dependencies, so on Python 3.13
it reported "No matching distribution found for bytewax==0.21.1". The end-to-end test runs
the pip that Python 3.13 bundles (24.x, from ensurepip) as a user would; its build
environment takes setuptools and packaging from the package index, like any install."""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from build_backend.kgstream_backend import unsupported_python_message

ROOT = Path(__file__).resolve().parent.parent
REQUIRES_PYTHON = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]


@pytest.mark.parametrize("version", ["3.11.0", "3.11.7", "3.12.1", "3.12.13"])
def test_a_supported_python_builds(version: str) -> None:
    assert unsupported_python_message(REQUIRES_PYTHON, version, "python") == ""


@pytest.mark.parametrize("version", ["3.10.13", "3.13.0", "3.13.0rc1", "3.14.2"])
def test_an_unsupported_python_is_refused_naming_the_versions_that_work(version: str) -> None:
    message = unsupported_python_message(REQUIRES_PYTHON, version, "/venv/bin/python")
    assert message.startswith(
        f"kgstream needs Python 3.11 or 3.12 (requires-python {REQUIRES_PYTHON}); "
        f"this is Python {version} (/venv/bin/python).\nhint: "
    )


def python_3_13() -> Path:
    """A Python 3.13 interpreter: on PATH, in the usual system places, or pyenv's."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates = [
        shutil.which("python3.13"),
        "/usr/bin/python3.13",
        "/usr/local/bin/python3.13",
        *sorted(str(path) for path in pyenv.glob("versions/3.13*/bin/python3.13")),
    ]
    for candidate in (c for c in candidates if c and os.access(c, os.X_OK)):
        probe = subprocess.run(
            [candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 13))"],
            capture_output=True,
            text=True,
        )
        if probe.stdout.strip() == "True":
            return Path(candidate)
    pytest.fail(
        "this test needs a Python 3.13 interpreter (python3.13 on PATH, or pyenv's "
        f"{pyenv}/versions/3.13.x); tried {candidates}"
    )


@pytest.mark.services  # runs Python 3.13 and pip
def test_pip_on_python_3_13_says_kgstream_needs_another_python_not_a_missing_bytewax(
    tmp_path: Path,
) -> None:
    venv = tmp_path / "venv"
    subprocess.run([str(python_3_13()), "-m", "venv", str(venv)], check=True, timeout=120)
    source = tmp_path / "kgstream"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "build_backend", source / "build_backend")
    environment = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    for install in (["-e", str(source)], [str(source)]):
        ran = subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", *install],
            env=environment,
            capture_output=True,
            text=True,
            timeout=300,
        )
        output = ran.stdout + ran.stderr
        assert ran.returncode != 0, output
        assert "kgstream needs Python 3.11 or 3.12" in output, output
        assert "this is Python 3.13." in output, output
        assert "bytewax" not in output, output
