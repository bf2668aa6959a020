"""The document and chunk steps (dataflow/logic/keyed.py): `packed_flat_map` snapshots its
state packed as bytes through the real Bytewax recovery, and resumes each key from them."""

import pickle
import sqlite3
from contextlib import closing
from functools import partial
from pathlib import Path

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.testing import TestingSource, run_main

from dataflow.core.steps import DocumentState
from dataflow.logic.keyed import packed_flat_map
from dataflow.state.codec import SnapshotCodec
from dataflow.state.forms import pack_document, unpack_document


def counted_paths(state: DocumentState | None, path: str) -> tuple[DocumentState, list[int]]:
    """A document step stand-in: the state counts the item's arrivals in its chunk ids."""
    seen = state.chunk_ids if state is not None else ()
    new = DocumentState(f"sha256:{len(seen) + 1}", path, (*seen, f"chunk-{len(seen)}"))
    return new, [len(new.chunk_ids)]


def run_counting(
    run: int, paths: list[str], recovery: Path, codec: SnapshotCodec
) -> list[tuple[str, int]]:
    flow = Dataflow("kgstream")
    # An input of each run's own, since the testing source resumes at its offset.
    items = op.input(f"in_{run}", flow, TestingSource(paths))
    keyed = op.key_on("key", items, lambda path: path)
    pack, unpack = partial(pack_document, codec), partial(unpack_document, codec)
    counts = packed_flat_map("document", keyed, counted_paths, pack, unpack)
    out: list[tuple[str, int]] = []
    op.inspect("out", counts, lambda _step, item: out.append(item))
    run_main(flow, recovery_config=RecoveryConfig(str(recovery)))
    return out


def test_a_step_of_packed_states_snapshots_their_bytes_and_resumes_from_them(tmp_path):
    """Each key's snapshot is its state packed (no class or restore function named in
    each row), and the next run resumes each key from it."""
    codec = SnapshotCodec()
    init_db_dir(tmp_path, 1)
    assert run_counting(1, ["a.md", "b.md", "a.md"], tmp_path, codec) == [
        ("a.md", 1),
        ("b.md", 1),
        ("a.md", 2),
    ]
    step = "kgstream.document.stateful.stateful_batch"
    with closing(sqlite3.connect(tmp_path / "part-0.sqlite3")) as connection:
        rows = dict(
            connection.execute(
                "SELECT state_key, ser_change FROM snaps WHERE step_id = ? ORDER BY snap_epoch",
                (step,),
            ).fetchall()
        )
    assert set(rows) == {"a.md", "b.md"}
    snapshot = pickle.loads(rows["a.md"])
    assert isinstance(snapshot, bytes)
    assert b"DocumentState" not in rows["a.md"]
    assert unpack_document(codec, snapshot).chunk_ids == ("chunk-0", "chunk-1")

    assert run_counting(2, ["a.md", "b.md"], tmp_path, codec) == [("a.md", 3), ("b.md", 2)]
