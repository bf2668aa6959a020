"""kgstream.v1.Ingest: document changes published to the event log: Kafka, or the watched
folder when the indexer reads one (connectors/folder/publisher.py)."""

from __future__ import annotations

import time
from typing import Protocol

import grpc

from connectors.redis.ports import GraphRecords
from dataflow.core.documents import (
    MAX_DOC_ID_BYTES,
    DocumentChange,
    DocumentDelete,
    DocumentLimits,
    DocumentUpsert,
    PreparedDocument,
    prepare_document,
)
from gateway.status import abort, invalid, statuses
from kgstream_protos.v1 import events_pb2, ingest_pb2, ingest_pb2_grpc


class EventPublisher(Protocol):
    """What Ingest needs from connectors.kafka.producer.DocumentEventProducer."""

    topic: str

    def send(self, change: DocumentChange, event_time_ms: int | None = None) -> tuple[int, int]: ...


class IngestService(ingest_pb2_grpc.IngestServicer):
    def __init__(self, graph: GraphRecords, producer: EventPublisher | None) -> None:
        self._graph = graph
        self._producer = producer

    def UpsertDocument(
        self, request: ingest_pb2.UpsertDocumentRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.IngestResponse:
        _check_doc_id(context, request.doc_id)
        change = DocumentUpsert(
            request.doc_id, bytes(request.content), request.file_path or request.doc_id
        )
        # Unlimited size here: only the indexer's limit decides, and it reports FAILED.
        prepared = prepare_document(change, DocumentLimits(max_bytes=len(request.content) + 1))
        digest = prepared.content_hash if isinstance(prepared, PreparedDocument) else ""
        return self._publish(context, change, events_pb2.DocumentEvent.UPSERT, digest)

    def DeleteDocument(
        self, request: ingest_pb2.DeleteDocumentRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.IngestResponse:
        _check_doc_id(context, request.doc_id)
        change = DocumentDelete(request.doc_id)
        return self._publish(context, change, events_pb2.DocumentEvent.DELETE, "")

    def _publish(
        self,
        context: grpc.ServicerContext,
        change: DocumentChange,
        op: events_pb2.DocumentEvent.Op,
        digest: str,
    ) -> ingest_pb2.IngestResponse:
        producer = self._producer
        if producer is None:
            abort(
                context,
                grpc.StatusCode.FAILED_PRECONDITION,
                "no event log is configured: this gateway cannot publish document changes. "
                "Start it with a Kafka bootstrap server and topic, or write files into the "
                "watched folder instead.",
            )
        with statuses(context):
            # Read before publishing: the batch holding this event is applied after
            # it, so version + 1 is a true lower bound.
            version = self._graph.version()
        try:
            partition, offset = producer.send(change, event_time_ms=int(time.time() * 1000))
        except ValueError as error:  # the log cannot hold this change (a folder: the doc id)
            invalid(context, "doc_id", str(error).removeprefix(f"doc_id {change.doc_id!r} "))
        except Exception as error:  # the producer's own error already says what to check
            abort(context, grpc.StatusCode.UNAVAILABLE, str(error))
        return ingest_pb2.IngestResponse(
            doc_id=change.doc_id,
            op=op,
            topic=producer.topic,
            partition=partition,
            offset=offset,
            content_hash=digest,
            index_version=version,
            min_index_version=version + 1,
        )


def _check_doc_id(context: grpc.ServicerContext, doc_id: str) -> None:
    if not doc_id.strip():
        invalid(context, "doc_id", "must be non-empty")
    if "\x00" in doc_id:
        invalid(context, "doc_id", "must not contain a NUL character")
    size = len(doc_id.encode("utf-8", "surrogatepass"))
    if size > MAX_DOC_ID_BYTES:
        invalid(context, "doc_id", f"is {size} bytes, over the limit of {MAX_DOC_ID_BYTES} bytes")
