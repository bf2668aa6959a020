"""The MCP tools: one row each of what an agent sees (name, description, the JSON schema of
its arguments with their limits) and of which servicer method it calls with what.

Each tool builds the gRPC request message from its checked arguments and calls the
servicer (`gateway/mcp/servicers.py`), so every limit and message is the servicers' own;
the schemas state the same limits, from the same constants and settings.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import mcp.types as types

from dataflow.core.documents import MAX_DOC_ID_BYTES
from gateway.convert import (
    DEFAULT_SEARCH_LIMIT,
    MAX_SEARCH_LIMIT,
    entity_search_request,
    mode_to_proto,
)
from gateway.engine import DEFAULT_LIMITS, MAX_TOP_K
from gateway.http.calls import CallFailed
from gateway.http.messages import to_json
from gateway.knowledge_graph import (
    DEFAULT_PAGE_SIZE,
    DEFAULT_SUBGRAPH_DEPTH,
    DEFAULT_SUBGRAPH_NODES,
    MAX_PAGE_SIZE,
    MAX_SUBGRAPH_DEPTH,
    MAX_SUBGRAPH_NODES,
)
from gateway.mcp.arguments import INT64, BadArgument, Param, input_schema
from gateway.mcp.render import ToolOutput, answer_output, as_json, context_output
from gateway.mcp.servicers import Servicers
from gateway.types import DEFAULT_MODE, MODE_NAMES, QueryParams, RequestLimits, parse_mode, shown
from kgstream_protos.v1 import ingest_pb2
from kgstream_protos.v1 import query_pb2 as pb

Run = Callable[[Servicers, dict[str, Any]], Awaitable[ToolOutput]]

_DEFAULTS = QueryParams(question="")
DEFAULT_WAIT_MS = 30_000
MAX_WAIT_MS = 3_600_000  # as the HTTP API's timeout_ms; the server's own maximum cuts first
STATUSES = ("pending", "processing", "processed", "failed")
FAILED_LISTED = 20  # failed documents `status` lists with their reasons
# What `wait_for_version` asks to wait: the smallest retrieval (one chunk, no LLM call;
# the same text every time, so its embedding is cached after the first).
_VERSION_PROBE = "index version"


@dataclass(frozen=True)
class ToolLimits:
    """The limits the schemas state: the engine's (`requests`) and the largest message."""

    requests: RequestLimits = DEFAULT_LIMITS
    max_message_bytes: int = 16 * 1024 * 1024


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    params: tuple[Param, ...]
    run: Run
    read_only: bool = True
    destructive: bool = False

    def listed(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            title=self.title,
            description=self.description,
            input_schema=input_schema(self.params),
            annotations=types.ToolAnnotations(
                title=self.title,
                read_only_hint=self.read_only,
                destructive_hint=self.destructive,
                idempotent_hint=True,
                open_world_hint=False,
            ),
        )


# -- arguments shared by several tools -----------------------------------------------------


def _question_params(limits: ToolLimits) -> tuple[Param, ...]:
    most = limits.requests.max_question_chars
    return (
        Param(
            "question",
            "string",
            f"The question, in natural language (at most {most} characters).",
            required=True,
            max_length=most,
        ),
        Param(
            "mode",
            "string",
            "How to retrieve (LightRAG's modes): local (entities matching the question's "
            "details, their relations and chunks), global (relations matching its themes), "
            "hybrid (both), naive (chunk vectors only), mix (hybrid plus chunk vectors).",
            enum=MODE_NAMES,
            default=DEFAULT_MODE.value,
        ),
        Param(
            "top_k",
            "integer",
            "Entities (local) and relations (global) to retrieve.",
            minimum=1,
            maximum=MAX_TOP_K,
            default=_DEFAULTS.top_k,
        ),
        Param(
            "chunk_top_k",
            "integer",
            "Text chunks to keep.",
            minimum=1,
            maximum=MAX_TOP_K,
            default=_DEFAULTS.chunk_top_k,
        ),
        Param(
            "max_total_tokens",
            "integer",
            "Token budget of the whole context.",
            minimum=1,
            default=_DEFAULTS.max_total_tokens,
        ),
        Param(
            "min_index_version",
            "integer",
            "Read-your-writes: first wait until the index reaches this version (as "
            "wait_for_version does); 0: do not wait.",
            minimum=0,
            default=0,
            wire=INT64,
        ),
        Param("doc_ids", "string_list", "Only these documents (by doc id); none: all."),
        Param(
            "file_path_prefix",
            "string",
            "Only documents whose file path starts with this directory or file.",
        ),
    )


def _doc_id_param(what: str) -> Param:
    return Param(
        "doc_id",
        "string",
        f"{what} (its path in the watched folder, e.g. notes/today.md, or its Kafka key): "
        f"non-empty, no NUL character, at most {MAX_DOC_ID_BYTES} bytes in UTF-8.",
        required=True,
        max_length=MAX_DOC_ID_BYTES,
    )


def _query_request(args: dict[str, Any]) -> pb.QueryRequest:
    request = pb.QueryRequest(
        question=args["question"], mode=mode_to_proto(parse_mode(args.get("mode")))
    )
    for name in (
        "top_k",
        "chunk_top_k",
        "max_total_tokens",
        "min_index_version",
        "response_type",
        "user_prompt",
    ):
        if name in args:
            setattr(request, name, args[name])
    request.document_filter.doc_ids.extend(args.get("doc_ids", ()))
    if "file_path_prefix" in args:
        request.document_filter.file_path_prefix = args["file_path_prefix"]
    return request


# -- the tools ------------------------------------------------------------------------------


async def _query(servicers: Servicers, args: dict[str, Any]) -> ToolOutput:
    reply = await servicers.call("Query", _query_request(args))
    return answer_output(reply)


async def _retrieve(servicers: Servicers, args: dict[str, Any]) -> ToolOutput:
    reply = await servicers.call("Retrieve", _query_request(args))
    return context_output(reply)


async def _search_entities(servicers: Servicers, args: dict[str, Any]) -> ToolOutput:
    limit = args.get("limit", DEFAULT_SEARCH_LIMIT)
    reply = await servicers.call("Retrieve", entity_search_request(args["text"], limit, "text"))
    return as_json(
        {
            "entities": [to_json(entity) for entity in reply.entities[:limit]],
            "index_version": reply.index_version,
        }
    )


async def _get_entity(servicers: Servicers, args: dict[str, Any]) -> ToolOutput:
    reply = await servicers.call("GetEntity", pb.GetEntityRequest(name=args["name"]))
    return as_json(to_json(reply))


async def _get_relation(servicers: Servicers, args: dict[str, Any]) -> ToolOutput:
    request = pb.GetRelationRequest(source=args["source"], target=args["target"])
    return as_json(to_json(await servicers.call("GetRelation", request)))


async def _get_subgraph(servicers: Servicers, args: dict[str, Any]) -> ToolOutput:
    request = pb.GetSubgraphRequest(seed=args["seed"])
    for name in ("depth", "max_nodes"):
        if name in args:
            setattr(request, name, args[name])
    return as_json(to_json(await servicers.call("GetSubgraph", request)))


def _status_value(name: str | None) -> pb.DocumentStatus:
    if name is None:
        return pb.DOCUMENT_STATUS_UNSPECIFIED
    if name not in STATUSES:
        raise BadArgument(
            "status",
            f"must be one of {', '.join(STATUSES)} (or leave it unset for every status); "
            f"got {shown(name)}",
        )
    value: pb.DocumentStatus = pb.DocumentStatus.Value(f"DOCUMENT_STATUS_{name.upper()}")
    return value


async def _list_documents(servicers: Servicers, args: dict[str, Any]) -> ToolOutput:
    request = pb.ListDocumentsRequest(
        status=_status_value(args.get("status")), page_token=args.get("page_token", "")
    )
    if "page_size" in args:
        request.page_size = args["page_size"]
    return as_json(to_json(await servicers.call("ListDocuments", request)))


async def _get_document(servicers: Servicers, args: dict[str, Any]) -> ToolOutput:
    request = pb.GetDocumentRequest(doc_id=args["doc_id"])
    return as_json(to_json(await servicers.call("GetDocument", request)))


def _content_of(args: dict[str, Any]) -> bytes:
    text, encoded = args.get("content"), args.get("content_base64")
    if text is not None and encoded is not None:
        raise BadArgument("content_base64", "give content or content_base64, not both")
    if text is not None:
        return str(text).encode("utf-8", "surrogatepass")
    if encoded is None:
        raise BadArgument(
            "content", "is required: the document's text (or its bytes as content_base64)"
        )
    try:
        return base64.b64decode(str(encoded), validate=True)
    except binascii.Error as error:
        raise BadArgument("content_base64", f"is not base64: {error}") from None


async def _upsert_document(servicers: Servicers, args: dict[str, Any]) -> ToolOutput:
    request = ingest_pb2.UpsertDocumentRequest(
        doc_id=args["doc_id"], content=_content_of(args), file_path=args.get("file_path", "")
    )
    return as_json(to_json(await servicers.call("UpsertDocument", request)))


async def _delete_document(servicers: Servicers, args: dict[str, Any]) -> ToolOutput:
    request = ingest_pb2.DeleteDocumentRequest(doc_id=args["doc_id"])
    return as_json(to_json(await servicers.call("DeleteDocument", request)))


async def _wait_for_version(servicers: Servicers, args: dict[str, Any]) -> ToolOutput:
    """A Retrieve of one chunk with `min_index_version`: the servicers' one wait for a
    version, so it is bounded exactly as gRPC bounds it (the call's deadline, the server's
    version_wait_seconds, max_version_waits calls waiting at once)."""
    probe = pb.QueryRequest(
        question=_VERSION_PROBE,
        mode=pb.QUERY_MODE_NAIVE,
        top_k=1,
        chunk_top_k=1,
        include_references=False,
        min_index_version=args["min_index_version"],
    )
    timeout_ms = args.get("timeout_ms", DEFAULT_WAIT_MS)
    if not 1 <= timeout_ms <= MAX_WAIT_MS:
        raise BadArgument("timeout_ms", f"must be between 1 and {MAX_WAIT_MS}; got {timeout_ms}")
    reached = await servicers.call("Retrieve", probe, timeout_ms / 1000)
    data: dict[str, Any] = {"index_version": reached.index_version}
    if "doc_id" in args:
        try:
            found = await servicers.call(
                "GetDocument", pb.GetDocumentRequest(doc_id=args["doc_id"])
            )
            data["document"] = to_json(found.document)
        except CallFailed as failure:
            if failure.code != grpc.StatusCode.NOT_FOUND:
                raise
            data["document"] = None
    return as_json(data)


async def _status(servicers: Servicers, args: dict[str, Any]) -> ToolOutput:
    counts: dict[str, int] = {}
    versions: list[int] = []
    failed: list[dict[str, str]] = []
    for name in STATUSES:
        listed = FAILED_LISTED if name == "failed" else 1
        request = pb.ListDocumentsRequest(status=_status_value(name), page_size=listed)
        reply = await servicers.call("ListDocuments", request)
        counts[name] = reply.total
        versions.append(reply.index_version)
        if name == "failed":
            failed = [{"doc_id": d.doc_id, "reason": d.reason} for d in reply.documents]
    # Each count is at least as fresh as the version read with it: the smallest holds all.
    return as_json({"index_version": min(versions), "documents": counts, "failed": failed})


DEFAULT_TOOL_LIMITS = ToolLimits()


def tool_table(limits: ToolLimits = DEFAULT_TOOL_LIMITS) -> dict[str, Tool]:
    """The tools by name, their schemas stating `limits`."""
    question = _question_params(limits)
    upload_mib = limits.max_message_bytes / (1024 * 1024)
    tools = [
        Tool(
            "query",
            "Ask the knowledge graph",
            "Answer a question from the indexed documents (knowledge graph and text chunks, "
            "LightRAG style). Returns the answer, which cites its sources as [n], with the "
            "numbered references (file paths) and the index version it reflects; the "
            "structured result also holds the retrieved context.",
            (
                *question,
                Param(
                    "response_type",
                    "string",
                    "The answer's form, e.g. Bullet Points.",
                    default=_DEFAULTS.response_type,
                    max_length=limits.requests.max_user_prompt_chars,
                ),
                Param(
                    "user_prompt",
                    "string",
                    "Extra instructions for the answer.",
                    max_length=limits.requests.max_user_prompt_chars,
                ),
            ),
            _query,
        ),
        Tool(
            "retrieve",
            "Retrieve context",
            "Retrieve the context for a question without answering it: the matching "
            "entities, relations and text chunks, each chunk tagged with its reference "
            "number [n], the reference list and the index version. No LLM answer is made.",
            question,
            _retrieve,
        ),
        Tool(
            "search_entities",
            "Search entities",
            "Find entities (people, organisations, places, concepts...) by name: exact "
            "names and aliases first, then by similarity.",
            (
                Param(
                    "text",
                    "string",
                    "A name or a few words to search for.",
                    required=True,
                    max_length=limits.requests.max_keyword_chars,
                ),
                Param(
                    "limit",
                    "integer",
                    "The most entities to return.",
                    minimum=1,
                    maximum=MAX_SEARCH_LIMIT,
                    default=DEFAULT_SEARCH_LIMIT,
                ),
            ),
            _search_entities,
        ),
        Tool(
            "get_entity",
            "Get an entity",
            "One entity's record: name, type, description, the chunks, files and documents "
            "it comes from, and its degree (number of relations).",
            (
                Param(
                    "name",
                    "string",
                    "The entity's name in any spelling that normalises to its key (case, "
                    "spacing and quotes do not matter), or its key.",
                    required=True,
                ),
            ),
            _get_entity,
        ),
        Tool(
            "get_relation",
            "Get a relation",
            "The relation between two entities (undirected): its description, keywords, "
            "weight and sources.",
            (
                Param("source", "string", "One entity's name or key.", required=True),
                Param("target", "string", "The other entity's name or key.", required=True),
            ),
            _get_relation,
        ),
        Tool(
            "get_subgraph",
            "Get a subgraph",
            "An entity's neighbourhood, breadth first from the seed, better-connected "
            "neighbours first: the entities and every relation between them.",
            (
                Param("seed", "string", "The entity to start from (name or key).", required=True),
                Param(
                    "depth",
                    "integer",
                    "Hops from the seed.",
                    minimum=0,
                    maximum=MAX_SUBGRAPH_DEPTH,
                    default=DEFAULT_SUBGRAPH_DEPTH,
                ),
                Param(
                    "max_nodes",
                    "integer",
                    "The most entities to return (truncated says whether it cut the walk).",
                    minimum=1,
                    maximum=MAX_SUBGRAPH_NODES,
                    default=DEFAULT_SUBGRAPH_NODES,
                ),
            ),
            _get_subgraph,
        ),
        Tool(
            "list_documents",
            "List documents",
            "The indexed documents with their status (PENDING, PROCESSING, PROCESSED, "
            "FAILED with the reason), a page at a time.",
            (
                Param(
                    "status",
                    "string",
                    "Only documents with this status; unset: every status.",
                    enum=STATUSES,
                ),
                Param(
                    "page_size",
                    "integer",
                    "Documents per page.",
                    minimum=1,
                    maximum=MAX_PAGE_SIZE,
                    default=DEFAULT_PAGE_SIZE,
                ),
                Param(
                    "page_token",
                    "string",
                    "next_page_token of the previous page; unset for the first page.",
                ),
            ),
            _list_documents,
        ),
        Tool(
            "get_document",
            "Get a document's status",
            "One document's status (PROCESSED, or FAILED with the reason), content_hash, "
            "length, chunk ids and a preview of its text.",
            (_doc_id_param("The document"),),
            _get_document,
        ),
        Tool(
            "upsert_document",
            "Add or replace a document",
            "Add a document, or replace its whole content, through the index's event log "
            "(its Kafka topic, or a file written into its watched folder). Indexing is "
            "asynchronous: the reply's min_index_version is a lower bound of the version "
            "that will hold the change; pass it to wait_for_version (or to query as "
            "min_index_version), and get_document shows the document PROCESSED with the "
            "reply's content_hash once indexed. Content that is not text is still "
            "accepted, and the document becomes FAILED with the reason. At most "
            f"{upload_mib:g} MiB per call.",
            (
                _doc_id_param("The document's id"),
                Param("content", "string", "The document's full text."),
                Param(
                    "content_base64",
                    "string",
                    "Instead of content: the document's bytes in base64 (a file that may "
                    "not be UTF-8 text).",
                ),
                Param("file_path", "string", "The path references cite; default: the doc id."),
            ),
            _upsert_document,
            read_only=False,
        ),
        Tool(
            "delete_document",
            "Delete a document",
            "Delete a document and everything only it contributed (entities, relations, "
            "chunks, vectors), through the index's event log as upsert_document does; the "
            "reply's min_index_version is for wait_for_version.",
            (_doc_id_param("The document"),),
            _delete_document,
            read_only=False,
            destructive=True,
        ),
        Tool(
            "wait_for_version",
            "Wait for an index version",
            "Read-your-writes: wait until the index reaches min_index_version (from "
            "upsert_document or delete_document), then return the version reached and, "
            "given doc_id, that document's status (null once deleted). Fails with a "
            "deadline error when the version does not come within timeout_ms; the server "
            "stops any wait at its own maximum (version_wait_seconds, 30 s by default) and "
            "lets only a few calls wait at once.",
            (
                Param(
                    "min_index_version",
                    "integer",
                    "The version to wait for; 0 returns the current one.",
                    required=True,
                    minimum=0,
                    wire=INT64,
                ),
                Param(
                    "timeout_ms",
                    "integer",
                    "How long to wait, in milliseconds.",
                    minimum=1,
                    maximum=MAX_WAIT_MS,
                    default=DEFAULT_WAIT_MS,
                ),
                Param(
                    "doc_id",
                    "string",
                    "A document whose status to return once the version is reached.",
                ),
            ),
            _wait_for_version,
        ),
        Tool(
            "status",
            "Index status",
            "The index version, the number of documents by status and the failed "
            f"documents with their reasons (the first {FAILED_LISTED}).",
            (),
            _status,
        ),
    ]
    return {tool.name: tool for tool in tools}
