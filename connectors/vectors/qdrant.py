"""The vector store on a Qdrant server (or qdrant-client's local mode), via qdrant-client."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from qdrant_client import QdrantClient, models

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
from connectors.vectors.qdrant_cluster import QdrantClusterOptions
from dataflow.core.lexical import SparseVector

_TERMS_INDEX = models.TextIndexParams(
    type=models.TextIndexType.TEXT, tokenizer=models.TokenizerType.WHITESPACE, lowercase=False
)
"""`TERMS_FIELD`'s full-text index: each space-separated term one token, as written."""


class QdrantClientVectorStore(BaseVectorStore):
    """A `VectorStore` on qdrant-client: a Qdrant server, or local mode (same API).

    Local mode is brute force in Python (~120 ms per search at 50k points, more with a
    filter), so it suits tests and small corpora; the embedded default is Qdrant Edge.
    """

    def __init__(
        self,
        client: QdrantClient,
        workspace: str,
        options: VectorStoreOptions | None = None,
        *,
        create_payload_indexes: bool = True,
        cluster: QdrantClusterOptions | None = None,
    ):
        super().__init__(workspace, options)
        self.client = client
        # Local mode ignores payload indexes (and warns); a server needs them for filters.
        self._create_payload_indexes = create_payload_indexes
        # Local mode takes these and ignores them: one process has one shard.
        self.cluster = cluster or QdrantClusterOptions()

    @classmethod
    def from_url(
        cls,
        url: str,
        workspace: str,
        options: VectorStoreOptions | None = None,
        *,
        api_key: str | None = None,
        timeout: int | None = None,
        cluster: QdrantClusterOptions | None = None,
    ) -> QdrantClientVectorStore:
        """A Qdrant server or cluster (``http://host:6333``)."""
        # qdrant-client's version check asks the server at construction and warns when the
        # minor versions are more than one apart. The calls made here are the ones the test
        # suite runs against a real server of an older minor version than the client's (and
        # the compose file pins a current one), so the warning would only repeat on every
        # open, and its request would make opening a store talk to the server before use.
        client = QdrantClient(url=url, api_key=api_key, timeout=timeout, check_compatibility=False)
        return cls(client, workspace, options, cluster=cluster)

    @classmethod
    def from_path(
        cls, path: str, workspace: str, options: VectorStoreOptions | None = None
    ) -> QdrantClientVectorStore:
        """qdrant-client local mode persisted under `path` (one process per path)."""
        return cls(QdrantClient(path=path), workspace, options, create_payload_indexes=False)

    @classmethod
    def in_memory(
        cls, workspace: str, options: VectorStoreOptions | None = None
    ) -> QdrantClientVectorStore:
        """qdrant-client local mode in memory (lost on close)."""
        return cls(QdrantClient(":memory:"), workspace, options, create_payload_indexes=False)

    def _list_records(self) -> list[CollectionRecord]:
        prefix = workspace_collection_prefix(self.workspace)
        records = []
        for description in self.client.get_collections().collections:
            if description.name.startswith(prefix):
                info = self.client.get_collection(description.name)
                record = CollectionRecord.from_metadata(description.name, info.config.metadata)
                if record is not None:
                    records.append(record)
        return records

    def _create_or_open(self, record: CollectionRecord, index_fields: Sequence[str]) -> None:
        if self.client.collection_exists(record.name):
            return
        self.client.create_collection(
            record.name,
            vectors_config=models.VectorParams(
                size=record.dimension, distance=models.Distance.COSINE
            ),
            sparse_vectors_config={LEXICAL_VECTOR: models.SparseVectorParams()},
            metadata=record.to_metadata(),
            shard_number=self.cluster.shard_number,
            replication_factor=self.cluster.replication_factor,
            write_consistency_factor=self.cluster.write_consistency_factor,
        )
        if self._create_payload_indexes:
            for field in index_fields:
                schema = _TERMS_INDEX if field == TERMS_FIELD else models.PayloadSchemaType.KEYWORD
                self.client.create_payload_index(record.name, field, field_schema=schema, wait=True)

    def _upgrade_terms(self, record: CollectionRecord) -> None:
        offset: Any = None
        while True:
            records, offset = self.client.scroll(
                record.name, limit=256, offset=offset, with_payload=[TERMS_FIELD]
            )
            texts = {
                r.id: terms_text(map(str, terms))
                for r in records
                if isinstance(terms := (r.payload or {}).get(TERMS_FIELD), list)
            }
            if texts:
                self.client.batch_update_points(
                    record.name,
                    [
                        models.SetPayloadOperation(
                            set_payload=models.SetPayload(payload={TERMS_FIELD: text}, points=[i])
                        )
                        for i, text in texts.items()
                    ],
                    wait=True,
                )
            if offset is None:
                break
        if self._create_payload_indexes:
            self.client.delete_payload_index(record.name, TERMS_FIELD, wait=True)
            self.client.create_payload_index(
                record.name, TERMS_FIELD, field_schema=_TERMS_INDEX, wait=True
            )
        self.client.update_collection(record.name, metadata=record.to_metadata())

    def _drop(self, name: str) -> None:
        self.client.delete_collection(name)

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
            vector: dict[str, Any] = {"": dense}
            if lexical:
                vector[LEXICAL_VECTOR] = models.SparseVector(
                    indices=list(lexical.indices), values=list(lexical.values)
                )
            points.append(models.PointStruct(id=point_id, vector=vector, payload=payload))
        self.client.upsert(name, points=points, wait=True)

    def _delete_batch(self, name: str, ids: list[str]) -> None:
        self.client.delete(name, points_selector=models.PointIdsList(points=list(ids)), wait=True)

    def _query(
        self,
        name: str,
        query: list[float] | SparseVector,
        limit: int,
        conditions: list[tuple[str, list[str]]],
        ids: list[str] | None,
        with_payload: bool,
    ) -> list[RawHit]:
        selector: models.PayloadSelector | bool = (
            models.PayloadSelectorExclude(exclude=list(INDEXED_FIELDS)) if with_payload else False
        )
        query_filter = _filter(conditions, ids)
        if isinstance(query, SparseVector):
            response = self.client.query_points(
                name,
                query=models.SparseVector(indices=list(query.indices), values=list(query.values)),
                using=LEXICAL_VECTOR,
                limit=limit,
                query_filter=query_filter,
                with_payload=selector,
            )
        else:
            response = self.client.query_points(
                name,
                query=query,
                using="",
                limit=limit,
                query_filter=query_filter,
                with_payload=selector,
            )
        return [
            RawHit(str(point.id), _engine_score(point.score), point.payload or {})
            for point in response.points
        ]

    def _retrieve_keys(self, name: str, ids: list[str]) -> dict[str, str]:
        records = self.client.retrieve(
            name, ids, with_payload=models.PayloadSelectorInclude(include=[KEY_FIELD])
        )
        return {str(r.id): str(r.payload[KEY_FIELD]) for r in records if r.payload}

    def _retrieve(self, name: str, ids: list[str]) -> list[RawRecord]:
        records = self.client.retrieve(name, ids, with_payload=True, with_vectors=True)
        return [RawRecord(dense_vector(r.vector, "Qdrant"), r.payload or {}) for r in records]

    def _count(self, name: str, term: str | None = None) -> int:
        count_filter = (
            models.Filter(
                must=[models.FieldCondition(key=TERMS_FIELD, match=models.MatchText(text=term))]
            )
            if term is not None
            else None
        )
        return self.client.count(name, count_filter=count_filter, exact=True).count

    def _scroll(self, name: str, page_size: int) -> Iterator[RawRecord]:
        offset: Any = None
        while True:
            records, offset = self.client.scroll(
                name, limit=page_size, offset=offset, with_payload=True, with_vectors=True
            )
            for r in records:
                yield RawRecord(dense_vector(r.vector, "Qdrant"), r.payload or {})
            if offset is None:
                return

    def _scroll_keys(self, name: str, page_size: int) -> Iterator[list[tuple[str, str]]]:
        offset: Any = None
        key_only = models.PayloadSelectorInclude(include=[KEY_FIELD])
        while True:
            records, offset = self.client.scroll(
                name, limit=page_size, offset=offset, with_payload=key_only, with_vectors=False
            )
            yield [(str(r.id), str(r.payload[KEY_FIELD])) for r in records if r.payload]
            if offset is None:
                return

    def _scroll_payloads(
        self,
        name: str,
        conditions: list[tuple[str, list[str]]],
        ids: list[str] | None,
        limit: int | None,
        page_size: int,
    ) -> Iterator[dict[str, Any]]:
        selector = models.PayloadSelectorExclude(exclude=list(INDEXED_FIELDS))
        query_filter = _filter(conditions, ids)
        offset: Any = None
        left = limit
        while left is None or left > 0:
            records, offset = self.client.scroll(
                name,
                scroll_filter=query_filter,
                limit=page_size if left is None else min(page_size, left),
                offset=offset,
                with_payload=selector,
                with_vectors=False,
            )
            for record in records:
                yield record.payload or {}
            if left is not None:
                left -= len(records)
            if offset is None:
                return

    def _ping(self) -> None:
        self.client.get_collections()

    def _close_backend(self) -> None:
        self.client.close()


def _engine_score(score: float) -> float:
    """The score as Qdrant's engine computed it, a float32. Over HTTP it arrives as the
    shortest decimal of that float32, whose nearest double is another number (0.10547285
    for 0.10547284781932831): rounded back, a server reports exactly the score Qdrant Edge
    reports for the same point, so answers and their scores do not depend on the backend."""
    return float(np.float32(score))


def _filter(conditions: list[tuple[str, list[str]]], ids: list[str] | None) -> models.Filter | None:
    must: list[Any] = [
        models.FieldCondition(key=field, match=models.MatchAny(any=values))
        for field, values in conditions
    ]
    if ids is not None:
        must.append(models.HasIdCondition(has_id=list(ids)))
    return models.Filter(must=must) if must else None
