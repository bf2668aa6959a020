"""Which files in a folder are documents: the rules the scan and the watcher share."""

from __future__ import annotations

import os
from pathlib import Path

from connectors.folder.scan import (
    DocumentPaths,
    has_hidden_part,
    is_document_path,
    iter_document_paths,
    iter_document_paths_under,
    read_document,
)


def test_hidden_part_anywhere_in_a_relative_path_counts() -> None:
    assert has_hidden_part(".git/config")
    assert has_hidden_part("notes/.draft.md")
    assert not has_hidden_part("notes/draft.md")
    assert not has_hidden_part("")


def test_documents_are_listed_sorted_without_hidden_temporary_or_outside_links(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    (root / "b").mkdir(parents=True)
    (root / "b" / "z.md").write_text("z")
    (root / "a.md").write_text("a")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "h.md").write_text("h")
    (root / "x.md.swp").write_text("swap")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "o.md").write_text("o")
    (root / "linked-folder").symlink_to(tmp_path / "outside")
    (root / "link.md").symlink_to(tmp_path / "outside" / "o.md")

    listed = [p.relative_to(root).as_posix() for p in iter_document_paths(root)]

    assert listed == ["a.md", "b/z.md"]


def test_a_file_reached_through_a_symlinked_folder_outside_the_root_is_not_a_document(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "o.md").write_text("o")
    (root / "linked-folder").symlink_to(tmp_path / "outside")

    assert not is_document_path(root, root / "linked-folder" / "o.md")


def test_document_paths_answer_as_is_document_path_on_a_tree_of_hostile_links(
    tmp_path: Path,
) -> None:
    """The per-pass checker resolves folders once and only links in full; every answer
    must still be `is_document_path`'s, whatever the links do."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub" / "deep").mkdir(parents=True)
    (root / ".hidden").mkdir()
    outside.mkdir()
    (outside / "o.md").write_text("o")
    for relative in ("a.md", "sub/b.md", "sub/deep/c.md", ".hidden/h.md", "x.md.swp", "#t#"):
        (root / relative).write_text(relative)
    (root / "in-link.md").symlink_to(root / "sub" / "b.md")
    (root / "out-link.md").symlink_to(outside / "o.md")
    (root / "dangling.md").symlink_to(root / "missing.md")
    (root / "loop-a.md").symlink_to(root / "loop-b.md")
    (root / "loop-b.md").symlink_to(root / "loop-a.md")
    (root / "out-folder").symlink_to(outside)
    (root / "in-folder").symlink_to(root / "sub")
    (root / "sub" / "up").symlink_to(root)
    (root / "dir-link.md").symlink_to(root / "sub")
    os.mkfifo(root / "pipe.md")
    candidates = [
        *(Path(current) / name for current, dirs, files in os.walk(root) for name in dirs + files),
        root / "out-folder" / "o.md",
        root / "in-folder" / "b.md",
        root / "in-folder" / "deep" / "c.md",
        root / "sub" / "up" / "a.md",
        root / "sub" / "up" / "out-folder" / "o.md",
        root / "missing.md",
        root,
        outside / "o.md",
    ]
    checker = DocumentPaths(root)

    answers = {path: checker(path) for path in candidates}

    assert answers == {path: is_document_path(root, path) for path in candidates}
    assert {p.relative_to(root).as_posix() for p, yes in answers.items() if yes} == {
        "a.md",
        "sub/b.md",
        "sub/deep/c.md",
        "in-link.md",
        "in-folder/b.md",
        "in-folder/deep/c.md",
        "sub/up/a.md",
    }


def test_listing_under_a_subfolder_applies_the_root_rules(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / ".private" / "inner").mkdir(parents=True)
    (root / ".private" / "inner" / "p.md").write_text("p")
    (root / "pub").mkdir()
    (root / "pub" / "q.md").write_text("q")

    assert list(iter_document_paths_under(root, root / ".private" / "inner")) == []
    assert list(iter_document_paths_under(root, root / "pub")) == [root / "pub" / "q.md"]
    assert list(iter_document_paths_under(root, root / "missing")) == []


def test_read_document_uses_the_relative_path_as_doc_id_and_file_path(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.md").write_bytes(b"text")

    upsert = read_document(tmp_path, tmp_path / "sub" / "a.md")

    assert (upsert.doc_id, upsert.file_path, upsert.content) == ("sub/a.md", "sub/a.md", b"text")
