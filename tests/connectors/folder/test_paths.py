"""The folder path <-> doc id mapping, by example and fuzzed with Hypothesis."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connectors.folder.paths import doc_id_for_path, path_for_doc_id

# What a Linux file name can be: any bytes but "/" and NUL, as os.fsdecode hands them over.
name_bytes = st.binary(min_size=1, max_size=12).filter(
    lambda b: b"/" not in b and b"\x00" not in b and b not in (b".", b"..")
)
# Names made of the characters that matter most to the mapping, so collisions are likely.
tricky_names = st.text(alphabet="\\x5cE9ef/.%", min_size=1, max_size=12).filter(
    lambda t: "/" not in t and t not in (".", "..")
)
relative_paths = st.lists(
    st.one_of(name_bytes.map(os.fsdecode), tricky_names), min_size=1, max_size=4
).map("/".join)


def test_a_plain_path_is_its_own_doc_id() -> None:
    assert doc_id_for_path("notes/a.md") == "notes/a.md"
    assert path_for_doc_id("notes/a.md") == "notes/a.md"


def test_a_non_utf8_byte_is_written_as_python_prints_it() -> None:
    relative = os.fsdecode(b"caf\xe9.txt")
    assert doc_id_for_path(relative) == "caf\\xe9.txt"
    assert path_for_doc_id("caf\\xe9.txt") == relative
    assert os.fsencode(path_for_doc_id("caf\\xe9.txt") or "") == b"caf\xe9.txt"


def test_a_backslash_stays_a_backslash_unless_it_reads_as_an_escape() -> None:
    assert doc_id_for_path("a\\b.md") == "a\\b.md"
    assert doc_id_for_path("odd\\xe9.md") == "odd\\x5cxe9.md"
    assert path_for_doc_id("odd\\x5cxe9.md") == "odd\\xe9.md"


@pytest.mark.parametrize("bad", ["", ".", "..", "../x", "/etc/passwd", "a//b", "a/./b", "a\x00"])
def test_a_path_that_is_not_normalised_and_relative_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="relative"):
        doc_id_for_path(bad)
    assert path_for_doc_id(bad) is None


def test_only_the_canonical_spelling_of_a_doc_id_maps_back() -> None:
    assert path_for_doc_id("caf\\xE9.txt") == "caf\\xE9.txt"  # upper case is no escape
    assert path_for_doc_id("\\x41.md") is None  # "A.md" is spelled A.md
    assert path_for_doc_id("a\\x2f..\\x2f..") is None
    assert path_for_doc_id("\udce9.md") is None  # raw surrogates are never doc ids


@given(relative_paths)
def test_every_relative_path_round_trips_through_a_utf8_doc_id(relative: str) -> None:
    doc_id = doc_id_for_path(relative)
    doc_id.encode("utf-8")  # strict: a doc id is always valid UTF-8
    assert path_for_doc_id(doc_id) == relative


@given(relative_paths, relative_paths)
def test_different_paths_never_share_a_doc_id(first: str, second: str) -> None:
    if first != second:
        assert doc_id_for_path(first) != doc_id_for_path(second)


@given(st.text(max_size=40))
def test_any_text_as_a_doc_id_maps_back_canonically_or_not_at_all(doc_id: str) -> None:
    relative = path_for_doc_id(doc_id)
    if relative is not None:
        assert doc_id_for_path(relative) == doc_id


@given(st.one_of(st.text(alphabet="./\\x5c9a", max_size=20), st.text(max_size=20)))
def test_no_doc_id_maps_outside_the_root(doc_id: str) -> None:
    relative = path_for_doc_id(doc_id)
    if relative is None:
        return
    root = Path("/srv/watched")
    resolved = Path(os.path.normpath(root / relative))
    assert resolved.is_relative_to(root) and resolved != root
    os.fsencode(relative)  # a name the file system can be asked about
