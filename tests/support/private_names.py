"""Finds the places in tests that reach a private name (`_name`) of our packages: patch one,
assign one, read one or import one. A test that does breaks when a private helper is
renamed; it should build the object with the value it needs (an injected parameter) or
read a public property instead.

Static and deliberately narrow, to keep false positives out:

- `self._x` and `cls._x` are a class's own business (test helpers have private state too);
- a receiver imported from outside our packages (a third party, the standard library) is
  not ours to judge;
- a receiver the scan cannot trace to an import (a fixture, a local variable, a call's
  result) counts only when our packages define the name and no test gives an object of its
  own that name (so a test helper's private method, called from another helper, is left
  alone, and so is a third party's private attribute on an object one of ours returned).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

OUR_PACKAGES = frozenset({"connectors", "dataflow", "gateway", "kgstream"})
_SELF = frozenset({"self", "cls"})
_BY_NAME = frozenset({"setattr", "getattr", "delattr", "hasattr"})  # builtins and monkeypatch


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@dataclass(frozen=True)
class PrivateReach:
    """One place a test reaches a private name."""

    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def defined_private_names(modules: Iterable[ast.Module]) -> frozenset[str]:
    """The private names `modules` define: functions, classes, globals, and what
    `defined_private_attributes` counts."""
    modules = list(modules)
    names: set[str] = set(defined_private_attributes(modules))
    for module in modules:
        for node in ast.walk(module):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return frozenset(name for name in names if is_private(name))


def defined_private_attributes(modules: Iterable[ast.Module]) -> frozenset[str]:
    """The private names `modules` give objects: a class's methods and attributes, and
    attributes assigned on any object (`self._x = ...`)."""
    names: set[str] = set()
    for module in modules:
        for node in ast.walk(module):
            if isinstance(node, ast.ClassDef):
                for statement in node.body:
                    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
                        names.add(statement.name)
                    targets = (
                        statement.targets
                        if isinstance(statement, ast.Assign)
                        else [statement.target]
                        if isinstance(statement, ast.AnnAssign)
                        else []
                    )
                    names.update(t.id for t in targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
    return frozenset(name for name in names if is_private(name))


def parsed_modules(root: Path) -> list[tuple[Path, ast.Module]]:
    """Every Python module under `root`, parsed."""
    return [
        (path, ast.parse(path.read_text(encoding="utf-8"))) for path in sorted(root.rglob("*.py"))
    ]


class _Imports:
    """Which top-level names of a module are bound by imports, and from where."""

    def __init__(self, tree: ast.Module) -> None:
        self.ours: set[str] = set()
        self.theirs: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    bound = alias.asname or alias.name.partition(".")[0]
                    self._bind(bound, alias.name)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for alias in node.names:
                    self._bind(alias.asname or alias.name, node.module)

    def _bind(self, name: str, module: str) -> None:
        (self.ours if module.partition(".")[0] in OUR_PACKAGES else self.theirs).add(name)


def _root(node: ast.expr) -> tuple[str | None, bool]:
    """The name an expression starts from, and whether a call lies on the way."""
    called = False
    while True:
        if isinstance(node, ast.Attribute | ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call):
            called, node = True, node.func
        else:
            return (node.id if isinstance(node, ast.Name) else None), called


def private_reaches(
    path: str, module: ast.Module, production: frozenset[str], tests_define: frozenset[str]
) -> list[PrivateReach]:
    """Where the test `module` reaches a private name of our packages. `production`:
    the private names our packages define (`defined_private_names`); `tests_define`: those
    the tests give their own objects (`defined_private_attributes`)."""
    reaches = _Scan(path, module, production, tests_define).reaches
    return sorted(reaches, key=lambda reach: reach.line)


class _Scan:
    def __init__(
        self, path: str, tree: ast.Module, production: frozenset[str], tests_define: frozenset[str]
    ) -> None:
        self.path, self.production, self.tests_define = path, production, tests_define
        self.imports = _Imports(tree)
        self.reaches: list[PrivateReach] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                self._import(node, node.module)
            elif isinstance(node, ast.Call):
                self._call(node)
            elif (
                isinstance(node, ast.Attribute)
                and is_private(node.attr)
                and self._ours(node.value, node.attr)
            ):
                verb = "assigns" if isinstance(node.ctx, ast.Store) else "reads"
                self._reach(node, f"{verb} {ast.unparse(node)}")

    def _ours(self, receiver: ast.expr, name: str) -> bool:
        """Whether `receiver.name` is a private name of our packages (see the module doc)."""
        if isinstance(receiver, ast.Name) and receiver.id in _SELF:
            return False
        root, called = _root(receiver)
        if root in self.imports.ours and not called:
            return True
        if root in self.imports.theirs and not called:
            return False
        return name in self.production and name not in self.tests_define

    def _import(self, node: ast.ImportFrom, module: str) -> None:
        if module.partition(".")[0] in OUR_PACKAGES:
            for alias in node.names:
                if is_private(alias.name) or any(map(is_private, module.split("."))):
                    self._reach(node, f"imports {alias.name} from {module}")

    def _call(self, node: ast.Call) -> None:
        """`setattr(x, "_name", ...)`, `monkeypatch.setattr(x, "_name", ...)`,
        `patch.object(x, "_name")` (and getattr, delattr, hasattr); and their dotted forms,
        `monkeypatch.setattr("package.module._name", ...)`, `patch("package.module._name")`."""
        func, args = node.func, node.args
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        by_name = name in _BY_NAME or (
            name == "object" and isinstance(func, ast.Attribute) and _is_patch(func.value)
        )
        if by_name and len(args) >= 2:
            attribute = args[1]
            if (
                isinstance(attribute, ast.Constant)
                and isinstance(attribute.value, str)
                and is_private(attribute.value)
                and self._ours(args[0], attribute.value)
            ):
                self._reach(node, f"{name} {ast.unparse(args[0])}.{attribute.value}")
        if (by_name or name == "patch") and args:
            dotted = args[0]
            if isinstance(dotted, ast.Constant) and isinstance(dotted.value, str):
                parts = dotted.value.split(".")
                if parts[0] in OUR_PACKAGES and any(map(is_private, parts)):
                    self._reach(node, f"{name} {dotted.value}")

    def _reach(self, node: ast.stmt | ast.expr, what: str) -> None:
        self.reaches.append(PrivateReach(self.path, node.lineno, what))


def _is_patch(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "patch") or (
        isinstance(node, ast.Attribute) and node.attr == "patch"
    )
