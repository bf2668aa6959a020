"""The bench scripts import shared helpers, never each other in a cycle."""

from __future__ import annotations

import itertools
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
SHARED = ("bench.corpus", "bench.harness", "bench.queries", "bench.results")


def test_no_two_bench_modules_import_each_other() -> None:
    graph = grimp.build_graph("bench", include_external_packages=False)
    cycles = [
        (a, b)
        for a, b in itertools.combinations(sorted(graph.modules), 2)
        if graph.chain_exists(importer=a, imported=b) and graph.chain_exists(importer=b, imported=a)
    ]
    assert cycles == [], f"bench modules that import each other: {cycles}"


def test_the_shared_helpers_import_no_bench_script() -> None:
    graph = grimp.build_graph("bench", include_external_packages=False)
    for module in SHARED:
        imported = graph.find_modules_directly_imported_by(module)
        scripts = sorted(
            name for name in imported if name.startswith("bench.") and name not in SHARED
        )
        assert scripts == [], f"{module} imports bench scripts: {scripts}"
