"""Graph records as Redis hashes, and the checks a batch of them passes before it is written.

List fields (source chunk ids, file paths, keywords, chunk ids, aliases) are JSON
arrays, except a long citation list, which is in a sorted set of its own with the field
holding `SIDE_MARKER` (connectors/redis/written_lists.py; the store reads it in for the
record: `ReadFields`); floats are stored as `repr` so they read back exactly.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from redis.typing import EncodableT, FieldT

from connectors.redis.ports import StoredDocument
from connectors.redis.written_lists import SIDE_MARKER
from dataflow.core.chunking import Chunk
from dataflow.core.commit import GraphBatch
from dataflow.core.contributions import EntityRecord, RelationRecord
from dataflow.core.documents import DocumentRecord, DocumentStatus, FailureKind
from dataflow.core.naming import relation_pair

# What redis-py's HSET takes (its Mapping is invariant in the key type).
HashFields = dict[FieldT, EncodableT]

ReadFields = Mapping[str, Any]
"""A record's hash as read (str values), its sorted-set lists read in as tuples (GraphStore)."""


def dump_list(values: Sequence[str]) -> str:
    return json.dumps(list(values), ensure_ascii=False)


# The json module's C scanner alone: `json.loads` wraps it in three Python calls and two
# regex matches, several times its cost on a short list, and a Retrieve reads hundreds of
# lists. (A decoder
# sets `scan_once` in its __init__; typeshed does not declare it.)
_SCAN_JSON: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def load_list(text: str) -> tuple[str, ...]:
    try:
        values, end = _SCAN_JSON(text, 0)
    except StopIteration:  # the scanner's way to say no JSON value starts here
        values, end = None, 0
    if not isinstance(values, list) or end != len(text):
        raise ValueError(f"expected a JSON array, found {text[:80]!r}")
    return tuple(values)  # `dump_list` wrote strings: JSON reads them back as str


# -- record <-> hash ---------------------------------------------------------


def entity_lists(record: EntityRecord) -> dict[str, tuple[str, ...]]:
    """The record's list fields, by field name."""
    return {
        "source_chunk_ids": record.source_chunk_ids,
        "file_paths": record.file_paths,
        "doc_ids": record.doc_ids,
        "aliases": record.aliases,
    }


def entity_fields(
    record: EntityRecord, leave_out: Collection[str] = (), marked: Collection[str] = ()
) -> HashFields:
    """The record's hash fields, without the list fields named in `leave_out` (the store
    has them already) and with those named in `marked` as `SIDE_MARKER` (their lists are in
    sorted sets: connectors/redis/written_lists.py)."""
    fields: HashFields = {
        "key": record.key,
        "name": record.name,
        "type": record.type,
        "description": record.description,
    }
    return _with_lists(fields, entity_lists(record), leave_out, marked)


def entity_from(fields: ReadFields) -> EntityRecord:
    return EntityRecord(
        key=fields["key"],
        name=fields["name"],
        type=fields["type"],
        description=fields["description"],
        source_chunk_ids=_list(fields["source_chunk_ids"]),
        file_paths=_list(fields["file_paths"]),
        doc_ids=_list(fields["doc_ids"]),
        aliases=_list(fields["aliases"]),
    )


def relation_lists(record: RelationRecord) -> dict[str, tuple[str, ...]]:
    """The record's list fields, by field name."""
    return {
        "keywords": record.keywords,
        "source_chunk_ids": record.source_chunk_ids,
        "file_paths": record.file_paths,
        "doc_ids": record.doc_ids,
    }


def relation_fields(
    record: RelationRecord, leave_out: Collection[str] = (), marked: Collection[str] = ()
) -> HashFields:
    """The record's hash fields, as `entity_fields` makes them."""
    fields: HashFields = {
        "source": record.source,
        "target": record.target,
        "source_name": record.source_name,
        "target_name": record.target_name,
        "description": record.description,
        "weight": repr(float(record.weight)),
    }
    return _with_lists(fields, relation_lists(record), leave_out, marked)


def _with_lists(
    fields: HashFields,
    lists: dict[str, tuple[str, ...]],
    leave_out: Collection[str],
    marked: Collection[str],
) -> HashFields:
    for name, values in lists.items():
        if name in marked:
            fields[name] = SIDE_MARKER
        elif name not in leave_out:
            fields[name] = dump_list(values)
    return fields


def relation_from(fields: ReadFields) -> RelationRecord:
    return RelationRecord(
        source=fields["source"],
        target=fields["target"],
        source_name=fields["source_name"],
        target_name=fields["target_name"],
        keywords=_list(fields["keywords"]),
        description=fields["description"],
        weight=float(fields["weight"]),
        source_chunk_ids=_list(fields["source_chunk_ids"]),
        file_paths=_list(fields["file_paths"]),
        doc_ids=_list(fields["doc_ids"]),
    )


def _list(value: str | tuple[str, ...]) -> tuple[str, ...]:
    """A list field as read: JSON in the hash, or already read from its sorted set."""
    return value if isinstance(value, tuple) else load_list(value)


def chunk_fields(chunk: Chunk) -> HashFields:
    return {
        "chunk_id": chunk.chunk_id,
        "doc_id": chunk.doc_id,
        "order": str(chunk.order),
        "text": chunk.text,
        "tokens": str(chunk.tokens),
        "file_path": chunk.file_path,
    }


def chunk_from(fields: dict[str, str]) -> Chunk:
    return Chunk(
        chunk_id=fields["chunk_id"],
        doc_id=fields["doc_id"],
        order=int(fields["order"]),
        text=fields["text"],
        tokens=int(fields["tokens"]),
        file_path=fields["file_path"],
    )


def document_fields(record: DocumentRecord, updated_at: str) -> HashFields:
    return {
        "doc_id": record.doc_id,
        "status": record.status.value,
        "file_path": record.file_path,
        "content_hash": record.content_hash,
        "chunk_ids": dump_list(record.chunk_ids),
        "preview": record.preview,
        "length": str(record.length),
        "reason": record.reason,
        "failure_kind": "" if record.failure_kind is None else record.failure_kind.value,
        "failed_chunk_ids": dump_list(record.failed_chunk_ids),
        "chunks_settled": str(record.chunks_settled),
        "chunks_changed": str(record.chunks_changed),
        "updated_at": updated_at,
    }


def document_from(fields: dict[str, str]) -> StoredDocument:
    record = DocumentRecord(
        doc_id=fields["doc_id"],
        status=DocumentStatus(fields["status"]),
        file_path=fields["file_path"],
        content_hash=fields["content_hash"],
        chunk_ids=load_list(fields["chunk_ids"]),
        preview=fields["preview"],
        length=int(fields["length"]),
        reason=fields["reason"],
        failure_kind=FailureKind(fields["failure_kind"]) if fields["failure_kind"] else None,
        failed_chunk_ids=load_list(fields["failed_chunk_ids"]),
        chunks_settled=int(fields["chunks_settled"]),
        chunks_changed=int(fields["chunks_changed"]),
    )
    return StoredDocument(
        record=record,
        created_at=float(fields["created_at"]),
        updated_at=float(fields["updated_at"]),
    )


def latest_documents(batch: GraphBatch) -> dict[str, DocumentRecord]:
    """The batch's document upserts by id; the last one of an id wins."""
    return {d.doc_id: d for d in batch.document_upserts}


def status_moves(
    documents: Iterable[DocumentRecord],
) -> list[tuple[DocumentStatus, list[str], list[str]]]:
    """For each status: the ids of the documents that now have it (to add to its set) and
    of those that now have another (to remove from it)."""
    records = list(documents)
    if not records:
        return []
    return [
        (
            status,
            [d.doc_id for d in records if d.status is status],
            [d.doc_id for d in records if d.status is not status],
        )
        for status in DocumentStatus
    ]


def aliases_from(wanted: Sequence[str], members: Sequence[set[str]]) -> dict[str, list[str]]:
    return {
        alias: sorted(entities) for alias, entities in zip(wanted, members, strict=True) if entities
    }


# -- batch validation --------------------------------------------------------


def _check_no_overlap(kind: str, upserts: Iterable[Any], deletes: Iterable[Any]) -> None:
    both = set(upserts) & set(deletes)
    if both:
        example = min(both)
        raise ValueError(
            f"GraphBatch holds {len(both)} {kind} key(s) in both upserts and deletes "
            f"(e.g. {example!r}); send one final operation per key"
        )


def check_batch(batch: GraphBatch) -> None:
    for entity in batch.entity_upserts:
        if not entity.key:
            raise ValueError(f"EntityRecord.key must be non-empty; got {entity!r}")
    for relation in batch.relation_upserts:
        if relation_pair(relation.source, relation.target) != relation.pair:
            raise ValueError(
                f"RelationRecord.source must sort before target; got "
                f"source={relation.source!r}, target={relation.target!r}"
            )
    for kind, ids in (
        ("chunk", [c.chunk_id for c in batch.chunk_upserts]),
        ("document", [d.doc_id for d in batch.document_upserts]),
    ):
        if any(not i for i in ids):
            raise ValueError(f"GraphBatch has a {kind} upsert with an empty id")
    _check_no_overlap("entity", (e.key for e in batch.entity_upserts), batch.entity_deletes)
    _check_no_overlap(
        "relation",
        (r.pair for r in batch.relation_upserts),
        (relation_pair(*p) for p in batch.relation_deletes),
    )
    _check_no_overlap("chunk", (c.chunk_id for c in batch.chunk_upserts), batch.chunk_deletes)
    _check_no_overlap(
        "document", (d.doc_id for d in batch.document_upserts), batch.document_deletes
    )
