"""OpenAI's `POST /v1/embeddings` over the index's own embedding model
(`gateway/embeddings.py`): `input` a text or a list of texts, `encoding_format` "float" (a
list of numbers) or "base64" (the little-endian float32 bytes, which OpenAI's clients ask
for and decode themselves). `model` must name the index's model (404 `model_not_found`
listing it otherwise), `dimensions`, when given, its dimension: the vectors are never cut.
Token ids (a list of integers) are refused, as kgstream's tokenizer is not the client's.
Usage is not counted (0): the embedder counts no tokens.
"""

from __future__ import annotations

import base64
import struct
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.embeddings import MAX_EMBEDDING_INPUT_CHARS, MAX_EMBEDDING_INPUTS, EmbeddingService
from gateway.http.app import call_of, json_object
from gateway.http.calls import CallFailed
from gateway.http.errors import Refusal

ENCODING_FORMATS = ("float", "base64")


class EmbeddingsRoute:
    def __init__(self, service: EmbeddingService) -> None:
        self._service = service
        self.model_id = service.model_id

    async def create(self, request: Request) -> Response:
        try:
            texts, encoding = self._parse(await json_object(request))
        except Refusal as refusal:
            return refusal.openai()
        call = call_of(request)
        try:
            vectors = await run_in_threadpool(self._service.embed, texts, call)
        except CallFailed as failure:
            return Refusal.of(failure).openai()
        finally:
            call.finish()
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {"object": "embedding", "index": index, "embedding": _encoded(vector, encoding)}
                    for index, vector in enumerate(vectors)
                ],
                "model": self.model_id,
                "usage": {"prompt_tokens": 0, "total_tokens": 0},
            }
        )

    def _parse(self, body: dict[str, Any]) -> tuple[list[str], str]:
        model = body.get("model")
        if model != self.model_id:
            status, code = (404, "model_not_found") if isinstance(model, str) else (400, None)
            raise Refusal(
                status,
                f"model: must be {self.model_id} (the index's embedding model); got {model!r}",
                "model",
                code or "invalid_model",
            )
        encoding = body.get("encoding_format", "float")
        if encoding not in ENCODING_FORMATS:
            raise Refusal(
                400,
                f"encoding_format: must be one of {', '.join(ENCODING_FORMATS)}; got {encoding!r}",
                "encoding_format",
                "invalid_encoding_format",
            )
        dimensions = body.get("dimensions")
        if dimensions is not None and dimensions != self._service.dimension:
            raise Refusal(
                400,
                f"dimensions: the model's vectors have {self._service.dimension} dimensions and "
                f"are not cut; leave it out or pass {self._service.dimension}; got {dimensions!r}",
                "dimensions",
                "invalid_dimensions",
            )
        return _texts(body.get("input")), encoding

    def schemas(self) -> dict[str, dict[str, Any]]:
        """The request and reply schemas, with the limits `embed` enforces."""
        text = {"type": "string", "minLength": 1, "maxLength": MAX_EMBEDDING_INPUT_CHARS}
        return {
            "EmbeddingRequest": {
                "type": "object",
                "required": ["model", "input"],
                "properties": {
                    "model": {"type": "string", "enum": [self.model_id]},
                    "input": {
                        "oneOf": [
                            text,
                            {
                                "type": "array",
                                "items": text,
                                "minItems": 1,
                                "maxItems": MAX_EMBEDDING_INPUTS,
                            },
                        ]
                    },
                    "encoding_format": {
                        "type": "string",
                        "enum": list(ENCODING_FORMATS),
                        "default": ENCODING_FORMATS[0],
                    },
                    "dimensions": {"type": "integer", "enum": [self._service.dimension]},
                    "user": {"type": "string", "description": "accepted and ignored"},
                },
            },
            "EmbeddingList": {
                "type": "object",
                "description": "OpenAI's embedding list: one unit-length vector per input",
                "properties": {
                    "object": {"const": "list"},
                    "data": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "object": {"const": "embedding"},
                                "index": {"type": "integer"},
                                "embedding": {
                                    "oneOf": [
                                        {"type": "array", "items": {"type": "number"}},
                                        {"type": "string", "contentEncoding": "base64"},
                                    ]
                                },
                            },
                        },
                    },
                    "model": {"type": "string"},
                    "usage": {"type": "object"},
                },
            },
        }


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    if isinstance(value, list) and value and all(isinstance(item, int | list) for item in value):
        message = "input: token ids are not accepted (kgstream's tokenizer is not yours); send text"
    else:
        message = f"input: must be a text or a list of texts; got {type(value).__name__}"
    raise Refusal(400, message, "input", "invalid_input")


def _encoded(vector: list[float], encoding: str) -> list[float] | str:
    if encoding == "base64":
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
    return vector
