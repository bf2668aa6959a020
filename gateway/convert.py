"""Protobuf <-> gateway types, in one place, so protobuf never reaches the engine or the core.

Defaults for unset `optional` fields come from `QueryParams` itself (LightRAG's), so
the proto comments, the engine and this module cannot drift apart on them.
"""

from __future__ import annotations

from connectors.redis.ports import StoredDocument
from dataflow.core.contributions import EntityRecord, RelationRecord
from dataflow.core.documents import DocumentStatus, FailureKind
from gateway.types import (
    Answer,
    InvalidQuery,
    Keywords,
    Mode,
    QueryParams,
    Reference,
    Retrieval,
    RetrievedChunk,
    RetrievedEntity,
    RetrievedRelation,
    Turn,
    Usage,
    parse_mode,
)
from kgstream_protos.v1 import query_pb2 as pb

_DEFAULTS = QueryParams(question="")
DEFAULT_SEARCH_LIMIT = 20
MAX_SEARCH_LIMIT = 200
_QUERY_MODES = pb.QueryMode.DESCRIPTOR
_STATUS_TO_PROTO: dict[DocumentStatus, pb.DocumentStatus] = {
    DocumentStatus.PENDING: pb.DOCUMENT_STATUS_PENDING,
    DocumentStatus.PROCESSING: pb.DOCUMENT_STATUS_PROCESSING,
    DocumentStatus.PROCESSED: pb.DOCUMENT_STATUS_PROCESSED,
    DocumentStatus.FAILED: pb.DOCUMENT_STATUS_FAILED,
}
_STATUS_FROM_PROTO = {int(value): status for status, value in _STATUS_TO_PROTO.items()}
_FAILURE_KIND_TO_PROTO: dict[FailureKind | None, pb.FailureKind] = {
    None: pb.FAILURE_KIND_UNSPECIFIED,
    FailureKind.BAD_DOC_ID: pb.FAILURE_KIND_BAD_DOC_ID,
    FailureKind.TOO_LARGE: pb.FAILURE_KIND_TOO_LARGE,
    FailureKind.BINARY: pb.FAILURE_KIND_BINARY,
    FailureKind.NOT_UTF8: pb.FAILURE_KIND_NOT_UTF8,
    FailureKind.EMPTY: pb.FAILURE_KIND_EMPTY,
    FailureKind.EXTRACTION: pb.FAILURE_KIND_EXTRACTION,
}

# `QueryParams` field -> the QueryRequest field a client sets, for error messages.
_REQUEST_FIELDS = {
    "doc_ids": "document_filter.doc_ids",
    "file_path_prefix": "document_filter.file_path_prefix",
}


def request_field(params_field: str) -> str:
    """The QueryRequest field behind a `QueryParams` field an `InvalidQuery` names."""
    head, dot, rest = params_field.partition(".")
    base, bracket, index = head.partition("[")
    mapped = _REQUEST_FIELDS.get(base, base)
    return f"{mapped}{bracket}{index}{dot}{rest}"


def _enum_spelling(name: str) -> str:
    """A mode's name as the QueryMode enum spells it ("mix" -> QUERY_MODE_MIX)."""
    return f"QUERY_MODE_{name.upper()}"


def mode_from_proto(value: int) -> Mode:
    """The mode of a QueryMode value (UNSPECIFIED: the default), by its name, so a value
    the proto has and the mode table lacks is refused like any unknown one; the message
    names the enum's values as gRPC clients send them (QUERY_MODE_LOCAL)."""
    if value == pb.QUERY_MODE_UNSPECIFIED:
        return parse_mode(None)
    named = _QUERY_MODES.values_by_number.get(value)
    return parse_mode(value if named is None else named.name, spelling=_enum_spelling)


def mode_to_proto(mode: Mode) -> pb.QueryMode:
    value: pb.QueryMode = pb.QueryMode.Value(_enum_spelling(mode.value))
    return value


def mode_from_json(value: object) -> pb.QueryMode:
    """The QueryMode of an HTTP request's `mode`: a mode's name ("mix"), or the forms
    proto3 JSON gives an enum (its value's name or number; UNSPECIFIED: the default).
    A value that is none of these is refused naming the modes by their names."""
    named = _QUERY_MODES.values_by_name.get(value) if isinstance(value, str) else None
    number = value if named is None else named.number
    if type(number) is int and number in _QUERY_MODES.values_by_number:  # a bool is no number
        return mode_to_proto(mode_from_proto(number))
    return mode_to_proto(parse_mode(value))


def query_params_from(request: pb.QueryRequest) -> QueryParams:
    """The engine's parameters for a request; unset optional fields take LightRAG's defaults.

    Checks only what the wire adds (an enum value this server does not know); ranges,
    budgets and history roles are the engine's `validate`.
    """
    history = tuple(Turn(role=turn.role, content=turn.content) for turn in request.history)
    prefix = request.document_filter.file_path_prefix
    return QueryParams(
        question=request.question,
        mode=mode_from_proto(request.mode),
        top_k=_optional(request, "top_k", _DEFAULTS.top_k),
        chunk_top_k=_optional(request, "chunk_top_k", _DEFAULTS.chunk_top_k),
        max_entity_tokens=_optional(request, "max_entity_tokens", _DEFAULTS.max_entity_tokens),
        max_relation_tokens=_optional(
            request, "max_relation_tokens", _DEFAULTS.max_relation_tokens
        ),
        max_total_tokens=_optional(request, "max_total_tokens", _DEFAULTS.max_total_tokens),
        response_type=request.response_type or _DEFAULTS.response_type,
        history=history,
        user_prompt=request.user_prompt,
        high_level_keywords=tuple(request.high_level_keywords),
        low_level_keywords=tuple(request.low_level_keywords),
        include_references=(
            request.include_references
            if request.HasField("include_references")
            else _DEFAULTS.include_references
        ),
        min_index_version=request.min_index_version,
        doc_ids=tuple(request.document_filter.doc_ids),
        file_path_prefix=prefix or None,
    )


def entity_search_request(text: str, limit: int, field: str) -> pb.QueryRequest:
    """An entity search as a Retrieve: local mode with the text as its only keyword, so
    exact names and aliases come first, then entity vectors, and no LLM is asked for
    keywords. `field` names the text in the caller's request, for the error of an empty one."""
    if not text.strip():
        raise InvalidQuery(field, "must name what to search for")
    if not 1 <= limit <= MAX_SEARCH_LIMIT:
        raise InvalidQuery("limit", f"must be between 1 and {MAX_SEARCH_LIMIT}; got {limit}")
    return pb.QueryRequest(
        question=text,
        mode=mode_to_proto(Mode.LOCAL),
        low_level_keywords=[text],
        high_level_keywords=[text],
        top_k=limit,
        chunk_top_k=1,
        include_references=False,
    )


def _optional(request: pb.QueryRequest, field: str, default: int) -> int:
    return int(getattr(request, field)) if request.HasField(field) else default


def entity_to_proto(record: EntityRecord) -> pb.Entity:
    return pb.Entity(
        key=record.key,
        name=record.name,
        type=record.type,
        description=record.description,
        source_chunk_ids=record.source_chunk_ids,
        file_paths=record.file_paths,
        doc_ids=record.doc_ids,
    )


def relation_to_proto(record: RelationRecord) -> pb.Relation:
    return pb.Relation(
        source=record.source,
        target=record.target,
        source_name=record.source_name,
        target_name=record.target_name,
        keywords=record.keywords,
        description=record.description,
        weight=record.weight,
        source_chunk_ids=record.source_chunk_ids,
        file_paths=record.file_paths,
        doc_ids=record.doc_ids,
    )


def _retrieved_entity(item: RetrievedEntity) -> pb.RetrievedEntity:
    return pb.RetrievedEntity(
        entity=entity_to_proto(item.record), score=item.score, degree=item.degree
    )


def _retrieved_relation(item: RetrievedRelation) -> pb.RetrievedRelation:
    return pb.RetrievedRelation(
        relation=relation_to_proto(item.record), score=item.score, degree=item.degree
    )


def _retrieved_chunk(item: RetrievedChunk) -> pb.RetrievedChunk:
    return pb.RetrievedChunk(
        chunk_id=item.chunk_id,
        doc_id=item.doc_id,
        file_path=item.file_path,
        text=item.text,
        score=item.score,
    )


def _reference(item: Reference) -> pb.Reference:
    return pb.Reference(
        reference_id=item.reference_id, file_path=item.file_path, chunk_ids=item.chunk_ids
    )


def keywords_to_proto(keywords: Keywords) -> pb.Keywords:
    return pb.Keywords(high_level=keywords.high_level, low_level=keywords.low_level)


def retrieval_to_proto(retrieval: Retrieval) -> pb.RetrievalResult:
    return pb.RetrievalResult(
        mode=mode_to_proto(retrieval.mode),
        keywords=keywords_to_proto(retrieval.keywords),
        entities=[_retrieved_entity(e) for e in retrieval.entities],
        relations=[_retrieved_relation(r) for r in retrieval.relations],
        chunks=[_retrieved_chunk(c) for c in retrieval.chunks],
        references=[_reference(r) for r in retrieval.references],
        index_version=retrieval.index_version,
    )


def entity_from_proto(entity: pb.Entity) -> EntityRecord:
    return EntityRecord(
        key=entity.key,
        name=entity.name,
        type=entity.type,
        description=entity.description,
        source_chunk_ids=tuple(entity.source_chunk_ids),
        file_paths=tuple(entity.file_paths),
        doc_ids=tuple(entity.doc_ids),
    )


def relation_from_proto(relation: pb.Relation) -> RelationRecord:
    return RelationRecord(
        source=relation.source,
        target=relation.target,
        source_name=relation.source_name,
        target_name=relation.target_name,
        keywords=tuple(relation.keywords),
        description=relation.description,
        weight=relation.weight,
        source_chunk_ids=tuple(relation.source_chunk_ids),
        file_paths=tuple(relation.file_paths),
        doc_ids=tuple(relation.doc_ids),
    )


def retrieval_from_proto(result: pb.RetrievalResult) -> Retrieval:
    """The context a Retrieve answered (entities without their aliases, which no context
    shows), for doors that render it as the engine does."""
    return Retrieval(
        mode=mode_from_proto(result.mode),
        keywords=Keywords(tuple(result.keywords.high_level), tuple(result.keywords.low_level)),
        entities=tuple(
            RetrievedEntity(entity_from_proto(e.entity), e.score, e.degree) for e in result.entities
        ),
        relations=tuple(
            RetrievedRelation(relation_from_proto(r.relation), r.score, r.degree)
            for r in result.relations
        ),
        chunks=tuple(
            RetrievedChunk(c.chunk_id, c.doc_id, c.file_path, c.text, c.score)
            for c in result.chunks
        ),
        references=tuple(
            Reference(r.reference_id, r.file_path, tuple(r.chunk_ids)) for r in result.references
        ),
        index_version=result.index_version,
    )


def usage_to_proto(usage: Usage) -> pb.Usage:
    return pb.Usage(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens)


def answer_to_proto(answer: Answer) -> pb.QueryResponse:
    return pb.QueryResponse(
        answer=answer.text,
        context=retrieval_to_proto(answer.retrieval),
        llm_configured=answer.llm_configured,
        cached=answer.cached,
        usage=usage_to_proto(answer.usage),
        index_version=answer.retrieval.index_version,
    )


def context_event(retrieval: Retrieval) -> pb.QueryEvent:
    return pb.QueryEvent(context=retrieval_to_proto(retrieval))


def delta_event(text: str) -> pb.QueryEvent:
    return pb.QueryEvent(delta=pb.AnswerDelta(text=text))


def done_event(usage: Usage, index_version: int, llm_configured: bool) -> pb.QueryEvent:
    return pb.QueryEvent(
        done=pb.QueryDone(
            usage=usage_to_proto(usage),
            index_version=index_version,
            llm_configured=llm_configured,
        )
    )


def status_to_proto(status: DocumentStatus) -> pb.DocumentStatus:
    return _STATUS_TO_PROTO[status]


def status_from_proto(value: int) -> DocumentStatus | None:
    """None for UNSPECIFIED (every status); ValueError for a value this server does not know."""
    if value == pb.DOCUMENT_STATUS_UNSPECIFIED:
        return None
    status = _STATUS_FROM_PROTO.get(value)
    if status is None:
        names = ", ".join(pb.DocumentStatus.Name(known) for known in _STATUS_TO_PROTO.values())
        raise ValueError(
            f"unknown DocumentStatus value {value}; use one of {names} "
            f"(or {pb.DocumentStatus.Name(pb.DOCUMENT_STATUS_UNSPECIFIED)} for every status)"
        )
    return status


def document_to_proto(stored: StoredDocument) -> pb.Document:
    record = stored.record
    return pb.Document(
        doc_id=record.doc_id,
        status=status_to_proto(record.status),
        file_path=record.file_path,
        content_hash=record.content_hash,
        chunk_ids=record.chunk_ids,
        preview=record.preview,
        length=record.length,
        reason=record.reason,
        created_at_ms=round(stored.created_at * 1000),
        updated_at_ms=round(stored.updated_at * 1000),
        chunks_settled=record.chunks_settled,
        chunks_changed=record.chunks_changed,
        failure_kind=_FAILURE_KIND_TO_PROTO[record.failure_kind],
    )
