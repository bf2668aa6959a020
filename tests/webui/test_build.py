"""The committed web UI assets are what `scripts/build-webui` builds from webui/: rebuilding
into a temporary folder gives byte-identical files (the build is reproducible, and nobody
changed webui/ without rebuilding)."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "gateway" / "http" / "webui"


def files_under(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.mark.services
def test_rebuilding_the_web_ui_gives_the_committed_assets(tmp_path):
    out = tmp_path / "webui"
    build = subprocess.run(
        [str(ROOT / "scripts" / "build-webui"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    built, committed = files_under(out), files_under(COMMITTED)
    assert sorted(built) == sorted(committed), "run scripts/build-webui and commit the result"
    changed = [name for name in built if built[name] != committed[name]]
    assert not changed, f"{changed} differ from a fresh build: run scripts/build-webui"


def test_the_built_page_loads_its_assets_from_the_served_folder():
    page = (COMMITTED / "index.html").read_text()
    assets = sorted(path.name for path in (COMMITTED / "assets").iterdir())
    assert any(name.endswith(".js") for name in assets)
    for name in assets:
        assert f'"/assets/{name}"' in page, f"index.html does not load {name}"


@pytest.mark.services
def test_the_wheel_ships_the_built_web_ui(tmp_path):
    """What the Dockerfile installs (pip install of the packages) serves the UI without npm."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in (
        "kgstream",
        "dataflow",
        "connectors",
        "gateway",
        "kgstream_protos",
        "build_backend",
    ):
        shutil.copytree(
            ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    wheel = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert wheel.returncode == 0, wheel.stdout + wheel.stderr
    (built,) = (tmp_path / "dist").glob("kgstream-*.whl")
    shipped = {
        name.removeprefix("gateway/http/webui/")
        for name in zipfile.ZipFile(built).namelist()
        if name.startswith("gateway/http/webui/")
    }
    assert shipped == set(files_under(COMMITTED))
