"""Document changes written into the watched folder, for the gateway's Ingest when the
indexer reads a folder rather than Kafka.

An upsert writes the file its doc id names (`path_for_doc_id`) through a hidden temporary
file in the same folder and a rename, as editors save, so the watcher sees one complete
file (each write its own temporary name, so concurrent writes of one doc id do not share
one); a delete removes the file. The folder source then indexes the change like any other
edit, and the folder stays the one truth about what is indexed. A doc id the folder could
not hold as a document (absolute, climbing out, hidden, an editor's temporary name) is
refused with ValueError, since the watcher would never index it, and so is one that names a
directory, a name longer than the file system takes, or a file where a folder should be.

Every write and delete happens relative to a directory handle, opened one folder at a time
from the root with O_NOFOLLOW, never through a path the kernel resolves again: a check of
the resolved path followed by a write through it leaves a window in which a folder swapped
for a symbolic link sends the write out of the root. A symbolic link anywhere on the doc
id's path, the name itself included, is refused with ValueError (a bad doc id). The root
is opened afresh for each change and never made: a root that has gone is an outage
(OSError), which the source waits out too.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path, PurePosixPath

from connectors.folder.paths import path_for_doc_id
from connectors.folder.scan import is_document_name
from dataflow.core.documents import DocumentChange, DocumentUpsert

NAME_MAX = 255  # bytes in one file or folder name (Linux, macOS and Windows file systems)

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_MKDIR_TRIES = 100  # a folder moved away each time it is made is an outage, not a loop


class FolderPublisher:
    """`EventPublisher` (gateway/ingest.py) over a watched folder: (partition 0, offset -1)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.topic = f"folder:{self.root}"

    def send(self, change: DocumentChange, event_time_ms: int | None = None) -> tuple[int, int]:
        doc_id = change.doc_id
        *folders, name = self.parts_of(doc_id)
        upsert = isinstance(change, DocumentUpsert)
        folder = self._open_folder(doc_id, folders, create=upsert)
        if folder is None:
            return 0, -1  # a delete under a folder that is not there: nothing to remove
        try:
            _refuse_link_or_folder(doc_id, folder, [*folders, name])
            if isinstance(change, DocumentUpsert):
                content = change.content
                data = content.encode() if isinstance(content, str) else content
                _write_file(doc_id, folder, name, data)
            else:
                try:
                    os.unlink(name, dir_fd=folder)
                except FileNotFoundError:
                    pass  # deleting what is gone is no error
                except IsADirectoryError:
                    raise _directory(doc_id) from None
        finally:
            os.close(folder)
        return 0, -1

    def parts_of(self, doc_id: str) -> tuple[str, ...]:
        """The root-relative parts of the file `doc_id` names (surrogateescaped, as `os`
        takes them); ValueError when no file of the folder can be that document."""
        relative = path_for_doc_id(doc_id)
        if relative is None:
            raise ValueError(
                f"doc_id {doc_id!r} cannot name a file in the watched folder (it must be a "
                "relative path such as notes/today.md, without . or .. parts)"
            )
        parts = PurePosixPath(relative).parts
        if not is_document_name(PurePosixPath(relative)):
            raise ValueError(
                f"doc_id {doc_id!r} names a file the watcher does not index (hidden, or "
                "an editor's temporary name)"
            )
        too_long = next((part for part in parts if len(os.fsencode(part)) > NAME_MAX), None)
        if too_long is not None:
            raise ValueError(
                f"doc_id {doc_id!r} has a name of {len(os.fsencode(too_long))} bytes; the file "
                f"system takes at most {NAME_MAX}"
            )
        return parts

    def _open_folder(self, doc_id: str, folders: list[str], create: bool) -> int | None:
        """A handle of the folder holding the doc id's file, opened one part at a time from
        the root (made where missing when `create`); None when one is missing otherwise.
        The caller closes it."""
        handle = os.open(self.root, _FOLDER)
        for index, part in enumerate(folders):
            try:
                child = _open_child(doc_id, handle, part, folders[: index + 1], create)
            finally:
                os.close(handle)
            if child is None:
                return None
            handle = child
        return handle


def _open_child(doc_id: str, parent: int, name: str, path: list[str], create: bool) -> int | None:
    for _ in range(_MKDIR_TRIES):
        try:
            return os.open(name, _FOLDER, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                return None
        except NotADirectoryError:  # a file, or a symbolic link (O_NOFOLLOW)
            raise _not_a_folder(doc_id, parent, name, path) from None
        with contextlib.suppress(FileExistsError):  # made meanwhile by a concurrent write
            os.mkdir(name, dir_fd=parent)
    raise FileNotFoundError(
        f"folder {'/'.join(path)!r} of the watched folder was gone again each of the "
        f"{_MKDIR_TRIES} times it was made: something else is moving it; try again"
    )


def _write_file(doc_id: str, folder: int, name: str, data: bytes) -> None:
    # Hidden (the watcher skips it) and short whatever the name's length.
    temporary = f".kgstream-ingest-{secrets.token_hex(8)}"
    handle = os.open(temporary, _NEW_FILE, 0o666, dir_fd=folder)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(handle, view) :]
        finally:
            os.close(handle)
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except IsADirectoryError:  # a folder took the name after the check
        raise _directory(doc_id) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary, dir_fd=folder)


def _refuse_link_or_folder(doc_id: str, folder: int, path: list[str]) -> None:
    """The file's own name may not be a link or a folder: rename and unlink would replace
    or remove the link itself, never follow it, but the watcher would not index what a
    link out of the folder names, and a folder is no document."""
    try:
        mode = os.stat(path[-1], dir_fd=folder, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise _link(doc_id, path)
    if stat.S_ISDIR(mode):
        raise _directory(doc_id)


def _not_a_folder(doc_id: str, parent: int, name: str, path: list[str]) -> ValueError:
    try:
        is_link = stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        is_link = True  # gone again: only a swap between link and folder does that
    if is_link:
        return _link(doc_id, path)
    shown = "/".join(path)
    return ValueError(f"doc_id {doc_id!r} needs {shown!r} to be a folder, and it is a file")


def _link(doc_id: str, path: list[str]) -> ValueError:
    shown = "/".join(path)
    return ValueError(
        f"doc_id {doc_id!r} goes through {shown!r}, a symbolic link: documents are written "
        "only through the watched folder's own folders, never through a link"
    )


def _directory(doc_id: str) -> ValueError:
    return ValueError(f"doc_id {doc_id!r} names a directory of the watched folder")
