"""The embedding port: one small protocol every embedder (local or remote) implements.

Every embedder returns L2-normalised float vectors in input order, so the vector store can
use cosine or dot product interchangeably and never has to know which embedder ran.
``embedding_space_name`` names the vector space (model + dimension); vector collections are
named after it, so switching models starts new collections instead of mixing two spaces.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol


class Embedder(Protocol):
    """Turns texts into unit-length vectors of one fixed space."""

    @property
    def model_name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text, in input order; ``[]`` for no texts."""
        ...


def embedding_space_name(embedder: Embedder) -> str:
    """A slug such as ``all-minilm-l6-v2-384``: lower-case model name plus dimension.

    Used to name vector collections; two embedders share a name only when their vectors
    are comparable (same model, same dimension).
    """
    slug = re.sub(r"[^a-z0-9]+", "-", embedder.model_name.lower()).strip("-")
    if not slug:
        raise ValueError(
            f"embedder model_name {embedder.model_name!r} has no letters or digits to name "
            "a vector space with; give the model a real name"
        )
    return f"{slug}-{embedder.dimension}"


class EmbeddingRequestError(RuntimeError):
    """The embedding endpoint failed for good (not retryable, or out of attempts).

    `transient`: every attempt failed in a way that retrying later may fix (no answer,
    timeouts, 429, 5xx), so the endpoint is away rather than the request wrong; the
    indexer waits such an outage out (connectors/errors.py)."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient
