"""Reading a folder of documents: which files count, and their doc ids.

The watched-folder source and one-shot commands share these rules: hidden
files and folders (a leading dot), editor temporary files, and symlinks that
lead outside the root are not documents.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from dataflow.core.documents import DocumentUpsert, doc_id_for_path

TEMPORARY_SUFFIXES = (".tmp", ".swp", ".swx", ".part", ".crdownload", "~")
TEMPORARY_PREFIXES = (".#", "#")


def is_document_path(root: Path, path: Path) -> bool:
    """True when `path` (inside `root`) is a file kgstream should index."""
    try:
        relative = path.relative_to(root)
    except ValueError:
        return False
    name = path.name
    if any(part.startswith(".") for part in relative.parts):
        return False
    if name.endswith(TEMPORARY_SUFFIXES) or name.startswith(TEMPORARY_PREFIXES):
        return False
    if path.is_symlink():
        target = path.resolve()
        if not target.is_relative_to(root.resolve()):
            return False
    return path.is_file()


def iter_document_paths(root: Path) -> Iterator[Path]:
    """Every document under `root`, in a stable (sorted) order."""
    for directory, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for filename in sorted(filenames):
            path = Path(directory) / filename
            if is_document_path(root, path):
                yield path


def read_document(root: Path, path: Path) -> DocumentUpsert:
    """The upsert for one file; its doc id and file path are the root-relative path."""
    relative = doc_id_for_path(path.relative_to(root).as_posix())
    return DocumentUpsert(doc_id=relative, content=path.read_bytes(), file_path=relative)
