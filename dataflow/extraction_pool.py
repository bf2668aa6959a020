"""Extraction and embedding off the dataflow's thread, fairly by document.

Bytewax runs each worker's steps on one thread, so an extraction made inside a step would
hold the whole worker: nothing else would move while a large document's chunks were being
extracted, and a one-line document saved behind it would wait for most of it
(docs/decisions/0004-extraction-off-the-dataflow-thread.md). So the extract step only hands
chunks to an `ExtractionPool` and collects what is done (`ExtractLogic` in
dataflow/logic/extract.py); the pool's threads do the work:

- extraction threads (as many as the LLM may take calls at once; one for the offline
  extractor, which holds the GIL) take chunks round-robin by document, so a document that
  arrives behind a large one has its chunks taken next, not after all of the large one's;
- one embedding thread embeds what is extracted, in one call for everything waiting (the
  local model and an embedding endpoint both gain from batches).

Its backlog (documents handed to the extract step and not yet passed on) gates the sources
(`GatedSource`): they read nothing more while it is full, so an initial load does not pull
the whole corpus into the extract step's state, and a one-shot run's sources end only once
it is empty, so its last documents commit as they go, like the rest.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition

from dataflow.core.chunking import Chunk
from dataflow.core.extraction import Extraction
from dataflow.core.messages import SourceEvent, Vector

ExtractMany = Callable[[Sequence[str]], list[Extraction | str]]
"""Extract many chunk texts; a str in the result is the reason that chunk failed."""
EmbedMany = Callable[[Sequence[str]], list[Vector]]

#: Documents the extract step may hold before the sources wait (two sources' batches).
BACKLOG_DOCUMENTS = 128
#: Texts one embedding call takes at most.
EMBED_BATCH = 64


@dataclass(frozen=True)
class Extracted:
    """One chunk's extraction (a str: the reason it failed) and, when it did not fail,
    the chunk's vector."""

    extraction: Extraction | str
    vector: Vector | None


class ExtractionPool:
    """Background extraction (fair by document) and batched embedding of chunks.

    `submit` returns a future per chunk. A failure of `extract` or `embed` (an exception,
    not a reason) is the future's exception: the extract step re-raises it on the
    dataflow's thread, so it fails the run like an error of the step itself. Threads start
    on the first submit.
    """

    def __init__(self, extract: ExtractMany, embed: EmbedMany, threads: int) -> None:
        if threads < 1:
            raise ValueError(f"ExtractionPool needs at least one thread; got {threads}")
        self._extract, self._embed, self._thread_count = extract, embed, threads
        self._lock = threading.Condition()
        self._queues: OrderedDict[str, deque[tuple[Chunk, Future[Extracted]]]] = OrderedDict()
        self._to_embed: deque[tuple[str, Extraction, Future[Extracted]]] = deque()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._backlog: dict[str, int] = {}

    def submit(self, doc_id: str, chunk: Chunk) -> Future[Extracted]:
        future: Future[Extracted] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the extraction pool is closed")
            if not self._threads:
                self._start()
            self._queues.setdefault(doc_id, deque()).append((chunk, future))
            self._lock.notify_all()
        return future

    def report_backlog(self, holder: str, documents: int) -> None:
        """`holder` (an extract step's key) holds `documents` documents not passed on."""
        with self._lock:
            if documents:
                self._backlog[holder] = documents
            else:
                self._backlog.pop(holder, None)

    def backlog(self) -> int:
        """Documents the extract steps of this process hold."""
        with self._lock:
            return sum(self._backlog.values())

    def close(self) -> None:
        """Stop the threads; chunks not yet taken are cancelled."""
        with self._lock:
            self._closed = True
            for queue in self._queues.values():
                for _, future in queue:
                    future.cancel()
            self._queues.clear()
            self._lock.notify_all()
        for thread in self._threads:
            thread.join(timeout=5)

    def _start(self) -> None:
        for number in range(self._thread_count):
            self._spawn(self._extract_loop, f"kgstream-extract-{number}")
        self._spawn(self._embed_loop, "kgstream-embed")

    def _spawn(self, loop: Callable[[], None], name: str) -> None:
        # Daemon threads: a call hung on an unreachable LLM must not keep the process up.
        thread = threading.Thread(target=loop, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _next_chunk(self) -> tuple[Chunk, Future[Extracted]] | None:
        """The next chunk, round-robin by document (None once closed)."""
        with self._lock:
            while not self._queues and not self._closed:
                self._lock.wait()
            if self._closed:
                return None
            doc_id, queue = next(iter(self._queues.items()))
            taken = queue.popleft()
            if queue:
                self._queues.move_to_end(doc_id)  # the other documents go first
            else:
                del self._queues[doc_id]
            return taken

    def _extract_loop(self) -> None:
        while (taken := self._next_chunk()) is not None:
            chunk, future = taken
            if not future.set_running_or_notify_cancel():
                continue
            try:
                (result,) = self._extract([chunk.text])
            except BaseException as error:  # handed to the dataflow's thread
                future.set_exception(error)
                continue
            if isinstance(result, str):
                future.set_result(Extracted(result, None))
                continue
            with self._lock:
                self._to_embed.append((chunk.text, result, future))
                self._lock.notify_all()

    def _embed_loop(self) -> None:
        while True:
            with self._lock:
                while not self._to_embed and not self._closed:
                    self._lock.wait()
                if self._closed:
                    for _, _, future in self._to_embed:
                        future.cancel()
                    return
                count = min(EMBED_BATCH, len(self._to_embed))
                batch = [self._to_embed.popleft() for _ in range(count)]
            try:
                vectors = self._embed([text for text, _, _ in batch])
            except BaseException as error:  # handed to the dataflow's thread
                for _, _, future in batch:
                    future.set_exception(error)
                continue
            for (_, extraction, future), vector in zip(batch, vectors, strict=True):
                future.set_result(Extracted(extraction, vector))


GATE_POLL = timedelta(milliseconds=20)  # how often a waiting source looks at the backlog


class GatedSource(FixedPartitionedSource[SourceEvent, Any]):
    """`inner`, whose partitions read nothing while `pool`'s backlog is `limit` documents or
    more, and end (when `inner`'s do) only once the backlog is empty; a waiting partition
    asks to be woken a poll interval from `now()` (the dataflow's clock). Snapshots are
    `inner`'s, so a gated run resumes where it would have."""

    def __init__(
        self,
        inner: FixedPartitionedSource[SourceEvent, Any],
        pool: ExtractionPool,
        now: Callable[[], datetime],
        limit: int = BACKLOG_DOCUMENTS,
    ) -> None:
        self._inner, self._pool, self._now, self._limit = inner, pool, now, limit

    def list_parts(self) -> list[str]:
        return self._inner.list_parts()

    def build_part(
        self, step_id: str, for_part: str, resume_state: Any | None
    ) -> StatefulSourcePartition[SourceEvent, Any]:
        inner = self._inner.build_part(step_id, for_part, resume_state)
        return _GatedPartition(inner, self._pool, self._now, self._limit)


class _GatedPartition(StatefulSourcePartition[SourceEvent, Any]):
    def __init__(
        self,
        inner: StatefulSourcePartition[SourceEvent, Any],
        pool: ExtractionPool,
        now: Callable[[], datetime],
        limit: int,
    ) -> None:
        self._inner, self._pool, self._now, self._limit = inner, pool, now, limit
        self._ended = False
        self._waiting = False

    def next_batch(self) -> Iterable[SourceEvent]:
        backlog = self._pool.backlog()
        if self._ended:
            if backlog:
                self._waiting = True
                return []
            raise StopIteration
        if backlog >= self._limit:
            self._waiting = True
            return []
        self._waiting = False
        try:
            return self._inner.next_batch()
        except StopIteration:
            self._ended = True
            self._waiting = backlog > 0
            if self._waiting:
                return []
            raise

    def next_awake(self) -> datetime | None:
        if self._waiting:
            return self._now() + GATE_POLL
        if self._ended:
            return None
        return self._inner.next_awake()

    def snapshot(self) -> Any:
        return self._inner.snapshot()

    def close(self) -> None:
        self._inner.close()
