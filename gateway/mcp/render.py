"""What an MCP tool returns: the reply as JSON (`structuredContent`, and the same JSON as
text for clients that read only text), or, for the answers and contexts an agent reads
as prose, a text made for reading with the JSON beside it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gateway.http.chat import with_references
from gateway.http.messages import to_json
from protos.kgstream.v1 import query_pb2 as pb

CONTEXT_CHUNK_CHARS = 2000  # of each chunk's text in a rendered context (the JSON has all)


@dataclass(frozen=True)
class ToolOutput:
    text: str
    data: dict[str, Any]


def as_json(data: dict[str, Any]) -> ToolOutput:
    return ToolOutput(json.dumps(data, ensure_ascii=False, indent=1), data)


def answer_output(reply: pb.QueryResponse) -> ToolOutput:
    """The answer, ending with its numbered references, and the index version it reflects."""
    text = with_references(reply.answer, reply.context.references)
    return ToolOutput(f"{text}\n\n(index version {reply.index_version})", to_json(reply))


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
            text = chunk.text
            if len(text) > CONTEXT_CHUNK_CHARS:
                text = text[:CONTEXT_CHUNK_CHARS] + " ..."
            lines.append(f"{tag}{chunk.file_path}: {text}")
    if result.references:
        lines += ["", "References:"]
        lines += [f"[{r.reference_id}] {r.file_path}" for r in result.references]
    if not (result.entities or result.relations or result.chunks):
        lines.append("Nothing in the index matches.")
    return ToolOutput("\n".join(lines), to_json(result))


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
