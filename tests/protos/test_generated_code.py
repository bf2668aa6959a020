import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.services
def test_generated_modules_match_the_protos(tmp_path: Path):
    """Generated code is committed; it must be exactly what scripts/gen-protos makes."""
    subprocess.run([str(ROOT / "scripts" / "gen-protos"), str(tmp_path)], check=True, cwd=ROOT)
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert generated, "scripts/gen-protos produced nothing"
    for relative in generated:
        committed = ROOT / relative
        assert committed.exists(), f"{relative} is missing: run scripts/gen-protos"
        assert committed.read_bytes() == (tmp_path / relative).read_bytes(), (
            f"{relative} is stale: run scripts/gen-protos"
        )
