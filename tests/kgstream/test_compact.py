"""`kgstream compact`: after it, no byte of any file under the data directory holds the
text, doc id or chunk ids of a deleted document, or of an edited document's old version,
while the index answers and resumes exactly as before."""

from pathlib import Path

import pytest

from tests.kgstream.processes import clean_environment, finish, kgstream
from tests.kgstream.test_cli_kafka import export

KEPT = "Alice Moreau founded Northwind Labs in Lisbon."
DELETED = "Xantheia Quorvel founded Brumblewick Works in Zanzibar."
OLD_VERSION = "Odalys Pemberton joined Fennimore Dynamics in Quito."
NEW_VERSION = "Odalys Pemberton joined Helios Corp in Geneva."


@pytest.fixture
def env(llm_server):
    return clean_environment(llm_server.base_url)


def traces(data: Path, needles: list[str]) -> dict[str, list[str]]:
    """needle -> the files under `data` whose bytes contain it (case-insensitive)."""
    found: dict[str, list[str]] = {}
    for path in sorted(p for p in data.rglob("*") if p.is_file()):
        content = path.read_bytes().lower()
        for needle in needles:
            if needle.lower().encode() in content:
                found.setdefault(needle, []).append(str(path.relative_to(data)))
    return found


def index(folder: Path, data: Path, env: dict[str, str]) -> dict:
    finish(kgstream("index", str(folder), "--data", str(data), env=env))
    return export(data, env)


def test_after_compact_no_file_holds_a_deleted_document_and_the_index_goes_on(env, tmp_path):
    folder, data = tmp_path / "docs", tmp_path / "data"
    folder.mkdir()
    (folder / "kept.md").write_text(KEPT)
    (folder / "xantheia-notes.md").write_text(DELETED)
    (folder / "odalys.md").write_text(OLD_VERSION)
    first = index(folder, data, env)
    gone_chunks = [c["chunk_id"] for c in first["chunks"] if c["doc_id"] != "kept.md"]

    (folder / "xantheia-notes.md").unlink()
    (folder / "odalys.md").write_text(NEW_VERSION)
    compacted = index(folder, data, env)
    assert {d["doc_id"] for d in compacted["documents"]} == {"kept.md", "odalys.md"}
    words = ["Xantheia", "Quorvel", "Brumblewick", "Zanzibar", "Fennimore", "Quito"]
    gone = [*words, "xantheia-notes.md", *gone_chunks]
    residue = traces(data, gone)
    assert set(residue) == set(gone), residue  # deleting alone leaves all of it in the files

    # An earlier version also saved RDB snapshots; the one it left holds what was indexed.
    (data / "redis" / "dump.rdb").write_bytes(b"REDIS0011" + " ".join(gone).encode())
    output = finish(kgstream("compact", "--data", str(data), env=env))
    assert "what deleted documents held is gone" in output, output
    assert traces(data, gone) == {}
    live = ["Moreau", "Northwind", "Helios", "Geneva", "odalys.md"]
    assert set(traces(data, live)) == set(live)  # the scan finds what is still indexed
    assert export(data, env) == compacted

    assert index(folder, data, env) == compacted  # resumes from the compacted recovery
    (folder / "later.md").write_text("Bob Tanaka joined Helios Corp in Geneva.")
    assert index(folder, data, env) == index(folder, tmp_path / "fresh", env)
