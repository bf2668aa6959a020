"""What an MCP tool returns: the reply as JSON (`structuredContent`, and the same JSON as
text for clients that read only text); or, for the answers and contexts a model reads, a
text made for reading, with the part a program acts on as JSON beside it (the references
and the index version).

The context goes to the model once, as text: the whole retrieval as JSON beside it was
three times the text's size (the records' scores, ids and sources), and parsing and
validating it, on both sides of the call, cost more than the call's own work. The full
reply as JSON is gRPC's `Retrieve` and the HTTP API's POST /api/v1/retrieve.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gateway.http.conversation import references_tail
from gateway.http.messages import to_json
from kgstream_protos.v1 import query_pb2 as pb


@dataclass(frozen=True)
class ToolOutput:
    text: str
    data: dict[str, Any]


def as_json(data: dict[str, Any]) -> ToolOutput:
    return ToolOutput(json.dumps(data, ensure_ascii=False), data)


def _references(result: pb.RetrievalResult) -> list[dict[str, Any]]:
    return [to_json(reference) for reference in result.references]


def answer_output(reply: pb.QueryResponse) -> ToolOutput:
    """The answer, ending with its numbered references, and the index version it reflects."""
    text = reply.answer + references_tail(reply.answer, reply.context.references)
    data = {
        "answer": reply.answer,
        "references": _references(reply.context),
        "index_version": reply.index_version,
        "llm_configured": reply.llm_configured,
        "cached": reply.cached,
    }
    return ToolOutput(f"{text}\n\n(index version {reply.index_version})", data)


def context_output(result: pb.RetrievalResult) -> ToolOutput:
    """The retrieved context: entities, relations, then chunks tagged with their reference
    numbers, then the reference list."""
    reference_of = {
        chunk_id: reference.reference_id
        for reference in result.references
        for chunk_id in reference.chunk_ids
    }
    lines = [f"Context at index version {result.index_version}."]
    if result.entities:
        lines += ["", "Entities:"]
        for item in result.entities:
            entity = item.entity
            lines.append(f"- {entity.name} ({entity.type}): {entity.description}")
    if result.relations:
        lines += ["", "Relations:"]
        for found in result.relations:
            relation = found.relation
            keywords = f" [{', '.join(relation.keywords)}]" if relation.keywords else ""
            lines.append(
                f"- {relation.source_name or relation.source} -- "
                f"{relation.target_name or relation.target}{keywords}: {relation.description}"
            )
    if result.chunks:
        lines += ["", "Chunks:"]
        for chunk in result.chunks:
            marker = reference_of.get(chunk.chunk_id)
            tag = f"[{marker}] " if marker is not None else ""
            lines.append(f"{tag}{chunk.file_path}: {chunk.text}")
    if result.references:
        lines += ["", "References:"]
        lines += [f"[{r.reference_id}] {r.file_path}" for r in result.references]
    if not (result.entities or result.relations or result.chunks):
        lines.append("Nothing in the index matches.")
    data = {
        "mode": pb.QueryMode.Name(result.mode),
        "keywords": to_json(result.keywords),
        "references": _references(result),
        "index_version": result.index_version,
    }
    return ToolOutput("\n".join(lines), data)


def document_text(document: pb.Document, chunk_texts: dict[str, str] | None) -> str:
    """A document's indexed text, chunk by chunk in order (consecutive chunks overlap by up
    to the chunking's overlap tokens), or why there is none."""
    status = pb.DocumentStatus.Name(document.status).removeprefix("DOCUMENT_STATUS_")
    if chunk_texts is None:
        return (
            f"{document.preview}\n\n(the preview of {document.doc_id!r}, {status}: the chunk "
            "texts are read over the gateway's HTTP /mcp endpoint or `kgstream mcp --data`, "
            "not over gRPC)"
        )
    if not document.chunk_ids:
        reason = f": {document.reason}" if document.reason else ""
        return f"(no text is indexed for {document.doc_id!r}: it is {status}{reason})"
    count = len(document.chunk_ids)
    parts = []
    for number, chunk_id in enumerate(document.chunk_ids, 1):
        if count > 1:
            parts.append(f"--- chunk {number} of {count} ---")
        parts.append(chunk_texts.get(chunk_id, f"(chunk {chunk_id} is no longer stored)"))
    return "\n\n".join(parts)
