"""A file's doc id from its root-relative path, and back.

The doc id is the root-relative POSIX path, as text. Linux file names are bytes, and a name
that is not valid UTF-8 (unzipping an old archive leaves Latin-1 names like ``b"caf\\xe9.txt"``)
cannot be a doc id as it is: doc ids are UTF-8 in Redis, Bytewax state keys, vector payloads
and the gRPC API. Python hands such a name over with each bad byte as a lone surrogate
(``os.fsdecode``, "surrogateescape"); the doc id writes that byte as ``\\xe9`` instead, as
Python prints bytes (``caf\\xe9.txt``). So that the mapping can be undone, a backslash that is
itself followed by ``x`` and two lowercase hex digits is written ``\\x5c``; every other
backslash stays as it is (``a\\b.md`` is the doc id ``a\\b.md``, not a folder ``a``).

`doc_id_for_path` and `path_for_doc_id` are inverses: for every relative path the folder can
hold, ``path_for_doc_id(doc_id_for_path(p)) == p``, and no doc id maps outside the root.
"""

from __future__ import annotations

import re

_ESCAPE = re.compile(r"\\x([0-9a-f]{2})")
_BACKSLASH_ESCAPE = "\\x5c"
_SURROGATE_FIRST, _SURROGATE_LAST = 0xDC80, 0xDCFF  # what surrogateescape makes of bytes >= 0x80
_NEEDS_ESCAPING = re.compile(r"[\\\ud800-\udfff]")  # a backslash or a surrogate


def doc_id_for_path(relative_path: str) -> str:
    """The doc id of a root-relative POSIX path (as `os.fsdecode` gives it: surrogateescaped).

    Raises ValueError for an empty path, an absolute one, one with ``.``/``..`` or empty
    parts, or a surrogate that no file name can hold: such a path can only come from a bug in
    the caller, never from a folder listing.
    """
    if relative_path_problem(relative_path) is not None:
        raise ValueError(
            f"doc id needs a normalised path relative to the watched root; got {relative_path!r}"
        )
    if _NEEDS_ESCAPING.search(relative_path) is None:
        return relative_path  # nothing to escape: the path is its own doc id (the usual case)
    parts: list[str] = []
    for index, character in enumerate(relative_path):
        code = ord(character)
        if _SURROGATE_FIRST <= code <= _SURROGATE_LAST:
            parts.append(f"\\x{code - 0xDC00:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            raise ValueError(f"path holds a surrogate no file name can hold: {relative_path!r}")
        elif character == "\\" and _ESCAPE.match(relative_path, index):
            parts.append(_BACKSLASH_ESCAPE)
        else:
            parts.append(character)
    return "".join(parts)


def path_for_doc_id(doc_id: str) -> str | None:
    """The root-relative path (surrogateescaped) a doc id names, or None when the id is not
    one `doc_id_for_path` writes (an id from elsewhere, absolute, climbing out with ``..``):
    only the canonical spelling maps back, so the two functions are a bijection."""

    def unescape(match: re.Match[str]) -> str:
        value = int(match.group(1), 16)
        if value == 0x5C:
            return "\\"
        if value >= 0x80:
            return chr(0xDC00 + value)
        return match.group(0)  # never written by doc_id_for_path; refused below

    relative = _ESCAPE.sub(unescape, doc_id)
    try:
        canonical = doc_id_for_path(relative)
    except ValueError:
        return None
    return relative if canonical == doc_id else None


def relative_path_problem(relative_path: str) -> str | None:
    """Why `relative_path` is not a normalised path inside the root, or None when it is."""
    if "\x00" in relative_path:
        return "it holds a NUL"
    parts = relative_path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "it is empty, absolute, or has an empty, '.' or '..' part"
    return None
