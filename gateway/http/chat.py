"""OpenAI's API under /v1/, so chat front ends and OpenAI client libraries can use kgstream as
their model: `GET /v1/models` lists one model per query mode ("kgstream-mix",
"kgstream-local", ...), `GET /v1/models/{id}` describes one, `POST /v1/chat/completions`
answers with it, and `POST /v1/embeddings` embeds texts with the index's own embedding model.

A chat completion is a conversation (`gateway/http/conversation.py`): the messages become a
`QueryRequest` and `Query` (or `QueryStream` when `stream` is true) answers it, as over gRPC;
the response carries the answer's `references` (in the first chunk of a stream) and the
`index_version` answered at. Every error under /v1/ has OpenAI's shape,
`{"error": {"message", "type", "param", "code"}}` (`openai_error`), so the client libraries
raise their usual exceptions.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.http.app import event_stream, json_object
from gateway.http.conversation import (
    Answers,
    Broken,
    Closed,
    Delta,
    Opened,
    StreamedAnswer,
    Tokens,
    conversation_request,
    mode_of_model,
    model_names,
)
from gateway.http.embeddings import EmbeddingsRoute
from gateway.http.errors import Refusal, openai_error
from gateway.http.routes import ApiRoute, Door
from gateway.knowledge_graph import KnowledgeGraphService
from kgstream_protos.v1 import query_pb2

PREFIX = "/v1/"
MODEL_PREFIX = "kgstream-"
MESSAGE_ROLES = ("system", "developer", "user", "assistant")


def model_id(mode_name: str) -> str:
    """The model that answers in a mode ("mix" -> "kgstream-mix")."""
    return MODEL_PREFIX + mode_name


MODELS = model_names(model_id)


def openai_door(knowledge_graph: KnowledgeGraphService, embeddings: EmbeddingsRoute) -> Door:
    chat = ChatCompletions(knowledge_graph, embeddings.model_id)
    routes = (
        ApiRoute(
            "GET", "/v1/models", chat.models, "The chat models: one per query mode",
            response="ModelList", error="OpenAIError",
        ),
        ApiRoute(
            "GET", "/v1/models/{model}", chat.model,
            "One model: a query mode's, or the embedding model",
            response="Model", path_fields=("model",), error="OpenAIError",
        ),
        ApiRoute(
            "POST", "/v1/chat/completions", chat.completions,
            "OpenAI-compatible chat completion (stream or not)",
            body="ChatCompletionRequest", response="ChatCompletion", error="OpenAIError",
        ),
        ApiRoute(
            "POST", "/v1/embeddings", embeddings.create,
            "Embed texts with the index's own embedding model (OpenAI's embeddings API)",
            body="EmbeddingRequest", response="EmbeddingList", error="OpenAIError",
        ),
    )  # fmt: skip
    return Door(
        routes, schemas={**SCHEMAS, **embeddings.schemas()}, error_shapes={PREFIX: openai_error}
    )


def _model(ident: str) -> dict[str, Any]:
    return {"id": ident, "object": "model", "created": 0, "owned_by": "kgstream"}


class ChatCompletions:
    def __init__(self, knowledge_graph: KnowledgeGraphService, embedding_model: str) -> None:
        self._answers = Answers(knowledge_graph)
        self._embedding_model = embedding_model

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [_model(model) for model in MODELS]})

    async def model(self, request: Request) -> Response:
        """A chat model, or the embedding model (which the list leaves out: chat front ends
        offer every model listed as one to chat with)."""
        ident = request.path_params["model"]
        if ident == self._embedding_model:
            return JSONResponse(_model(ident))
        try:
            mode = mode_of_model(ident, model_id)
        except Refusal as refusal:
            return refusal.openai()
        return JSONResponse(_model(model_id(mode.value)))

    async def completions(self, request: Request) -> Response:
        body = await json_object(request)
        try:
            model, message, stream, include_usage = parse_chat_request(body)
            if stream:
                answer = await self._answers.stream(request, message)
                return event_stream(_chunks(model, answer, include_usage), answer.call)
            completion = await self._answers.complete(request, message)
        except Refusal as refusal:
            return refusal.openai()
        return JSONResponse(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": completion.text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": _usage(completion.tokens),
                "references": completion.references,
                "index_version": completion.index_version,
            }
        )


def _chunks(model: str, answer: StreamedAnswer, include_usage: bool) -> Iterator[str]:
    ident, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())

    def chunk(choices: list[dict[str, Any]], **extra: Any) -> str:
        payload = {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": choices,
            **extra,
        }
        return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"

    def choice(delta: Mapping[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
        return [{"index": 0, "delta": dict(delta), "finish_reason": finish}]

    for piece in answer.pieces:
        if isinstance(piece, Opened):
            yield chunk(
                choice({"role": "assistant", "content": ""}),
                references=piece.references,
                index_version=piece.index_version,
            )
        elif isinstance(piece, Delta):
            yield chunk(choice({"content": piece.text}))
        elif isinstance(piece, Closed):
            yield chunk(choice({}, "stop"))
            if include_usage:
                yield chunk([], usage=_usage(piece.tokens))
        elif isinstance(piece, Broken):
            refusal = piece.refusal
            body = {"message": refusal.message, "type": "server_error", "code": refusal.code}
            yield f"data: {json.dumps({'error': body})}\n\n"
    yield "data: [DONE]\n\n"


def parse_chat_request(body: Any) -> tuple[str, query_pb2.QueryRequest, bool, bool]:
    """A chat completion request as (model, the QueryRequest, stream, include_usage);
    `Refusal` in OpenAI's terms for one the endpoint refuses."""
    if not isinstance(body, dict):
        raise Refusal(400, "the body must be a JSON object", None, "invalid_request")
    mode = mode_of_model(body.get("model"), model_id)
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise Refusal(400, "messages: must be a non-empty list", "messages", "invalid_messages")
    turns: list[tuple[str, str]] = []
    for index, item in enumerate(messages):
        if not isinstance(item, dict):
            raise Refusal(
                400, f"messages[{index}]: must be an object", "messages", "invalid_messages"
            )
        role = item.get("role")
        if role not in MESSAGE_ROLES:
            raise Refusal(
                400,
                f"messages[{index}].role: must be one of {', '.join(MESSAGE_ROLES)}; got {role!r}",
                "messages",
                "invalid_messages",
            )
        # A developer message is what newer OpenAI models call a system message.
        turn_role = "system" if role == "developer" else str(role)
        turns.append((turn_role, _text_of(item.get("content"), index)))
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise Refusal(400, "stream: must be true or false", "stream", "invalid_stream")
    options = body.get("stream_options") or {}
    include_usage = bool(isinstance(options, dict) and options.get("include_usage"))
    return model_id(mode.value), conversation_request(mode, turns), stream, include_usage


def _text_of(content: Any, index: int) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise Refusal(
                    400,
                    f"messages[{index}].content: only text parts are supported",
                    "messages",
                    "unsupported_content",
                )
            parts.append(str(part.get("text", "")))
        return "".join(parts)
    raise Refusal(400, f"messages[{index}].content: must be text", "messages", "invalid_messages")


def _usage(tokens: Tokens) -> dict[str, int]:
    return {
        "prompt_tokens": tokens.prompt,
        "completion_tokens": tokens.completion,
        "total_tokens": tokens.prompt + tokens.completion,
    }


_MODEL = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "object": {"const": "model"},
        "created": {"type": "integer"},
        "owned_by": {"const": "kgstream"},
    },
}
SCHEMAS: dict[str, Mapping[str, Any]] = {
    "OpenAIError": {
        "type": "object",
        "properties": {
            "error": {
                "type": "object",
                "properties": {
                    "message": {"type": "string"},
                    "type": {"enum": ["invalid_request_error", "server_error"]},
                    "param": {"type": ["string", "null"]},
                    "code": {"type": ["string", "null"]},
                },
            }
        },
    },
    "Model": _MODEL,
    "ModelList": {
        "type": "object",
        "description": "OpenAI's model list: one chat model per query mode, the default first",
        "properties": {
            "object": {"const": "list"},
            "data": {"type": "array", "items": _MODEL},
        },
    },
    "ChatCompletionRequest": {
        "type": "object",
        "description": "OpenAI's request; temperature and the other sampling parameters are "
        "accepted and ignored",
        "required": ["model", "messages"],
        "properties": {
            "model": {"type": "string", "enum": list(MODELS)},
            "messages": {
                "type": "array",
                "minItems": 1,
                "description": "the last one the question (the user's), the earlier ones the "
                "history, system and developer ones the instructions",
                "items": {
                    "type": "object",
                    "required": ["role", "content"],
                    "properties": {
                        "role": {"type": "string", "enum": list(MESSAGE_ROLES)},
                        "content": {
                            "oneOf": [
                                {"type": "string"},
                                {"type": "array", "items": {"type": "object"}},
                            ],
                            "description": "text, or text content parts",
                        },
                    },
                },
            },
            "stream": {"type": "boolean", "default": False},
            "stream_options": {
                "type": "object",
                "properties": {"include_usage": {"type": "boolean", "default": False}},
            },
        },
    },
    "ChatCompletion": {
        "type": "object",
        "description": "OpenAI's chat completion (or, with stream: true, server-sent "
        "chat.completion.chunk objects ending with [DONE]); plus `references` and "
        "`index_version`.",
        "properties": {
            "id": {"type": "string"},
            "object": {"type": "string"},
            "model": {"type": "string"},
            "choices": {"type": "array"},
            "usage": {"type": "object"},
            "references": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/kgstream.v1.Reference"},
            },
            "index_version": {"type": "integer", "format": "int64"},
        },
    },
}
