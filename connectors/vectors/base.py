"""`BaseVectorStore`, the shared implementation of the vector-store port
(`connectors.vectors.port`): three Qdrant collections per workspace (chunks, entities,
relations).

Why it looks the way it does:

- **One space per collection.** A collection is named
  ``kg_{workspace}_{kind}_{space}`` where ``space`` names the embedding model and its
  dimension (``all-minilm-l6-v2-384``), and each collection records that space in its
  metadata. Opening a workspace whose vectors were made by another model raises
  `VectorSpaceMismatchError` instead of silently mixing two vector spaces; the fix is
  ``kgstream rebuild-vectors`` (`VectorStore.clear`, `ensure_collections` with the new
  space, re-embed).
- **Deterministic ids.** A point's id is ``uuid5(KGSTREAM_POINT_NAMESPACE, f"{kind}:{key}")``
  (`point_id`), so every write is an idempotent upsert or delete and replays are harmless.
  Keys: the chunk id, the entity key, and for a relation `dataflow.core.naming.relation_id` (its two
  entity keys, sorted, joined by U+001F, which entity keys never contain).
- **Payloads join back to Redis.** The caller's payload is stored and returned unchanged.
  By convention it carries ``doc_id`` + ``file_path`` + ``chunk_id`` (chunks) or
  ``doc_ids`` + ``file_paths`` + ``chunk_ids`` (points that come from many chunks; kgstream's
  own entity and relation points carry none, connectors/writes.py), and relations also carry
  ``source`` and ``target``. From those fields the
  store derives indexed fields (prefixed ``_kg_``, hidden from readers): the point's key,
  its doc ids, its chunk ids (so "the entities these chunks mention" is one filtered
  search), a relation's two entity keys (so "the relations of these entities" is one
  filtered search), and every directory prefix of its file paths, because Qdrant cannot
  prefix-match a keyword payload (`path_prefixes`).
- **Lexical beside dense.** Every point may carry a text for lexical search
  (`VectorPoint.lexical_text`); the store turns it into a BM25-style sparse vector with
  `dataflow.core.lexical` (the tokenizer `search_lexical` also uses), and keeps the
  text's distinct terms in an indexed payload field. A lexical search counts, for each
  query term, the live points holding it, so its IDF follows edits and deletes exactly
  (Qdrant's own IDF modifier keeps deleted points until a segment is optimized).

Backends: `QdrantClientVectorStore` (a Qdrant server, or qdrant-client's local mode,
which shares the server's API) in `connectors.vectors.qdrant`, and `EdgeVectorStore`
(Qdrant Edge in-process) in `connectors.vectors.edge`. Both pass one contract suite.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import logging
import math
import re
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from connectors.vectors.port import (
    JsonValue,
    VectorFilter,
    VectorHit,
    VectorKind,
    VectorPoint,
    VectorSpaceMismatchError,
    VectorStoreNotOpenError,
)
from dataflow.core.lexical import (
    SparseVector,
    lexical_terms,
    query_terms,
    query_vector,
    terms_vector,
)

_log = logging.getLogger(__name__)

KGSTREAM_POINT_NAMESPACE = uuid.UUID("6f1c1a52-3d0e-5b8e-9a57-2f4c8b1d7e90")
"""Namespace of every point id; fixed forever, or every stored point id changes."""

INDEX_FIELD_PREFIX = "_kg_"
KEY_FIELD = "_kg_key"
DOC_IDS_FIELD = "_kg_doc_ids"
CHUNK_IDS_FIELD = "_kg_chunk_ids"
ENDS_FIELD = "_kg_ends"
TERMS_FIELD = "_kg_terms"
"""The point's distinct lexical terms as one text, space-separated, indexed as full text with
a whitespace tokenizer: counting the points whose text holds a term as a whole token gives
its document frequency (`lexical_query`). A list of keywords would count the same, but Qdrant
Edge's binding converts a list element by element, which makes a point with many terms
several times slower to build than one text (docs/decisions/0013-lexical-vectors.md)."""
PATH_PREFIXES_FIELD = "_kg_path_prefixes"
PAYLOAD_FIELD = "_kg_payload"
"""The caller's payload, stored as one JSON text: no filter reads it, and Qdrant Edge's
binding takes a text at once where it converts a list element by element, string by string
(docs/decisions/0012-qdrant-edge-as-the-embedded-vector-store.md). A point without it holds
the caller's fields at the top level."""
# The collections' format: a lexical sparse vector beside the dense one, a relation's two
# ends indexed, chunk points naming what they mention while entity and relation points carry
# no citation lists (connectors/writes.py), and the terms as one text with a full-text index.
# Formats 1 to 3 lack some of these and are refused with the command that rebuilds them.
METADATA_FORMAT = "kgstream-vectors/5"
KEYWORD_TERMS_FORMAT = "kgstream-vectors/4"
"""The format that differs from `METADATA_FORMAT` only in `TERMS_FIELD` (a keyword list):
opening such a collection rewrites it in place (`_upgrade_terms`)."""
_OLDER_FORMATS = tuple(f"kgstream-vectors/{n}" for n in (1, 2, 3, 4))
LEXICAL_VECTOR = "lexical"
INDEXED_FIELDS = (DOC_IDS_FIELD, CHUNK_IDS_FIELD, ENDS_FIELD, PATH_PREFIXES_FIELD, TERMS_FIELD)
"""The indexed fields (keywords, `TERMS_FIELD` full text): filters and counts use them, a
search never returns them."""


@dataclass(frozen=True)
class VectorStoreOptions:
    """How the store talks to its backend.

    `batch_size`: points per upsert/delete/retrieve request; bounds request size and
    memory, and (on a server) the size of one HTTP/gRPC message.
    `cached_keys`: point id -> key pairs kept for searches without payload (about 150
    bytes each; the oldest go first).
    """

    batch_size: int = 256
    cached_keys: int = 1 << 18

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"VectorStoreOptions.batch_size must be >= 1; got {self.batch_size}")
        if self.cached_keys < 0:
            raise ValueError(f"VectorStoreOptions.cached_keys must be >= 0; got {self.cached_keys}")


@dataclass(frozen=True)
class KeyCacheStats:
    """The point id -> key cache of a store (`BaseVectorStore.key_cache`).

    `cached`: pairs held now (at most `VectorStoreOptions.cached_keys`).
    `read_from_backend`: point ids whose key searches without payload had to read from the
    backend, since the store was made (each at most once while it stays cached).
    `warming_up`: the background read of every key (`start_key_warmup`) is running.
    """

    cached: int
    read_from_backend: int
    warming_up: bool


@dataclass(frozen=True)
class CollectionRecord:
    """What a stored collection says about itself (kept in its metadata)."""

    name: str
    workspace: str
    kind: VectorKind
    space: str
    dimension: int
    current_format: bool = True  # False: formats 1 to 3, without fields this one searches
    keyword_terms: bool = False  # `KEYWORD_TERMS_FORMAT`: upgraded when opened

    def to_metadata(self) -> dict[str, JsonValue]:
        return {
            "format": METADATA_FORMAT,
            "workspace": self.workspace,
            "kind": self.kind.value,
            "space": self.space,
            "dimension": self.dimension,
        }

    @staticmethod
    def from_metadata(name: str, metadata: Mapping[str, Any] | None) -> CollectionRecord | None:
        """Parse a collection's metadata; None when it is not a kgstream collection."""
        stored_format = metadata.get("format") if metadata else None
        if not metadata or stored_format not in (METADATA_FORMAT, *_OLDER_FORMATS):
            return None
        return CollectionRecord(
            name=name,
            workspace=str(metadata["workspace"]),
            kind=VectorKind(metadata["kind"]),
            space=str(metadata["space"]),
            dimension=int(metadata["dimension"]),
            current_format=stored_format in (METADATA_FORMAT, KEYWORD_TERMS_FORMAT),
            keyword_terms=stored_format == KEYWORD_TERMS_FORMAT,
        )


def space_mismatch(
    workspace: str, stored: CollectionRecord, space: str, dimension: int
) -> VectorSpaceMismatchError:
    """The error for a workspace whose `stored` collection another space or format made."""
    if not stored.current_format:
        return VectorSpaceMismatchError(
            f"workspace {workspace!r} holds {stored.kind.value} vectors (collection "
            f"{stored.name!r}) from an older kgstream (without the lexical vectors, "
            "indexed fields or chunk mentions this version searches with). "
            "Run `kgstream rebuild-vectors` to re-create the collections from Redis."
        )
    return VectorSpaceMismatchError(
        f"workspace {workspace!r} holds {stored.kind.value} vectors made by embedding "
        f"space {stored.space!r} ({stored.dimension}-d, collection {stored.name!r}), but "
        f"the configured embedder is {space!r} ({dimension}-d); vectors of two models "
        "cannot be compared. Run `kgstream rebuild-vectors` to drop the old collections "
        "and re-embed every chunk, entity and relation with the configured model, or "
        "configure the embedder that made them."
    )


@functools.lru_cache(maxsize=1 << 16)
def point_id(kind: VectorKind, key: str) -> str:
    """The Qdrant point id of a key: a UUID string, the same on every machine and run.
    Cached: writes, reads by key and searches among given keys ask for the same ids again."""
    return str(uuid.uuid5(KGSTREAM_POINT_NAMESPACE, f"{kind.value}:{key}"))


def path_prefixes(file_path: str) -> list[str]:
    """Every directory prefix of a path, then the path: "a/b/c.md" -> a/, a/b/, a/b/c.md."""
    prefixes = [file_path[: i + 1] for i, char in enumerate(file_path) if char == "/"]
    if file_path and not file_path.endswith("/"):
        prefixes.append(file_path)
    return prefixes


def collection_name(workspace: str, kind: VectorKind, space: str) -> str:
    """``kg_{workspace}_{kind}_{space}``, with each part made safe for Qdrant and file names."""
    return f"kg_{_sanitise_name_part(workspace, 'workspace')}_{kind.value}_" + (
        _sanitise_name_part(space, "space")
    )


def workspace_collection_prefix(workspace: str) -> str:
    """The name prefix shared by every collection of a workspace."""
    return f"kg_{_sanitise_name_part(workspace, 'workspace')}_"


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def _sanitise_name_part(part: str, field: str) -> str:
    if not part:
        raise ValueError(f"vector store {field} must be a non-empty string; got {part!r}")
    safe = _UNSAFE.sub("_", part)
    if safe != part:  # keep distinct names distinct after replacing characters
        safe = f"{safe}_{hashlib.sha1(part.encode()).hexdigest()[:8]}"
    return safe


def index_fields(
    kind: VectorKind, key: str, payload: Mapping[str, JsonValue], terms: Iterable[str] = ()
) -> dict[str, Any]:
    """The stored payload: the caller's payload plus the derived, indexed `_kg_` fields;
    `terms` are the `lexical_terms` of the point's lexical text."""
    for field in payload:
        if field.startswith(INDEX_FIELD_PREFIX):
            raise ValueError(
                f"{kind.value} point {key!r}: payload field {field!r} uses the reserved prefix "
                f"{INDEX_FIELD_PREFIX!r}; rename it"
            )
    doc_ids = _string_fields(kind, key, payload, "doc_id", "doc_ids")
    file_paths = _string_fields(kind, key, payload, "file_path", "file_paths")
    prefixes = sorted({prefix for path in file_paths for prefix in path_prefixes(path)})
    stored: dict[str, Any] = {
        KEY_FIELD: key,
        PAYLOAD_FIELD: json.dumps(dict(payload), ensure_ascii=False),
    }
    stored[DOC_IDS_FIELD] = sorted(set(doc_ids))
    chunk_ids = _string_fields(kind, key, payload, "chunk_id", "chunk_ids")
    if kind is VectorKind.CHUNK:
        # A chunk's key is its chunk id, indexed with it: a search among given chunks
        # matches this keyword field (`BaseVectorStore._ranked`).
        if any(chunk_id != key for chunk_id in chunk_ids):
            raise ValueError(
                f"chunk point {key!r}: its payload's chunk ids {chunk_ids!r} must be its key"
            )
        chunk_ids = [key]
    stored[CHUNK_IDS_FIELD] = sorted(set(chunk_ids))
    ends = {
        end for name in ("source", "target") for end in _string_fields(kind, key, payload, name)
    }
    stored[ENDS_FIELD] = sorted(ends)
    stored[PATH_PREFIXES_FIELD] = prefixes
    stored[TERMS_FIELD] = terms_text(terms)
    return stored


def terms_text(terms: Iterable[str]) -> str:
    """`TERMS_FIELD`'s value: the distinct terms, sorted, space-separated (a term holds no
    white space)."""
    return " ".join(sorted(set(terms)))


def _string_fields(
    kind: VectorKind, key: str, payload: Mapping[str, JsonValue], one: str, many: str = ""
) -> list[str]:
    """The string in field `one` and the strings in list field `many` (if given)."""
    values: list[str] = []
    single = payload.get(one)
    if single is not None:
        if not isinstance(single, str):
            raise ValueError(
                f"{kind.value} point {key!r}: payload field {one!r} must be a string; "
                f"got {single!r}"
            )
        values.append(single)
    several = payload.get(many) if many else None
    if several is not None:
        if not isinstance(several, list) or not all(isinstance(v, str) for v in several):
            raise ValueError(
                f"{kind.value} point {key!r}: payload field {many!r} must be a list of "
                f"strings; got {several!r}"
            )
        values.extend(several)
    return values


def strip_index_fields(stored: Mapping[str, Any]) -> dict[str, JsonValue]:
    """The caller's payload back from a stored one (`PAYLOAD_FIELD`, or the top-level
    fields of a point without it)."""
    text = stored.get(PAYLOAD_FIELD)
    if text is not None:
        payload: dict[str, JsonValue] = json.loads(text)
        return payload
    return {k: v for k, v in stored.items() if not k.startswith(INDEX_FIELD_PREFIX)}


def filter_conditions(query_filter: VectorFilter) -> list[tuple[str, list[str]]]:
    """(field, any-of values) pairs that must all hold; backends turn them into MatchAny."""
    conditions: list[tuple[str, list[str]]] = []
    if query_filter.doc_ids:
        conditions.append((DOC_IDS_FIELD, sorted(set(query_filter.doc_ids))))
    if query_filter.chunk_ids:
        conditions.append((CHUNK_IDS_FIELD, sorted(set(query_filter.chunk_ids))))
    if query_filter.ends:
        conditions.append((ENDS_FIELD, sorted(set(query_filter.ends))))
    prefix = query_filter.file_path_prefix
    if prefix is not None:
        stem = prefix.rstrip("/")
        if not stem:
            raise ValueError(
                f"VectorFilter.file_path_prefix must name a file or directory; got {prefix!r} "
                "(use None for no path restriction)"
            )
        conditions.append((PATH_PREFIXES_FIELD, [stem, stem + "/"]))
    return conditions


@dataclass(frozen=True)
class RawHit:
    """A backend's scored point, before ties are ordered: its point id (the UUID string
    `point_id` gives), score, and payload (empty for a search without payload)."""

    point_id: str
    score: float
    payload: Mapping[str, Any]


@dataclass(frozen=True)
class RawRecord:
    """A backend's stored point."""

    vector: Sequence[float]
    payload: Mapping[str, Any]


class BaseVectorStore(ABC):
    """The backend-independent half of a `VectorStore`: validation, ids, payloads, ties.

    A backend implements the small abstract methods below on collection names and point
    ids; everything a caller can observe is decided here, so backends cannot drift apart.
    """

    def __init__(self, workspace: str, options: VectorStoreOptions | None = None):
        workspace_collection_prefix(workspace)  # validates
        self.workspace = workspace
        self.options = options or VectorStoreOptions()
        self._space: str | None = None
        self._dimension = 0
        self._names: dict[VectorKind, str] = {}
        # Lexical document counts of one index state (`lexical_query`'s `as_of`).
        self._counts_lock = threading.Lock()
        self._counts_as_of: int | None = None
        self._counts: dict[tuple[str, str | None], int] = {}
        # Point id -> key, for searches without payload. Never stale: an id is a hash of
        # its key (`point_id`), so it names the same key whatever is written or deleted.
        self._keys_lock = threading.Lock()
        self._keys: dict[str, str] = {}
        self._keys_read = 0
        self._warmup: threading.Thread | None = None
        self._warmup_stop = threading.Event()

    # -- backend primitives -------------------------------------------------------------

    @abstractmethod
    def _list_records(self) -> list[CollectionRecord]:
        """Every kgstream collection of this workspace, of any space."""

    @abstractmethod
    def _create_or_open(self, record: CollectionRecord, index_fields: Sequence[str]) -> None:
        """Open the collection, creating it (cosine, keyword-indexed fields) if missing."""

    @abstractmethod
    def _drop(self, name: str) -> None: ...

    @abstractmethod
    def _upsert_batch(
        self,
        name: str,
        ids: list[str],
        vectors: np.ndarray,
        sparse: list[SparseVector],
        payloads: list[dict[str, Any]],
    ) -> None:
        """Replace the points; an empty sparse vector means the point has no lexical terms."""

    @abstractmethod
    def _delete_batch(self, name: str, ids: list[str]) -> None: ...

    @abstractmethod
    def _query(
        self,
        name: str,
        query: list[float] | SparseVector,
        limit: int,
        conditions: list[tuple[str, list[str]]],
        ids: list[str] | None,
        with_payload: bool,
    ) -> list[RawHit]:
        """At most `limit` hits, score descending (ties in any order): by cosine for a
        dense query, by the lexical vector (IDF applied) for a sparse one; `ids` None
        means every point, else only those point ids. With `with_payload`, each hit's
        payload holds `KEY_FIELD` and the caller's fields (`INDEXED_FIELDS` are never
        needed from a search: reading their long lists back is most of a search's
        cost); without, no payload is read at all (keys come from `_retrieve_keys`, once
        per point id: reading a payload costs more than scoring the whole collection)."""

    @abstractmethod
    def _retrieve(self, name: str, ids: list[str]) -> list[RawRecord]: ...

    @abstractmethod
    def _retrieve_keys(self, name: str, ids: list[str]) -> dict[str, str]:
        """The `KEY_FIELD` of each of those points that exists, by point id."""

    @abstractmethod
    def _scroll_keys(self, name: str, page_size: int) -> Iterator[list[tuple[str, str]]]:
        """Every point's (point id, `KEY_FIELD`), in pages, reading no other field."""

    @abstractmethod
    def _count(self, name: str, term: str | None = None) -> int:
        """Points in the collection; with `term`, only those whose `TERMS_FIELD` holds it."""

    @abstractmethod
    def _scroll(self, name: str, page_size: int) -> Iterator[RawRecord]: ...

    @abstractmethod
    def _scroll_payloads(
        self,
        name: str,
        conditions: list[tuple[str, list[str]]],
        ids: list[str] | None,
        limit: int | None,
        page_size: int,
    ) -> Iterator[Mapping[str, Any]]:
        """The stored payloads (`KEY_FIELD` and the caller's fields, as `_query` reads
        them) of at most `limit` points (None: all) that meet every condition and, with
        `ids`, are among those point ids."""

    @abstractmethod
    def _upgrade_terms(self, record: CollectionRecord) -> None:
        """Rewrite the open collection `record.name` of `KEYWORD_TERMS_FORMAT` as this
        format: each point's `TERMS_FIELD` list as one text, indexed as full text, then its
        metadata `record`'s. Run again after a crash, it finishes the job."""

    @abstractmethod
    def _ping(self) -> None:
        """One cheap round trip to the backend; raise when it cannot be reached."""

    @abstractmethod
    def _close_backend(self) -> None: ...

    # -- the VectorStore port ---------------------------------------------------------

    def ensure_collections(self, space: str, dimension: int) -> None:
        if dimension < 1:
            raise ValueError(f"vector dimension must be >= 1; got {dimension}")
        names = {kind: collection_name(self.workspace, kind, space) for kind in VectorKind}
        self._space, self._dimension, self._names = None, 0, {}  # open again only on success
        keyword_terms = set()
        for stored in self._list_records():
            if stored.workspace == self.workspace and (
                stored.space != space or stored.dimension != dimension or not stored.current_format
            ):
                raise space_mismatch(self.workspace, stored, space, dimension)
            if stored.workspace == self.workspace and stored.keyword_terms:
                keyword_terms.add(stored.name)
        for kind, name in names.items():
            record = CollectionRecord(name, self.workspace, kind, space, dimension)
            self._create_or_open(record, INDEXED_FIELDS)
            if name in keyword_terms:
                _log.info("vector collection %s: writing its terms as one text", name)
                self._upgrade_terms(record)
        self._space, self._dimension, self._names = space, dimension, names

    def upsert(self, points: Iterable[VectorPoint]) -> None:
        by_kind: dict[VectorKind, dict[str, VectorPoint]] = {}
        for point in points:
            self._name(point.kind)
            by_kind.setdefault(point.kind, {})[point.key] = point
        # Validate every point before writing any, so a bad one leaves the store unchanged.
        prepared = []
        for kind, latest in by_kind.items():
            batch = list(latest.values())
            vectors = np.stack([self._checked_vector(kind, p.key, p.vector) for p in batch])
            # Normalise here rather than trusting each backend to: qdrant-client's local
            # mode returns the raw vector after a reload from disk.
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            terms = [lexical_terms(p.lexical_text) for p in batch]
            sparse = [terms_vector(t) for t in terms]
            payloads = [
                index_fields(kind, p.key, p.payload, t) for p, t in zip(batch, terms, strict=True)
            ]
            ids = [point_id(kind, p.key) for p in batch]
            prepared.append((self._names[kind], ids, vectors, sparse, payloads))
        size = self.options.batch_size
        for name, ids, vectors, sparse, payloads in prepared:
            for start in range(0, len(ids), size):
                end = start + size
                self._upsert_batch(
                    name, ids[start:end], vectors[start:end], sparse[start:end], payloads[start:end]
                )

    def delete(self, kind: VectorKind, keys: Iterable[str]) -> None:
        name = self._name(kind)
        ids = sorted({point_id(kind, key) for key in _key_list(keys)})
        for start in range(0, len(ids), self.options.batch_size):
            self._delete_batch(name, ids[start : start + self.options.batch_size])

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
        self._name(kind)
        query = self._checked_vector(kind, "<query>", vector).tolist()
        return self._ranked(kind, query, top_k, filter, keys, with_payload)

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
        query = self.lexical_query(kind, text, as_of=as_of)
        return self.search_sparse(kind, query, top_k, filter, keys, with_payload=with_payload)

    def lexical_query(
        self, kind: VectorKind, text: str, *, as_of: int | None = None
    ) -> SparseVector:
        name = self._name(kind)
        terms = query_terms(text)
        if not terms:
            return SparseVector()
        counts: dict[tuple[str, str | None], int] = {}
        if as_of is not None:
            with self._counts_lock:
                if self._counts_as_of != as_of:  # a new index state: forget the old counts
                    self._counts_as_of, self._counts = as_of, {}
                counts = self._counts

        def count(term: str | None) -> int:
            found = counts.get((name, term))
            if found is None:
                found = self._count(name, term)
                counts[(name, term)] = found
            return found

        return query_vector({term: count(term) for term in terms}, count(None))

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
        self._name(kind)
        if not query:
            return []
        return self._ranked(kind, query, top_k, filter, keys, with_payload)

    def _ranked(
        self,
        kind: VectorKind,
        query: list[float] | SparseVector,
        top_k: int,
        filter: VectorFilter | None,
        keys: Iterable[str] | None,
        with_payload: bool,
    ) -> list[VectorHit]:
        name = self._name(kind)
        if top_k < 1:
            raise ValueError(f"search top_k must be >= 1; got {top_k}")
        conditions = filter_conditions(filter) if filter is not None else []
        ids: list[str] | None = None
        if keys is not None:
            among = sorted(set(_key_list(keys)))
            if not among:
                return []
            if kind is VectorKind.CHUNK:
                # A chunk point indexes its key as its one chunk id (`index_fields`), so
                # "among these chunks" is a match on that keyword index: a filter of strings,
                # where a point-id set is parsed id by id (on Qdrant Edge, building one of
                # hundreds of ids costs several times the keyword match, for the same hits).
                conditions.append((CHUNK_IDS_FIELD, among))
            else:
                ids = sorted({point_id(kind, key) for key in among})
        # Ask for one more than needed; while the last hit still ties with the k-th,
        # ties may have been cut arbitrarily, so widen until the tie group is complete.
        limit = top_k + 1
        while True:
            raw = self._query(name, query, limit, conditions, ids, with_payload)
            if len(raw) < limit or raw[-1].score < raw[top_k - 1].score:
                break
            limit *= 2
        keys = self._keys_of(name, raw)
        hits = [
            VectorHit(
                kind,
                keys[hit.point_id],
                hit.score,
                strip_index_fields(hit.payload) if with_payload else {},
            )
            for hit in raw
            if hit.point_id in keys  # else deleted since the search: as if searched after
        ]
        hits.sort(key=lambda hit: (-hit.score, hit.key))
        return hits[:top_k]

    def _keys_of(self, name: str, raw: Sequence[RawHit]) -> dict[str, str]:
        """The keys of `raw`'s points: from their payloads, the id cache, or the backend."""
        keys: dict[str, str] = {}
        missing: list[str] = []
        with self._keys_lock:
            for hit in raw:
                key = hit.payload.get(KEY_FIELD)
                if key is not None:
                    keys[hit.point_id] = str(key)
                elif (known := self._keys.get(hit.point_id)) is not None:
                    keys[hit.point_id] = known
                else:
                    missing.append(hit.point_id)
        if missing:
            keys.update(self._retrieve_keys(name, missing))
        with self._keys_lock:
            self._keys_read += len(missing)
            self._keys.update(keys)
            excess = len(self._keys) - self.options.cached_keys
            if excess > 0:  # forget the oldest entries (dicts keep insertion order)
                for stale in list(itertools.islice(self._keys, excess)):
                    del self._keys[stale]
        return keys

    def get(self, kind: VectorKind, keys: Iterable[str]) -> dict[str, VectorPoint]:
        name = self._name(kind)
        ids = sorted({point_id(kind, key) for key in _key_list(keys)})
        found: dict[str, VectorPoint] = {}
        for start in range(0, len(ids), self.options.batch_size):
            for record in self._retrieve(name, ids[start : start + self.options.batch_size]):
                point = self._to_point(kind, record)
                found[point.key] = point
        return found

    def payloads(
        self,
        kind: VectorKind,
        filter: VectorFilter | None = None,
        keys: Iterable[str] | None = None,
        *,
        limit: int | None = None,
    ) -> dict[str, dict[str, JsonValue]]:
        name = self._name(kind)
        if limit is not None and limit < 1:
            raise ValueError(f"payloads limit must be >= 1 or None; got {limit}")
        conditions = filter_conditions(filter) if filter is not None else []
        ids: list[str] | None = None
        if keys is not None:
            ids = sorted({point_id(kind, key) for key in _key_list(keys)})
            if not ids:
                return {}
        stored = self._scroll_payloads(name, conditions, ids, limit, self.options.batch_size)
        return {str(p[KEY_FIELD]): strip_index_fields(p) for p in stored}

    def count(self, kind: VectorKind) -> int:
        return self._count(self._name(kind))

    def collections(self) -> list[CollectionRecord]:
        """What each stored kgstream collection of the workspace says about itself (open
        or not, of any space): the format it was written in among the rest."""
        return [r for r in self._list_records() if r.workspace == self.workspace]

    def ping(self) -> None:
        self._ping()

    def iter_points(self, kind: VectorKind) -> Iterator[VectorPoint]:
        name = self._name(kind)
        for record in self._scroll(name, self.options.batch_size):
            yield self._to_point(kind, record)

    def clear(self) -> None:
        with self._counts_lock:
            self._counts_as_of, self._counts = None, {}
        for stored in self._list_records():
            if stored.workspace == self.workspace:
                self._drop(stored.name)
        if self._space is not None:
            self.ensure_collections(self._space, self._dimension)

    @property
    def key_cache(self) -> KeyCacheStats:
        """What the point id -> key cache holds and has cost (`KeyCacheStats`)."""
        warmup = self._warmup
        with self._keys_lock:
            return KeyCacheStats(
                cached=len(self._keys),
                read_from_backend=self._keys_read,
                warming_up=warmup is not None and warmup.is_alive(),
            )

    def start_key_warmup(self) -> None:
        """Read point keys into the id -> key cache in a background thread, a page of each
        collection in turn, until the cache is full or every key is in: a gateway's first
        searches then read no payload either (a fresh process reads a point's payload
        about four times slower than a scroll does). `close` stops it."""
        if self._warmup is None and self._names:
            self._warmup_stop.clear()
            self._warmup = threading.Thread(
                target=self._warm_keys, args=(list(self._names.values()),), daemon=True
            )
            self._warmup.start()

    def _warm_keys(self, names: list[str]) -> None:
        try:
            pages = [self._scroll_keys(name, self.options.batch_size) for name in names]
            for round_of_pages in itertools.zip_longest(*pages):
                for page in round_of_pages:
                    if self._warmup_stop.is_set():
                        return
                    with self._keys_lock:
                        room = self.options.cached_keys - len(self._keys)
                        if room <= 0:
                            return
                        for point, key in (page or [])[:room]:
                            self._keys.setdefault(point, key)
        except Exception as error:  # a cold cache is only slower: never fail a process for it
            _log.warning("reading point keys ahead stopped: %s", error)

    def close(self) -> None:
        warmup, self._warmup = self._warmup, None
        if warmup is not None:
            self._warmup_stop.set()
            warmup.join()
        self._close_backend()
        self._space, self._dimension, self._names = None, 0, {}

    # -- helpers ----------------------------------------------------------------------

    def _name(self, kind: VectorKind) -> str:
        name = self._names.get(kind)
        if name is None:
            raise VectorStoreNotOpenError(
                f"vector store for workspace {self.workspace!r} is not open: call "
                "ensure_collections(space, dimension) first"
            )
        return name

    def _checked_vector(self, kind: VectorKind, key: str, vector: Sequence[float]) -> np.ndarray:
        array = np.asarray(vector, dtype=np.float32)
        if array.shape != (self._dimension,):
            raise ValueError(
                f"{kind.value} vector for {key!r} has shape {array.shape}; the space "
                f"{self._space!r} holds {self._dimension}-d vectors"
            )
        norm = float(np.linalg.norm(array))
        if not math.isfinite(norm) or norm == 0.0:
            raise ValueError(
                f"{kind.value} vector for {key!r} has norm {norm}; cosine similarity needs a "
                "finite, non-zero vector (check the embedder's output)"
            )
        return array

    @staticmethod
    def _to_point(kind: VectorKind, record: RawRecord) -> VectorPoint:
        return VectorPoint(
            kind,
            str(record.payload[KEY_FIELD]),
            [float(x) for x in record.vector],
            strip_index_fields(record.payload),
        )


def _key_list(keys: Iterable[str]) -> list[str]:
    if isinstance(keys, str):
        raise TypeError(f"keys must be a collection of keys, not one string; got {keys!r}")
    return list(keys)


def dense_vector(vector: Any, backend: str) -> list[float]:
    """A stored point's dense vector as floats; `backend` names the engine in the error.

    Collections hold the unnamed dense vector beside the named lexical one, so a backend
    may return both by name: the dense one is named "".
    """
    if isinstance(vector, dict):
        vector = vector.get("")
    if not isinstance(vector, list):
        raise TypeError(f"expected one unnamed dense vector from {backend}; got {type(vector)!r}")
    return [float(x) for x in vector]
