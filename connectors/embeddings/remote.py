"""Embeddings from any OpenAI-compatible endpoint (the `openai` client), with retries."""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import openai

from connectors.embeddings.base import EmbeddingRequestError
from connectors.openai_errors import is_transient, openai_retry, without_key
from connectors.retry import Backoff


@dataclass(frozen=True)
class OpenAIEmbeddingOptions:
    """An OpenAI-compatible ``/embeddings`` endpoint.

    ``dimension`` None means "whatever the model returns", learned from the first response.
    ``request_dimensions`` also sends it as the API's ``dimensions`` parameter (only the
    text-embedding-3 family accepts that). ``api_key`` may be empty for local servers that
    check none. ``max_retries`` counts the retries after the first try (as `LLMOptions`
    does); retries wait ``backoff.delay(n)`` (see `connectors.openai_errors`).
    """

    base_url: str
    model: str
    api_key: str = ""
    dimension: int | None = None
    request_dimensions: bool = False
    max_batch_size: int = 64
    concurrency: int = 4
    timeout_s: float = 30.0
    max_retries: int = 5
    backoff: Backoff = field(default_factory=lambda: Backoff(base=0.5, cap=30.0))

    def __post_init__(self) -> None:
        if not self.base_url:
            raise ValueError("OpenAIEmbeddingOptions.base_url is empty; e.g. http://host:8000/v1")
        if not self.model:
            raise ValueError("OpenAIEmbeddingOptions.model is empty; name the embedding model")
        positive = {
            "max_batch_size": self.max_batch_size,
            "concurrency": self.concurrency,
        }
        for name, value in positive.items():
            if value < 1:
                raise ValueError(f"OpenAIEmbeddingOptions.{name} must be >= 1; got {value!r}")
        if self.max_retries < 0:
            raise ValueError(
                "OpenAIEmbeddingOptions.max_retries must be >= 0 (0 = no retry); "
                f"got {self.max_retries!r}"
            )
        if self.timeout_s <= 0:
            raise ValueError(
                f"OpenAIEmbeddingOptions.timeout_s must be > 0 seconds; got {self.timeout_s!r}"
            )
        if self.dimension is not None and self.dimension < 1:
            raise ValueError(
                f"OpenAIEmbeddingOptions.dimension must be >= 1 or None; got {self.dimension!r}"
            )
        if self.request_dimensions and self.dimension is None:
            raise ValueError(
                "OpenAIEmbeddingOptions.request_dimensions needs a dimension to request; "
                "set dimension"
            )


_log = logging.getLogger(__name__)

# Sent instead of an empty key: the client refuses to start without one, and a local server
# that checks no key ignores it.
_NO_KEY = "no-key"
_DIMENSION_PROBE = "dimension probe"


class OpenAIEmbedder:
    """Embeds through ``openai.OpenAI().embeddings.create``: batches of at most
    ``max_batch_size`` texts; a call with several batches fans them out over one pool of
    ``concurrency`` threads shared by all callers of this embedder (a single-batch call runs
    in the caller's thread). Each request is retried with backoff on rate limits, server
    errors and timeouts; the client's own retries are off so that one policy, ours, applies.

    ``sleep`` is injectable so tests can record the backoff delays instead of waiting.
    """

    def __init__(
        self,
        options: OpenAIEmbeddingOptions,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.options = options
        self._retry = openai_retry(options.backoff, options.max_retries, sleep)
        self._client = openai.OpenAI(
            base_url=options.base_url,
            api_key=options.api_key or _NO_KEY,
            timeout=options.timeout_s,
            max_retries=0,
        )
        self._dimension = options.dimension
        self._encoding: Literal["float", "base64"] = "base64"  # "float" once refused
        self._base64_answered = False
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None

    @property
    def model_name(self) -> str:
        return self.options.model

    @property
    def dimension(self) -> int:
        """The configured dimension, else the one the endpoint returns (asked once if need be)."""
        if self._dimension is None:
            self.embed([_DIMENSION_PROBE])  # sets self._dimension from the response
        if self._dimension is None:
            raise EmbeddingRequestError(
                f"could not learn the dimension of model {self.options.model!r} from "
                f"{self.options.base_url}; set OpenAIEmbeddingOptions.dimension"
            )
        return self._dimension

    def close(self) -> None:
        """Stop the worker threads and close the HTTP connections."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
        self._client.close()

    def __enter__(self) -> OpenAIEmbedder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit-length vector per text, in input order."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one str; wrap it in a list")
        for position, text in enumerate(texts):
            if not text:
                raise ValueError(
                    f"texts[{position}] is empty; the embeddings API rejects empty input, "
                    "so drop empty texts before embedding"
                )
        if not texts:
            return []
        size = self.options.max_batch_size
        batches = [list(texts[start : start + size]) for start in range(0, len(texts), size)]
        if len(batches) == 1:
            results = [self._embed_batch(batches[0])]
        else:
            results = list(self._pool().map(self._embed_batch, batches))
        return [vector for batch in results for vector in batch]

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=self.options.concurrency, thread_name_prefix="openai-embed"
                )
            return self._executor

    def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        try:
            response = self._retry.call_with_retry(
                lambda: self._create(batch),
                lambda error, attempts: self._failed(error, attempts, batch),
            )
        except EmbeddingRequestError as error:
            # Its message says what the server said (the key masked); the chained `openai`
            # error would print the server's text unmasked in a traceback.
            raise error from None
        return self._vectors_from(response, len(batch))

    def _failed(self, error: Exception, attempts: int, batch: list[str]) -> EmbeddingRequestError:
        said = without_key(error, self.options.api_key)
        if not is_transient(error):
            return EmbeddingRequestError(
                f"embedding request to {self.options.base_url} (model "
                f"{self.options.model!r}, {len(batch)} texts) failed and is not "
                f"retryable: {said}"
            )
        return EmbeddingRequestError(
            f"embedding request to {self.options.base_url} (model "
            f"{self.options.model!r}) still failing after {attempts} attempts "
            f"(max_retries={self.options.max_retries}): {said}; "
            "check the endpoint or raise max_retries",
            transient=True,
        )

    def _create(self, batch: list[str]) -> bytes:
        """The reply's body, unparsed by the client: building its pydantic models walks every
        float, which would be most of an edit's embedding time.

        The vectors are asked for as base64 (each the bytes of little-endian float32s, as
        OpenAI's own client asks by default): a quarter of the bytes of JSON numbers, and
        decoded about ten times faster. An endpoint that
        refuses base64 (400 or 422 before it has answered a base64 request) is asked for
        numbers, then and from then on."""
        encoding = self._encoding
        try:
            body = self._request(batch, encoding)
        except (openai.BadRequestError, openai.UnprocessableEntityError) as error:
            if encoding == "float" or self._base64_answered:
                raise
            body = self._request(batch, "float")  # the same error again if it was not that
            self._encoding = "float"
            _log.warning(
                "embedding endpoint %s refused encoding_format=base64 (%s); asking for "
                "numbers from now on",
                self.options.base_url,
                without_key(error, self.options.api_key),
            )
            return body
        self._base64_answered = encoding == "base64"
        return body

    def _request(self, batch: list[str], encoding: Literal["float", "base64"]) -> bytes:
        extra: dict[str, Any] = {}
        if self.options.request_dimensions and self.options.dimension is not None:
            extra["dimensions"] = self.options.dimension
        raw = self._client.embeddings.with_raw_response.create(
            input=batch, model=self.options.model, encoding_format=encoding, **extra
        )
        return raw.content

    def _vectors_from(self, body: bytes, expected: int) -> list[list[float]]:
        try:
            response = json.loads(body)
        except ValueError as error:
            raise EmbeddingRequestError(
                f"embedding endpoint {self.options.base_url} answered something that is not "
                f"JSON: {error}"
            ) from None
        data = response.get("data") if isinstance(response, dict) else None
        if not isinstance(data, list) or not all(
            isinstance(item, dict) and isinstance(item.get("index"), int) for item in data
        ):
            raise EmbeddingRequestError(
                f"embedding endpoint {self.options.base_url} answered JSON without a 'data' "
                "list of {index, embedding} objects"
            )
        items = sorted(data, key=lambda item: item["index"])
        if [item["index"] for item in items] != list(range(expected)):
            raise EmbeddingRequestError(
                f"embedding endpoint {self.options.base_url} answered {len(items)} vectors "
                f"with indexes {[item['index'] for item in items][:10]} for {expected} texts; "
                "it must return one vector per input, indexed 0..n-1"
            )
        matrix = _matrix([item.get("embedding") for item in items])
        if matrix.ndim != 2:
            raise EmbeddingRequestError(
                f"embedding endpoint {self.options.base_url} returned vectors that are not "
                "lists of numbers (or base64 of little-endian float32s) of one length for "
                f"model {self.options.model!r}"
            )
        self._check_dimension(matrix.shape[1])
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        zero = [int(i) for i in np.flatnonzero(~(norms[:, 0] > 0) | ~np.isfinite(norms[:, 0]))]
        if zero:
            raise EmbeddingRequestError(
                f"embedding endpoint {self.options.base_url} returned zero or non-finite "
                f"vectors at batch positions {zero[:10]}; they cannot be normalised"
            )
        normalised: list[list[float]] = (matrix / norms).tolist()
        return normalised

    def _check_dimension(self, width: int) -> None:
        with self._lock:
            if self._dimension is None:
                self._dimension = width
            known = self._dimension
        if width != known:
            raise EmbeddingRequestError(
                f"embedding endpoint {self.options.base_url} returned {width}-d vectors for "
                f"model {self.options.model!r}, expected {known} (dimension); fix "
                "OpenAIEmbeddingOptions.dimension or the model name"
            )


def _matrix(vectors: list[Any]) -> np.ndarray:
    """The vectors of a reply as rows of float64s, each a list of numbers or, as asked for,
    base64 of little-endian float32s (an endpoint that ignores `encoding_format` sends
    numbers); an empty array when they are neither or differ in length."""
    try:
        if vectors and all(isinstance(vector, str) for vector in vectors):
            rows = [np.frombuffer(base64.b64decode(v, validate=True), "<f4") for v in vectors]
            return np.vstack(rows).astype(np.float64)
        return np.asarray(vectors, dtype=np.float64)
    except (TypeError, ValueError):  # binascii.Error is a ValueError
        return np.empty(0)
