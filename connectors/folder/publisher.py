"""Document changes written into the watched folder, for the gateway's Ingest when the
indexer reads a folder rather than Kafka.

An upsert writes the file its doc id names (`path_for_doc_id`) through a hidden temporary
file in the same folder and a rename, as editors save, so the watcher sees one complete
file (each write its own temporary name, so concurrent writes of one doc id do not share
one); a delete removes the file. The folder source then indexes the change like any other
edit, and the folder stays the one truth about what is indexed. A doc id the folder could
not hold as a document (absolute, climbing out, hidden, an editor's temporary name) is
refused with ValueError, since the watcher would never index it, and so is one that names a
directory or a name longer than the file system takes.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from connectors.folder.paths import path_for_doc_id
from connectors.folder.scan import is_document_name
from dataflow.core.documents import DocumentChange, DocumentUpsert

NAME_MAX = 255  # bytes in one file or folder name (Linux, macOS and Windows file systems)


class FolderPublisher:
    """`EventPublisher` (gateway/ingest.py) over a watched folder: (partition 0, offset -1)."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.topic = f"folder:{self.root}"

    def send(self, change: DocumentChange, event_time_ms: int | None = None) -> tuple[int, int]:
        path = self.path_of(change.doc_id)
        if isinstance(change, DocumentUpsert):
            path.parent.mkdir(parents=True, exist_ok=True)
            # Hidden (the watcher skips it) and short whatever the name's length.
            temporary = path.with_name(f".kgstream-ingest-{secrets.token_hex(8)}")
            try:
                content = change.content
                temporary.write_bytes(content.encode() if isinstance(content, str) else content)
                os.replace(temporary, path)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    temporary.unlink()
        else:
            path.unlink(missing_ok=True)
        return 0, -1

    def path_of(self, doc_id: str) -> Path:
        """The file `doc_id` names in the folder; ValueError when it cannot be a document."""
        relative = path_for_doc_id(doc_id)
        if relative is None:
            raise ValueError(
                f"doc_id {doc_id!r} cannot name a file in the watched folder (it must be a "
                "relative path such as notes/today.md, without . or .. parts)"
            )
        path = self.root / relative
        inside = Path(os.path.realpath(path)).is_relative_to(self.root)
        if not inside or not is_document_name(path.relative_to(self.root)):
            raise ValueError(
                f"doc_id {doc_id!r} names a file the watcher does not index (hidden, a "
                "temporary name, or through a link out of the folder)"
            )
        if path.is_dir():
            raise ValueError(f"doc_id {doc_id!r} names a directory of the watched folder")
        too_long = next(
            (part for part in Path(relative).parts if len(os.fsencode(part)) > NAME_MAX), None
        )
        if too_long is not None:
            raise ValueError(
                f"doc_id {doc_id!r} has a name of {len(os.fsencode(too_long))} bytes; the file "
                f"system takes at most {NAME_MAX}"
            )
        return path
