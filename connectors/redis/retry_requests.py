"""The indexer's second input: retry requests that `kgstream retry-failed` appends to a Redis
stream (`IndexControl.request_retry`).

A request asks for every document whose extraction failed. When the partition reads new
requests (any number at once: one scan serves them all), it lists the FAILED documents whose
stored record names failed chunks (an extraction that failed for good) and turns each into a
`DocumentRetry` carrying that record and the version's chunks; the document step re-extracts
exactly those chunks if the version is still current. Documents that failed for a reason a
retry cannot fix carry no failed chunks and are skipped. So the same path serves folder and
Kafka sources, the user re-sends nothing, and the stream names no document (nothing to scrub
after a delete).

The partition's resume position is the last stream id it read (in Bytewax recovery, as a
Kafka offset is), so a request is acted on once; a request read again after a crash is
harmless (the records it finds are PROCESSED by then, or the retry is a no-op). While Redis
is unreachable it reads nothing and tries again later: the store sink reports the outage.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition

from connectors.errors import StoreUnavailable, store_outages
from connectors.redis.ports import GraphRecords, IndexControl
from dataflow.core.documents import DocumentStatus
from dataflow.core.messages import SourceEvent
from dataflow.core.steps import DocumentRetry

PART = "retry-requests"
_BATCH = 100
_POLL = timedelta(milliseconds=500)


class RetryRequestSource(FixedPartitionedSource[SourceEvent, str]):
    """One partition reading the retry-request stream of `control`'s workspace, and the
    FAILED documents of `graph`.

    `follow` keeps polling for new requests (`kgstream run`); without it the partition
    ends once it has read the requests that were there when it started (`kgstream index`).
    """

    def __init__(
        self,
        graph: GraphRecords,
        control: IndexControl,
        *,
        follow: bool,
        clock: Callable[[], float] = time.time,
    ):
        self.graph = graph
        self.control = control
        self.follow = follow
        self.clock = clock

    def list_parts(self) -> list[str]:
        return [PART]

    def build_part(
        self, step_id: str, for_part: str, resume_state: str | None
    ) -> RetryRequestPartition:
        return RetryRequestPartition(
            self.graph, self.control, resume_state or "0", self.follow, self.clock
        )


class RetryRequestPartition(StatefulSourcePartition[SourceEvent, str]):
    def __init__(
        self,
        graph: GraphRecords,
        control: IndexControl,
        last_id: str,
        follow: bool,
        clock: Callable[[], float],
    ) -> None:
        self.graph = graph
        self.control = control
        self.last_id = last_id
        self.follow = follow
        self.clock = clock
        self.end_id: str | None = None  # not following: the newest request at the first read
        self._awake: datetime | None = None

    def next_batch(self) -> list[SourceEvent]:
        try:
            with store_outages(self.graph.workspace):
                return self._read()
        except StoreUnavailable:
            self._awake = datetime.now(UTC) + _POLL
            return []

    def _read(self) -> list[SourceEvent]:
        if not self.follow and self.end_id is None:
            self.end_id = self.control.last_retry_request_id()
        if self.end_id is not None and _stream_id_key(self.last_id) >= _stream_id_key(self.end_id):
            raise StopIteration()
        requests = self.control.retry_requests_after(self.last_id, _BATCH)
        if self.end_id is not None:
            end = _stream_id_key(self.end_id)
            requests = [r for r in requests if _stream_id_key(r) <= end]
        self._awake = None if requests else datetime.now(UTC) + _POLL
        if not requests:
            return []
        self.last_id = requests[-1]
        return retry_events(self.graph, f"retry:{self.last_id}", self.clock())

    def next_awake(self) -> datetime | None:
        return self._awake

    def snapshot(self) -> str:
        return self.last_id


def retry_events(graph: GraphRecords, origin: str, now: float) -> list[SourceEvent]:
    """A `DocumentRetry` event for every FAILED document whose stored record names failed
    chunks (in doc id order)."""
    events = []
    offset = 0
    while True:
        doc_ids, total = graph.documents_by_status(DocumentStatus.FAILED, offset, _BATCH)
        for doc_id, document in graph.get_documents(doc_ids).items():
            record = document.record
            if record.status is not DocumentStatus.FAILED or not record.retryable:
                continue
            chunks = graph.get_chunks(record.chunk_ids)
            if len(chunks) != len(record.chunk_ids):
                continue  # the version's chunks are gone: a newer change has superseded it
            retry = DocumentRetry(doc_id, record, tuple(chunks[c] for c in record.chunk_ids))
            events.append(SourceEvent(retry, origin, now))
        offset += len(doc_ids)
        if not doc_ids or offset >= total:
            return events


def _stream_id_key(entry_id: str) -> tuple[int, int]:
    milliseconds, _, sequence = entry_id.partition("-")
    return int(milliseconds), int(sequence or 0)
