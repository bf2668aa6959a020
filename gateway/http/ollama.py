"""Ollama's API under /api/, as LightRAG emulates it, so that Ollama clients (Open WebUI, the
`ollama` libraries, editor assistants) can chat with the index: `GET /api/version`,
`GET /api/tags`, `POST /api/show`, `POST /api/chat` and `POST /api/generate`.

One model per query mode, the default first: "kgstream-mix:latest", "kgstream-local:latest",
...; a name without a tag means ":latest", as Ollama reads it. `/api/chat` is a conversation
(`gateway/http/conversation.py`), answered by `Query` or `QueryStream` as the OpenAI chat
endpoint's: the last message the question, the earlier ones its history, system messages
the instructions. `/api/generate` takes `prompt` as the question and `system` as the
instructions, and answers from the index the same way (LightRAG's hands the prompt to its
LLM without retrieval; the gateway has one way to answer, and it reads the index).

`stream` defaults to true, as in Ollama: NDJSON lines, the first carrying the answer's
`references` and `index_version`, then the text, then a `done` line with the durations and
token counts; `stream: false` is one object with all of it. A request without messages (or
with an empty prompt) loads the model, as Ollama's clients expect: `done_reason` "load".
Errors are Ollama's `{"error": "message"}` (404 for an unknown model), in a stream too.
Options, `format`, `keep_alive`, `think` and `tools` are accepted and ignored: the
gateway's own LLM settings decide; images are refused.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.http.app import event_stream, json_object
from gateway.http.conversation import (
    TURN_ROLES,
    Answers,
    Closed,
    Completion,
    Delta,
    Opened,
    StreamedAnswer,
    Tokens,
    conversation_request,
    mode_of_model,
    model_names,
)
from gateway.http.errors import Refusal, ollama_error
from gateway.http.routes import ApiRoute, Door
from gateway.knowledge_graph import KnowledgeGraphService
from gateway.types import Mode
from kgstream_protos.v1 import query_pb2

PREFIX = "/api/"
# The Ollama API version answered: LightRAG's, which Ollama clients accept.
OLLAMA_VERSION = "0.9.3"
MODEL_TAG = "latest"
NDJSON = "application/x-ndjson"
FAMILY = "kgstream"


def ollama_model(mode_name: str) -> str:
    """The Ollama model that answers in a mode ("mix" -> "kgstream-mix:latest")."""
    return f"kgstream-{mode_name}:{MODEL_TAG}"


MODELS = model_names(ollama_model)


def mode_of(model: object) -> Mode:
    """The mode a model name answers in; "kgstream-mix" is "kgstream-mix:latest"."""
    if isinstance(model, str) and model and ":" not in model:
        model = f"{model}:{MODEL_TAG}"
    return mode_of_model(model, ollama_model)


def _now() -> str:
    """Ollama's timestamps: RFC 3339, UTC, microseconds."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _details() -> dict[str, Any]:
    return {
        "parent_model": "",
        "format": FAMILY,
        "family": FAMILY,
        "families": [FAMILY],
        "parameter_size": "",
        "quantization_level": "",
    }


def _digest(model: str) -> str:
    """A stable digest per model name, in Ollama's form (64 hex digits): there are no
    weights to hash, and a digest that stays put tells clients nothing changed."""
    return hashlib.sha256(model.encode()).hexdigest()


def ollama_door(knowledge_graph: KnowledgeGraphService) -> Door:
    ollama = OllamaApi(knowledge_graph, _now())
    routes = (
        ApiRoute(
            "GET", "/api/version", ollama.version, "Ollama's version",
            response="OllamaVersion", error="OllamaError",
        ),
        ApiRoute(
            "GET", "/api/tags", ollama.tags, "Ollama's model list: one per query mode",
            response="OllamaTags", error="OllamaError",
        ),
        ApiRoute(
            "POST", "/api/show", ollama.show, "One Ollama model's details",
            body="OllamaShowRequest", response="OllamaShow", error="OllamaError",
        ),
        ApiRoute(
            "POST", "/api/chat", ollama.chat, "Ollama's chat (NDJSON stream, or one object)",
            body="OllamaChatRequest", response="OllamaChat", media=NDJSON, error="OllamaError",
        ),
        ApiRoute(
            "POST", "/api/generate", ollama.generate,
            "Ollama's generate: the prompt answered from the index (NDJSON stream, or one object)",
            body="OllamaGenerateRequest", response="OllamaGenerate", media=NDJSON,
            error="OllamaError",
        ),
    )  # fmt: skip
    return Door(routes, schemas=SCHEMAS, error_shapes={PREFIX: ollama_error})


@dataclass(frozen=True)
class _Asked:
    """A chat or generate request, read: the model, the question, whether to stream, and how
    the reply writes a piece of text (chat: a message, generate: a response)."""

    model: str
    message: query_pb2.QueryRequest | None  # None: nothing asked (the model is loaded)
    stream: bool
    text: Callable[[str], dict[str, Any]]
    final: Mapping[str, Any]  # what the last object adds (generate: an empty `context`)


class OllamaApi:
    def __init__(self, knowledge_graph: KnowledgeGraphService, modified_at: str) -> None:
        self._answers = Answers(knowledge_graph)
        self._modified_at = modified_at

    async def version(self, request: Request) -> Response:
        return JSONResponse({"version": OLLAMA_VERSION})

    async def tags(self, request: Request) -> Response:
        return JSONResponse(
            {
                "models": [
                    {
                        "name": model,
                        "model": model,
                        "modified_at": self._modified_at,
                        "size": 0,
                        "digest": _digest(model),
                        "details": _details(),
                    }
                    for model in MODELS
                ]
            }
        )

    async def show(self, request: Request) -> Response:
        try:
            body = await json_object(request)
            # Ollama's clients send `model`; older ones `name`.
            mode = mode_of(body.get("model", body.get("name")))
        except Refusal as refusal:
            return refusal.ollama()
        model = ollama_model(mode.value)
        return JSONResponse(
            {
                "modelfile": f"# {model}: kgstream's knowledge graph, answering in {mode.value} "
                "mode\n",
                "parameters": "",
                "template": "",
                "license": "",
                "details": _details(),
                "model_info": {"general.architecture": FAMILY, "kgstream.query_mode": mode.value},
                "capabilities": ["completion"],
                "modified_at": self._modified_at,
            }
        )

    async def chat(self, request: Request) -> Response:
        try:
            asked = _chat_request(await json_object(request))
        except Refusal as refusal:
            return refusal.ollama()
        return await self._answer(request, asked)

    async def generate(self, request: Request) -> Response:
        try:
            asked = _generate_request(await json_object(request))
        except Refusal as refusal:
            return refusal.ollama()
        return await self._answer(request, asked)

    async def _answer(self, request: Request, asked: _Asked) -> Response:
        started = time.monotonic_ns()
        if asked.message is None:
            return JSONResponse(
                {**_line(asked, asked.text("")), "done": True, "done_reason": "load", **asked.final}
            )
        try:
            if asked.stream:
                answer = await self._answers.stream(request, asked.message)
                return event_stream(_lines(asked, answer, started), answer.call, media_type=NDJSON)
            completion = await self._answers.complete(request, asked.message)
        except Refusal as refusal:
            return refusal.ollama()
        return JSONResponse(_whole(asked, completion, started))


def _line(asked: _Asked, text: Mapping[str, Any]) -> dict[str, Any]:
    return {"model": asked.model, "created_at": _now(), **text}


def _counts(tokens: Tokens, started: int, first_text: int, ended: int) -> dict[str, int]:
    """Ollama's durations (nanoseconds) and token counts: the prompt's part is the time to
    the first text, the rest the answer's."""
    return {
        "total_duration": ended - started,
        "load_duration": 0,
        "prompt_eval_count": tokens.prompt,
        "prompt_eval_duration": first_text - started,
        "eval_count": tokens.completion,
        "eval_duration": ended - first_text,
    }


def _whole(asked: _Asked, completion: Completion, started: int) -> dict[str, Any]:
    ended = time.monotonic_ns()
    return {
        **_line(asked, asked.text(completion.text)),
        "done": True,
        "done_reason": "stop",
        **asked.final,
        **_counts(completion.tokens, started, started, ended),
        "references": completion.references,
        "index_version": completion.index_version,
    }


def _lines(asked: _Asked, answer: StreamedAnswer, started: int) -> Iterator[str]:
    first_text: int | None = None
    for piece in answer.pieces:
        if isinstance(piece, Opened):
            line = {
                **_line(asked, asked.text("")),
                "done": False,
                "references": piece.references,
                "index_version": piece.index_version,
            }
        elif isinstance(piece, Delta):
            first_text = first_text or time.monotonic_ns()
            line = {**_line(asked, asked.text(piece.text)), "done": False}
        elif isinstance(piece, Closed):
            ended = time.monotonic_ns()
            line = {
                **_line(asked, asked.text("")),
                "done": True,
                "done_reason": "stop",
                **asked.final,
                **_counts(piece.tokens, started, first_text or ended, ended),
            }
        else:  # Broken: Ollama's in-stream error, which its clients raise
            line = {"error": piece.refusal.message}
        yield json.dumps(line, ensure_ascii=False) + "\n"


def _stream_of(body: Mapping[str, Any]) -> bool:
    stream = body.get("stream", True)
    if not isinstance(stream, bool):
        raise Refusal(400, f"stream: must be true or false; got {stream!r}", "stream", "invalid")
    return stream


def _no_images(images: object, field: str) -> None:
    if images:
        raise Refusal(400, f"{field}: images are not supported; send text", field, "invalid")


def _chat_message(text: str) -> dict[str, Any]:
    return {"message": {"role": "assistant", "content": text}}


def _chat_request(body: Mapping[str, Any]) -> _Asked:
    mode = mode_of(body.get("model"))
    messages = body.get("messages") or []
    if not isinstance(messages, list):
        raise Refusal(400, "messages: must be a list of messages", "messages", "invalid")
    turns: list[tuple[str, str]] = []
    for index, item in enumerate(messages):
        field = f"messages[{index}]"
        if not isinstance(item, dict):
            raise Refusal(400, f"{field}: must be an object", "messages", "invalid")
        role, content = item.get("role"), item.get("content", "")
        if role not in TURN_ROLES:
            raise Refusal(
                400,
                f"{field}.role: must be one of {', '.join(TURN_ROLES)}; got {role!r}",
                "messages",
                "invalid",
            )
        if not isinstance(content, str):
            raise Refusal(400, f"{field}.content: must be text", "messages", "invalid")
        _no_images(item.get("images"), f"{field}.images")
        turns.append((role, content))
    return _Asked(
        model=ollama_model(mode.value),
        message=conversation_request(mode, turns) if turns else None,
        stream=_stream_of(body),
        text=_chat_message,
        final={},
    )


def _generate_request(body: Mapping[str, Any]) -> _Asked:
    mode = mode_of(body.get("model"))
    prompt, system = body.get("prompt", ""), body.get("system", "")
    for field, value in (("prompt", prompt), ("system", system)):
        if not isinstance(value, str):
            raise Refusal(400, f"{field}: must be text", field, "invalid")
    _no_images(body.get("images"), "images")
    turns = [("system", system)] if system else []
    return _Asked(
        model=ollama_model(mode.value),
        message=conversation_request(mode, [*turns, ("user", prompt)], "prompt")
        if prompt
        else None,
        stream=_stream_of(body),
        text=lambda text: {"response": text},
        final={"context": []},
    )


_MODEL = {"type": "string", "enum": list(MODELS)}
_MODEL_ASKED = {  # as a request names it: with its tag, or without (":latest")
    "type": "string",
    "enum": [*MODELS, *(model.removesuffix(f":{MODEL_TAG}") for model in MODELS)],
}
_COUNTS = {
    name: {"type": "integer"}
    for name in (
        "total_duration",
        "load_duration",
        "prompt_eval_count",
        "prompt_eval_duration",
        "eval_count",
        "eval_duration",
    )
}
_ANSWER_EXTRAS = {
    "references": {
        "type": "array",
        "items": {"$ref": "#/components/schemas/kgstream.v1.Reference"},
    },
    "index_version": {"type": "integer", "format": "int64"},
}
_DETAILS = {"type": "object", "properties": {name: {"type": "string"} for name in _details()}}
_STREAM = {"type": "boolean", "default": True}
SCHEMAS: dict[str, Mapping[str, Any]] = {
    "OllamaError": {"type": "object", "properties": {"error": {"type": "string"}}},
    "OllamaVersion": {"type": "object", "properties": {"version": {"const": OLLAMA_VERSION}}},
    "OllamaTags": {
        "type": "object",
        "properties": {
            "models": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": _MODEL,
                        "model": _MODEL,
                        "modified_at": {"type": "string", "format": "date-time"},
                        "size": {"type": "integer"},
                        "digest": {"type": "string"},
                        "details": _DETAILS,
                    },
                },
            }
        },
    },
    "OllamaShowRequest": {
        "type": "object",
        "required": ["model"],
        "properties": {"model": _MODEL_ASKED, "verbose": {"type": "boolean"}},
    },
    "OllamaShow": {
        "type": "object",
        "properties": {
            "modelfile": {"type": "string"},
            "details": _DETAILS,
            "model_info": {"type": "object"},
            "capabilities": {"type": "array", "items": {"type": "string"}},
        },
    },
    "OllamaChatRequest": {
        "type": "object",
        "required": ["model"],
        "properties": {
            "model": _MODEL_ASKED,
            "messages": {
                "type": "array",
                "description": "the last one the question (the user's), the earlier ones the "
                "history; none: the model is loaded",
                "items": {
                    "type": "object",
                    "required": ["role", "content"],
                    "properties": {
                        "role": {"type": "string", "enum": list(TURN_ROLES)},
                        "content": {"type": "string"},
                    },
                },
            },
            "stream": _STREAM,
        },
    },
    "OllamaChat": {
        "type": "object",
        "description": "one object, or with stream (the default) NDJSON lines of it",
        "properties": {
            "model": _MODEL,
            "created_at": {"type": "string", "format": "date-time"},
            "message": {
                "type": "object",
                "properties": {"role": {"const": "assistant"}, "content": {"type": "string"}},
            },
            "done": {"type": "boolean"},
            "done_reason": {"type": "string", "enum": ["stop", "load"]},
            **_COUNTS,
            **_ANSWER_EXTRAS,
        },
    },
    "OllamaGenerateRequest": {
        "type": "object",
        "required": ["model"],
        "properties": {
            "model": _MODEL_ASKED,
            "prompt": {"type": "string", "description": "the question; empty: the model is loaded"},
            "system": {"type": "string", "description": "extra instructions for the answer"},
            "stream": _STREAM,
        },
    },
    "OllamaGenerate": {
        "type": "object",
        "description": "one object, or with stream (the default) NDJSON lines of it",
        "properties": {
            "model": _MODEL,
            "created_at": {"type": "string", "format": "date-time"},
            "response": {"type": "string"},
            "done": {"type": "boolean"},
            "done_reason": {"type": "string", "enum": ["stop", "load"]},
            "context": {"type": "array", "items": {"type": "integer"}},
            **_COUNTS,
            **_ANSWER_EXTRAS,
        },
    },
}
