"""The watched-folder source against a real folder, a real watchdog observer and real Bytewax.

Partition-level tests drive `next_batch` directly for precise assertions; the
one-shot tests run whole dataflows with `bytewax.testing.run_main` (with
recovery, so the resume snapshot goes through Bytewax itself). "Nothing else
happened" is checked with a sentinel: a later change to another file, whose
upsert can only arrive after every earlier event has been resolved.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import bytewax.operators as op
import pytest
from bytewax.dataflow import Dataflow
from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.testing import TestingSink, run_main

from connectors.folder.source import (
    SETTLED_SECONDS,
    FolderPartition,
    FolderSnapshot,
    FolderSource,
    FolderSourceOptions,
    pack_fingerprints,
    unpack_fingerprints,
)
from dataflow.core.documents import (
    DocumentDelete,
    DocumentFailure,
    DocumentLimits,
    DocumentUpsert,
    prepare_document,
)
from dataflow.core.messages import SourceEvent
from dataflow.state.codec import SnapshotCodec
from tests.support.wait import wait_until

Summary = tuple[str, str] | tuple[str, str, bytes]

CODEC = SnapshotCodec()
"""Packs the source's snapshots, as the indexer's codec does (kgstream gives it the source)."""


WAIT_SECONDS = 30.0  # what a test waits for arrives in milliseconds on an idle machine
PUMP_INTERVAL = 0.005  # between two calls of `next_batch`


def summarise(event: SourceEvent) -> Summary:
    change = event.change
    if isinstance(change, DocumentDelete):
        return ("delete", change.doc_id)
    content = change.content if isinstance(change.content, bytes) else change.content.encode()
    return ("upsert", change.doc_id, content)


class Driver:
    """Calls a partition's `next_batch` the way Bytewax would, collecting what it emits."""

    def __init__(self, partition: FolderPartition) -> None:
        self.partition = partition
        self.events: list[SourceEvent] = []

    def pump_until(self, predicate: Callable[[list[SourceEvent]], bool], what: str) -> None:
        """Call `next_batch` until `predicate` holds for the events collected; `what` names
        what the test waits for."""

        def step() -> bool:
            self.events.extend(self.partition.next_batch())
            return predicate(self.events)

        wait_until(step, WAIT_SECONDS, what, interval=PUMP_INTERVAL)

    def expect(self, *summaries: Summary) -> list[SourceEvent]:
        """Wait for exactly these events (in any order), then hand them over and forget them."""
        wanted = sorted(summaries)
        self.pump_until(lambda events: len(events) >= len(wanted), f"the events {wanted}")
        taken, self.events = self.events, []
        assert sorted(summarise(e) for e in taken) == wanted
        return taken

    def expect_nothing_before(self, sentinel: Path) -> None:
        """Touch a sentinel file; its upsert must be the only event."""
        sentinel.write_text(f"sentinel {time.monotonic_ns()}")
        relative = sentinel.name
        self.pump_until(
            lambda events: any(e.origin == f"folder:{relative}" for e in events),
            f"the upsert of the sentinel {relative}",
        )
        taken, self.events = self.events, []
        assert [summarise(e) for e in taken] == [("upsert", relative, sentinel.read_bytes())]

    def run_to_end(self) -> list[SourceEvent]:
        """Pump a one-shot partition until it raises StopIteration."""
        ended = False

        def step() -> bool:
            nonlocal ended
            try:
                self.events.extend(self.partition.next_batch())
            except StopIteration:
                ended = True
            return ended

        wait_until(step, WAIT_SECONDS, "the end of the one-shot scan", interval=PUMP_INTERVAL)
        return self.events


PartitionFactory = Callable[..., Driver]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    return folder


@pytest.fixture
def start(root: Path) -> Iterator[PartitionFactory]:
    """Build live partitions on `root`; every one is closed at the end of the test."""
    partitions: list[FolderPartition] = []

    def build(resume: FolderSnapshot | None = None, **options: object) -> Driver:
        source = FolderSource(FolderSourceOptions(root=root, **options), CODEC)  # type: ignore[arg-type]
        partition = source.build_part("folder_in", "folder", resume)
        partitions.append(partition)
        return Driver(partition)

    yield build
    for partition in partitions:
        partition.close()


def sha256_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# --- initial scan ---------------------------------------------------------------------------


def test_initial_scan_emits_documents_and_skips_hidden_temporary_and_outside_symlinks(
    root: Path, tmp_path: Path, start: PartitionFactory
) -> None:
    (root / "a.md").write_bytes(b"alpha")
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_bytes(b"beta")
    (root / ".hidden.md").write_bytes(b"hidden")
    (root / ".git").mkdir()
    (root / ".git" / "notes.md").write_bytes(b"hidden folder")
    (root / "draft.md.tmp").write_bytes(b"temporary")
    (root / "draft.md~").write_bytes(b"backup")
    (root / "#draft.md#").write_bytes(b"emacs autosave")
    outside = tmp_path / "outside.md"
    outside.write_bytes(b"outside")
    (root / "out-link.md").symlink_to(outside)
    (tmp_path / "outside-dir").mkdir()
    (tmp_path / "outside-dir" / "c.md").write_bytes(b"outside folder")
    (root / "out-dir-link").symlink_to(tmp_path / "outside-dir")
    (root / "in-link.md").symlink_to(root / "a.md")

    driver = start(stop_after_scan=True)
    events = driver.run_to_end()

    assert sorted(summarise(e) for e in events) == [
        ("upsert", "a.md", b"alpha"),
        ("upsert", "in-link.md", b"alpha"),
        ("upsert", "sub/b.txt", b"beta"),
    ]
    upsert = next(e for e in events if e.origin == "folder:sub/b.txt")
    assert isinstance(upsert.change, DocumentUpsert)
    assert upsert.change.file_path == "sub/b.txt"
    assert upsert.event_time == os.stat(root / "sub" / "b.txt").st_mtime
    assert driver.partition.fingerprints() == {
        "a.md": sha256_of(b"alpha"),
        "in-link.md": sha256_of(b"alpha"),
        "sub/b.txt": sha256_of(b"beta"),
    }


def test_file_created_right_after_start_is_emitted_once(
    root: Path, start: PartitionFactory
) -> None:
    driver = start()
    (root / "early.md").write_bytes(b"written while the scan may be running")
    driver.expect(("upsert", "early.md", b"written while the scan may be running"))
    driver.expect_nothing_before(root / "sentinel.md")


# --- live changes ---------------------------------------------------------------------------


def test_create_then_modify_emit_upserts_with_origin_and_mtime(
    root: Path, start: PartitionFactory
) -> None:
    driver = start()
    path = root / "a.md"
    path.write_bytes(b"first")
    (created,) = driver.expect(("upsert", "a.md", b"first"))
    assert created.origin == "folder:a.md"
    assert created.event_time == path.stat().st_mtime

    path.write_bytes(b"second")
    driver.expect(("upsert", "a.md", b"second"))
    assert driver.partition.fingerprints() == {"a.md": sha256_of(b"second")}


def test_atomic_save_through_a_temporary_file_emits_one_upsert_of_the_target(
    root: Path, start: PartitionFactory
) -> None:
    (root / "a.md").write_bytes(b"old text")
    driver = start()
    driver.expect(("upsert", "a.md", b"old text"))

    temporary = root / ".a.md.tmp"
    temporary.write_bytes(b"saved by an editor")
    os.replace(temporary, root / "a.md")
    driver.expect(("upsert", "a.md", b"saved by an editor"))
    driver.expect_nothing_before(root / "sentinel.md")


def test_rename_emits_delete_of_old_path_and_upsert_of_new_path(
    root: Path, start: PartitionFactory
) -> None:
    (root / "old.md").write_bytes(b"content")
    driver = start()
    driver.expect(("upsert", "old.md", b"content"))

    (root / "old.md").rename(root / "new.md")
    driver.expect(("delete", "old.md"), ("upsert", "new.md", b"content"))
    assert driver.partition.fingerprints() == {"new.md": sha256_of(b"content")}


def test_delete_emits_delete_with_wall_clock_time(root: Path, start: PartitionFactory) -> None:
    (root / "a.md").write_bytes(b"content")
    driver = start()
    driver.expect(("upsert", "a.md", b"content"))

    before = time.time()
    (root / "a.md").unlink()
    (deleted,) = driver.expect(("delete", "a.md"))
    assert deleted.origin == "folder:a.md"
    assert before <= deleted.event_time <= time.time()
    assert driver.partition.fingerprints() == {}


# Moving a watched folder out and back in makes watchdog re-register inotify watches it never
# dropped; it warns and carries on.
@pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")
def test_directory_moves_within_into_and_out_of_the_root(
    root: Path, tmp_path: Path, start: PartitionFactory
) -> None:
    (root / "guides" / "deep").mkdir(parents=True)
    (root / "guides" / "x.md").write_bytes(b"x")
    (root / "guides" / "deep" / "y.md").write_bytes(b"y")
    driver = start()
    driver.expect(("upsert", "guides/x.md", b"x"), ("upsert", "guides/deep/y.md", b"y"))

    (root / "guides").rename(root / "manuals")
    driver.expect(
        ("delete", "guides/x.md"),
        ("delete", "guides/deep/y.md"),
        ("upsert", "manuals/x.md", b"x"),
        ("upsert", "manuals/deep/y.md", b"y"),
    )

    (root / "manuals").rename(tmp_path / "archived")
    driver.expect(("delete", "manuals/x.md"), ("delete", "manuals/deep/y.md"))
    # inotify keeps watching the moved-out folder; its events name paths that are gone.
    (tmp_path / "archived" / "x.md").write_bytes(b"edited outside the root")
    driver.expect_nothing_before(root / "sentinel.md")

    (tmp_path / "archived").rename(root / "restored")
    driver.expect(
        ("upsert", "restored/x.md", b"edited outside the root"),
        ("upsert", "restored/deep/y.md", b"y"),
    )
    driver.expect_nothing_before(root / "sentinel.md")


def test_directory_delete_emits_delete_for_every_file_inside(
    root: Path, start: PartitionFactory
) -> None:
    (root / "keep.md").write_bytes(b"keep")
    (root / "gone" / "inner").mkdir(parents=True)
    for name in ("one.md", "two.md", "inner/three.md"):
        (root / "gone" / name).write_bytes(name.encode())
    driver = start()
    driver.expect(
        ("upsert", "keep.md", b"keep"),
        ("upsert", "gone/one.md", b"one.md"),
        ("upsert", "gone/two.md", b"two.md"),
        ("upsert", "gone/inner/three.md", b"inner/three.md"),
    )

    shutil.rmtree(root / "gone")
    driver.expect(
        ("delete", "gone/one.md"), ("delete", "gone/two.md"), ("delete", "gone/inner/three.md")
    )
    assert driver.partition.fingerprints() == {"keep.md": sha256_of(b"keep")}


def test_hidden_temporary_and_outside_symlink_changes_emit_nothing(
    root: Path, tmp_path: Path, start: PartitionFactory
) -> None:
    driver = start()
    (root / ".secret.md").write_bytes(b"hidden")
    (root / ".cache").mkdir()
    (root / ".cache" / "x.md").write_bytes(b"hidden folder")
    (root / "x.md.swp").write_bytes(b"vim swap")
    (root / "download.part").write_bytes(b"partial")
    outside = tmp_path / "outside.md"
    outside.write_bytes(b"outside")
    (root / "link.md").symlink_to(outside)
    driver.expect_nothing_before(root / "sentinel.md")


def test_burst_of_writes_to_one_file_collapses_to_one_upsert_of_the_last_content(
    root: Path, start: PartitionFactory
) -> None:
    driver = start(debounce_seconds=0.3)
    path = root / "busy.md"
    for version in range(20):
        path.write_bytes(f"version {version}".encode())
    driver.expect(("upsert", "busy.md", b"version 19"))
    driver.expect_nothing_before(root / "sentinel.md")


def test_rewriting_identical_bytes_emits_nothing(root: Path, start: PartitionFactory) -> None:
    (root / "a.md").write_bytes(b"same")
    driver = start()
    driver.expect(("upsert", "a.md", b"same"))

    (root / "a.md").write_bytes(b"same")
    os.utime(root / "a.md")
    driver.expect_nothing_before(root / "sentinel.md")


def test_oversized_file_emits_an_upsert_the_core_fails_naming_the_files_real_size(
    root: Path, start: PartitionFactory
) -> None:
    limit = 100
    driver = start(max_document_bytes=limit)
    (root / "at-limit.md").write_bytes(b"y" * limit)
    (root / "huge.md").write_bytes(b"x" * 5000)
    driver.pump_until(lambda events: len(events) >= 2, "two events")
    events, driver.events = {e.change.doc_id: e.change for e in driver.events}, []
    at_limit, huge = events["at-limit.md"], events["huge.md"]
    assert isinstance(at_limit, DocumentUpsert) and isinstance(huge, DocumentUpsert)
    assert len(huge.content) == limit + 1  # the file is not read past the limit

    limits = DocumentLimits(max_bytes=limit)
    assert not isinstance(prepare_document(at_limit, limits), DocumentFailure)
    outcome = prepare_document(huge, limits)
    assert isinstance(outcome, DocumentFailure)
    assert outcome.reason.startswith(f"document is 5000 bytes, over the limit of {limit}")

    fingerprint = driver.partition.fingerprints()["huge.md"]
    assert fingerprint.startswith("oversized:5000:")
    driver.expect_nothing_before(root / "sentinel.md")


# --- hostile names and files ----------------------------------------------------------------


def test_names_with_non_utf8_bytes_backslashes_and_newlines_are_documents(
    root: Path, start: PartitionFactory
) -> None:
    (root / os.fsdecode(b"caf\xe9.txt")).write_bytes(b"latin-1 name")
    (root / "back\\slash.md").write_bytes(b"backslash")
    driver = start()
    driver.expect(
        ("upsert", "caf\\xe9.txt", b"latin-1 name"), ("upsert", "back\\slash.md", b"backslash")
    )

    (root / "line\nbreak.md").write_bytes(b"newline")
    (root / os.fsdecode(b"na\xefve\\x41.md")).write_bytes(b"both")
    driver.expect(
        ("upsert", "line\nbreak.md", b"newline"), ("upsert", "na\\xefve\\x5cx41.md", b"both")
    )
    (root / os.fsdecode(b"caf\xe9.txt")).write_bytes(b"edited")
    driver.expect(("upsert", "caf\\xe9.txt", b"edited"))
    snapshot = driver.partition.snapshot()
    driver.partition.close()

    (root / "back\\slash.md").unlink()
    restarted = start(resume=snapshot)
    restarted.expect(("delete", "back\\slash.md"))
    (root / os.fsdecode(b"caf\xe9.txt")).unlink()
    restarted.expect(("delete", "caf\\xe9.txt"))
    restarted.expect_nothing_before(root / "sentinel.md")


def test_a_file_replaced_by_a_folder_is_deleted_at_once_and_back_to_a_file_upserted(
    root: Path, start: PartitionFactory
) -> None:
    (root / "notes.md").write_bytes(b"a file")
    driver = start(rescan_seconds=3600.0)  # only the watcher can tell
    driver.expect(("upsert", "notes.md", b"a file"))

    (root / "notes.md").unlink()
    (root / "notes.md").mkdir()
    driver.expect(("delete", "notes.md"))
    (root / "notes.md" / "inner.md").write_bytes(b"inside the folder")
    driver.expect(("upsert", "notes.md/inner.md", b"inside the folder"))

    shutil.rmtree(root / "notes.md")
    (root / "notes.md").write_bytes(b"a file again")
    driver.expect(("delete", "notes.md/inner.md"), ("upsert", "notes.md", b"a file again"))
    driver.expect_nothing_before(root / "sentinel.md")


# --- restart and rescan ---------------------------------------------------------------------


def test_restart_from_snapshot_emits_exactly_the_changes_made_while_down(
    root: Path, start: PartitionFactory
) -> None:
    (root / "edited.md").write_bytes(b"before")
    (root / "removed.md").write_bytes(b"doomed")
    (root / "untouched.md").write_bytes(b"stable")
    first = start()
    first.expect(
        ("upsert", "edited.md", b"before"),
        ("upsert", "removed.md", b"doomed"),
        ("upsert", "untouched.md", b"stable"),
    )
    snapshot = first.partition.snapshot()
    first.partition.close()

    (root / "edited.md").write_bytes(b"after")
    (root / "removed.md").unlink()
    (root / "sub").mkdir()
    (root / "sub" / "added.md").write_bytes(b"new")

    second = start(resume=snapshot)
    second.expect(
        ("upsert", "edited.md", b"after"),
        ("delete", "removed.md"),
        ("upsert", "sub/added.md", b"new"),
    )
    second.expect_nothing_before(root / "sentinel.md")


def test_snapshot_is_a_copy_that_later_changes_do_not_alter(
    root: Path, start: PartitionFactory
) -> None:
    (root / "a.md").write_bytes(b"one")
    driver = start()
    driver.expect(("upsert", "a.md", b"one"))
    taken = driver.partition.snapshot()
    (root / "a.md").write_bytes(b"two")
    driver.expect(("upsert", "a.md", b"two"))
    assert unpack_fingerprints(taken, CODEC) == {"a.md": sha256_of(b"one")}
    assert unpack_fingerprints(driver.partition.snapshot(), CODEC) == {"a.md": sha256_of(b"two")}


def test_a_snapshot_packs_each_sha256_as_its_bytes_and_reads_back_every_fingerprint() -> None:
    fingerprints = {f"notes/{n:05}.md": sha256_of(str(n).encode()) for n in range(2_000)}
    fingerprints["huge.md"] = "oversized:5000:1733400000000000000"

    packed = pack_fingerprints(fingerprints, CODEC)

    assert unpack_fingerprints(packed, CODEC) == fingerprints
    # 32 bytes a hash, the paths compressed: at most 40 bytes a file, against the dict's 90.
    assert len(packed) <= 40 * len(fingerprints), len(packed)
    assert len(packed) * 2 < len(pickle.dumps(fingerprints, protocol=5))


def test_periodic_rescan_finds_changes_no_watcher_reported(
    root: Path, start: PartitionFactory
) -> None:
    (root / "a.md").write_bytes(b"one")
    driver = start(watch=False, rescan_seconds=0.1)
    driver.expect(("upsert", "a.md", b"one"))

    (root / "a.md").write_bytes(b"two")
    (root / "b.md").write_bytes(b"bee")
    driver.expect(("upsert", "a.md", b"two"), ("upsert", "b.md", b"bee"))
    (root / "b.md").unlink()
    driver.expect(("delete", "b.md"))


_OPENING: list[FilesOpened] = []  # the recorders asked, for the process's one audit hook


def _record_opens(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and _OPENING and isinstance(args[0], str):
        for recorder in _OPENING:
            if args[0].startswith(recorder.prefix):
                recorder.names.append(args[0][len(recorder.prefix) :])


class FilesOpened:
    """The files under a folder that this process opens meanwhile, seen through Python's
    audit event "open" (a hook stays for the process's life, so one serves every test)."""

    hooked = False

    def __init__(self, root: Path) -> None:
        self.prefix = str(root) + os.sep
        self.names: list[str] = []

    def __enter__(self) -> FilesOpened:
        if not FilesOpened.hooked:
            sys.addaudithook(_record_opens)
            FilesOpened.hooked = True
        _OPENING.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _OPENING.remove(self)


def wait_settled(*paths: Path) -> None:
    """Until each file's last change is `SETTLED_SECONDS` old: a rescan trusts its status."""
    wait_until(
        lambda: all(
            time.time_ns() - p.stat().st_ctime_ns >= SETTLED_SECONDS * 1e9 + 1e7 for p in paths
        ),
        timeout=SETTLED_SECONDS + WAIT_SECONDS,
        message=f"{[p.name for p in paths]} to settle",
    )


def rescan_once(driver: Driver) -> None:
    """Pump until the partition has run one more whole rescan from start to end."""
    driver.pump_until(lambda _: driver.partition.next_awake() is None, "a rescan to be queued")
    driver.pump_until(lambda _: driver.partition.next_awake() is not None, "the rescan to end")


def test_a_rescan_reads_only_files_whose_status_changed_since_they_were_read(
    root: Path, start: PartitionFactory
) -> None:
    for name in ("a.md", "b.md", "c.md"):
        (root / name).write_bytes(name.encode())
    wait_settled(root / "a.md", root / "b.md", root / "c.md")
    driver = start(watch=False, rescan_seconds=0.01)
    with FilesOpened(root) as opened:
        driver.expect(
            ("upsert", "a.md", b"a.md"), ("upsert", "b.md", b"b.md"), ("upsert", "c.md", b"c.md")
        )
        assert sorted(opened.names) == ["a.md", "b.md", "c.md"]  # the start-up scan reads all

        opened.names.clear()
        (root / "b.md").write_bytes(b"bee")
        driver.expect(("upsert", "b.md", b"bee"))
        rescan_once(driver)
        rescan_once(driver)
        # b.md changed within SETTLED_SECONDS of its reads: read by every rescan till then
        assert set(opened.names) == {"b.md"} and opened.names.count("b.md") >= 3

        wait_settled(root / "b.md")
        rescan_once(driver)  # reads b.md once more, settled now
        opened.names.clear()
        rescan_once(driver)
        rescan_once(driver)
        assert opened.names == []
    driver.expect_nothing_before(root / "sentinel.md")


def test_a_rewrite_keeping_size_and_mtime_is_found_by_a_rescan(
    root: Path, start: PartitionFactory
) -> None:
    path = root / "a.md"
    path.write_bytes(b"one")
    wait_settled(path)
    driver = start(watch=False, rescan_seconds=0.01)
    driver.expect(("upsert", "a.md", b"one"))
    before = path.stat()
    path.write_bytes(b"two")  # the same size, and the mtime put back: only the ctime moves
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    driver.expect(("upsert", "a.md", b"two"))


def test_idle_partition_without_a_watcher_sleeps_until_its_next_rescan(
    root: Path, start: PartitionFactory
) -> None:
    driver = start(watch=False, rescan_seconds=30.0)
    driver.pump_until(lambda _: driver.partition.next_awake() is not None, "the scan to end")
    wake = driver.partition.next_awake()
    assert wake is not None
    assert timedelta(seconds=25) < wake - datetime.now(UTC) <= timedelta(seconds=30)


def test_symlink_loops_and_links_out_of_the_root_are_never_read(
    root: Path, tmp_path: Path, start: PartitionFactory
) -> None:
    (root / "self-loop.md").symlink_to(root / "self-loop.md")
    (root / "ping.md").symlink_to(root / "pong.md")
    (root / "pong.md").symlink_to(root / "ping.md")
    (root / "sub").mkdir()
    (root / "sub" / "up").symlink_to(root)  # a folder loop: never entered
    (root / "sub" / "a.md").write_bytes(b"alpha")
    secret = tmp_path / "secret.md"
    secret.write_bytes(b"outside the root")
    (root / "secret-link.md").symlink_to(secret)
    (root / "sub" / "climb.md").symlink_to(Path("..") / ".." / "secret.md")
    driver = start()
    driver.expect(("upsert", "sub/a.md", b"alpha"))

    secret.write_bytes(b"edited outside the root")  # reaches the root only through links
    (root / "late-link.md").symlink_to(secret)
    (root / "late-loop.md").symlink_to(root / "late-loop.md")
    driver.expect_nothing_before(root / "sentinel.md")
    assert all(
        not k.startswith(("secret", "sub/climb", "sub/up")) for k in driver.partition.fingerprints()
    )


def test_hard_links_are_one_document_per_name_and_the_rescan_brings_the_other_names(
    root: Path, start: PartitionFactory
) -> None:
    (root / "first.md").write_bytes(b"shared text")
    os.link(root / "first.md", root / "second.md")
    driver = start(rescan_seconds=0.5)
    driver.expect(("upsert", "first.md", b"shared text"), ("upsert", "second.md", b"shared text"))

    with (root / "first.md").open("r+b") as through_first:  # in place, as `>>` or an editor does
        through_first.write(b"edited text")
    driver.expect(("upsert", "first.md", b"edited text"), ("upsert", "second.md", b"edited text"))
    assert driver.partition.fingerprints() == {
        "first.md": sha256_of(b"edited text"),
        "second.md": sha256_of(b"edited text"),
    }


def test_a_thousand_files_written_at_once_are_each_emitted_once(
    root: Path, start: PartitionFactory
) -> None:
    driver = start(rescan_seconds=3600.0)
    driver.expect_nothing_before(root / "sentinel.md")
    for number in range(1000):
        folder = root / f"batch-{number % 10}"
        folder.mkdir(exist_ok=True)
        (folder / f"doc-{number:04}.md").write_bytes(f"document {number}".encode())
    driver.expect(
        *(
            ("upsert", f"batch-{n % 10}/doc-{n:04}.md", f"document {n}".encode())
            for n in range(1000)
        )
    )
    driver.expect_nothing_before(root / "sentinel.md")


def test_a_big_scan_is_handed_on_in_batches_of_at_most_max_batch_documents(
    root: Path, start: PartitionFactory
) -> None:
    for number in range(50):
        (root / f"doc-{number:02}.md").write_text(f"document {number}")
    driver = start(stop_after_scan=True, watch=False, max_batch=8)
    sizes: list[int] = []

    def step() -> bool:
        try:
            batch = driver.partition.next_batch()
        except StopIteration:
            return True
        sizes.append(len(batch))
        driver.events.extend(batch)
        return False

    wait_until(step, WAIT_SECONDS, "the end of the scan", interval=PUMP_INTERVAL)
    assert max(sizes) == 8
    assert sorted(e.change.doc_id for e in driver.events) == [f"doc-{n:02}.md" for n in range(50)]


def test_a_hundred_saves_in_ten_seconds_end_with_the_last_content_and_nothing_stale(
    root: Path, start: PartitionFactory
) -> None:
    driver = start(rescan_seconds=3600.0)
    path = root / "busy.md"
    for version in range(100):
        temporary = root / ".busy.md.tmp"  # alternate plain writes and atomic saves
        target = temporary if version % 2 else path
        target.write_bytes(f"version {version}".encode())
        if version % 2:
            os.replace(temporary, path)
        driver.events.extend(driver.partition.next_batch())
        time.sleep(0.1)  # the pace of the saves, not a wait for the source
    driver.pump_until(
        lambda events: bool(events) and events[-1].change.content == b"version 99",
        "the upsert of version 99",
    )
    upserts = [e.change for e in driver.events]
    assert all(isinstance(c, DocumentUpsert) and c.doc_id == "busy.md" for c in upserts)
    versions = [int(c.content.split()[1]) for c in upserts if isinstance(c, DocumentUpsert)]
    assert versions == sorted(versions) and versions[-1] == 99  # never an older one after a newer
    driver.events = []
    driver.expect_nothing_before(root / "sentinel.md")
    assert driver.partition.fingerprints()["busy.md"] == sha256_of(b"version 99")


# --- the root vanishing ---------------------------------------------------------------------


def pump_until_holding(driver: Driver) -> str:
    driver.pump_until(lambda _: driver.partition.holding is not None, "the partition to hold")
    assert driver.events == [], "a holding source emits nothing"
    return driver.partition.holding or ""


@pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")
def test_a_root_moved_away_holds_its_documents_and_is_reconciled_when_moved_back(
    root: Path, tmp_path: Path, start: PartitionFactory
) -> None:
    for name in ("kept.md", "edited.md", "removed.md"):
        (root / name).write_bytes(name.encode())
    reports: list[str | None] = []
    options = FolderSourceOptions(root=root, rescan_seconds=3600.0)
    source = FolderSource(options, CODEC, reports.append)
    driver = Driver(source.build_part("folder_in", "folder", None))
    try:
        driver.expect(*(("upsert", n, n.encode()) for n in ("kept.md", "edited.md", "removed.md")))

        away = tmp_path / "moved-away"
        root.rename(away)
        assert "missing" in pump_until_holding(driver)
        (away / "edited.md").write_bytes(b"edited while away")
        (away / "removed.md").unlink()

        away.rename(root)
        driver.expect(("upsert", "edited.md", b"edited while away"), ("delete", "removed.md"))
        assert driver.partition.holding is None
        driver.expect_nothing_before(root / "sentinel.md")
        assert reports == [f"watched folder {str(root)!r} is missing", None]
    finally:
        driver.partition.close()


def test_a_root_recreated_by_a_tool_deletes_only_what_the_new_root_lacks(
    root: Path, start: PartitionFactory
) -> None:
    for name in ("same.md", "changed.md", "dropped.md"):
        (root / name).write_bytes(name.encode())
    driver = start(rescan_seconds=3600.0)
    driver.expect(*(("upsert", n, n.encode()) for n in ("same.md", "changed.md", "dropped.md")))

    shutil.rmtree(root)
    pump_until_holding(driver)
    staging = root.parent / "staging"
    staging.mkdir()
    (staging / "same.md").write_bytes(b"same.md")
    (staging / "changed.md").write_bytes(b"new content")
    (staging / "added.md").write_bytes(b"added")
    staging.rename(root)
    driver.expect(
        ("upsert", "changed.md", b"new content"),
        ("upsert", "added.md", b"added"),
        ("delete", "dropped.md"),
    )
    driver.expect_nothing_before(root / "sentinel.md")


def test_a_root_replaced_by_an_empty_folder_holds_like_an_unmounted_share(
    root: Path, tmp_path: Path, start: PartitionFactory
) -> None:
    (root / "a.md").write_bytes(b"alpha")
    (root / "b.md").write_bytes(b"beta")
    driver = start(rescan_seconds=3600.0)
    driver.expect(("upsert", "a.md", b"alpha"), ("upsert", "b.md", b"beta"))

    root.rename(tmp_path / "share-contents")
    root.mkdir()  # the mount point left behind
    driver.pump_until(
        lambda _: "empty" in (driver.partition.holding or ""), "a hold for the empty root"
    )
    assert driver.events == []

    (root / "b.md").write_bytes(b"beta")  # remounted, or refilled: one file is back
    driver.expect(("delete", "a.md"))
    driver.expect_nothing_before(root / "sentinel.md")


def test_without_a_watcher_a_vanished_root_holds_through_its_rescans(
    root: Path, tmp_path: Path, start: PartitionFactory
) -> None:
    (root / "a.md").write_bytes(b"alpha")
    (root / "b.md").write_bytes(b"beta")
    driver = start(watch=False, rescan_seconds=0.1)  # a network mount: rescans only
    driver.expect(("upsert", "a.md", b"alpha"), ("upsert", "b.md", b"beta"))

    root.rename(tmp_path / "unmounted")
    pump_until_holding(driver)
    wake = driver.partition.next_awake()
    assert wake is not None and wake - datetime.now(UTC) <= timedelta(seconds=0.5)
    (tmp_path / "unmounted" / "b.md").unlink()
    (tmp_path / "unmounted").rename(root)
    driver.expect(("delete", "b.md"))
    assert driver.partition.holding is None


def test_an_empty_root_at_start_does_not_empty_the_index_of_a_one_shot_run(
    root: Path, start: PartitionFactory
) -> None:
    fingerprints = {"a.md": sha256_of(b"alpha"), "b.md": sha256_of(b"beta")}
    driver = start(resume=pack_fingerprints(fingerprints, CODEC), stop_after_scan=True)
    assert driver.run_to_end() == []
    assert "empty" in (driver.partition.holding or "")
    assert driver.partition.fingerprints() == fingerprints


# --- options and construction ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("debounce_seconds", -1.0),
        ("rescan_seconds", 0.0),
        ("max_document_bytes", 0),
        ("poll_seconds", 0.0),
    ],
)
def test_options_reject_values_out_of_range_naming_the_field(
    tmp_path: Path, field: str, value: float
) -> None:
    with pytest.raises(ValueError, match=field):
        FolderSourceOptions(root=tmp_path, **{field: value})  # type: ignore[arg-type]


def test_building_on_a_missing_folder_says_which_folder(tmp_path: Path) -> None:
    source = FolderSource(FolderSourceOptions(root=tmp_path / "absent"), CODEC)
    with pytest.raises(FileNotFoundError, match="absent"):
        source.build_part("folder_in", "folder", None)


# --- whole dataflows ------------------------------------------------------------------------


def run_one_shot(root: Path, recovery_dir: Path) -> list[SourceEvent]:
    """Run `kgstream index`-style: one scan against the recovered snapshot, then EOF."""
    collected: list[SourceEvent] = []
    flow = Dataflow("folder_one_shot")
    options = FolderSourceOptions(root=root, stop_after_scan=True)
    stream = op.input("folder_in", flow, FolderSource(options, CODEC))
    op.output("collect", stream, TestingSink(collected))
    config = RecoveryConfig(str(recovery_dir))  # type: ignore[no-untyped-call]
    runner = threading.Thread(
        target=run_main, args=(flow,), kwargs={"recovery_config": config}, daemon=True
    )
    runner.start()
    runner.join(timeout=10)
    assert not runner.is_alive(), "the one-shot dataflow did not reach EOF"
    return collected


def test_one_shot_dataflow_ends_and_a_rerun_emits_only_what_changed(
    root: Path, tmp_path: Path
) -> None:
    recovery_dir = tmp_path / "recovery"
    recovery_dir.mkdir()
    init_db_dir(recovery_dir, 1)  # type: ignore[no-untyped-call]
    (root / "a.md").write_bytes(b"alpha")
    (root / "b.md").write_bytes(b"beta")
    (root / ".hidden.md").write_bytes(b"hidden")

    first = run_one_shot(root, recovery_dir)
    assert sorted(summarise(e) for e in first) == [
        ("upsert", "a.md", b"alpha"),
        ("upsert", "b.md", b"beta"),
    ]

    assert run_one_shot(root, recovery_dir) == []

    (root / "a.md").write_bytes(b"alpha two")
    (root / "b.md").unlink()
    (root / "c.md").write_bytes(b"gamma")
    third = run_one_shot(root, recovery_dir)
    assert sorted(summarise(e) for e in third) == [
        ("delete", "b.md"),
        ("upsert", "a.md", b"alpha two"),
        ("upsert", "c.md", b"gamma"),
    ]
