"""What the dataflow's steps need from the outside world, built once per process.

The steps stay wiring; everything with I/O (LLM, embeddings, stores), the clock and the
snapshot codec are reached through this one object, built from the settings by
`build_components` or assembled by hand in tests.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from connectors.embeddings.base import Embedder, EmbeddingRequestError
from connectors.errors import OutageWait
from connectors.stores import Stores
from dataflow.clock import Clock
from dataflow.core.chunking import ChunkingOptions, Tokenizer
from dataflow.core.commit import CommitBatch
from dataflow.core.contributions import EntityRecord, RelationRecord, Renderer
from dataflow.core.documents import DocumentLimits, DocumentStatus
from dataflow.core.extraction import Extraction
from dataflow.core.messages import Drafted, EntityDrafted, SourceEvent, Vector
from dataflow.extraction_pool import ExtractionPool, ExtractMany
from dataflow.state.codec import SnapshotCodec
from dataflow.state.fragment_log import LogPolicy

logger = logging.getLogger("kgstream.indexer")


class IndexObserver(Protocol):
    """Told what the indexer does (the hook for metrics); methods must be cheap."""

    def event_received(self, event: SourceEvent) -> None: ...

    def chunks_extracted(self, count: int) -> None: ...

    def embedding_call(self, texts: int) -> None: ...

    def committed(self, batch: CommitBatch) -> None: ...

    def wrote(self, worker: int, batch: CommitBatch, seconds: float) -> None:
        """Worker `worker` wrote `batch` to the stores in `seconds` (wall time)."""

    def commit_cpu(self, worker: int, seconds: float) -> None:
        """Worker `worker` spent `seconds` of CPU in the commit protocol's bookkeeping."""

    def store_outage(self, reason: str | None) -> None: ...


class WorkerThreads:
    """The Bytewax worker each thread runs, by thread id, for per-worker metrics: Bytewax
    runs each worker on a thread of its own and builds the stores sink's partition there
    first, which records it (`enter`). Not a threading.local: Bytewax's Rust threads drop
    their Python thread state, and with it thread-local data, each time they release the
    GIL."""

    def __init__(self) -> None:
        self._by_thread: dict[int, int] = {}

    def enter(self, worker: int) -> None:
        self._by_thread[threading.get_ident()] = worker

    def current(self) -> int:
        """The calling thread's worker (0 on a thread no worker entered)."""
        return self._by_thread.get(threading.get_ident(), 0)


@dataclass
class Components:
    tokenizer: Tokenizer
    chunking: ChunkingOptions
    limits: DocumentLimits
    extract_many: ExtractMany
    embedder: Embedder
    renderer: Renderer
    stores: Stores
    render_concurrency: int = 1
    # Chunks extracted at once, on the extraction pool's threads (the LLM's concurrency; 1
    # for the offline extractor, which holds the GIL).
    extract_concurrency: int = 4
    coalesce_seconds: float = 0.0  # summarise a key at most once per this long (bursts)
    # An entity or relation with at least this many fragments keeps running totals beside
    # them (dataflow/core/tally.py), so its render costs what changed, not its size; below
    # half of it, the totals are dropped again (they take about half the fragments' memory).
    tally_over_fragments: int = 64
    # From `snapshot_logs.over` fragments, a key's snapshot is its last whole packing and the
    # changes packed since (dataflow/state/fragment_log.py), so snapshotting it costs what
    # changed.
    snapshot_logs: LogPolicy = LogPolicy()
    # Packs every step's snapshot; its dictionary is the index's (kgstream/indexer.py).
    codec: SnapshotCodec = field(default_factory=SnapshotCodec)
    clock: Clock = Clock()
    # A large document is passed on from extraction in pieces of this many extracted chunks
    # (0: whole), each committed and shown as progress; finished documents wait for a batch
    # of this many chunks (or 1 s) while others are extracted.
    chunks_per_round: int = 64
    on_commit: Callable[[CommitBatch], None] | None = None
    on_close: Callable[[], None] | None = None  # e.g. the LLM client's (flushes its cache)
    observer: IndexObserver | None = None
    outages: OutageWait = field(default_factory=OutageWait)  # writes and embeddings wait them out
    workers: WorkerThreads = field(default_factory=WorkerThreads)
    # Ends the run with one line, for errors that every later document would meet too.
    cannot_go_on: Callable[[str], None] | None = None
    _pool: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)
    _extraction: ExtractionPool | None = field(default=None, init=False, repr=False)

    @property
    def extraction(self) -> ExtractionPool:
        """The pool that extracts and embeds chunks off the dataflow's threads (one per
        process, made on first use)."""
        if self._extraction is None:
            self._extraction = ExtractionPool(
                self.extract_many, self.embed, self.extract_concurrency
            )
        return self._extraction

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        if not texts:
            return []
        if self.observer is not None:
            self.observer.embedding_call(len(texts))
        try:
            vectors = self.outages.call(lambda: self.embedder.embed(list(texts)))
        except EmbeddingRequestError as error:  # rejected: so would every other chunk be
            if self.cannot_go_on is None:
                raise
            self.cannot_go_on(f"the embedding endpoint rejects requests: {error}")
            raise
        return [tuple(vector) for vector in vectors]

    def render_many(self, drafts: Sequence[Drafted]) -> list[EntityRecord | RelationRecord | None]:
        """Render drafts; concurrently when summaries may call an LLM."""
        if self.render_concurrency <= 1 or len(drafts) <= 1:
            return [self._render(drafted) for drafted in drafts]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.render_concurrency, "kgstream-render")
        return list(self._pool.map(self._render, drafts))

    def _render(self, drafted: Drafted) -> EntityRecord | RelationRecord | None:
        if isinstance(drafted, EntityDrafted):
            entity = drafted.draft
            return self.renderer.entity_record(entity) if entity is not None else None
        relation = drafted.draft
        return self.renderer.relation_record(relation) if relation is not None else None

    def write(self, batch: CommitBatch, worker: int = 0) -> None:
        """Write `batch` (waiting out store outages) for Bytewax worker `worker`."""
        began = time.perf_counter()
        if not batch.is_empty():
            self.outages.call(lambda: self.stores.write(batch))
        if self.observer is not None:
            self.observer.wrote(worker, batch, time.perf_counter() - began)
        for completed in batch.completed:
            record = completed.record
            if record is not None and record.status is DocumentStatus.FAILED:
                logger.warning(
                    "document %s failed: %s",
                    record.doc_id,
                    record.reason,
                    extra={"doc_id": record.doc_id, "file_path": record.file_path},
                )
        if self.on_commit is not None:
            self.on_commit(batch)
        if self.observer is not None:
            self.observer.committed(batch)

    def commit_cpu(self, worker: int, seconds: float) -> None:
        if self.observer is not None:
            self.observer.commit_cpu(worker, seconds)

    def close(self) -> None:
        if self._extraction is not None:
            self._extraction.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        try:
            if self.on_close is not None:
                self.on_close()
        finally:
            self.stores.close()


def offline_extract_many(texts: Sequence[str]) -> list[Extraction | str]:
    from dataflow.core.offline.extractor import extract_offline

    return [extract_offline(text) for text in texts]
