"""The vector-store port: what the sinks and the query engine ask of a vector store, and
the data it takes and gives.

The contract every backend keeps (one suite checks it against each:
tests/connectors/vectors/):

- **One embedding space per workspace.** `ensure_collections` opens the workspace's three
  collections (chunks, entities, relations) for one embedding model and dimension; a
  workspace whose vectors another model made raises `VectorSpaceMismatchError` instead of
  mixing two vector spaces (`kgstream rebuild-vectors` re-embeds).
- **Writes are idempotent by (kind, key).** Keys: the chunk id, the entity key, and for a
  relation `dataflow.core.naming.relation_id`; replays are harmless.
- **Payloads come back unchanged**, so a hit joins back to the Redis records.
- **Lexical beside dense**: a point's `lexical_text` is searched BM25-style, its IDF over
  the live points.
- **Search is exact about ties.** Hits come score-descending with equal scores ordered
  by key, so every backend returns the same list for the same data.

The shared implementation is `connectors.vectors.base.BaseVectorStore`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeAlias

from dataflow.core.lexical import SparseVector

JsonValue: TypeAlias = (
    "str | int | float | bool | Sequence[JsonValue] | Mapping[str, JsonValue] | None"
)
"""A payload value: JSON data (lists and dicts; read back, sequences are lists)."""


class VectorKind(enum.Enum):
    """Which collection a point lives in; the value names the collection."""

    CHUNK = "chunks"
    ENTITY = "entities"
    RELATION = "relations"


@dataclass(frozen=True)
class VectorPoint:
    """One point to write, or one point read back.

    Read back, `vector` is the stored one: the store keeps cosine vectors unit-normalised.
    """

    kind: VectorKind
    key: str
    vector: Sequence[float]
    payload: Mapping[str, JsonValue]
    lexical_text: str = ""  # indexed for `search_lexical`; not returned when read back


@dataclass(frozen=True)
class VectorHit:
    """One search result: `score` is the cosine similarity to the query vector."""

    kind: VectorKind
    key: str
    score: float
    payload: Mapping[str, JsonValue]


@dataclass(frozen=True)
class VectorFilter:
    """Restrict a search to points from some documents and/or under a path.

    `doc_ids`: keep points whose doc ids include any of these (empty: no restriction).
    `file_path_prefix`: keep points with a file path equal to it or inside it as a
    directory; it matches whole path components, so ``"a/b"`` matches ``a/b``,
    ``a/b/c.md`` but not ``a/bc.md``. `chunk_ids`: keep points whose ``chunk_id`` or
    ``chunk_ids`` payload includes any of these (an entity's or relation's source chunks).
    `ends`: keep points whose ``source`` or ``target`` payload is one of these (the
    relations of some entities).
    Several given: a point must satisfy all.
    """

    doc_ids: tuple[str, ...] = ()
    file_path_prefix: str | None = None
    chunk_ids: tuple[str, ...] = ()  # points that cite any of these chunks (empty: any)
    ends: tuple[str, ...] = ()  # relations with any of these entity keys at an end (empty: any)


class VectorSpaceMismatchError(RuntimeError):
    """The workspace holds vectors from another embedding model or dimension, or in a format
    this version does not read: `kgstream rebuild-vectors` re-creates them (the message says
    which)."""


class VectorStoreNotOpenError(RuntimeError):
    """A read or write came before `ensure_collections`."""


class VectorStore(Protocol):
    """The vector-store port: what the sinks and the query engine need."""

    def ensure_collections(self, space: str, dimension: int) -> None:
        """Open (creating if needed) the three collections for this embedding space."""
        ...

    def upsert(self, points: Iterable[VectorPoint]) -> None:
        """Insert or replace points by (kind, key); the last of duplicate keys wins."""
        ...

    def delete(self, kind: VectorKind, keys: Iterable[str]) -> None:
        """Delete points by key; missing keys are ignored."""
        ...

    def search(
        self,
        kind: VectorKind,
        vector: Sequence[float],
        top_k: int,
        filter: VectorFilter | None = None,
        keys: Iterable[str] | None = None,
        *,
        with_payload: bool = True,
    ) -> list[VectorHit]:
        """The `top_k` most cosine-similar points, score descending, ties by key;
        with `keys`, only among those points (missing keys are ignored). With
        `with_payload` False the hits carry their keys and scores only (an empty
        payload), which is cheaper to read back."""
        ...

    def search_lexical(
        self,
        kind: VectorKind,
        text: str,
        top_k: int,
        filter: VectorFilter | None = None,
        keys: Iterable[str] | None = None,
        *,
        with_payload: bool = True,
        as_of: int | None = None,
    ) -> list[VectorHit]:
        """The `top_k` best BM25-style matches of `text` (IDF over the live collection),
        score descending, ties by key; only points sharing a term score. `[]` when `text`
        has no searchable terms (stopwords only)."""
        ...

    def lexical_query(
        self, kind: VectorKind, text: str, *, as_of: int | None = None
    ) -> SparseVector:
        """`text` as a lexical query: its terms weighted by their IDF in the live
        collection (one count per term), to reuse across several `search_sparse` calls.
        `as_of` names the index state the caller reads (the gateway passes the index
        version): counts made under the same `as_of` are reused, not counted again."""
        ...

    def search_sparse(
        self,
        kind: VectorKind,
        query: SparseVector,
        top_k: int,
        filter: VectorFilter | None = None,
        keys: Iterable[str] | None = None,
        *,
        with_payload: bool = True,
    ) -> list[VectorHit]:
        """`search_lexical` with a query made by `lexical_query`."""
        ...

    def get(self, kind: VectorKind, keys: Iterable[str]) -> dict[str, VectorPoint]:
        """The stored points among `keys`, by key; missing keys are absent."""
        ...

    def payloads(
        self,
        kind: VectorKind,
        filter: VectorFilter | None = None,
        keys: Iterable[str] | None = None,
        *,
        limit: int | None = None,
    ) -> dict[str, dict[str, JsonValue]]:
        """The payloads of the points that match `filter` (and, with `keys`, are among
        them), by key, no vectors read: at most `limit` of them (None: all), in no
        particular order."""
        ...

    def count(self, kind: VectorKind) -> int:
        """How many points the collection holds."""
        ...

    def ping(self) -> None:
        """Raise when the backend cannot be reached (the gateway's health check)."""
        ...

    def iter_points(self, kind: VectorKind) -> Iterator[VectorPoint]:
        """Every point of the collection, in no particular order (export, equality tests)."""
        ...

    def clear(self) -> None:
        """Drop every collection of this workspace, whatever space made it.

        If the store was open it stays open, on the same space, with empty collections.
        """
        ...

    def close(self) -> None:
        """Release the backend (files, locks, connections)."""
        ...
