"""The indexer's second input: retry requests that `kgstream retry-failed` appends to a Redis
stream (`GraphStore.request_retries`).

Each request names a document. When the partition reads it, it looks the document up in
the stores and, when its stored record is FAILED with failed chunks (an extraction that
failed for good), turns it into a `DocumentRetry` carrying that record and the version's
chunks; the document step re-extracts exactly those chunks if the version is still
current. Anything else (a document since edited, deleted, processed, or failed for a
reason a retry cannot fix) is skipped. So the same path serves folder and Kafka sources,
and the user re-sends nothing.

The partition's resume position is the last stream id it read (in Bytewax recovery, as a
Kafka offset is), so a request is acted on once; a request read again after a crash is
harmless (the record it finds is PROCESSED by then, or the retry is a no-op). While Redis
is unreachable it reads nothing and tries again later: the store sink reports the outage.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition

from connectors.errors import StoreUnavailable, store_outages
from connectors.redis.graph_store import GraphStore
from dataflow.core.documents import DocumentStatus
from dataflow.core.messages import SourceEvent
from dataflow.core.steps import DocumentRetry

PART = "retry-requests"
_BATCH = 100
_POLL = timedelta(milliseconds=500)


class RetryRequestSource(FixedPartitionedSource[SourceEvent, str]):
    """One partition reading the retry-request stream of `graph`'s workspace.

    `follow` keeps polling for new requests (`kgstream run`); without it the partition
    ends once it has read the requests that were there when it started (`kgstream index`).
    """

    def __init__(self, graph: GraphStore, *, follow: bool, clock: Callable[[], float] = time.time):
        self.graph = graph
        self.follow = follow
        self.clock = clock

    def list_parts(self) -> list[str]:
        return [PART]

    def build_part(
        self, step_id: str, for_part: str, resume_state: str | None
    ) -> RetryRequestPartition:
        return RetryRequestPartition(self.graph, resume_state or "0", self.follow, self.clock)


class RetryRequestPartition(StatefulSourcePartition[SourceEvent, str]):
    def __init__(
        self, graph: GraphStore, last_id: str, follow: bool, clock: Callable[[], float]
    ) -> None:
        self.graph = graph
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
            self.end_id = self.graph.last_retry_request_id()
        if self.end_id is not None and _stream_id_key(self.last_id) >= _stream_id_key(self.end_id):
            raise StopIteration()
        requests = self.graph.retry_requests_after(self.last_id, _BATCH)
        if self.end_id is not None:
            requests = [r for r in requests if _stream_id_key(r[0]) <= _stream_id_key(self.end_id)]
        self._awake = None if requests else datetime.now(UTC) + _POLL
        if not requests:
            return []
        self.last_id = requests[-1][0]
        return retry_events(self.graph, requests, self.clock())

    def next_awake(self) -> datetime | None:
        return self._awake

    def snapshot(self) -> str:
        return self.last_id


def retry_events(
    graph: GraphStore, requests: list[tuple[str, str]], now: float
) -> list[SourceEvent]:
    """The `DocumentRetry` events for (stream id, doc id) requests whose document's stored
    record failed extraction; other requests are skipped."""
    stored = graph.get_documents(doc_id for _, doc_id in requests)
    events = []
    for entry_id, doc_id in requests:
        document = stored.get(doc_id)
        if document is None:
            continue
        record = document.record
        if record.status is not DocumentStatus.FAILED or not record.failed_chunk_ids:
            continue
        chunks = graph.get_chunks(record.chunk_ids)
        if len(chunks) != len(record.chunk_ids):
            continue  # the version's chunks are gone: a newer change has superseded it
        retry = DocumentRetry(doc_id, record, tuple(chunks[c] for c in record.chunk_ids))
        events.append(SourceEvent(retry, f"retry:{entry_id}", now))
    return events


def _stream_id_key(entry_id: str) -> tuple[int, int]:
    milliseconds, _, sequence = entry_id.partition("-")
    return int(milliseconds), int(sequence or 0)
