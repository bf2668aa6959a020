"""The indexing steps as pure state transitions, one per keyed step of the dataflow.

Each function takes the state kept for one key and one input, and returns the
new state and what to emit downstream, exactly as a Bytewax `stateful_map`
needs. The Bytewax wiring (dataflow/flow.py) and the in-process reference
index (dataflow/core/index.py) both drive these same functions; the entity and
relation steps fold in place (`fold_fragments`) and emit drafts, where the
reference index folds copies (`update_fragments`) and renders at its snapshot.

    document step  key doc_id    DocumentState        -> ChunkAdded / ChunkRemoved
    chunk step     key chunk_id  ChunkLedger          -> EntityDelta, RelationDelta (+ / -)
    entity step    key entity    EntityState          -> EntityDraft or deletion
    relation step  key pair      RelationState        -> RelationDraft or deletion
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Generic, TypeVar, cast

from dataflow.core.chunking import Chunk, ChunkingOptions, Tokenizer, chunk_document, diff_chunks
from dataflow.core.contributions import (
    ChunkLedger,
    Contribution,
    EntityContribution,
    EntityFragment,
    LedgerEntry,
    RelationFragment,
    RelationPair,
    contributions_for_chunk,
    identity,
)
from dataflow.core.documents import (
    DocumentChange,
    DocumentDelete,
    DocumentFailure,
    DocumentLimits,
    DocumentRecord,
    DocumentStatus,
    prepare_document,
)
from dataflow.core.extraction import Extraction
from dataflow.core.tally import FragmentTally

F = TypeVar("F", EntityFragment, RelationFragment)
K = TypeVar("K")


@dataclass(frozen=True)
class DocumentState:
    """What the document step remembers of a document's last indexed version."""

    content_hash: str
    file_path: str
    chunk_ids: tuple[str, ...]


@dataclass(frozen=True)
class ChunkAdded:
    chunk: Chunk


@dataclass(frozen=True)
class ChunkRemoved:
    chunk_id: str


ChunkChange = ChunkAdded | ChunkRemoved


@dataclass(frozen=True)
class DocumentOutcome:
    """What one document change means for the stores and for extraction.

    `chunks` is the document's full current chunk list (order can change for
    kept chunks, so the chunk store rewrites them all; that is cheap and
    idempotent). `changes` holds only the chunks whose text changed: the ones
    that cost extraction.
    """

    record: DocumentRecord | None  # None: the document is gone
    chunks: tuple[Chunk, ...]
    changes: tuple[ChunkChange, ...]


def update_document(
    state: DocumentState | None,
    change: DocumentChange,
    tokenizer: Tokenizer,
    chunking: ChunkingOptions,
    limits: DocumentLimits,
) -> tuple[DocumentState | None, DocumentOutcome]:
    """Diff a document's new version against its last one.

    A version that fails validation retracts the previous one: the index must
    equal a build from the documents as they are now, and this one has no
    valid content. Its record says FAILED with the reason.
    """
    previous_ids = state.chunk_ids if state is not None else ()
    if isinstance(change, DocumentDelete):
        removed = tuple(ChunkRemoved(chunk_id) for chunk_id in previous_ids)
        return None, DocumentOutcome(record=None, chunks=(), changes=removed)

    prepared = prepare_document(change, limits)
    if isinstance(prepared, DocumentFailure):
        removed = tuple(ChunkRemoved(chunk_id) for chunk_id in previous_ids)
        record = DocumentRecord(
            doc_id=change.doc_id,
            status=DocumentStatus.FAILED,
            file_path=change.file_path,
            content_hash=prepared.content_hash,
            reason=prepared.reason,
            failure_kind=prepared.kind,
        )
        return None, DocumentOutcome(record=record, chunks=(), changes=removed)

    same_place = state is not None and state.file_path == prepared.file_path
    if same_place and state is not None and state.content_hash == prepared.content_hash:
        unchanged = DocumentOutcome(record=None, chunks=(), changes=())
        return state, unchanged

    chunks = chunk_document(prepared.doc_id, prepared.file_path, prepared.text, tokenizer, chunking)
    # A moved file keeps its chunk ids but every fragment names the old path:
    # re-emit all chunks (extraction is cached by text, so this costs no LLM call).
    diff = diff_chunks(previous_ids if same_place else (), chunks)
    stale = tuple(chunk_id for chunk_id in previous_ids if chunk_id not in diff.kept)
    current_ids = {chunk.chunk_id for chunk in chunks}
    changes: tuple[ChunkChange, ...] = (
        *(ChunkRemoved(chunk_id) for chunk_id in stale if chunk_id not in current_ids),
        *(ChunkAdded(chunk) for chunk in diff.added),
    )
    record = DocumentRecord(
        doc_id=prepared.doc_id,
        status=DocumentStatus.PROCESSED,
        file_path=prepared.file_path,
        content_hash=prepared.content_hash,
        chunk_ids=tuple(chunk.chunk_id for chunk in chunks),
        preview=prepared.preview,
        length=prepared.length,
    )
    new_state = DocumentState(prepared.content_hash, prepared.file_path, record.chunk_ids)
    return new_state, DocumentOutcome(record=record, chunks=chunks, changes=changes)


@dataclass(frozen=True)
class DocumentRetry:
    """Extract again the chunks of a document version whose extraction failed
    (`kgstream retry-failed`).

    The document step keeps no text, so the request carries the version's record and
    chunks as the stores hold them (`record.failed_chunk_ids` names the chunks to retry).
    """

    doc_id: str
    record: DocumentRecord
    chunks: tuple[Chunk, ...]


def retry_document(
    state: DocumentState | None, retry: DocumentRetry
) -> tuple[DocumentState | None, DocumentOutcome]:
    """Re-extract the failed chunks of the document's current version, and nothing else.

    A retry of a version that is no longer current (edited, moved or deleted since: that
    change decided the document's fate) or that has no failed chunk changes nothing, so a
    retry request that is read twice is harmless. The record turns PROCESSED again; the
    commit step marks it FAILED anew if a retried chunk fails again.
    """
    record = retry.record
    nothing = DocumentOutcome(record=None, chunks=(), changes=())
    current = state is not None and (
        state.content_hash == record.content_hash
        and state.file_path == record.file_path
        and state.chunk_ids == record.chunk_ids
        and tuple(chunk.chunk_id for chunk in retry.chunks) == record.chunk_ids
    )
    failed = set(record.failed_chunk_ids)
    if not current or not failed:
        return state, nothing
    changes = tuple(ChunkAdded(chunk) for chunk in retry.chunks if chunk.chunk_id in failed)
    processed = replace(
        record, status=DocumentStatus.PROCESSED, reason="", failure_kind=None, failed_chunk_ids=()
    )
    return state, DocumentOutcome(record=processed, chunks=retry.chunks, changes=changes)


@dataclass(frozen=True)
class ChunkExtracted:
    """A changed chunk together with what its extractor found."""

    chunk: Chunk
    extraction: Extraction


@dataclass(frozen=True)
class _Delta(Generic[K, F]):
    """A chunk's contribution to `key` added or changed (`fragment`), or retracted
    (`fragment` None: a retraction needs only the key and the contribution id)."""

    key: K
    contribution_id: str
    fragment: F | None = None

    @property
    def retracted(self) -> bool:
        return self.fragment is None


class EntityDelta(_Delta[str, EntityFragment]):
    """A delta of an entity's fragments."""


class RelationDelta(_Delta[RelationPair, RelationFragment]):
    """A delta of a relation's fragments."""


ContributionDelta = EntityDelta | RelationDelta


def update_chunk(
    state: ChunkLedger | None, event: ChunkExtracted | ChunkRemoved
) -> tuple[ChunkLedger | None, tuple[ContributionDelta, ...]]:
    """Emit the difference between what a chunk contributed and what it now contributes.

    Retractions are exactly the contributions the ledger names (the LLM is never asked
    again). Re-delivering the same extraction emits nothing, so replays are free. A chunk
    extracted again with a different result (a retry, another model) retracts what it no
    longer contributes and adds all it does: the ledger keeps one digest of the chunk's
    contributions, not one for each (docs/decisions/0002-a-chunk-keeps-a-ledger.md).
    """
    old = list(state.entries()) if state is not None else []
    if isinstance(event, ChunkRemoved):
        return None, tuple(_retraction(entry) for entry in old)
    found = contributions_for_chunk(event.chunk, event.extraction)
    new_state = ChunkLedger.of(found)
    if state is not None and state.digest == new_state.digest:
        return new_state, ()
    kept = {identity(c) for c in found.all()}
    retractions = [_retraction(entry) for entry in old if entry not in kept]
    return new_state, (*retractions, *map(_addition, found.all()))


def _retraction(entry: LedgerEntry) -> ContributionDelta:
    kind, key, contribution_id = entry
    if kind == "entity":
        return EntityDelta(cast(str, key), contribution_id)
    return RelationDelta(cast(RelationPair, key), contribution_id)


def _addition(contribution: Contribution) -> ContributionDelta:
    if isinstance(contribution, EntityContribution):
        return EntityDelta(contribution.key, contribution.contribution_id, contribution.fragment)
    return RelationDelta(contribution.key, contribution.contribution_id, contribution.fragment)


def update_fragments(
    state: Mapping[str, F] | None, deltas: Iterable[tuple[str, F | None]]
) -> dict[str, F] | None:
    """Fold (contribution id, fragment or None for a retraction) into an entity or relation state.

    The same fold as `apply` and `retract` of dataflow/core/contributions.py, made on one
    copy of the state rather than one a delta (a hub entity holds a fragment per citing
    chunk). Returns None when no contribution is left, so the key is discarded. The
    reference index folds with it; the dataflow's steps fold in place (`fold_fragments`).
    """
    current: dict[str, F] = dict(state or {})  # one copy a fold, never one a delta
    for contribution_id, fragment in deltas:
        if fragment is None:
            current.pop(contribution_id, None)
        else:
            current[contribution_id] = fragment
    return current or None


def fold_fragments(
    fragments: dict[str, F],
    deltas: Iterable[tuple[str, F | None]],
    tally: FragmentTally[F] | None = None,
) -> None:
    """`update_fragments`' fold made in place on `fragments`, and on `tally` (the running
    totals of `fragments`, dataflow/core/tally.py) alike: the entity and relation steps
    hold a hub's fragments in one dict, which a copy per fold would make O(hub) a touch."""
    for contribution_id, fragment in deltas:
        if fragment is None:
            previous = fragments.pop(contribution_id, None)
        else:
            previous = fragments.get(contribution_id)
            fragments[contribution_id] = fragment
        if tally is not None:
            if previous is not None:
                tally.remove(previous)
            if fragment is not None:
                tally.add(fragment)
