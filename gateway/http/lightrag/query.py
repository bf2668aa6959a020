"""LightRAG's query routes: `POST /query`, `/query/stream` (NDJSON) and `/query/data`, over
the KnowledgeGraph servicer's Query, QueryStream and Retrieve.

LightRAG's `QueryRequest` becomes kgstream's (`parse_query`): the names differ (`query` is
the question, `hl_keywords`/`ll_keywords` the keyword levels, `conversation_history` the
history), the meaning does not. `only_need_context` and `only_need_prompt` answer with the
context or the whole answer prompt the engine would send, rendered by the engine's own
functions from a Retrieve; `mode: "bypass"` (the LLM alone) is refused, since kgstream
answers from its index only. What has no meaning here (`enable_rerank`,
`disable_user_prompt_prefix`) is accepted and ignored.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from gateway import convert
from gateway.context import answer_messages, source_of
from gateway.engine import QueryEngine
from gateway.http.app import call_of, invoke, reach_version, started
from gateway.http.calls import CallFailed
from gateway.http.lightrag.wire import FieldNames, Fields, Invalid, invalid_field, json_body
from gateway.knowledge_graph import KnowledgeGraphService
from gateway.types import InvalidQuery, parse_mode
from kgstream_protos.v1 import query_pb2 as pb

MAX_QUERY_TOP_K = 1000  # LightRAG's bounds of top_k, chunk_top_k and the token budgets
MAX_QUERY_TOKEN_BUDGET = 1_000_000
MAX_RESPONSE_TYPE_CHARS = 256
NO_CONTEXT_RESPONSE = "No relevant context found for the query."
SEPARATOR = "<SEP>"  # how LightRAG joins a record's chunk ids and file paths
NDJSON_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

# kgstream's QueryRequest fields as LightRAG's request names them (for 422s).
QUERY_FIELDS: FieldNames = {
    "question": "query",
    "history": "conversation_history",
    "high_level_keywords": "hl_keywords",
    "low_level_keywords": "ll_keywords",
}


@dataclass(frozen=True)
class QueryOptions:
    """What a LightRAG query asks of the response rather than of retrieval."""

    only_need_context: bool = False
    only_need_prompt: bool = False
    include_references: bool = True
    include_chunk_content: bool = False
    include_progress: bool = False
    stream: bool | None = None


def parse_query(body: dict[str, Any]) -> tuple[pb.QueryRequest, QueryOptions]:
    """kgstream's QueryRequest and the response options of LightRAG's QueryRequest body;
    `Invalid` names every field of the wrong type or out of LightRAG's bounds (the servicer
    then checks the rest, as for any request)."""
    fields = Fields(body)
    message = pb.QueryRequest(question=fields.text("query", required=True) or "")
    message.mode = convert.mode_to_proto(_mode(fields))
    for name in ("top_k", "chunk_top_k"):
        value = fields.integer(name, 1, MAX_QUERY_TOP_K)
        if value is not None:
            setattr(message, name, value)
    for name in ("max_entity_tokens", "max_relation_tokens", "max_total_tokens"):
        value = fields.integer(name, 1, MAX_QUERY_TOKEN_BUDGET)
        if value is not None:
            setattr(message, name, value)
    message.response_type = (
        fields.text("response_type", non_empty=True, max_length=MAX_RESPONSE_TYPE_CHARS) or ""
    )
    message.user_prompt = fields.text("user_prompt") or ""
    message.high_level_keywords.extend(fields.strings("hl_keywords") or ())
    message.low_level_keywords.extend(fields.strings("ll_keywords") or ())
    for index, turn in enumerate(fields.objects("conversation_history") or ()):
        role, content = turn.get("role"), turn.get("content")
        for key, value in (("role", role), ("content", content)):
            if not isinstance(value, str):
                fields.fail(["conversation_history", index, key], "must be a string", value)
        if isinstance(role, str) and isinstance(content, str):
            message.history.add(role=role, content=content)
    # kgstream's own: read-your-writes (the index version an insert's track reaches)
    message.min_index_version = fields.integer("min_index_version", 0, 2**62) or 0
    options = QueryOptions(
        only_need_context=bool(fields.boolean("only_need_context")),
        only_need_prompt=bool(fields.boolean("only_need_prompt")),
        include_references=bool(fields.boolean("include_references", True)),
        include_chunk_content=bool(fields.boolean("include_chunk_content")),
        include_progress=bool(fields.boolean("include_progress")),
        stream=fields.boolean("stream"),
    )
    for ignored in ("enable_rerank", "disable_user_prompt_prefix"):
        fields.boolean(ignored)  # accepted and ignored, but still a boolean
    fields.check()
    message.include_references = options.include_references
    return message, options


def _mode(fields: Fields) -> Any:
    value = fields.values.get("mode")
    if value == "bypass":
        fields.fail(
            ["mode"],
            "'bypass' (the LLM alone, without the index) is not offered: kgstream answers "
            "from its index; use local, global, hybrid, naive or mix",
            value,
        )
        return parse_mode(None)
    try:
        return parse_mode(value)
    except InvalidQuery as error:
        fields.fail(["mode"], error.detail, value)
        return parse_mode(None)


def references(result: pb.RetrievalResult, with_content: bool) -> list[dict[str, Any]]:
    """LightRAG's reference list; `with_content`: each with its chunks' texts."""
    texts = {chunk.chunk_id: chunk.text for chunk in result.chunks}
    listed = []
    for reference in result.references:
        item: dict[str, Any] = {
            "reference_id": str(reference.reference_id),
            "file_path": reference.file_path,
        }
        content = [texts[i] for i in reference.chunk_ids if i in texts]
        if with_content and content:
            item["content"] = content
        listed.append(item)
    return listed


def debug_text(message: pb.QueryRequest, result: pb.RetrievalResult, prompt: bool) -> str:
    """What `only_need_context` (the context block) or `only_need_prompt` (the answer's
    system prompt, then the question, as LightRAG joins them) return: rendered by the
    engine's own functions, so it is what the LLM would see."""
    context = QueryEngine.context_text(convert.retrieval_from_proto(result))
    if not prompt:
        return context
    params = convert.query_params_from(message)
    system = answer_messages(params, context)[0].content
    return "\n\n".join([system, "---User Query---", params.question])


def ndjson(item: dict[str, Any]) -> str:
    return json.dumps(item, ensure_ascii=False) + "\n"


class QueryRoutes:
    def __init__(self, knowledge_graph: KnowledgeGraphService) -> None:
        self.knowledge_graph = knowledge_graph

    async def _complete(
        self, request: Request, message: pb.QueryRequest, options: QueryOptions
    ) -> tuple[str, pb.RetrievalResult, bool]:
        """The whole response text, its context, and whether the LLM wrote the text."""
        debug = options.only_need_context or options.only_need_prompt
        if debug:
            result = await invoke(request, self.knowledge_graph.Retrieve, message)
            text, generated = debug_text(message, result, options.only_need_prompt), False
        else:
            reply = await invoke(request, self.knowledge_graph.Query, message)
            result, text = reply.context, reply.answer
            # no context: the engine answers without asking the LLM
            generated = reply.llm_configured and bool(
                result.entities or result.relations or result.chunks
            )
        if not text:
            return NO_CONTEXT_RESPONSE, result, False
        return text, result, generated

    async def query(self, request: Request) -> Response:
        began = time.perf_counter()
        message, options = parse_query(await json_body(request))
        text, result, generated = await self._complete(request, message, options)
        listed = references(result, options.include_chunk_content)
        return JSONResponse(
            {
                "response": text,
                "references": listed if options.include_references else None,
                "response_time": round(time.perf_counter() - began, 3),
                "llm_generated": generated,
                "index_version": result.index_version,
            }
        )

    async def query_stream(self, request: Request) -> Response:
        began = time.perf_counter()
        message, options = parse_query(await json_body(request))
        if options.stream is False or options.only_need_context or options.only_need_prompt:
            text, result, generated = await self._complete(request, message, options)
            line: dict[str, Any] = {"response": text, "llm_generated": generated}
            if options.include_references:
                line["references"] = references(result, options.include_chunk_content)
            lines = [ndjson(line)]
            if options.include_progress:
                lines.append(ndjson({"response_time": round(time.perf_counter() - began, 3)}))
            return Response(
                "".join(lines), media_type="application/x-ndjson", headers=NDJSON_HEADERS
            )
        call = call_of(request)
        await reach_version(request, message, call)
        events = await started(self.knowledge_graph.QueryStream(message, call), call)

        def stream() -> Iterator[str]:
            try:
                for event in events:
                    kind = event.WhichOneof("event")
                    if kind == "context" and options.include_references:
                        listed = references(event.context, options.include_chunk_content)
                        yield ndjson({"references": listed})
                    elif kind == "delta" and event.delta.text:
                        yield ndjson({"response": event.delta.text})
            except CallFailed as failure:
                yield ndjson({"error": failure.message})
            if options.include_progress:
                yield ndjson({"response_time": round(time.perf_counter() - began, 3)})

        return StreamingResponse(
            stream(),
            media_type="application/x-ndjson",
            headers=NDJSON_HEADERS,
            background=BackgroundTask(call.finish),
        )

    async def query_data(self, request: Request) -> Response:
        try:
            message, _ = parse_query(await json_body(request))
            message.include_references = True  # /query/data always lists them
            result = await invoke(request, self.knowledge_graph.Retrieve, message)
        except Invalid as invalid:
            return _data_failure(invalid)
        except CallFailed as failure:
            refused = invalid_field(failure, QUERY_FIELDS, "body")
            if refused is None:
                raise
            return _data_failure(refused)
        return JSONResponse(query_data(result))


def _data_failure(invalid: Invalid) -> Response:
    """/query/data's own shape of a bad request (LightRAG's: 400, not FastAPI's 422)."""
    return JSONResponse(
        {
            "status": "failure",
            "message": f"Validation error: {invalid}",
            "data": {},
            "metadata": {},
        },
        status_code=400,
    )


def query_data(result: pb.RetrievalResult) -> dict[str, Any]:
    """LightRAG's QueryDataResponse of a retrieval."""
    numbers = {r.file_path: str(r.reference_id) for r in result.references}

    def reference_of(paths: Any) -> str:
        return next((numbers[path] for path in paths if path in numbers), "")

    entities = [
        {
            "entity_name": item.entity.name,
            "entity_type": item.entity.type,
            "description": item.entity.description,
            "source_id": SEPARATOR.join(item.entity.source_chunk_ids),
            "file_path": SEPARATOR.join(item.entity.file_paths),
            "reference_id": reference_of(item.entity.file_paths),
        }
        for item in result.entities
    ]
    relationships = [
        {
            "src_id": item.relation.source_name,
            "tgt_id": item.relation.target_name,
            "description": item.relation.description,
            "keywords": ", ".join(item.relation.keywords),
            "weight": item.relation.weight,
            "source_id": SEPARATOR.join(item.relation.source_chunk_ids),
            "file_path": SEPARATOR.join(item.relation.file_paths),
            "reference_id": reference_of(item.relation.file_paths),
        }
        for item in result.relations
    ]
    chunks = [
        {
            "content": chunk.text,
            "file_path": source_of(chunk),
            "chunk_id": chunk.chunk_id,
            "reference_id": numbers.get(source_of(chunk), ""),
        }
        for chunk in convert.retrieval_from_proto(result).chunks
    ]
    return {
        "status": "success",
        "message": "Query executed successfully",
        "data": {
            "entities": entities,
            "relationships": relationships,
            "chunks": chunks,
            "references": references(result, with_content=False),
        },
        "metadata": {
            "query_mode": convert.mode_from_proto(result.mode).value,
            "keywords": {
                "high_level": list(result.keywords.high_level),
                "low_level": list(result.keywords.low_level),
            },
            "processing_info": {
                "total_entities_found": len(entities),
                "total_relations_found": len(relationships),
                "entities_after_truncation": len(entities),
                "relations_after_truncation": len(relationships),
                "final_chunks_count": len(chunks),
            },
            "index_version": result.index_version,
        },
    }
