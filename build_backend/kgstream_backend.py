"""kgstream's build backend: setuptools', but refusing to build kgstream for a Python that
`requires-python` (pyproject.toml) excludes, with a message that names the cause.

pip before 25.1 checks a local project's Requires-Python only after its dependencies, so
`pip install .` (or `-e .`) on Python 3.13 stopped at the first dependency without a wheel
for that Python: "No matching distribution found for bytewax==0.21.1", never saying that
kgstream itself does not support it. Every install from a checkout first asks this backend
for its build requirements, on the Python it installs for, so the check here comes first
whatever pip's version. A wheel tag cannot do it: a pure-Python wheel tagged py311 or py312
still installs on any newer Python 3. Building an sdist is not refused: it serves any Python.
"""

from __future__ import annotations

import functools
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from setuptools import build_meta as _setuptools

Hook = TypeVar("Hook", bound=Callable[..., Any])


def unsupported_python_message(requires_python: str, running: str, executable: str) -> str:
    """What to print when `running` (a Python version) is outside `requires_python`; empty
    when it is inside."""
    from packaging.specifiers import SpecifierSet

    supported = SpecifierSet(requires_python)
    if supported.contains(running, prereleases=True):
        return ""
    minors = [f"3.{minor}" for minor in range(40) if f"3.{minor}" in supported]
    names = " or ".join(minors) if minors else requires_python
    newest = f"python{minors[-1]}" if minors else "a supported python"
    return (
        f"kgstream needs Python {names} (requires-python {requires_python}); this is Python "
        f"{running} ({executable}).\n"
        f"hint: create the environment with {newest} (e.g. `{newest} -m venv .venv`), "
        "or run scripts/bootstrap, which finds one"
    )


def _require_supported_python() -> None:
    # This runs on the Python being refused, which may be older than kgstream's own.
    if sys.version_info >= (3, 11):  # noqa: UP036
        import tomllib
    else:
        import tomli as tomllib
    project = tomllib.loads(Path("pyproject.toml").read_text(encoding="utf-8"))["project"]
    message = unsupported_python_message(
        project["requires-python"], platform.python_version(), sys.executable
    )
    if message:
        raise SystemExit(message)


def _checked(hook: Hook) -> Hook:
    @functools.wraps(hook)
    def checked(*args: Any, **kwargs: Any) -> Any:
        _require_supported_python()
        return hook(*args, **kwargs)

    return checked  # type: ignore[return-value]


get_requires_for_build_wheel = _checked(_setuptools.get_requires_for_build_wheel)
get_requires_for_build_editable = _checked(_setuptools.get_requires_for_build_editable)
prepare_metadata_for_build_wheel = _checked(_setuptools.prepare_metadata_for_build_wheel)
prepare_metadata_for_build_editable = _checked(_setuptools.prepare_metadata_for_build_editable)
build_wheel = _checked(_setuptools.build_wheel)
build_editable = _checked(_setuptools.build_editable)
get_requires_for_build_sdist = _setuptools.get_requires_for_build_sdist
build_sdist = _setuptools.build_sdist
