"""An OpenAI-compatible chat endpoint, so chat front ends and OpenAI client libraries can use
kgstream as their model: `GET /v1/models` lists one model per query mode
("kgstream-mix", "kgstream-local", ...), `POST /v1/chat/completions` answers with it.

The last message is the question (it must be the user's); the earlier user and assistant
messages are the conversation history, and system messages become the answer's extra
instructions (`user_prompt`). The answer comes from `Query` (or `QueryStream` when
`stream` is true), so it is the same as over gRPC; without an LLM it is the extractive
answer. References: the answer text ends with a "References" list of the sources (added
when the answer has none of its own), and the response carries them as `references`
(in the first chunk of a stream), with the `index_version` answered at. Errors have
OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, so the client libraries
raise their usual exceptions.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.convert import mode_to_proto
from gateway.http.app import call_of, event_stream, read_body, started
from gateway.http.calls import CallFailed, field_of
from gateway.http.messages import to_json
from gateway.http.routes import ApiRoute
from gateway.knowledge_graph import KnowledgeGraphService
from gateway.types import DEFAULT_MODE, MODE_NAMES, InvalidQuery, parse_mode
from kgstream_protos.v1 import query_pb2

MODEL_PREFIX = "kgstream-"


def model_id(mode_name: str) -> str:
    """The model that answers in a mode ("mix" -> "kgstream-mix")."""
    return MODEL_PREFIX + mode_name


# The default mode's model first: chat front ends preselect the first model listed.
MODELS = tuple(
    model_id(name)
    for name in (DEFAULT_MODE.value, *(name for name in MODE_NAMES if name != DEFAULT_MODE.value))
)
_REFERENCES_HEADING = re.compile(r"^\W*references\b", re.IGNORECASE | re.MULTILINE)


class ChatError(Exception):
    """A request the endpoint refuses, in OpenAI's error terms."""

    def __init__(self, status: int, message: str, param: str | None, code: str) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code

    def response(self) -> Response:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        body = {"message": self.message, "type": kind, "param": self.param, "code": self.code}
        return JSONResponse({"error": body}, status_code=self.status)


def chat_routes(knowledge_graph: KnowledgeGraphService) -> list[ApiRoute]:
    chat = ChatCompletions(knowledge_graph)
    return [
        ApiRoute(
            "GET", "/v1/models", chat.models, "The models: one per query mode", response="ModelList"
        ),
        ApiRoute(
            "POST",
            "/v1/chat/completions",
            chat.completions,
            "OpenAI-compatible chat completion (stream or not)",
            response="ChatCompletion",
        ),
    ]


class ChatCompletions:
    def __init__(self, knowledge_graph: KnowledgeGraphService) -> None:
        self._knowledge_graph = knowledge_graph

    async def models(self, request: Request) -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {"id": model, "object": "model", "created": 0, "owned_by": "kgstream"}
                    for model in MODELS
                ],
            }
        )

    async def completions(self, request: Request) -> Response:
        try:
            body = json.loads(await read_body(request) or b"null")
        except ValueError as error:
            return ChatError(400, f"the body is not JSON: {error}", None, "invalid_json").response()
        try:
            model, message, stream, include_usage = parse_chat_request(body)
        except ChatError as error:
            return error.response()
        call = call_of(request)
        if stream:
            try:
                events = await started(self._knowledge_graph.QueryStream(message, call), call)
            except CallFailed as failure:
                return _failure(failure).response()
            return event_stream(self._chunks(model, events, include_usage), call)
        try:
            reply = await run_in_threadpool(self._knowledge_graph.Query, message, call)
        except CallFailed as failure:
            return _failure(failure).response()
        finally:
            call.finish()
        references = [to_json(r) for r in reply.context.references]
        text = with_references(reply.answer, reply.context.references)
        usage = _usage(reply.usage)
        return JSONResponse(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": usage,
                "references": references,
                "index_version": reply.index_version,
            }
        )

    def _chunks(
        self, model: str, events: Iterator[query_pb2.QueryEvent], include_usage: bool
    ) -> Iterator[str]:
        ident, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())

        def chunk(delta: Mapping[str, Any], finish: str | None = None, **extra: Any) -> str:
            payload = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish}],
                **extra,
            }
            return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"

        references: list[query_pb2.Reference] = []
        answer: list[str] = []
        try:
            for event in events:
                kind = event.WhichOneof("event")
                if kind == "context":
                    references = list(event.context.references)
                    yield chunk(
                        {"role": "assistant", "content": ""},
                        references=[to_json(r) for r in references],
                        index_version=event.context.index_version,
                    )
                elif kind == "delta":
                    answer.append(event.delta.text)
                    yield chunk({"content": event.delta.text})
                elif kind == "done":
                    tail = with_references("".join(answer), references)[len("".join(answer)) :]
                    if tail:
                        yield chunk({"content": tail})
                    yield chunk({}, "stop")
                    if include_usage:
                        payload = {
                            "id": ident,
                            "object": "chat.completion.chunk",
                            "created": created,
                            "model": model,
                            "choices": [],
                            "usage": _usage(event.done.usage),
                        }
                        yield f"data: {json.dumps(payload)}\n\n"
        except CallFailed as failure:
            error = _failure(failure)
            body = {"message": error.message, "type": "server_error", "code": error.code}
            yield f"data: {json.dumps({'error': body})}\n\n"
        yield "data: [DONE]\n\n"


def with_references(answer: str, references: Any) -> str:
    """`answer` ending with a "References" list of `references`, unless it has one already
    (the LLM is asked to write one) or there are none."""
    if not references or _REFERENCES_HEADING.search(answer):
        return answer
    listed = "\n".join(f"- [{r.reference_id}] {r.file_path}" for r in references)
    return f"{answer.rstrip()}\n\nReferences:\n{listed}"


def parse_chat_request(body: Any) -> tuple[str, query_pb2.QueryRequest, bool, bool]:
    """A chat completion request as (model, the QueryRequest, stream, include_usage);
    `ChatError` in OpenAI's terms for one the endpoint refuses."""
    if not isinstance(body, dict):
        raise ChatError(400, "the body must be a JSON object", None, "invalid_request")
    model = body.get("model")
    try:
        mode = parse_mode(model, "model", spelling=model_id, default=None)
    except InvalidQuery as error:
        if isinstance(model, str) and model:  # OpenAI's answer for a model it does not have
            raise ChatError(404, str(error), "model", "model_not_found") from None
        raise ChatError(400, str(error), "model", "invalid_model") from None
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ChatError(400, "messages: must be a non-empty list", "messages", "invalid_messages")
    turns: list[tuple[str, str]] = []
    for index, item in enumerate(messages):
        if not isinstance(item, dict):
            raise ChatError(
                400, f"messages[{index}]: must be an object", "messages", "invalid_messages"
            )
        role = item.get("role")
        if role not in ("system", "developer", "user", "assistant"):
            raise ChatError(
                400,
                f"messages[{index}].role: must be system, developer, user or assistant; "
                f"got {role!r}",
                "messages",
                "invalid_messages",
            )
        turns.append((str(role), _text_of(item.get("content"), index)))
    if turns[-1][0] != "user":
        raise ChatError(
            400,
            "messages: the last message must be the user's question",
            "messages",
            "invalid_messages",
        )
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ChatError(400, "stream: must be true or false", "stream", "invalid_stream")
    options = body.get("stream_options") or {}
    include_usage = bool(isinstance(options, dict) and options.get("include_usage"))
    instructions = "\n".join(text for role, text in turns if role in ("system", "developer"))
    history = [
        query_pb2.ConversationTurn(role=role, content=text)
        for role, text in turns[:-1]
        if role in ("user", "assistant")
    ]
    message = query_pb2.QueryRequest(
        question=turns[-1][1], mode=mode_to_proto(mode), history=history, user_prompt=instructions
    )
    return model_id(mode.value), message, stream, include_usage


def _text_of(content: Any, index: int) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise ChatError(
                    400,
                    f"messages[{index}].content: only text parts are supported",
                    "messages",
                    "unsupported_content",
                )
            parts.append(str(part.get("text", "")))
        return "".join(parts)
    raise ChatError(400, f"messages[{index}].content: must be text", "messages", "invalid_messages")


def _usage(usage: query_pb2.Usage) -> dict[str, int]:
    prompt, completion = int(usage.prompt_tokens), int(usage.completion_tokens)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _failure(failure: CallFailed) -> ChatError:
    param = field_of(failure.code, failure.message) or None
    return ChatError(failure.http_status, failure.message, param, failure.code.name.lower())
