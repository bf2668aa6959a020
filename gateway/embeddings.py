"""Texts embedded with the index's own embedding model, the one queries are embedded with,
so a client that searches its own vectors, or checks what kgstream's searches see, embeds
the same way (OpenAI's `/v1/embeddings` over HTTP: `gateway/http/embeddings.py`).

Like the servicers, it takes a `grpc.ServicerContext` (over HTTP an `HttpCall`): a bad
request is INVALID_ARGUMENT naming the input, an embedding endpoint that is down is
UNAVAILABLE (`gateway/status.py`), and texts are embedded a batch at a time, so a call whose
deadline passed or whose client left stops between two batches.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc

from connectors.embeddings.base import Embedder, embedding_space_name
from gateway.status import abort, invalid, statuses

MAX_EMBEDDING_INPUTS = 2048
"""Texts one call may embed: OpenAI's own limit, so clients batch as they do for OpenAI."""

MAX_EMBEDDING_INPUT_CHARS = 32_768
"""The longest text one call may embed, about OpenAI's 8192-token limit per input; a
longer text is embedded in windows (connectors/embeddings/local.py), so its cost grows
with its length."""

EMBED_BATCH = 16  # texts embedded between two looks at the call's deadline and client


class EmbeddingService:
    """The embedder the query engine uses, behind the servicers' checks and statuses."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder

    @property
    def model_id(self) -> str:
        """The model's name as clients give it: the vector space's (model and dimension),
        which also names the index's vector collections."""
        return embedding_space_name(self._embedder)

    @property
    def dimension(self) -> int:
        return self._embedder.dimension

    def embed(self, texts: Sequence[str], context: grpc.ServicerContext) -> list[list[float]]:
        """One unit-length vector per text, in order."""
        if not texts:
            invalid(context, "input", "is empty; pass a text or a list of texts")
        if len(texts) > MAX_EMBEDDING_INPUTS:
            invalid(
                context,
                "input",
                f"holds {len(texts)} texts; the limit is {MAX_EMBEDDING_INPUTS} per call "
                "(send them in batches)",
            )
        for index, text in enumerate(texts):
            if not text.strip():
                invalid(context, f"input[{index}]", "is empty; there is nothing to embed")
            if len(text) > MAX_EMBEDDING_INPUT_CHARS:
                invalid(
                    context,
                    f"input[{index}]",
                    f"is {len(text)} characters long; the limit is {MAX_EMBEDDING_INPUT_CHARS}",
                )
        vectors: list[list[float]] = []
        for start in range(0, len(texts), EMBED_BATCH):
            if not context.is_active():
                left = context.time_remaining()
                if left is not None and left <= 0:
                    abort(
                        context,
                        grpc.StatusCode.DEADLINE_EXCEEDED,
                        f"the call's deadline passed after {start} of {len(texts)} texts",
                    )
                abort(context, grpc.StatusCode.CANCELLED, "the call was cancelled")
            with statuses(context):
                vectors.extend(self._embedder.embed(texts[start : start + EMBED_BATCH]))
        return vectors
