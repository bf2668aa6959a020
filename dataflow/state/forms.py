"""Each keyed step's state as its snapshot, and back.

The document and chunk steps snapshot their state as one packed blob of its values
(`pack_document`, `pack_ledger`, read back by `unpack_document`, `unpack_ledger`), which
Bytewax pickles as bytes: a pickled object would name its class, or the function that
restores it, in every row, a quarter of a small document or ledger snapshot, and packed with
the index's dictionary a document's state is about half its size as an object
(docs/decisions/0006-packed-snapshots-and-a-dictionary.md).

An entity's or relation's fragments are kept as rows of their field values (`FragmentRows`;
dataflow/state/fragments.py has the rest of those steps' snapshots). A document's commit
state is small and short-lived: its snapshot is a copy that Bytewax pickles
(`snapshot_commit`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

from dataflow.core.commit import DocumentCommit, VersionMessages
from dataflow.core.contributions import (
    FRAGMENT_FIELDS,
    FRAGMENT_ROW,
    ChunkLedger,
    EntityFragment,
    RelationFragment,
    RelationPair,
)
from dataflow.core.steps import DocumentState
from dataflow.state.codec import SnapshotCodec

F = TypeVar("F", EntityFragment, RelationFragment)

Rows = dict[str, tuple[object, ...]]
"""Fragments as rows: contribution id -> the fragment's field values, in field order."""


def pack_document(codec: SnapshotCodec, state: DocumentState) -> bytes:
    """The document step's snapshot of `state`."""
    return codec.pack((state.content_hash, state.file_path, state.chunk_ids))


def unpack_document(codec: SnapshotCodec, blob: bytes) -> DocumentState:
    return DocumentState(*cast(tuple[str, str, tuple[str, ...]], codec.unpack(blob)))


def pack_ledger(codec: SnapshotCodec, ledger: ChunkLedger) -> bytes:
    """The chunk step's snapshot of `ledger`."""
    return codec.pack((ledger.chunk_id, ledger.entities, ledger.relations, ledger.digest))


def unpack_ledger(codec: SnapshotCodec, blob: bytes) -> ChunkLedger:
    values = cast(tuple[str, tuple[str, ...], tuple[RelationPair, ...], bytes], codec.unpack(blob))
    return ChunkLedger(*values)


def snapshot_commit(commit: DocumentCommit) -> DocumentCommit:
    """The document commit step's snapshot of `commit`: a copy, so that the flushes and adds
    after it cannot reach it; containers copied, their values shared (chunks, records,
    tickets, vectors and chunk sets are immutable)."""
    return DocumentCommit(
        versions={
            token: VersionMessages(v.pending, dict(v.settled), Counter(v.acks))
            for token, v in commit.versions.items()
        },
        current=commit.current,
        current_done=commit.current_done,
        current_chunks=commit.current_chunks,
        failed_chunks=dict(commit.failed_chunks),
        chunks=dict(commit.chunks),
        chunk_vectors=dict(commit.chunk_vectors),
        document=commit.document,
        completed=list(commit.completed),
    )


@dataclass(frozen=True)
class FragmentRows(Generic[F]):
    """One key's fragments as rows of field values: the form its snapshot pickles.

    A hub's state is tens of thousands of fragments, and pickle spends most of its time on
    each dataclass's class and field names: as rows such a state packs in about half the
    time, conversion included, and loads in about half the time too. `restore` gives back
    equal fragments.
    """

    kind: type[F]
    rows: Rows

    @staticmethod
    def of(fragments: Mapping[str, F]) -> FragmentRows[F]:
        """The rows of `fragments`, one kind of fragment, at least one (a state with none is
        discarded)."""
        if not fragments:
            raise ValueError("FragmentRows.of needs at least one fragment")
        kind = type(next(iter(fragments.values())))
        row = FRAGMENT_ROW[kind]
        return FragmentRows(kind, {cid: row(f) for cid, f in fragments.items()})

    def restore(self) -> dict[str, F]:
        kind = self.kind
        return {contribution_id: _build(kind, row) for contribution_id, row in self.rows.items()}


def _build(kind: type[F], row: Iterable[object]) -> F:
    """The fragment `row` holds the field values of, built as pickle builds a dataclass (no
    __init__, fields set): a hub restores tens of thousands."""
    fragment = object.__new__(kind)
    fragment.__dict__.update(zip(FRAGMENT_FIELDS[kind], row, strict=True))
    return fragment
