"""Reading a folder of documents: which files count, and their doc ids.

The watched-folder source and one-shot commands share these rules: hidden
files and folders (a leading dot), editor temporary files, and symlinks that
lead outside the root are not documents.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from functools import cached_property
from pathlib import Path, PurePath, PurePosixPath

from connectors.folder.paths import doc_id_for_path
from dataflow.core.documents import DocumentUpsert

TEMPORARY_SUFFIXES = (".tmp", ".swp", ".swx", ".part", ".crdownload", "~")
TEMPORARY_PREFIXES = (".#", "#")


def has_hidden_part(relative_path: str) -> bool:
    """True when any component of a root-relative POSIX path starts with a dot.

    Nothing under such a path is ever a document, so a watcher may drop its
    events without looking at the disk.
    """
    return any(part.startswith(".") for part in PurePosixPath(relative_path).parts)


def is_document_name(relative: PurePath) -> bool:
    """True when a root-relative path is named like a document: no hidden part (a leading
    dot), not an editor's temporary file. Says nothing of what is (or is not) on disk."""
    name = relative.name
    if any(part.startswith(".") for part in relative.parts):
        return False
    return not (name.endswith(TEMPORARY_SUFFIXES) or name.startswith(TEMPORARY_PREFIXES))


def is_document_path(root: Path, path: Path) -> bool:
    """True when `path` (inside `root`) is a file kgstream should index.

    The symlink rule looks at the fully resolved path, so a link anywhere on
    the way (the file itself or a folder above it) that leads outside the
    root disqualifies the file.
    """
    try:
        relative = path.relative_to(root)
    except ValueError:
        return False
    if not is_document_name(relative):
        return False
    try:
        target = path.resolve()
    except (OSError, RuntimeError):  # a symlink loop, or a path that vanished mid-way
        return False
    if not target.is_relative_to(root.resolve()):
        return False
    return path.is_file()


class DocumentPaths:
    """`is_document_path` for the many paths of one pass over the disk: each folder is
    resolved once, and a file is resolved in full only when it is a symlink itself.

    A file that is no symlink resolves to its folder's resolved path plus its name, so it
    lies inside the root exactly when its folder resolves inside it: the answers are
    `is_document_path`'s (a test compares the two on a tree of hostile links). Resolving
    every file in full costs about 14 system calls a file on every rescan of the whole
    folder, a large share of the indexer's time on a big one. Folders are remembered for the
    object's life: make one per pass, not one per run.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._inside: dict[Path, bool] = {}

    @cached_property
    def _resolved_root(self) -> Path | None:
        return _resolved(self.root)  # on first use: a pass that checks no file resolves nothing

    def __call__(self, path: Path) -> bool:
        try:
            relative = path.relative_to(self.root)
        except ValueError:
            return False
        if not is_document_name(relative):
            return False
        try:
            mode = path.lstat().st_mode
        except OSError:
            return False
        if stat.S_ISLNK(mode):
            return is_document_path(self.root, path)
        return stat.S_ISREG(mode) and self._folder_is_inside(path.parent)

    def _folder_is_inside(self, folder: Path) -> bool:
        inside = self._inside.get(folder)
        if inside is None:
            resolved = _resolved(folder)
            inside = (
                resolved is not None
                and self._resolved_root is not None
                and resolved.is_relative_to(self._resolved_root)
            )
            self._inside[folder] = inside
        return inside


def _resolved(path: Path) -> Path | None:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a symlink loop, or a path that vanished mid-way
        return None


def iter_document_paths_under(
    root: Path, directory: Path, is_document: Callable[[Path], bool] | None = None
) -> Iterator[Path]:
    """Every document in `directory` (a folder inside `root`, or `root` itself), sorted.

    Hidden folders are not entered and symlinked folders are not followed, the
    same as a watcher that does not follow symlinks. A missing `directory`
    yields nothing. `is_document` decides for each file (default: a `DocumentPaths`
    for this walk).
    """
    check = is_document or DocumentPaths(root)
    for current, dirnames, filenames in os.walk(directory, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for filename in sorted(filenames):
            path = Path(current) / filename
            if check(path):
                yield path


def iter_document_paths(root: Path) -> Iterator[Path]:
    """Every document under `root`, in a stable (sorted) order."""
    return iter_document_paths_under(root, root)


def read_document(root: Path, path: Path) -> DocumentUpsert:
    """The upsert for one file; its doc id and file path are the root-relative path."""
    relative = doc_id_for_path(path.relative_to(root).as_posix())
    return DocumentUpsert(doc_id=relative, content=path.read_bytes(), file_path=relative)
