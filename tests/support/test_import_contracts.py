"""The import contract types of tests/support/import_contracts.py, on small packages made for
the test: the standard-library-only contract breaks on any other package, and the
only-importers contract tells the part of an external package an import names."""

import importlib

import grimp
import pytest

from tests.support.import_contracts import OnlyImportersContract, StandardLibraryOnlyContract


@pytest.fixture
def package(tmp_path, monkeypatch):
    """Writes a package of `files` (module path -> source) and returns its import graph."""
    monkeypatch.syspath_prepend(str(tmp_path))
    name = f"toy_{tmp_path.name}"  # one package name per test: modules are cached by name

    def make(files: dict[str, str]) -> tuple[str, grimp.ImportGraph]:
        for path, source in {"__init__": "", **files}.items():
            module = tmp_path / name / f"{path.replace('.', '/')}.py"
            module.parent.mkdir(parents=True, exist_ok=True)
            module.write_text(source)
            for parent in module.relative_to(tmp_path / name).parents:
                (tmp_path / name / parent / "__init__.py").touch()
        importlib.invalidate_caches()
        return name, grimp.build_graph(name, include_external_packages=True, cache_dir=None)

    return make


def standard_library_only(source: str) -> StandardLibraryOnlyContract:
    return StandardLibraryOnlyContract("pure", {}, {"source_modules": [source]})


def test_a_core_of_the_standard_library_and_itself_keeps_the_contract(package):
    name, graph = package(
        {
            "core.a": "from __future__ import annotations\nimport pickle\nfrom . import b\n",
            "core.b": "import threading\nfrom collections.abc import Sequence\n",
            "shell": "import zstandard\n",  # outside the core: not its concern
        }
    )
    assert standard_library_only(f"{name}.core").check(graph, verbose=False).kept


@pytest.mark.parametrize(
    "line", ["import zstandard", "import numpy as np", "from bytewax import x"]
)
def test_a_core_that_imports_another_package_breaks_the_contract(package, line):
    name, graph = package({"core.a": "import os\n", "core.b": f"import json\n{line}\n"})
    check = standard_library_only(f"{name}.core").check(graph, verbose=False)
    assert not check.kept
    ((importer, imported, number, text),) = check.metadata["found"]
    assert (importer, number, text.strip()) == (f"{name}.core.b", 2, line)
    assert imported == line.split()[1]


def only_state(name: str) -> OnlyImportersContract:
    options = {
        "modules": ["bytewax.recovery", "sqlite3"],
        "allowed_importers": [f"{name}.state"],
    }
    return OnlyImportersContract("state", {}, options)


def test_only_the_allowed_importers_may_name_a_part_of_an_external_package(package):
    name, graph = package(
        {
            "state.partitions": "import sqlite3\nfrom bytewax.recovery import init_db_dir\n",
            "flow": "import bytewax.operators as op\nfrom bytewax.dataflow import Dataflow\n",
            "shell": "from bytewax import recovery\nimport sqlite3\n",
            "runner": "from bytewax.recovery import (\n    RecoveryConfig,\n)\n",
        }
    )
    check = only_state(name).check(graph, verbose=False)
    assert not check.kept
    found = sorted(
        (importer, imported, line) for importer, imported, line, _ in check.metadata["found"]
    )
    assert found == [
        (f"{name}.runner", "bytewax.recovery", 1),
        (f"{name}.shell", "bytewax.recovery", 1),
        (f"{name}.shell", "sqlite3", 2),
    ]
