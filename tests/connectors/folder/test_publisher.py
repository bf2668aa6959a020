"""Ingest into a watched folder: the file a doc id names, written whole, removed on delete;
ids the folder cannot hold as documents refused before anything is written."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from connectors.folder.paths import doc_id_for_path
from connectors.folder.publisher import FolderPublisher
from connectors.folder.scan import iter_document_paths
from dataflow.core.documents import DocumentDelete, DocumentUpsert


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
