"""The FAILED documents of a workspace, split by whether a retry can help.

`kgstream retry-failed` and the HTTP API's retry route ask the indexer to retry the first
kind (`IndexControl.request_retry`); the second kind needs new content.
"""

from __future__ import annotations

from connectors.redis.ports import GraphRecords
from dataflow.core.documents import DocumentStatus

_PAGE = 1000


def failed_documents(graph: GraphRecords) -> tuple[list[str], list[tuple[str, str]]]:
    """The FAILED documents: the ids a retry can fix (`DocumentRecord.retryable`: their
    extraction failed), and the others with their reasons (bad encoding, binary, empty,
    too large, a bad doc id)."""
    retried: list[str] = []
    permanent: list[tuple[str, str]] = []
    offset = 0
    while True:
        ids, total = graph.documents_by_status(DocumentStatus.FAILED, offset, _PAGE)
        for doc_id, stored in graph.get_documents(ids).items():
            record = stored.record
            if record.retryable:
                retried.append(doc_id)
            else:
                permanent.append((doc_id, record.reason))
        offset += len(ids)
        if not ids or offset >= total:
            return retried, permanent
