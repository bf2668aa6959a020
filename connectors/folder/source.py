"""The watched-folder source: a folder's documents as a stream of changes.

Events from watchdog are only hints. For every path they name, the source
looks at the disk once the path has been quiet for a moment (debounce) and
emits what is true *now*: an upsert when the file's bytes differ from what was
last emitted, a delete when a file that was emitted is gone. The same
resolution runs over the whole tree at start-up (against the resume snapshot,
so changes made while the indexer was down are found, deletions included) and
periodically (so events the OS dropped are caught). Because every step
compares the disk with the snapshot, repeated or reordered hints are harmless.

The source remembers ``{doc id: fingerprint}`` (doc ids: connectors/folder/paths.py);
the fingerprint is ``sha256:<hex>`` of the raw bytes. A file over
``max_document_bytes`` is not hashed (reading a 5 GB file to learn that it is too
big is the mistake this avoids): its fingerprint is ``oversized:<size>:<mtime_ns>``
and its upsert carries only the first ``max_document_bytes + 1`` bytes and the
file's real size, which the core's `prepare_document` names when it fails it.

The root itself can vanish: a share unmounted, the folder moved away, a tool that
deletes and recreates it. That is never read as "every document was deleted". While
the root is missing, or has been replaced by an empty folder while the snapshot
holds documents (an unmounted share leaves its empty mount point), the source holds:
it emits nothing, keeps the snapshot, logs one warning and reports it through
`on_hold`. It looks for the root every `ROOT_CHECK_SECONDS`, and once the root is
back (with content, or the very folder it was) it watches it again and rescans it
at once, so only files truly gone from it are deleted.

A periodic rescan reads only the files whose status changed: the source remembers, in
memory, each file's (device, inode, size, mtime, ctime) from when it last read it, and a
rescan that finds the same five takes the file as unchanged. The ctime cannot be set back
by any tool (a write, `touch -d` or a rename in place all move it), so an equal status
means no write since the read, except a write in the same clock tick as the read: a status
read less than `SETTLED_SECONDS` after the file's ctime is not remembered, and the file is
read again by the next rescan. The start-up scan and every path the watcher names are read
in full (docs/decisions/0017-the-folder-source.md).
"""

from __future__ import annotations

import hashlib
import logging
import os
import queue
import stat
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol, cast

from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
from watchdog.events import (
    EVENT_TYPE_CLOSED_NO_WRITE,
    EVENT_TYPE_MODIFIED,
    EVENT_TYPE_MOVED,
    EVENT_TYPE_OPENED,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from connectors.folder.paths import doc_id_for_path, path_for_doc_id, relative_path_problem
from connectors.folder.scan import DocumentPaths, has_hidden_part, iter_document_paths_under
from dataflow.core.documents import DocumentDelete, DocumentUpsert
from dataflow.core.messages import SourceEvent

log = logging.getLogger(__name__)

PARTITION = "folder"
"""The source's only partition: one folder is watched by one worker."""

Fingerprints = dict[str, str]
"""{doc id (the root-relative path, connectors/folder/paths.py): fingerprint of the bytes
last emitted for it}."""

FolderSnapshot = bytes
"""The resume snapshot: the fingerprints packed (`pack_fingerprints`)."""


class Packer(Protocol):
    """Turns plain data into compressed bytes and back: the indexer's snapshot codec
    (dataflow/state/codec.py), which the composition root gives the source, so that the
    source's snapshot is packed (and its small ones with the index's dictionary) as every
    step's is."""

    def pack(self, value: object) -> bytes: ...

    def unpack(self, blob: bytes) -> object: ...


_SHA256 = "sha256:"


def pack_fingerprints(fingerprints: Fingerprints, packer: Packer) -> bytes:
    """`fingerprints` as compressed bytes, each SHA-256 as its 32 bytes rather than 71
    characters: about a third of the bytes of the dict pickled, and the snapshot is written
    to the recovery database in every epoch that changes one fingerprint."""
    return packer.pack(
        {
            doc_id: bytes.fromhex(fingerprint[len(_SHA256) :])
            if fingerprint.startswith(_SHA256)
            else fingerprint
            for doc_id, fingerprint in fingerprints.items()
        }
    )


def unpack_fingerprints(snapshot: FolderSnapshot, packer: Packer) -> Fingerprints:
    """The fingerprints a resume snapshot holds."""
    packed = cast(dict[str, bytes | str], packer.unpack(snapshot))
    return {
        doc_id: _SHA256 + fingerprint.hex() if isinstance(fingerprint, bytes) else fingerprint
        for doc_id, fingerprint in packed.items()
    }


HoldReport = Callable[[str | None], None]
"""Told why the source holds (the watched root is missing), or None once it goes on."""

ROOT_CHECK_SECONDS = 0.5
"""How often a holding source looks for its root again."""

SETTLED_SECONDS = 2.0
"""How long after its last change (ctime) a file's status is trusted by the rescan: longer
than any file system's timestamp tick (FAT's is 2 s), so no write can share it."""

_FileStatus = tuple[int, int, int, int, int]
"""(device, inode, size, mtime ns, ctime ns): equal between two looks only if no write or
rename came between them (see the module docstring)."""

# How long one next_batch call may spend resolving scan paths before it hands
# control back to Bytewax; a big initial scan is spread over many calls.
_WORK_BUDGET_SECONDS = 0.05
_IGNORED_EVENT_TYPES = frozenset({EVENT_TYPE_OPENED, EVENT_TYPE_CLOSED_NO_WRITE})


@dataclass(frozen=True)
class FolderSourceOptions:
    """How to watch one folder.

    `stop_after_scan` is the one-shot mode (``kgstream index DIR``): emit what
    the initial scan finds against the resume snapshot, then end the stream.
    `watch=False` relies on the periodic rescan alone, for file systems that
    deliver no change notifications (network mounts). `poll_seconds` is how
    often the source looks at the watcher's queue, since a watchdog thread
    cannot wake Bytewax.

    `max_batch` bounds the documents one `next_batch` hands on from a scan. The dataflow
    carries a batch through its steps together, and a document turns PROCESSED with the
    last of its batch, so during an initial load this is how soon and how steadily
    documents turn PROCESSED; much smaller batches cost throughput (more renders of the
    same hub entities). 64: the first documents of a load turn PROCESSED in about a third of
    the time batches of a few hundred take, at the same total time; 16 makes the load a
    quarter slower.
    """

    root: Path
    debounce_seconds: float = 0.05
    rescan_seconds: float = 30.0
    max_document_bytes: int = 10_000_000
    stop_after_scan: bool = False
    watch: bool = True
    poll_seconds: float = 0.02
    max_batch: int = 64

    def __post_init__(self) -> None:
        if self.debounce_seconds < 0:
            raise ValueError(f"debounce_seconds must be >= 0; got {self.debounce_seconds!r}")
        if self.rescan_seconds <= 0:
            raise ValueError(
                f"rescan_seconds must be > 0; got {self.rescan_seconds!r} "
                "(use a large value to rescan rarely)"
            )
        if self.max_document_bytes <= 0:
            raise ValueError(f"max_document_bytes must be > 0; got {self.max_document_bytes!r}")
        if self.poll_seconds <= 0:
            raise ValueError(f"poll_seconds must be > 0; got {self.poll_seconds!r}")
        if self.max_batch < 1:
            raise ValueError(f"max_batch must be >= 1; got {self.max_batch!r}")


@dataclass(frozen=True)
class _Touch:
    """The watcher saw something happen at `doc_id` ("" for the root), at monotonic `seen_at`."""

    doc_id: str
    is_directory: bool
    seen_at: float


@dataclass
class _Pending:
    last_seen: float
    is_directory: bool


@dataclass(frozen=True)
class _FileVersion:
    content: bytes
    fingerprint: str
    modified_at: float
    size: int
    status: _FileStatus | None
    """The file's status when read, if it had been settled for `SETTLED_SECONDS`."""


class _TouchCollector(FileSystemEventHandler):
    """Runs on the observer's thread: turns events into touched paths, nothing more."""

    def __init__(self, root: Path, touches: queue.SimpleQueue[_Touch]) -> None:
        self._root = str(root)
        self._touches = touches

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in _IGNORED_EVENT_TYPES:
            return
        if event.is_directory and event.event_type == EVENT_TYPE_MODIFIED:
            return  # a folder's mtime moves when its children change; they have their own events
        now = time.monotonic()
        self._touch(event.src_path, event.is_directory, now)
        if event.event_type == EVENT_TYPE_MOVED:
            self._touch(event.dest_path, event.is_directory, now)

    def _touch(self, raw_path: bytes | str, is_directory: bool, now: float) -> None:
        path = os.fsdecode(raw_path)
        if path == self._root:
            self._touches.put(_Touch("", is_directory, now))
            return
        if not path.startswith(self._root + os.sep):
            return
        relative = Path(path[len(self._root) + 1 :]).as_posix()
        if has_hidden_part(relative) or relative_path_problem(relative) is not None:
            return  # nothing hidden (or outside the root) is ever in the snapshot
        self._touches.put(_Touch(doc_id_for_path(relative), is_directory, now))


def read_file_version(path: Path, max_bytes: int) -> _FileVersion:
    """The file's bytes (at most `max_bytes` + 1) and the fingerprint the snapshot keeps."""
    with path.open("rb") as handle:
        status = os.fstat(handle.fileno())
        content = handle.read(max_bytes + 1)
    if len(content) > max_bytes:
        fingerprint = f"oversized:{status.st_size}:{status.st_mtime_ns}"
    else:
        fingerprint = "sha256:" + hashlib.sha256(content).hexdigest()
    settled = time.time_ns() - status.st_ctime_ns >= SETTLED_SECONDS * 1e9
    return _FileVersion(
        content,
        fingerprint,
        status.st_mtime,
        max(status.st_size, len(content)),
        _status(status) if settled else None,
    )


def _status(status: os.stat_result) -> _FileStatus:
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)


def _current_status(path: Path) -> _FileStatus | None:
    try:
        return _status(path.stat())
    except OSError:
        return None


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of a folder, or None when `path` is not a folder now."""
    try:
        status = path.stat()
    except OSError:
        return None
    if not stat.S_ISDIR(status.st_mode):
        return None
    return (status.st_dev, status.st_ino)


@dataclass
class _ScanJob:
    doc_ids: Iterator[str]
    whole_tree: bool


class FolderPartition(StatefulSourcePartition[SourceEvent, FolderSnapshot]):
    """The folder's only partition; see the module docstring for how it decides what to emit."""

    def __init__(
        self,
        options: FolderSourceOptions,
        packer: Packer,
        resume_state: FolderSnapshot | None,
        on_hold: HoldReport | None = None,
    ) -> None:
        self._options, self._packer = options, packer
        self._root = options.root.absolute()
        # Which paths are documents, folders resolved once per batch (a new one each batch:
        # a folder replaced by a link meanwhile is seen at the next).
        self._document_paths = DocumentPaths(self._root)
        self._on_hold = on_hold
        self._fingerprints = unpack_fingerprints(resume_state, packer) if resume_state else {}
        self._packed: bytes | None = None  # `snapshot()` of the fingerprints as they are
        # Each file's status when it was last read, if settled: what a rescan may trust.
        self._read_status: dict[str, _FileStatus] = {}
        self._touches: queue.SimpleQueue[_Touch] = queue.SimpleQueue()
        self._pending: dict[str, _Pending] = {}
        self._jobs: deque[_ScanJob] = deque()
        self._next_rescan: float | None = None
        self._finished = False
        self._observer: BaseObserver | None = None
        # An empty root is believed only when the source saw it emptied: one that is empty
        # at start while the snapshot holds documents may be an unmounted share.
        empty_at_start = bool(self._fingerprints) and self._is_empty_root()
        self._root_identity = None if empty_at_start else _identity(self._root)
        self._holding: str | None = None  # why the source holds, while the root is missing
        self._next_root_check = 0.0  # while holding, when to look for the root again
        self._watch_and_scan()

    def _watch_and_scan(self) -> None:
        """Watch the root (before scanning it: a change made during the scan is then either
        seen by the scan or reported by the watcher) and queue a scan of the whole tree."""
        if self._options.watch and not self._options.stop_after_scan:
            observer = Observer()
            observer.schedule(
                _TouchCollector(self._root, self._touches), str(self._root), recursive=True
            )
            observer.start()
            self._observer = observer
        self._jobs.append(_ScanJob(self._doc_ids_under(""), whole_tree=True))

    def next_batch(self) -> list[SourceEvent]:
        if self._finished:
            raise StopIteration
        now = time.monotonic()
        self._document_paths = DocumentPaths(self._root)
        self._collect_touches()
        if not self._root_is_there():
            self._next_root_check = now + ROOT_CHECK_SECONDS
            return []
        emitted: list[SourceEvent] = []
        for doc_id in self._quiet_paths(now):
            pending = self._pending.pop(doc_id)
            if pending.is_directory or self._is_real_directory(doc_id):
                self._jobs.append(_ScanJob(self._doc_ids_under(doc_id), whole_tree=False))
            else:
                self._emit_resolution(doc_id, emitted)
        self._run_jobs(now + _WORK_BUDGET_SECONDS, emitted)
        rescan_due = self._next_rescan is not None and now >= self._next_rescan
        if rescan_due and not self._has_whole_tree_job() and self._holding is None:
            self._next_rescan = None
            self._jobs.append(_ScanJob(self._doc_ids_under(""), whole_tree=True))
        return emitted

    def next_awake(self) -> datetime | None:
        if self._finished:
            return None
        now = time.monotonic()
        if self._holding is not None:  # a fixed time: next_awake may be asked again before it
            wait = max(0.0, self._next_root_check - now)
            return datetime.now(UTC) + timedelta(seconds=wait)
        if self._jobs:
            return None
        wake = now + self._options.poll_seconds if self._observer is not None else float("inf")
        for pending in self._pending.values():
            wake = min(wake, pending.last_seen + self._options.debounce_seconds)
        if self._next_rescan is not None:
            wake = min(wake, self._next_rescan)
        if wake == float("inf"):
            return None
        return datetime.now(UTC) + timedelta(seconds=max(0.0, wake - now))

    def snapshot(self) -> bytes:
        if self._packed is None:  # packed again only once a fingerprint has changed
            self._packed = pack_fingerprints(self._fingerprints, self._packer)
        return self._packed

    def fingerprints(self) -> Fingerprints:
        """A copy of what the source last emitted for each document."""
        return dict(self._fingerprints)

    @property
    def holding(self) -> str | None:
        """Why the source holds (its root is missing), or None while it watches."""
        return self._holding

    def close(self) -> None:
        self._stop_watching()

    def _stop_watching(self) -> None:
        observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            observer.join()

    # --- the root ----------------------------------------------------------------------------

    def _root_is_there(self) -> bool:
        """False while the source holds: the root is missing, or is a new folder that is
        empty while the snapshot holds documents (an unmounted share's mount point). When
        it comes back, watch it again and rescan it at once."""
        identity = _identity(self._root)
        if identity is not None and identity == self._root_identity and self._holding is None:
            return True
        if identity is None:
            self._hold(f"watched folder {str(self._root)!r} is missing")
            return False
        if self._fingerprints and identity != self._root_identity and self._is_empty_root():
            self._hold(f"watched folder {str(self._root)!r} is empty (a share not mounted?)")
            return False
        self._root_identity = identity
        if self._holding is not None:
            self._resume()
        else:  # replaced by a folder with content between two looks: reconcile with it
            self._stop_watching()
            self._pending.clear()
            self._jobs.clear()
            self._watch_and_scan()
        return True

    def _is_empty_root(self) -> bool:
        return next(iter_document_paths_under(self._root, self._root), None) is None

    def _hold(self, reason: str) -> None:
        self._pending.clear()
        self._jobs.clear()
        if self._holding == reason:
            return
        was_holding, self._holding = self._holding is not None, reason
        self._stop_watching()
        if self._options.stop_after_scan:
            self._finished = True  # a one-shot run ends: nothing to bring the index to
        if not was_holding:
            log.warning(
                "%s: keeping its %d documents in the index (nothing is deleted) until it is back",
                reason,
                len(self._fingerprints),
            )
        if self._on_hold is not None:
            self._on_hold(reason)

    def _resume(self) -> None:
        log.warning("watched folder %s is back: rescanning it", self._root)
        self._holding = None
        self._pending.clear()
        self._watch_and_scan()
        if self._on_hold is not None:
            self._on_hold(None)

    # --- resolving paths ---------------------------------------------------------------------

    def _collect_touches(self) -> None:
        while True:
            try:
                touch = self._touches.get_nowait()
            except queue.Empty:
                return
            pending = self._pending.get(touch.doc_id)
            if pending is None:
                self._pending[touch.doc_id] = _Pending(touch.seen_at, touch.is_directory)
            else:
                pending.last_seen = max(pending.last_seen, touch.seen_at)
                pending.is_directory = pending.is_directory or touch.is_directory

    def _quiet_paths(self, now: float) -> list[str]:
        quiet_since = now - self._options.debounce_seconds
        return sorted(r for r, p in self._pending.items() if p.last_seen <= quiet_since)

    def _run_jobs(self, deadline: float, emitted: list[SourceEvent]) -> None:
        while self._jobs:
            job = self._jobs[0]
            doc_id = next(job.doc_ids, None)
            if doc_id is None:
                self._jobs.popleft()
                if job.whole_tree:
                    self._finish_whole_tree_scan()
                continue
            self._emit_resolution(doc_id, emitted, trust_status=job.whole_tree)
            if time.monotonic() >= deadline or len(emitted) >= self._options.max_batch:
                return

    def _finish_whole_tree_scan(self) -> None:
        if self._options.stop_after_scan:
            self._finished = True
        elif not self._has_whole_tree_job():
            self._next_rescan = time.monotonic() + self._options.rescan_seconds

    def _has_whole_tree_job(self) -> bool:
        return any(job.whole_tree for job in self._jobs)

    def _path_of(self, doc_id: str) -> Path | None:
        """Where a doc id's file is (the root for ""), or None for an id no file can have."""
        if doc_id == "":
            return self._root
        relative = path_for_doc_id(doc_id)
        return None if relative is None else self._root / relative

    def _is_real_directory(self, doc_id: str) -> bool:
        path = self._path_of(doc_id)
        return path is not None and not path.is_symlink() and path.is_dir()

    def _doc_ids_under(self, doc_id: str) -> Iterator[str]:
        """Every doc id to resolve for a folder: its own (a file may have replaced it, or
        it a file), its documents on disk, then the snapshot's ids under it that the disk
        no longer has."""
        seen: set[str] = set()
        if doc_id:
            seen.add(doc_id)
            yield doc_id  # a file now, or a file that a folder of the same name replaced
        directory = self._path_of(doc_id)
        if directory is not None and (
            doc_id == "" or (not has_hidden_part(doc_id) and self._is_real_directory(doc_id))
        ):
            for path in iter_document_paths_under(self._root, directory, self._is_document):
                found = doc_id_for_path(path.relative_to(self._root).as_posix())
                seen.add(found)
                yield found
        prefix = f"{doc_id}/" if doc_id else ""
        vanished = sorted(k for k in self._fingerprints if k.startswith(prefix) and k not in seen)
        yield from vanished

    def _is_document(self, path: Path) -> bool:
        return self._document_paths(path)

    def _emit_resolution(
        self, doc_id: str, emitted: list[SourceEvent], trust_status: bool = False
    ) -> None:
        event = self._resolve(doc_id, trust_status)
        if event is not None:
            emitted.append(event)

    def _resolve(self, doc_id: str, trust_status: bool = False) -> SourceEvent | None:
        """Compare one document's current bytes on disk with the snapshot; with
        `trust_status` (a rescan), a file whose status is the one it had when last read
        is taken as unchanged without reading it."""
        if self._holding is not None:
            return None
        origin = f"folder:{doc_id}"
        path = self._path_of(doc_id)
        version: _FileVersion | None = None
        if path is not None and self._is_document(path):
            known = self._read_status.get(doc_id) if trust_status else None
            if known is not None and known == _current_status(path):
                return None
            try:
                version = read_file_version(path, self._options.max_document_bytes)
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                version = None  # gone between the check and the read
            except OSError as error:
                log.warning("skipping %s: cannot read it (%s); fix its permissions", path, error)
                return None
        if version is None:
            self._read_status.pop(doc_id, None)
            if doc_id not in self._fingerprints or not self._root_is_there():
                return None  # never emitted, or the whole root is gone: that is no deletion
            del self._fingerprints[doc_id]
            self._packed = None
            return SourceEvent(DocumentDelete(doc_id), origin, time.time())
        if version.status is None:
            self._read_status.pop(doc_id, None)
        else:
            self._read_status[doc_id] = version.status
        if self._fingerprints.get(doc_id) == version.fingerprint:
            return None
        self._fingerprints[doc_id] = version.fingerprint
        self._packed = None
        change = DocumentUpsert(
            doc_id=doc_id, content=version.content, file_path=doc_id, size=version.size
        )
        return SourceEvent(change, origin, version.modified_at)


class FolderSource(FixedPartitionedSource[SourceEvent, FolderSnapshot]):
    """A watched folder as a Bytewax source with one partition, resumable from its snapshot.

    `packer` packs its snapshot (`Packer`). `on_hold` is told when the source starts holding
    because its root is missing (the reason) and when it goes on (None), for `kgstream
    status` and the metrics."""

    def __init__(
        self, options: FolderSourceOptions, packer: Packer, on_hold: HoldReport | None = None
    ) -> None:
        self._options, self._packer = options, packer
        self._on_hold = on_hold

    def list_parts(self) -> list[str]:
        return [PARTITION]

    def build_part(
        self, step_id: str, for_part: str, resume_state: FolderSnapshot | None
    ) -> FolderPartition:
        if for_part != PARTITION:
            raise ValueError(
                f"FolderSource in step {step_id!r} has only partition {PARTITION!r}; "
                f"got {for_part!r}"
            )
        if not self._options.root.is_dir():
            raise FileNotFoundError(
                f"watched folder {str(self._options.root)!r} (step {step_id!r}) is not a folder; "
                "create it or point the source at another one"
            )
        return FolderPartition(self._options, self._packer, resume_state, self._on_hold)
