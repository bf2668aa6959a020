"""protos/ is a buf module with its configuration inside: a copy of the folder alone passes
buf's checks, and scripts/check-protos compares it with the previous commit whatever layout
that commit had."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.services  # runs buf and git


def go_tools_env() -> dict[str, str]:
    """The environment of scripts/go-tools, with the Go caches (and buf) of this checkout."""
    return {**os.environ, "KGSTREAM_GO_CACHE": str(ROOT / ".cache" / "go")}


def buf() -> str:
    tools = subprocess.run(
        [str(ROOT / "scripts" / "go-tools")],
        env=go_tools_env(),
        check=True,
        capture_output=True,
        text=True,
    )
    return str(Path(tools.stdout.strip()) / "buf")


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, env=go_tools_env(), capture_output=True, text=True, timeout=300
    )


def test_a_copy_of_protos_alone_passes_buf_lint_and_format_and_builds(tmp_path: Path) -> None:
    copy = tmp_path / "elsewhere"
    shutil.copytree(ROOT / "protos", copy)
    for command in (
        [buf(), "lint"],
        [buf(), "format", "--diff", "--exit-code"],
        [buf(), "build", "-o", str(tmp_path / "image.binpb")],
    ):
        checked = run(command, copy)
        assert checked.returncode == 0, f"{command[1:]}: {checked.stdout}{checked.stderr}"


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository whose first commit has buf.yaml at its root (modules: protos) and whose
    second has today's protos/ with its buf.yaml inside."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    for script in ("check-protos", "go-tools", "go-env"):
        shutil.copy2(ROOT / "scripts" / script, repo / "scripts" / script)
    shutil.copytree(ROOT / "protos", repo / "protos")
    config = (repo / "protos" / "buf.yaml").read_text()
    (repo / "protos" / "buf.yaml").unlink()
    (repo / "buf.yaml").write_text(
        config.replace("version: v2\n", "version: v2\nmodules:\n  - path: protos\n").replace(
            "      - kgstream/v1/", "      - protos/kgstream/v1/"
        )
    )
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "buf.yaml at the root")
    (repo / "buf.yaml").unlink()
    shutil.copy2(ROOT / "protos" / "buf.yaml", repo / "protos" / "buf.yaml")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "buf.yaml inside protos/")
    return repo


def test_check_protos_compares_with_a_commit_whose_buf_yaml_was_at_the_root(repo: Path) -> None:
    checked = run(["scripts/check-protos"], repo)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "no breaking change against" in checked.stdout
    assert "(HEAD~1)" in checked.stdout


def test_check_protos_refuses_a_renumbered_field_with_the_hint(repo: Path) -> None:
    query = repo / "protos" / "kgstream" / "v1" / "query.proto"
    query.write_text(query.read_text().replace("string question = 1;", "string question = 21;"))
    checked = run(["scripts/check-protos"], repo)  # uncommitted: compared with HEAD
    assert checked.returncode == 1
    assert 'Previously present field "1" with name "question"' in checked.stdout
    assert "keep the old numbers and" in checked.stderr
