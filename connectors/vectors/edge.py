"""A `VectorStore` on Qdrant Edge: Qdrant's own engine, in-process, no server.

This is the embedded default (`kgstream run`): the three searches of one Retrieve take a
few milliseconds on the bench corpus (bench/vector_store_bench.py), where qdrant-client's
local mode, brute force in Python, takes hundreds of milliseconds, over a second with a
filter (docs/decisions/0012-qdrant-edge-as-the-embedded-vector-store.md).

Layout on disk, one directory per collection::

    {path}/{collection name}/shard/          the Edge shard (segments, WAL, config)
    {path}/{collection name}/kgstream.json   the `CollectionRecord` (workspace, space, ...)

Reading a point's payload back costs more than scoring it (about ten times, for a search
that reads only each hit's key), so searches that need only keys read no payload; the base
class maps point ids to keys through a cache.

Edge never optimizes on its own: points stay in an appendable plain segment that is
searched exactly (brute force in Rust: milliseconds for tens of thousands of 384-d
points), so results are exact. `optimize` builds HNSW indexes and vacuums deletes; it
blocks for seconds and makes search approximate (on hard, weakly clustered data at default
settings, recall@10 falls to about 0.8; raise `hnsw_ef` to trade speed for recall), so it
is a maintenance step for corpora far larger than the bench's, never run on the write
path.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as edge

from connectors.vectors.base import (
    INDEXED_FIELDS,
    KEY_FIELD,
    LEXICAL_VECTOR,
    TERMS_FIELD,
    BaseVectorStore,
    CollectionRecord,
    RawHit,
    RawRecord,
    VectorStoreOptions,
    dense_vector,
    terms_text,
    workspace_collection_prefix,
)
from connectors.vectors.port import VectorStoreNotOpenError
from dataflow.core.lexical import SparseVector

_RECORD_FILE = "kgstream.json"
_TERMS_INDEX = edge.TextIndexParams(tokenizer=edge.TokenizerType.Whitespace, lowercase=False)
_SEARCH_PAYLOAD = edge.PayloadSelector.Exclude(list(INDEXED_FIELDS))
_KEY_ONLY = edge.PayloadSelector.Include([KEY_FIELD])
_TERMS_ONLY = edge.PayloadSelector.Include([TERMS_FIELD])
_SHARD_DIR = "shard"
_COMPACTING_DIR = "shard.compacting"  # `compact` writes the new shard here
_RETIRED_DIR = "shard.retired"  # then moves the old one here, the new one in, and deletes it


class EdgeVectorStore(BaseVectorStore):
    """Three Edge shards per workspace under one directory (one process per directory)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        workspace: str,
        options: VectorStoreOptions | None = None,
        *,
        hnsw_ef: int | None = None,
    ):
        """`hnsw_ef`: HNSW search breadth, used only once `optimize` has built an index."""
        super().__init__(workspace, options)
        self.path = Path(path)
        self._shards: dict[str, edge.EdgeShard] = {}
        self._search_params = edge.SearchParams(hnsw_ef=hnsw_ef) if hnsw_ef else None

    def shard(self, name: str) -> edge.EdgeShard:
        """The open Edge shard of the collection `name` (`collection_name`): Qdrant Edge's
        own API, as `QdrantClientVectorStore.client` is a server's, for what the port does
        not offer (an inspection, a repair)."""
        shard = self._shards.get(name)
        if shard is None:
            raise VectorStoreNotOpenError(
                f"no open Qdrant Edge collection {name!r}: call ensure_collections first"
            )
        return shard

    def optimize(self) -> None:
        """Build HNSW indexes and vacuum deleted points in every open collection (blocking)."""
        for shard in self._shards.values():
            shard.optimize()

    def _list_records(self) -> list[CollectionRecord]:
        if not self.path.is_dir():
            return []
        prefix = workspace_collection_prefix(self.workspace)
        records = []
        for entry in sorted(self.path.iterdir()):
            record_file = entry / _RECORD_FILE
            if entry.name.startswith(prefix) and record_file.is_file():
                record = CollectionRecord.from_metadata(
                    entry.name, json.loads(record_file.read_text(encoding="utf-8"))
                )
                if record is not None:
                    records.append(record)
        return records

    def _create_or_open(self, record: CollectionRecord, index_fields: Sequence[str]) -> None:
        if record.name in self._shards:
            return
        directory = self.path / record.name
        shard_dir = directory / _SHARD_DIR
        record_file = directory / _RECORD_FILE
        if record_file.is_file():
            _finish_compaction(directory)
            shard = edge.EdgeShard.load(str(shard_dir))
        else:
            # A crash between creating the shard and writing the record leaves a shard
            # with no record: it can only be empty or partial, so start it again.
            shutil.rmtree(directory, ignore_errors=True)
            shard = _new_shard(shard_dir, record.dimension)
            _write_atomically(record_file, json.dumps(record.to_metadata(), sort_keys=True))
        _index_fields(shard, index_fields)
        self._shards[record.name] = shard

    def _upgrade_terms(self, record: CollectionRecord) -> None:
        shard = self._shards[record.name]
        for records in self._pages(record.name, 256, _TERMS_ONLY, with_vector=False):
            for r in records:
                terms = (r.payload or {}).get(TERMS_FIELD)
                if isinstance(terms, list):
                    text = terms_text(map(str, terms))
                    shard.update(edge.UpdateOperation.set_payload([r.id], {TERMS_FIELD: text}))
        if TERMS_FIELD in shard.info().payload_schema:
            shard.update(edge.UpdateOperation.delete_field_index(TERMS_FIELD))
        shard.update(edge.UpdateOperation.create_field_index(TERMS_FIELD, _TERMS_INDEX))
        record_file = self.path / record.name / _RECORD_FILE
        _write_atomically(record_file, json.dumps(record.to_metadata(), sort_keys=True))

    def compact(self) -> None:
        """Rewrite every collection of the workspace into a new shard of its live points.

        Deleting a point only marks it: its vector and payload (chunk text, keys) stay in
        the segments and the write-ahead log. The rewritten shard holds only live points,
        and the old one is deleted, so what was deleted is gone from the files. The new
        shard is written beside the old and swapped in by renames; an interrupted swap is
        finished when the collection is next opened (`_finish_compaction`)."""
        for record in self._list_records():
            directory = self.path / record.name
            was_open = record.name in self._shards
            old = self._shards.pop(record.name, None)
            if old is None:
                _finish_compaction(directory)
                old = edge.EdgeShard.load(str(directory / _SHARD_DIR))
            fresh_dir = directory / _COMPACTING_DIR
            shutil.rmtree(fresh_dir, ignore_errors=True)
            fresh = _new_shard(fresh_dir, record.dimension)
            _index_fields(fresh, list(old.info().payload_schema))
            offset: Any = None
            while True:
                points, offset = old.scroll(
                    edge.ScrollRequest(
                        offset=offset, limit=256, with_payload=True, with_vector=True
                    )
                )
                if points:
                    copies = [
                        edge.Point(p.id, p.vector, p.payload or {})
                        for p in points
                        if p.vector is not None  # asked for with_vector: never None
                    ]
                    fresh.update(edge.UpdateOperation.upsert_points(copies))
                if offset is None:
                    break
            old.close()
            fresh.flush()
            fresh.close()
            os.replace(directory / _SHARD_DIR, directory / _RETIRED_DIR)
            os.replace(fresh_dir, directory / _SHARD_DIR)
            shutil.rmtree(directory / _RETIRED_DIR)
            if was_open:
                self._shards[record.name] = edge.EdgeShard.load(str(directory / _SHARD_DIR))

    def _drop(self, name: str) -> None:
        shard = self._shards.pop(name, None)
        if shard is not None:
            shard.close()
        shutil.rmtree(self.path / name, ignore_errors=True)

    def _upsert_batch(
        self,
        name: str,
        ids: list[str],
        vectors: np.ndarray,
        sparse: list[SparseVector],
        payloads: list[dict[str, Any]],
    ) -> None:
        points = []
        for point_id, dense, lexical, payload in zip(
            ids, vectors.tolist(), sparse, payloads, strict=True
        ):
            vector: Any = dense
            if lexical:
                terms = edge.SparseVector(list(lexical.indices), list(lexical.values))
                vector = {"": dense, LEXICAL_VECTOR: terms}
            points.append(edge.Point(point_id, vector, payload))
        self._shards[name].update(edge.UpdateOperation.upsert_points(points))

    def _delete_batch(self, name: str, ids: list[str]) -> None:
        self._shards[name].update(edge.UpdateOperation.delete_points(list(ids)))

    def _query(
        self,
        name: str,
        query: list[float] | SparseVector,
        limit: int,
        conditions: list[tuple[str, list[str]]],
        ids: list[str] | None,
        with_payload: bool,
    ) -> list[RawHit]:
        query_filter = _filter(conditions, ids)
        if isinstance(query, SparseVector):
            nearest = edge.Query.Nearest(
                edge.SparseVector(list(query.indices), list(query.values)), using=LEXICAL_VECTOR
            )
        else:
            nearest = edge.Query.Nearest(query)
        points = self._shards[name].query(
            edge.QueryRequest(
                limit=limit,
                query=nearest,
                filter=query_filter,
                with_payload=_SEARCH_PAYLOAD if with_payload else False,
                params=self._search_params,
            )
        )
        return [RawHit(str(p.id), p.score, p.payload or {}) for p in points]

    def _retrieve_keys(self, name: str, ids: list[str]) -> dict[str, str]:
        records = self._shards[name].retrieve(list(ids), with_payload=_KEY_ONLY, with_vector=False)
        return {str(r.id): str(r.payload[KEY_FIELD]) for r in records if r.payload}

    def _retrieve(self, name: str, ids: list[str]) -> list[RawRecord]:
        records = self._shards[name].retrieve(list(ids), with_payload=True, with_vector=True)
        return [RawRecord(dense_vector(r.vector, "Qdrant Edge"), r.payload or {}) for r in records]

    def _count(self, name: str, term: str | None = None) -> int:
        count_filter = (
            edge.Filter(must=[edge.FieldCondition(key=TERMS_FIELD, match=edge.MatchText(term))])
            if term is not None
            else None
        )
        return self._shards[name].count(edge.CountRequest(exact=True, filter=count_filter))

    def _scroll(self, name: str, page_size: int) -> Iterator[RawRecord]:
        for records in self._pages(name, page_size, True, with_vector=True):
            for r in records:
                yield RawRecord(dense_vector(r.vector, "Qdrant Edge"), r.payload or {})

    def _scroll_keys(self, name: str, page_size: int) -> Iterator[list[tuple[str, str]]]:
        for records in self._pages(name, page_size, _KEY_ONLY, with_vector=False):
            yield [(str(r.id), str(r.payload[KEY_FIELD])) for r in records if r.payload]

    def _scroll_payloads(
        self,
        name: str,
        conditions: list[tuple[str, list[str]]],
        ids: list[str] | None,
        limit: int | None,
        page_size: int,
    ) -> Iterator[dict[str, Any]]:
        pages = self._pages(
            name, page_size, _SEARCH_PAYLOAD, with_vector=False, filter=_filter(conditions, ids)
        )
        left = limit
        for records in pages:
            for record in records[:left]:
                yield record.payload
            if left is not None:
                left -= len(records)
                if left <= 0:
                    return

    def _pages(
        self,
        name: str,
        page_size: int,
        payload: Any,
        *,
        with_vector: bool,
        filter: edge.Filter | None = None,
    ) -> Iterator[list[Any]]:
        shard = self._shards[name]
        offset: Any = None
        while True:
            records, offset = shard.scroll(
                edge.ScrollRequest(
                    offset=offset,
                    limit=page_size,
                    filter=filter,
                    with_payload=payload,
                    with_vector=with_vector,
                )
            )
            yield records
            if offset is None:
                return

    def _ping(self) -> None:
        """In-process: reachable while the shards are open."""
        if not self._shards:
            raise VectorStoreNotOpenError("the Qdrant Edge shards are not open")
        for shard in self._shards.values():
            shard.info()

    def _close_backend(self) -> None:
        shards, self._shards = self._shards, {}
        for shard in shards.values():
            shard.flush()
            shard.close()


def _filter(conditions: list[tuple[str, list[str]]], ids: list[str] | None) -> edge.Filter | None:
    must: list[Any] = [
        edge.FieldCondition(key=field, match=edge.MatchAny(any=values))
        for field, values in conditions
    ]
    if ids is not None:
        must.append(edge.HasIdCondition(set(ids)))
    return edge.Filter(must=must) if must else None


def _new_shard(shard_dir: Path, dimension: int) -> edge.EdgeShard:
    config = edge.EdgeConfig(
        vectors=edge.EdgeVectorParams(size=dimension, distance=edge.Distance.Cosine),
        sparse_vectors={LEXICAL_VECTOR: edge.EdgeSparseVectorParams()},
    )
    return edge.EdgeShard.create(str(shard_dir), config)


def _index_fields(shard: edge.EdgeShard, fields: Sequence[str]) -> None:
    indexed = shard.info().payload_schema
    for field in fields:
        if field not in indexed:
            schema = _TERMS_INDEX if field == TERMS_FIELD else edge.PayloadSchemaType.Keyword
            shard.update(edge.UpdateOperation.create_field_index(field, schema))


def _finish_compaction(directory: Path) -> None:
    """After a `compact` that was interrupted: keep the old shard unless the new one had
    already been moved in (the renames are the only steps that change which is live)."""
    shard, retired = directory / _SHARD_DIR, directory / _RETIRED_DIR
    if retired.exists():
        if shard.exists():
            shutil.rmtree(retired)
        else:
            os.replace(retired, shard)
    shutil.rmtree(directory / _COMPACTING_DIR, ignore_errors=True)


def _write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
