"""LightRAG's document routes (`/documents/...`), over the Ingest and KnowledgeGraph
servicers: every insert, upload and delete is published through the configured sink (Kafka,
or the watched folder) exactly as `Ingest.UpsertDocument`/`DeleteDocument` publish it, and
every listing is `ListDocuments`/`GetDocument`.

Identity: a document's id is its `file_source` (or the upload's file name); a text without
one gets LightRAG's content id, "doc-" and the MD5 of the text. Inserting under an id that
exists replaces that document, as every kgstream upsert does (LightRAG answers 409 and wants
a delete first). Tracks: each insert or upload answers a `track_id` under which the gateway
keeps what it published (the doc ids and content hashes, in the store's control plane, for
`TRACK_KEPT_SECONDS`), so `/documents/track_status/{track_id}` tells exactly when each
document's new version is PROCESSED or FAILED.
"""

from __future__ import annotations

import hashlib
import re
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import grpc
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from connectors.redis.ports import TrackedDocument
from gateway.http.app import HttpApi, guarded, invoke, read_body_within_limit
from gateway.http.calls import CallFailed
from gateway.http.lightrag.wire import (
    Fields,
    Invalid,
    Refused,
    field_error,
    invalid_at,
    iso_time,
    json_body,
)
from gateway.knowledge_graph import MAX_PAGE_SIZE
from kgstream_protos.v1 import ingest_pb2
from kgstream_protos.v1 import query_pb2 as pb

TRACK_KEPT_SECONDS = 7 * 24 * 3600
MAX_TRACK_ID_CHARS = 200
MAX_LISTED_DOCUMENTS = 1000  # LightRAG's cap on the deprecated GET /documents
CLEAR_CONFIRMATION = "delete-all-documents"
# LightRAG's document statuses, in its pipeline order; kgstream's four are among them.
LIGHTRAG_STATUSES = (
    "pending",
    "parsing",
    "analyzing",
    "processing",
    "preprocessed",
    "processed",
    "failed",
)
STATUS_NAMES = {
    pb.DOCUMENT_STATUS_PENDING: "pending",
    pb.DOCUMENT_STATUS_PROCESSING: "processing",
    pb.DOCUMENT_STATUS_PROCESSED: "processed",
    pb.DOCUMENT_STATUS_FAILED: "failed",
}
STATUS_VALUES = {name: value for value, name in STATUS_NAMES.items()}
Publication = tuple[str, bytes, list[str | int]]
"""A document to upsert: its doc id, its content, and the request field the id came from."""
SORT_KEYS = {
    "created_at": lambda d: d.created_at_ms,
    "updated_at": lambda d: d.updated_at_ms,
    "id": lambda d: d.doc_id,
    "file_path": lambda d: d.file_path or d.doc_id,
}
# What a document source may not hold (LightRAG's rule): control characters, surrogates,
# the two non-characters.
_UNSAFE_SOURCE = re.compile("[\u0000-\u001f\u007f\ud800-\udfff\ufffe\uffff]")


def content_doc_id(text: str) -> str:
    """LightRAG's id of a text inserted without a source."""
    return (
        "doc-"
        + hashlib.md5(text.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()
    )


def new_track_id(prefix: str) -> str:
    """LightRAG's form of a track id: prefix, UTC time, eight random hex digits."""
    return f"{prefix}_{datetime.now(tz=UTC):%Y%m%d_%H%M%S}_{uuid.uuid4().hex[:8]}"


def doc_status(document: pb.Document) -> dict[str, Any]:
    """LightRAG's DocStatusResponse of a document (kgstream's extra facts in `metadata`)."""
    metadata: dict[str, Any] = {"content_hash": document.content_hash}
    if document.status == pb.DOCUMENT_STATUS_FAILED:
        metadata["failure_kind"] = pb.FailureKind.Name(document.failure_kind)
    if document.status == pb.DOCUMENT_STATUS_PROCESSING:
        metadata["chunks_settled"] = document.chunks_settled
        metadata["chunks_changed"] = document.chunks_changed
    return {
        "id": document.doc_id,
        "content_summary": document.preview,
        "content_length": document.length,
        "status": STATUS_NAMES[document.status],
        "created_at": iso_time(document.created_at_ms),
        "updated_at": iso_time(document.updated_at_ms),
        "track_id": None,
        "chunks_count": len(document.chunk_ids),
        "error_msg": document.reason or None,
        "metadata": metadata,
        "file_path": document.file_path or document.doc_id,
    }


def pending_status(tracked: TrackedDocument, known: pb.Document | None) -> dict[str, Any]:
    """A tracked document whose published version the indexer has not applied yet."""
    published = round(tracked.published_at * 1000)
    return {
        "id": tracked.doc_id,
        "content_summary": "",
        "content_length": 0,
        "status": "pending",
        "created_at": iso_time(known.created_at_ms if known is not None else published),
        "updated_at": iso_time(published),
        "track_id": None,
        "chunks_count": None,
        "error_msg": None,
        "metadata": {"content_hash": tracked.content_hash},
        "file_path": (known.file_path if known is not None else "") or tracked.doc_id,
    }


def tracked_status(tracked: TrackedDocument, document: pb.Document | None) -> dict[str, Any]:
    """Where the version `tracked` published stands: the document as indexed once the
    record holds that version (its content hash; for content that is not text, a FAILED
    record) or a later one (updated after the publication), else pending."""
    if document is None:
        return pending_status(tracked, None)
    if tracked.content_hash:
        reached = document.content_hash == tracked.content_hash
    else:
        reached = document.status == pb.DOCUMENT_STATUS_FAILED and not document.content_hash
    if reached or document.updated_at_ms >= round(tracked.published_at * 1000):
        return doc_status(document)
    return pending_status(tracked, document)


def _check_source(fields: Fields, path: list[str | int], source: str) -> None:
    unsafe = _UNSAFE_SOURCE.search(source)
    if unsafe is not None:
        fields.fail(path, f"must not contain the character U+{ord(unsafe.group()):04X}", source)


def _check_file_name(name: str) -> None:
    """LightRAG's rules for an upload's name: one plain file name, which can be nothing but
    a file directly in the watched folder (a folder sink refuses hidden and temporary names
    besides)."""
    if not name.strip():
        raise Refused(400, "Filename cannot be empty")
    unsafe = _UNSAFE_SOURCE.search(name)
    if name != name.strip() or unsafe is not None:
        found = f" (it holds U+{ord(unsafe.group()):04X})" if unsafe else ""
        raise Refused(400, f"Invalid filename{found}: {name!r}")
    if "/" in name or "\\" in name or name in (".", ".."):
        raise Refused(
            400, f"Unsafe filename detected: {name!r} (a file name, without / \\ or . parts)"
        )


class DocumentRoutes:
    def __init__(self, api: HttpApi) -> None:
        self.api = api

    # -- publishing ----------------------------------------------------------------

    async def _publish(
        self, request: Request, documents: Sequence[Publication], prefix: str
    ) -> str:
        """Upsert each (doc id, content, field the doc id came from) through Ingest and
        keep the track; a refusal names the field, and says which were published before."""
        track_id, published = new_track_id(prefix), list[TrackedDocument]()
        try:
            for doc_id, content, field in documents:
                message = ingest_pb2.UpsertDocumentRequest(doc_id=doc_id, content=content)
                try:
                    reply = await invoke(request, self.api.ingest.UpsertDocument, message)
                except CallFailed as failure:
                    refused = invalid_at(failure, field, "body")
                    if refused is None:
                        raise
                    entry = refused.errors[0]
                    if published:
                        entry["msg"] += (
                            f" (the {len(published)} before it were published: track {track_id})"
                        )
                    raise Invalid([entry]) from None
                published.append(TrackedDocument(doc_id, reply.content_hash, time.time()))
        finally:
            if published:
                await guarded(
                    request,
                    lambda: self.api.control.remember_track(
                        track_id, published, TRACK_KEPT_SECONDS
                    ),
                )
        return track_id

    async def insert_text(self, request: Request) -> Response:
        fields = Fields(await json_body(request))
        text = (fields.text("text", required=True, non_empty=True) or "").strip()
        source = (fields.text("file_source") or "").strip()
        _check_source(fields, ["file_source"], source)
        fields.check()
        doc_id = source or content_doc_id(text)
        track_id = await self._publish(
            request,
            [
                (
                    doc_id,
                    text.encode("utf-8", "surrogatepass"),
                    ["file_source" if source else "text"],
                )
            ],
            "insert",
        )
        return JSONResponse(
            {
                "status": "success",
                "message": "Text successfully received. Processing will continue in background.",
                "track_id": track_id,
            }
        )

    async def insert_texts(self, request: Request) -> Response:
        fields = Fields(await json_body(request))
        texts = [text.strip() for text in fields.strings("texts") or ()]
        if fields.values.get("texts") is None:
            fields.fail(["texts"], "Field required")
        elif not texts:
            fields.fail(["texts"], "must hold at least 1 text", [])
        for index, text in enumerate(texts):
            if not text:
                fields.fail(["texts", index], "must not be empty or whitespace only")
        sources = [source.strip() for source in fields.strings("file_sources") or ()]
        for index, source in enumerate(sources):
            _check_source(fields, ["file_sources", index], source)
        fields.check()
        if sources and len(sources) != len(texts):
            raise Refused(
                400,
                f"A valid file_source is required for each text: {len(texts)} texts, "
                f"{len(sources)} file_sources (give one for each, or none)",
            )
        ids = [
            (sources[i] if sources and sources[i] else content_doc_id(text), i)
            for i, text in enumerate(texts)
        ]
        seen: dict[str, int] = {}
        for doc_id, index in ids:
            if doc_id in seen:
                raise Refused(
                    400,
                    f"file_sources must be unique: texts {seen[doc_id]} and {index} are both "
                    f"{doc_id!r}",
                )
            seen[doc_id] = index
        documents: list[Publication] = [
            (
                doc_id,
                texts[index].encode("utf-8", "surrogatepass"),
                ["file_sources", index] if sources and sources[index] else ["texts", index],
            )
            for doc_id, index in ids
        ]
        track_id = await self._publish(request, documents, "insert")
        return JSONResponse(
            {
                "status": "success",
                "message": "Texts successfully received. Processing will continue in background.",
                "track_id": track_id,
            }
        )

    async def upload(self, request: Request) -> Response:
        raw = await read_body_within_limit(request)
        if not request.headers.get("content-type", "").startswith("multipart/form-data"):
            raise Invalid(
                [
                    field_error(
                        "body", ["file"], "Field required (send the file as multipart/form-data)"
                    )
                ]
            )

        async def body() -> Any:
            yield raw

        try:
            form = await MultiPartParser(
                request.headers, body(), max_files=1, max_fields=16
            ).parse()
        except MultiPartException as error:
            raise Refused(400, f"the multipart body cannot be read: {error.message}") from None
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise Invalid(
                [field_error("body", ["file"], "Field required (a file field named 'file')")]
            )
        name = upload.filename or ""
        _check_file_name(name)
        content = await upload.read()
        await form.close()
        track_id = await self._publish(request, [(name, content, ["file"])], "upload")
        return JSONResponse(
            {
                "status": "success",
                "message": f"File '{name}' uploaded successfully. "
                "Processing will continue in background.",
                "track_id": track_id,
            }
        )

    async def scan(self, request: Request) -> Response:
        return JSONResponse(
            {
                "status": "scanning_started",
                "message": "kgstream indexes documents as they change (the watched folder is "
                "watched, the Kafka topic is read as it grows): there is nothing to scan, and "
                "this request changes nothing.",
                "track_id": new_track_id("scan"),
            }
        )

    async def delete_documents(self, request: Request) -> Response:
        fields = Fields(await json_body(request))
        doc_ids = [doc_id.strip() for doc_id in fields.strings("doc_ids") or ()]
        if fields.values.get("doc_ids") is None:
            fields.fail(["doc_ids"], "Field required")
        elif not doc_ids:
            fields.fail(["doc_ids"], "Document IDs list cannot be empty", [])
        if any(not doc_id for doc_id in doc_ids):
            fields.fail(["doc_ids"], "Document ID cannot be empty")
        if len(set(doc_ids)) != len(doc_ids):
            fields.fail(["doc_ids"], "Document IDs must be unique")
        fields.boolean("delete_file")  # the file always goes: the folder is what is indexed
        fields.boolean("delete_llm_cache")  # the LLM cache holds nothing a document owns
        fields.check()
        for index, doc_id in enumerate(doc_ids):
            await self._delete(request, doc_id, ["doc_ids", index])
        return JSONResponse(
            {
                "status": "deletion_started",
                "message": f"Document deletion for {len(doc_ids)} documents has been published; "
                "each is gone from the index once the indexer applies it.",
                "doc_id": ", ".join(doc_ids),
            }
        )

    async def _delete(self, request: Request, doc_id: str, field: list[str | int]) -> None:
        message = ingest_pb2.DeleteDocumentRequest(doc_id=doc_id)
        try:
            await invoke(request, self.api.ingest.DeleteDocument, message)
        except CallFailed as failure:
            refused = invalid_at(failure, field, "body")
            if refused is None:
                raise
            raise refused from None

    async def clear(self, request: Request) -> Response:
        if request.query_params.get("confirm") != CLEAR_CONFIRMATION:
            raise Refused(
                400,
                "Clearing deletes every document of the index (each deletion is published "
                "through the configured sink: a watched folder loses its files). To do it, "
                f"repeat the request as DELETE /documents?confirm={CLEAR_CONFIRMATION}",
            )
        documents = await self._documents(request, pb.DOCUMENT_STATUS_UNSPECIFIED)
        for document in documents:
            await self._delete(request, document.doc_id, ["doc_ids"])
        return JSONResponse(
            {
                "status": "success",
                "message": f"Deletion of all {len(documents)} documents has been published; "
                "the index empties as the indexer applies them.",
            }
        )

    # -- reading -------------------------------------------------------------------

    async def _documents(self, request: Request, status: pb.DocumentStatus) -> list[pb.Document]:
        """Every document with `status` (UNSPECIFIED: all), a ListDocuments page at a time."""
        documents: list[pb.Document] = []
        token = ""
        while True:
            message = pb.ListDocumentsRequest(
                status=status, page_size=MAX_PAGE_SIZE, page_token=token
            )
            reply = await invoke(request, self.api.knowledge_graph.ListDocuments, message)
            documents.extend(reply.documents)
            token = reply.next_page_token
            if not token:
                return documents

    async def _counts(self, request: Request) -> dict[str, int]:
        """Documents by LightRAG status (0 for those kgstream has not), and "all"."""
        counts = dict.fromkeys(LIGHTRAG_STATUSES, 0)
        for value, name in STATUS_NAMES.items():
            message = pb.ListDocumentsRequest(status=value, page_size=1)
            counts[name] = (
                await invoke(request, self.api.knowledge_graph.ListDocuments, message)
            ).total
        counts["all"] = sum(counts.values())
        return counts

    async def status_counts(self, request: Request) -> Response:
        return JSONResponse({"status_counts": await self._counts(request)})

    async def list_documents(self, request: Request) -> Response:
        message = pb.ListDocumentsRequest(page_size=MAX_LISTED_DOCUMENTS)
        reply = await invoke(request, self.api.knowledge_graph.ListDocuments, message)
        statuses: dict[str, list[dict[str, Any]]] = {}
        for document in reply.documents:
            statuses.setdefault(STATUS_NAMES[document.status], []).append(doc_status(document))
        return JSONResponse({"statuses": statuses})

    async def paginated(self, request: Request) -> Response:
        fields = Fields(await json_body(request))
        wanted = fields.strings("status_filters")
        if wanted is None:
            single = fields.text("status_filter")
            wanted = [single] if single else []
        for index, status in enumerate(wanted):
            if status.lower() not in LIGHTRAG_STATUSES:
                fields.fail(
                    ["status_filters", index],
                    f"must be one of {', '.join(LIGHTRAG_STATUSES)}; got {status!r}",
                    status,
                )
        page = fields.integer("page", 1, 2**31 - 1, 1) or 1
        page_size = fields.integer("page_size", 10, 200, 50) or 50
        sort_field = fields.choice("sort_field", tuple(SORT_KEYS), "updated_at")
        descending = fields.choice("sort_direction", ("asc", "desc"), "desc") == "desc"
        fields.check()
        names = {status.lower() for status in wanted} or set(STATUS_VALUES)
        documents: list[pb.Document] = []
        for name in sorted(names & set(STATUS_VALUES)):
            documents.extend(await self._documents(request, STATUS_VALUES[name]))
        documents.sort(key=SORT_KEYS[sort_field], reverse=descending)
        total = len(documents)
        pages = (total + page_size - 1) // page_size
        shown = documents[(page - 1) * page_size : page * page_size]
        return JSONResponse(
            {
                "documents": [doc_status(document) for document in shown],
                "pagination": {
                    "page": page,
                    "page_size": page_size,
                    "total_count": total,
                    "total_pages": pages,
                    "has_next": page < pages,
                    "has_prev": page > 1,
                },
                "status_counts": await self._counts(request),
            }
        )

    async def track_status(self, request: Request) -> Response:
        track_id = request.path_params["track_id"].strip()
        if not track_id:
            raise Refused(400, "Track ID cannot be empty")
        tracked: list[TrackedDocument] = []
        if len(track_id) <= MAX_TRACK_ID_CHARS:
            kept = await guarded(request, lambda: self.api.control.tracked_documents(track_id))
            tracked = kept or []
        documents = []
        for item in tracked:
            try:
                message = pb.GetDocumentRequest(doc_id=item.doc_id)
                found = (
                    await invoke(request, self.api.knowledge_graph.GetDocument, message)
                ).document
            except CallFailed as failure:
                if failure.code != grpc.StatusCode.NOT_FOUND:
                    raise
                found = None
            documents.append(tracked_status(item, found))
        summary: dict[str, int] = {}
        for document in documents:
            summary[document["status"]] = summary.get(document["status"], 0) + 1
        return JSONResponse(
            {
                "track_id": track_id,
                "documents": documents,
                "total_count": len(documents),
                "status_summary": summary,
            }
        )

    async def pipeline_status(self, request: Request) -> Response:
        counts = await self._counts(request)
        hold = await guarded(request, self.api.control.source_hold)
        waiting = counts["pending"] + counts["processing"]
        if hold:
            latest = f"The indexer holds: {hold}"
        elif waiting:
            latest = f"{counts['pending']} documents pending, {counts['processing']} processing"
        else:
            latest = "Idle: every document is indexed"
        return JSONResponse(
            {
                "busy": waiting > 0,
                "job_name": "kgstream indexer",
                "job_start": None,
                "docs": waiting,
                "batchs": 0,
                "cur_batch": 0,
                "latest_message": latest,
                "history_messages": [],
                "update_status": {},
                "recovery_required": False,
                "recovery_kind": None,
                "recovery_message": None,
                "autoscanned": False,
                "request_pending": False,
                "documents": counts,
            }
        )

    async def reprocess_failed(self, request: Request) -> Response:
        retried, permanent = await guarded(request, self.api.retry_failed_documents)
        message = f"Reprocessing of {len(retried)} failed documents has been requested."
        if permanent:
            message += (
                f" {len(permanent)} failed documents need new content, not a retry (binary, "
                "not UTF-8, empty or too large: see their error_msg)."
            )
        return JSONResponse({"status": "reprocessing_started", "message": message, "track_id": ""})
