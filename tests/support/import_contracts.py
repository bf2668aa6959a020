"""The import contracts pyproject.toml declares that import-linter's own types cannot say
(`lint-imports` registers them from `contract_types`):

- `standard_library_only`: modules that import nothing but the standard library and each
  other (the pure core);
- `only_importers`: a module that only some of ours may import, named to any depth, so a
  subpackage of an external package (`bytewax.recovery`) too, which grimp keeps squashed
  into its top package (`bytewax`): the import's own statement says which part it names.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from functools import cache
from pathlib import Path

from grimp import ImportGraph
from importlinter import Contract, ContractCheck, fields, output

Violation = tuple[str, str, int, str]
"""(importer, what it imports, line, the line's text)."""


class StandardLibraryOnlyContract(Contract):
    """`source_modules` and their descendants import only the standard library and each
    other. Needs `include_external_packages = true` (else grimp leaves the imports of other
    packages out of its graph)."""

    type_name = "standard_library_only"

    source_modules = fields.ListField(subfield=fields.ModuleField())

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        sources = [module.name for module in self.source_modules]  # type: ignore[attr-defined]
        violations: list[Violation] = []
        for source in sources:
            for module in sorted({source, *graph.find_descendants(source)}):
                for imported in sorted(graph.find_modules_directly_imported_by(module)):
                    inside = any(_within(imported, other) for other in sources)
                    if inside or imported.split(".")[0] in sys.stdlib_module_names:
                        continue
                    violations += _details(graph, module, imported, imported)
        return ContractCheck(kept=not violations, warnings=None, metadata={"found": violations})

    def render_broken_contract(self, check: ContractCheck) -> None:
        _render(check, "imports outside the standard library")


class OnlyImportersContract(Contract):
    """Only `allowed_importers` (and their descendants) import `modules`, each a dotted name
    of any depth. Needs `include_external_packages = true` for an external one."""

    type_name = "only_importers"

    modules = fields.ListField(subfield=fields.StringField())
    allowed_importers = fields.ListField(subfield=fields.ModuleField())

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        allowed = [module.name for module in self.allowed_importers]  # type: ignore[attr-defined]
        violations: list[Violation] = []
        for name in self.modules:  # type: ignore[attr-defined]
            node = _node_of(graph, name)
            if node is None:
                continue  # nothing of ours imports it
            for importer in sorted(graph.find_modules_that_directly_import(node)):
                if not any(_within(importer, module) for module in allowed):
                    violations += _details(graph, importer, node, name)
        return ContractCheck(kept=not violations, warnings=None, metadata={"found": violations})

    def render_broken_contract(self, check: ContractCheck) -> None:
        _render(check, "imports it may not")


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _node_of(graph: ImportGraph, name: str) -> str | None:
    """The graph's module for `name`: itself, or the squashed package it is part of."""
    parts = name.split(".")
    for depth in range(len(parts), 0, -1):
        candidate = ".".join(parts[:depth])
        if candidate in graph.modules:
            return candidate
    return None


def _details(graph: ImportGraph, importer: str, node: str, name: str) -> list[Violation]:
    """The statements by which `importer` imports `name` (through the graph's `node`)."""
    found: list[Violation] = []
    for detail in graph.get_import_details(importer=importer, imported=node):
        line = int(detail["line_number"])
        named = _imported_names(importer, line) or {node}
        if any(_within(imported, name) for imported in named):
            found.append((importer, name, line, str(detail["line_contents"])))
    return found


def _imported_names(module: str, line: int) -> set[str]:
    """The dotted names the import statement at `line` of `module` names (`from a.b import c`:
    a.b and a.b.c), read from the module's source."""
    names: set[str] = set()
    for node in _imports(module):
        if node.lineno != line:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif node.level == 0 and node.module is not None:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@cache
def _imports(module: str) -> tuple[ast.Import | ast.ImportFrom, ...]:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return ()
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    return tuple(node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom))


def _render(check: ContractCheck, what: str) -> None:
    for importer, imported, line, text in check.metadata["found"]:
        output.print_error(f"{importer} {what}: {imported} (l.{line}: {text.strip()})")
        output.new_line()
