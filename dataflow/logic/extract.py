"""The extract step: each lane of documents hands its added chunks to the extraction pool
(dataflow/extraction_pool.py) and passes each document's tasks on in order as they are done,
so the dataflow's thread never waits for an LLM."""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from concurrent.futures import Future
from datetime import datetime, timedelta

from bytewax.operators import StatefulBatchLogic
from typing_extensions import override

from dataflow.clock import Clock
from dataflow.components import IndexObserver
from dataflow.core.messages import ChunkOutcome, ChunkTask
from dataflow.core.steps import ChunkAdded, ChunkExtracted, ChunkRemoved
from dataflow.extraction_pool import Extracted, ExtractionPool

# How long a document whose chunks are all done may wait for others still in extraction,
# so that the renders and commits of a busy stream go in batches (a hub entity is rendered
# once per batch), while a lone edit goes at once.
HOLD_SECONDS = 1.0
_FIRST_POLL = timedelta(milliseconds=2)  # after new work: extracting a chunk offline is ms
_POLL = timedelta(milliseconds=20)  # at most this long between looks at running work

ExtractState = dict[str, list[ChunkTask]]
"""An extract lane's snapshot: each document's chunk tasks not yet passed on, in order."""


class ExtractLogic(StatefulBatchLogic[ChunkTask, ChunkOutcome, ExtractState]):
    """One lane of documents (`extract_lane`): hands their added chunks to the extraction
    pool (dataflow/extraction_pool.py) and passes each document's tasks on in order as they
    are done, so the dataflow's thread never waits for an LLM.

    What goes on when (`_done_now`): a document whose tasks are all done goes at once when
    nothing else of the lane is running, else with the next batch: once `per_round` chunks
    are done, or once it has waited `HOLD_SECONDS`; finished documents go in a step of their
    own. A large document goes one piece of `per_round` extracted chunks (0: whole) a step,
    each committed and shown as progress; others overtake it. Retractions cost no
    extraction and keep their place.
    Snapshots hold the tasks not passed on; a resumed lane hands them to the pool again. At
    the end of the input (a one-shot run, or a stop) it waits for everything and passes it
    on, since Bytewax calls nothing after that.
    """

    def __init__(
        self,
        resume: ExtractState | None,
        pool: ExtractionPool,
        per_round: int,
        lanes: int,
        observer: IndexObserver | None = None,
        clock: Clock = Clock(),
    ) -> None:
        self.pending: ExtractState = resume or {}
        self.pool, self.per_round, self.lanes, self.observer = pool, per_round, lanes, observer
        self.clock = clock
        self.running: dict[int, Future[Extracted]] = {}  # by id() of a pending task
        # Added chunks not handed to the pool yet (after a resume: every one pending).
        self.unsubmitted = [task for tasks in self.pending.values() for task in tasks]
        self.held_since: float | None = None  # when the oldest finished document began to wait
        self.poll = _FIRST_POLL
        self.lane = extract_lane(next(iter(self.pending)), lanes) if self.pending else ""

    @override
    def on_batch(self, values: list[ChunkTask]) -> tuple[Iterable[ChunkOutcome], bool]:
        for task in values:
            self.pending.setdefault(task.ticket.doc_id, []).append(task)
        self.unsubmitted += values
        self.lane = self.lane or extract_lane(values[0].ticket.doc_id, self.lanes)
        return self._step()

    @override
    def on_notify(self) -> tuple[Iterable[ChunkOutcome], bool]:
        return self._step()

    @override
    def on_eof(self) -> tuple[Iterable[ChunkOutcome], bool]:
        self._submit()
        for future in self.running.values():
            future.exception()  # waits; a failure is raised by _passed_on
        done = [task for tasks in self.pending.values() for task in tasks]
        self.pending = {}
        self.pool.report_backlog(self.lane, 0)
        return self._passed_on(done), StatefulBatchLogic.DISCARD

    @override
    def notify_at(self) -> datetime | None:
        return self.clock.now() + self.poll if self.pending else None

    @override
    def snapshot(self) -> ExtractState:
        return {doc_id: list(tasks) for doc_id, tasks in self.pending.items()}  # immutable tasks

    def _step(self) -> tuple[Iterable[ChunkOutcome], bool]:
        submitted = self._submit()
        done = self._done_now()
        self.poll = _FIRST_POLL if submitted or done else min(self.poll * 2, _POLL)
        self.pool.report_backlog(self.lane, len(self.pending))
        return self._passed_on(done), not self.pending

    def _submit(self) -> bool:
        """Hand the pool the added chunks it does not have yet."""
        submitted, self.unsubmitted = self.unsubmitted, []
        for task in submitted:
            change = task.change
            if isinstance(change, ChunkAdded):
                self.running[id(task)] = self.pool.submit(task.ticket.doc_id, change.chunk)
        return bool(submitted)

    def _is_done(self, task: ChunkTask) -> bool:
        return isinstance(task.change, ChunkRemoved) or self.running[id(task)].done()

    def _done_now(self) -> list[ChunkTask]:
        """The tasks to pass on now, taken out of `pending`: the finished documents when they
        may go, else of each document with more done one piece of `per_round` extracted
        chunks (one a step: each step's output is rendered and committed before the worker
        looks again, so a large document must not pass on thousands of chunks at once)."""
        finished: list[str] = []
        pieces: dict[str, list[ChunkTask]] = {}
        busy = False
        extracted = 0  # chunks done and passed on, or waiting in finished documents
        for doc_id, tasks in self.pending.items():
            ready, additions = 0, 0
            for task in tasks:
                added = isinstance(task.change, ChunkAdded)
                if added and self.per_round and additions == self.per_round:
                    break  # a piece's worth: the rest waits for a later step
                if not self._is_done(task):
                    break
                additions += added
                ready += 1
            whole_piece = bool(self.per_round) and additions == self.per_round
            if ready == len(tasks):
                finished.append(doc_id)
                extracted += additions
                continue
            busy = True
            if whole_piece:
                pieces[doc_id] = tasks[:ready]
                extracted += additions
        now = self.clock.monotonic()
        if finished and self.held_since is None:
            self.held_since = now
        go = not busy or (self.per_round and extracted >= self.per_round)
        go = go or (self.held_since is not None and now - self.held_since >= HOLD_SECONDS)
        if not (finished and go):
            for doc_id, tasks in pieces.items():
                del self.pending[doc_id][: len(tasks)]
            return [task for tasks in pieces.values() for task in tasks]
        # Finished documents go in a step of their own, before any piece: what a step passes
        # on is rendered and committed together, and a piece's render may take seconds.
        self.held_since = None
        return [task for doc_id in finished for task in self.pending.pop(doc_id)]

    def _passed_on(self, done: list[ChunkTask]) -> list[ChunkOutcome]:
        outcomes: list[ChunkOutcome] = []
        extracted = 0
        for task in done:
            change = task.change
            if isinstance(change, ChunkRemoved):
                outcomes.append(ChunkOutcome(task.ticket, change))
                continue
            result = self.running.pop(id(task)).result()
            extracted += 1
            if isinstance(result.extraction, str):
                removed = ChunkRemoved(change.chunk.chunk_id)
                outcomes.append(ChunkOutcome(task.ticket, removed, failure=result.extraction))
            else:
                event = ChunkExtracted(change.chunk, result.extraction)
                outcomes.append(ChunkOutcome(task.ticket, event, vector=result.vector))
        if self.observer is not None and extracted:
            self.observer.chunks_extracted(extracted)
        return outcomes


def extract_lane(doc_id: str, lanes: int) -> str:
    """The extract step's key for a document: one of `lanes`, by a stable hash."""
    return f"lane-{zlib.crc32(doc_id.encode()) % lanes}"
