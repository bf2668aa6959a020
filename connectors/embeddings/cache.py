"""A bounded in-process cache of embeddings by text.

An edit re-renders every entity and relation its chunks touch, but most of
them render to the same text as before (only source ids moved): embedding those
again is the largest cost of an edit with the local model. Vectors are kept as
float32 arrays (1.5 KB each at 384-d), least recently used first out.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from connectors.embeddings.base import Embedder


class CachedEmbedder:
    """Wraps an `Embedder`; texts seen recently are not embedded again."""

    def __init__(self, embedder: Embedder, capacity: int = 20_000) -> None:
        if capacity < 1:
            raise ValueError(f"embedding cache capacity must be >= 1 (got {capacity})")
        self.inner = embedder
        self.capacity = capacity
        self._vectors: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        keys = [hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest() for text in texts]
        found: dict[bytes, np.ndarray] = {}
        with self._lock:
            for key in keys:
                vector = self._vectors.get(key)
                if vector is not None:
                    self._vectors.move_to_end(key)
                    found[key] = vector
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        if missing:
            first_text = {key: text for key, text in zip(keys, texts, strict=True)}
            fresh = self.inner.embed([first_text[key] for key in missing])
            with self._lock:
                for key, values in zip(missing, fresh, strict=True):
                    array = np.asarray(values, dtype=np.float32)
                    found[key] = self._vectors[key] = array
                while len(self._vectors) > self.capacity:
                    self._vectors.popitem(last=False)
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        return [found[key].tolist() for key in keys]
