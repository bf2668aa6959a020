"""Ingest into a watched folder: the file a doc id names, written whole, removed on delete;
ids the folder cannot hold as documents refused before anything is written, and no write or
delete leaves the root, even while a folder on the way is swapped for a link out of it."""

import contextlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from connectors.folder.paths import doc_id_for_path
from connectors.folder.publisher import FolderPublisher
from connectors.folder.scan import iter_document_paths
from dataflow.core.documents import DocumentChange, DocumentDelete, DocumentUpsert


def test_upsert_writes_the_named_file_and_delete_removes_it(tmp_path: Path) -> None:
    publisher = FolderPublisher(tmp_path)
    assert publisher.send(DocumentUpsert("a/b/note.md", b"first")) == (0, -1)
    publisher.send(DocumentUpsert("a/b/note.md", "second, as text"))
    assert (tmp_path / "a" / "b" / "note.md").read_text() == "second, as text"
    assert [p.name for p in (tmp_path / "a" / "b").iterdir()] == ["note.md"]  # no temporary
    assert [
        doc_id_for_path(p.relative_to(tmp_path).as_posix()) for p in iter_document_paths(tmp_path)
    ] == ["a/b/note.md"]
    publisher.send(DocumentDelete("a/b/note.md"))
    assert not (tmp_path / "a" / "b" / "note.md").exists()
    publisher.send(DocumentDelete("a/b/note.md"))  # deleting what is gone is no error


def test_a_latin1_file_name_round_trips(tmp_path: Path) -> None:
    FolderPublisher(tmp_path).send(DocumentUpsert("caf\\xe9.txt", b"x"))
    assert (tmp_path / "caf\udce9.txt").exists()


@pytest.mark.parametrize(
    "doc_id",
    ["/etc/passwd", "../outside.md", "a/../../x.md", "a//b.md", ".hidden.md", "a/.git/config",
     "draft.md.tmp", "notes/x.md~", "link/escape.md"],
)  # fmt: skip
def test_ids_the_folder_cannot_hold_are_refused(tmp_path: Path, doc_id: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(tmp_path)  # a folder link out of the root
    with pytest.raises(ValueError, match="doc_id"):
        FolderPublisher(root).send(DocumentUpsert(doc_id, b"x"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root"]
    assert [p.name for p in root.iterdir()] == ["link"]


def test_a_directory_or_an_overlong_name_is_refused_as_a_bad_doc_id(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    publisher = FolderPublisher(tmp_path)
    with pytest.raises(ValueError, match="names a directory"):
        publisher.send(DocumentUpsert("notes", b"x"))
    with pytest.raises(ValueError, match="has a name of 300 bytes; the file system takes at most"):
        publisher.send(DocumentUpsert("a/" + "n" * 297 + ".md", b"x"))
    publisher.send(DocumentUpsert("a/" + "n" * 252 + ".md", b"at the limit"))
    assert (tmp_path / "a" / ("n" * 252 + ".md")).read_bytes() == b"at the limit"


def test_concurrent_writes_of_one_doc_id_each_land_whole(tmp_path: Path) -> None:
    publisher = FolderPublisher(tmp_path)
    contents = [f"version {n} ".encode() * 1000 for n in range(50)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda content: publisher.send(DocumentUpsert("a.md", content)), contents))
    assert (tmp_path / "a.md").read_bytes() in contents
    assert [p.name for p in tmp_path.iterdir()] == ["a.md"]  # no temporary left behind


@pytest.mark.parametrize("op", ["upsert", "delete"])
@pytest.mark.parametrize(
    ("doc_id", "reason"),
    [("link/victim.md", "goes through 'link', a symbolic link"),
     ("a/link/victim.md", "goes through 'a/link', a symbolic link"),
     ("victim.md", "goes through 'victim.md', a symbolic link"),
     ("file.md/victim.md", "needs 'file.md' to be a folder, and it is a file"),
     ("a", "names a directory of the watched folder")],
)  # fmt: skip
def test_a_link_a_file_or_a_folder_on_the_way_is_a_bad_doc_id_and_nothing_outside_changes(
    tmp_path: Path, op: str, doc_id: str, reason: str
) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "a").mkdir(parents=True)
    outside.mkdir()
    (outside / "victim.md").write_bytes(b"outside")
    (root / "link").symlink_to(outside)
    (root / "a" / "link").symlink_to(outside)
    (root / "victim.md").symlink_to(outside / "victim.md")
    (root / "file.md").write_bytes(b"a file")
    change: DocumentChange = (
        DocumentUpsert(doc_id, b"x") if op == "upsert" else DocumentDelete(doc_id)
    )
    with pytest.raises(ValueError, match=f"^doc_id {doc_id!r} {reason}"):
        FolderPublisher(root).send(change)
    assert [p.name for p in outside.iterdir()] == ["victim.md"]
    assert (outside / "victim.md").read_bytes() == b"outside"
    assert sorted(p.name for p in root.iterdir()) == ["a", "file.md", "link", "victim.md"]
    assert sorted(p.name for p in (root / "a").iterdir()) == ["link"]


def test_a_delete_under_a_missing_folder_changes_nothing_and_a_missing_root_is_an_os_error(
    tmp_path: Path,
) -> None:
    publisher = FolderPublisher(tmp_path / "root")
    (tmp_path / "root").mkdir()
    publisher.send(DocumentDelete("no/such/folder.md"))
    assert list((tmp_path / "root").iterdir()) == []
    (tmp_path / "root").rmdir()
    with pytest.raises(FileNotFoundError):  # an outage the gateway reports, not a bad doc id
        publisher.send(DocumentUpsert("a.md", b"x"))
    assert list(tmp_path.iterdir()) == []  # the root is not made again by a write


def test_writes_deletes_and_refusals_leave_no_descriptor_open(tmp_path: Path) -> None:
    publisher = FolderPublisher(tmp_path)
    (tmp_path / "link").symlink_to(tmp_path)
    (tmp_path / "folder").mkdir()
    opened = set(os.listdir("/proc/self/fd"))
    for n in range(50):
        publisher.send(DocumentUpsert(f"a/b/{n}.md", b"x"))
        for refused in (f"link/{n}.md", "folder", f"a/b/{n}.md/x.md"):
            with pytest.raises(ValueError, match="doc_id"):
                publisher.send(DocumentUpsert(refused, b"x"))
            with pytest.raises(ValueError, match="doc_id"):
                publisher.send(DocumentDelete(refused))
        publisher.send(DocumentDelete(f"a/b/{n}.md"))
        publisher.send(DocumentDelete(f"gone/{n}.md"))
    assert set(os.listdir("/proc/self/fd")) == opened


def test_a_folder_swapped_for_a_link_out_of_the_root_never_lets_a_write_or_delete_out(
    tmp_path: Path,
) -> None:
    """One thread swaps `swapdir` between a real folder and a link out of the root as fast as
    it can while 1,000 upserts and 1,000 deletes go through it: each lands inside the root
    or is refused as a bad doc id, and nothing outside is written or removed."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    swapdir = root / "swapdir"
    swapdir.mkdir()
    tries = 1000
    victims = {f"gone{n}.md": f"outside {n}".encode() for n in range(tries)}
    for name, content in victims.items():
        (outside / name).write_bytes(content)
    stop = threading.Event()
    swaps = [0, 0]  # times swapdir became a link, times it became a folder again

    failures: list[BaseException] = []

    def swap() -> None:
        try:
            swap_until_stopped()
        except BaseException as error:  # shown by the test, not lost with the thread
            failures.append(error)

    def swap_until_stopped() -> None:
        parked = 0
        while not stop.is_set():
            with contextlib.suppress(FileNotFoundError):  # a folder moved aside, inside
                os.rename(swapdir, root / f"parked{parked}")
                parked += 1
            try:
                swapdir.symlink_to(outside)
                swaps[0] += 1
            except FileExistsError:  # a write made the folder again meanwhile
                continue
            swapdir.unlink()
            with contextlib.suppress(FileExistsError):
                swapdir.mkdir()
                swaps[1] += 1

    def write(n: int) -> str:
        change: DocumentChange = (
            DocumentUpsert(f"swapdir/race{n // 2}.md", f"inside {n // 2}".encode())
            if n % 2 == 0
            else DocumentDelete(f"swapdir/gone{n // 2}.md")
        )
        try:
            FolderPublisher(root).send(change)
        except ValueError as error:
            assert str(error).startswith(f"doc_id {change.doc_id!r} "), error
            return "refused"
        return "done"

    swapper = threading.Thread(target=swap, name="swap swapdir")
    swapper.start()
    try:
        with ThreadPoolExecutor(max_workers=4) as pool:
            outcomes = list(pool.map(write, range(2 * tries)))
    finally:
        stop.set()
        swapper.join()

    assert failures == []
    assert sorted(p.name for p in outside.iterdir()) == sorted(victims)
    assert all((outside / name).read_bytes() == content for name, content in victims.items())
    landed = {
        Path(folder, name).read_bytes()
        for folder, _, names in os.walk(root)  # links are not followed
        for name in names
    }
    for n in range(tries):
        if outcomes[2 * n] == "done":
            assert f"inside {n}".encode() in landed, n
    assert not [p for p in root.rglob(".kgstream-ingest-*")]  # no temporary left behind
    assert swaps[0] > 0 and swaps[1] > 0
    assert "refused" in outcomes and "done" in outcomes
