"""Result files: what a bench writes is what docs/benchmarks.md shows, with its provenance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import results


@pytest.mark.services  # runs git or scripts/gen-docs
def test_a_written_result_reads_back_with_its_command_commit_and_machine(tmp_path: Path) -> None:
    run = results.BenchRun.start(str(results.REPO_ROOT / "bench" / "scale_bench.py"), ["--x", "1"])
    figures = results.table("Load", ("docs", "load s"), [("1,000", "13.0")])
    path = tmp_path / "scale.json"

    run.write(path, "Scaling", [figures], ["a note"])

    read = results.ResultFile.read(path)
    assert read.bench == "scale_bench"
    assert read.command == ".venv/bin/python bench/scale_bench.py --x 1"
    assert read.source == results.MEASURED
    assert read.commit == results.code_version()
    assert read.machine["cores"] >= 1
    assert len(read.machine["load_average_start"]) == 3
    assert read.tables == (figures,)
    assert read.notes == ("a note",)


@pytest.mark.services  # runs git or scripts/gen-docs
def test_without_a_results_path_nothing_is_written(tmp_path: Path) -> None:
    run = results.BenchRun.start(str(results.REPO_ROOT / "bench" / "scale_bench.py"), [])
    run.write(None, "Scaling", [])
    assert list(tmp_path.iterdir()) == []


def test_a_row_of_the_wrong_width_is_refused() -> None:
    with pytest.raises(ValueError, match="2 cells for 3 columns"):
        results.table("T", ("a", "b", "c"), [("1", "2")])


def test_a_path_outside_the_repository_is_shown_as_its_options_name() -> None:
    command = (
        ".venv/bin/python bench/retrieval_eval.py --set ../shared/evaldata/dev --data /tmp/kg "
        "--results bench/results/retrieval-dev.json"
    )
    assert results.shown_command(command) == (
        ".venv/bin/python bench/retrieval_eval.py --set SET --data DATA "
        "--results bench/results/retrieval-dev.json"
    )


@pytest.mark.services  # runs git or scripts/gen-docs
def test_the_page_shows_each_file_with_its_command_and_a_transcription_says_so(
    tmp_path: Path,
) -> None:
    measured = results.BenchRun.start(str(results.REPO_ROOT / "bench" / "gateway_bench.py"), [])
    measured.write(
        tmp_path / "gateway.json", "Gateway", [results.table("T", ("mode", "p50"), [("mix", "9")])]
    )
    transcribed = json.loads((tmp_path / "gateway.json").read_text())
    transcribed.update(bench="scale_bench", title="Scaling", source="transcribed from X")
    (tmp_path / "scale.json").write_text(json.dumps(transcribed))

    page = results.render_page(results.read_results(tmp_path))

    assert page.index("## Scaling") < page.index("## Gateway")  # the page's order
    assert ".venv/bin/python bench/gateway_bench.py" in page
    assert "| mix | 9 |" in page
    assert "This file was transcribed from X" in page
    assert "bench/results/scale.json" in page


@pytest.mark.services  # runs git or scripts/gen-docs
def test_two_files_of_one_title_are_refused(tmp_path: Path) -> None:
    run = results.BenchRun.start(str(results.REPO_ROOT / "bench" / "gateway_bench.py"), [])
    run.write(tmp_path / "a.json", "Gateway", [])
    run.write(tmp_path / "b.json", "Gateway", [])
    with pytest.raises(ValueError, match="Gateway"):
        results.render_page(results.read_results(tmp_path))
