from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class QueryMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    QUERY_MODE_UNSPECIFIED: _ClassVar[QueryMode]
    QUERY_MODE_LOCAL: _ClassVar[QueryMode]
    QUERY_MODE_GLOBAL: _ClassVar[QueryMode]
    QUERY_MODE_HYBRID: _ClassVar[QueryMode]
    QUERY_MODE_NAIVE: _ClassVar[QueryMode]
    QUERY_MODE_MIX: _ClassVar[QueryMode]

class DocumentStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DOCUMENT_STATUS_UNSPECIFIED: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_PENDING: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_PROCESSING: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_PROCESSED: _ClassVar[DocumentStatus]
    DOCUMENT_STATUS_FAILED: _ClassVar[DocumentStatus]

class FailureKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FAILURE_KIND_UNSPECIFIED: _ClassVar[FailureKind]
    FAILURE_KIND_BAD_DOC_ID: _ClassVar[FailureKind]
    FAILURE_KIND_TOO_LARGE: _ClassVar[FailureKind]
    FAILURE_KIND_BINARY: _ClassVar[FailureKind]
    FAILURE_KIND_NOT_UTF8: _ClassVar[FailureKind]
    FAILURE_KIND_EMPTY: _ClassVar[FailureKind]
    FAILURE_KIND_EXTRACTION: _ClassVar[FailureKind]
QUERY_MODE_UNSPECIFIED: QueryMode
QUERY_MODE_LOCAL: QueryMode
QUERY_MODE_GLOBAL: QueryMode
QUERY_MODE_HYBRID: QueryMode
QUERY_MODE_NAIVE: QueryMode
QUERY_MODE_MIX: QueryMode
DOCUMENT_STATUS_UNSPECIFIED: DocumentStatus
DOCUMENT_STATUS_PENDING: DocumentStatus
DOCUMENT_STATUS_PROCESSING: DocumentStatus
DOCUMENT_STATUS_PROCESSED: DocumentStatus
DOCUMENT_STATUS_FAILED: DocumentStatus
FAILURE_KIND_UNSPECIFIED: FailureKind
FAILURE_KIND_BAD_DOC_ID: FailureKind
FAILURE_KIND_TOO_LARGE: FailureKind
FAILURE_KIND_BINARY: FailureKind
FAILURE_KIND_NOT_UTF8: FailureKind
FAILURE_KIND_EMPTY: FailureKind
FAILURE_KIND_EXTRACTION: FailureKind

class ConversationTurn(_message.Message):
    __slots__ = ("role", "content")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class DocumentFilter(_message.Message):
    __slots__ = ("doc_ids", "file_path_prefix")
    DOC_IDS_FIELD_NUMBER: _ClassVar[int]
    FILE_PATH_PREFIX_FIELD_NUMBER: _ClassVar[int]
    doc_ids: _containers.RepeatedScalarFieldContainer[str]
    file_path_prefix: str
    def __init__(self, doc_ids: _Optional[_Iterable[str]] = ..., file_path_prefix: _Optional[str] = ...) -> None: ...

class QueryRequest(_message.Message):
    __slots__ = ("question", "mode", "top_k", "chunk_top_k", "max_entity_tokens", "max_relation_tokens", "max_total_tokens", "response_type", "history", "user_prompt", "high_level_keywords", "low_level_keywords", "include_references", "min_index_version", "document_filter")
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    CHUNK_TOP_K_FIELD_NUMBER: _ClassVar[int]
    MAX_ENTITY_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_RELATION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_TYPE_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    USER_PROMPT_FIELD_NUMBER: _ClassVar[int]
    HIGH_LEVEL_KEYWORDS_FIELD_NUMBER: _ClassVar[int]
    LOW_LEVEL_KEYWORDS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_REFERENCES_FIELD_NUMBER: _ClassVar[int]
    MIN_INDEX_VERSION_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_FILTER_FIELD_NUMBER: _ClassVar[int]
    question: str
    mode: QueryMode
    top_k: int
    chunk_top_k: int
    max_entity_tokens: int
    max_relation_tokens: int
    max_total_tokens: int
    response_type: str
    history: _containers.RepeatedCompositeFieldContainer[ConversationTurn]
    user_prompt: str
    high_level_keywords: _containers.RepeatedScalarFieldContainer[str]
    low_level_keywords: _containers.RepeatedScalarFieldContainer[str]
    include_references: bool
    min_index_version: int
    document_filter: DocumentFilter
    def __init__(self, question: _Optional[str] = ..., mode: _Optional[_Union[QueryMode, str]] = ..., top_k: _Optional[int] = ..., chunk_top_k: _Optional[int] = ..., max_entity_tokens: _Optional[int] = ..., max_relation_tokens: _Optional[int] = ..., max_total_tokens: _Optional[int] = ..., response_type: _Optional[str] = ..., history: _Optional[_Iterable[_Union[ConversationTurn, _Mapping]]] = ..., user_prompt: _Optional[str] = ..., high_level_keywords: _Optional[_Iterable[str]] = ..., low_level_keywords: _Optional[_Iterable[str]] = ..., include_references: _Optional[bool] = ..., min_index_version: _Optional[int] = ..., document_filter: _Optional[_Union[DocumentFilter, _Mapping]] = ...) -> None: ...

class Keywords(_message.Message):
    __slots__ = ("high_level", "low_level")
    HIGH_LEVEL_FIELD_NUMBER: _ClassVar[int]
    LOW_LEVEL_FIELD_NUMBER: _ClassVar[int]
    high_level: _containers.RepeatedScalarFieldContainer[str]
    low_level: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, high_level: _Optional[_Iterable[str]] = ..., low_level: _Optional[_Iterable[str]] = ...) -> None: ...

class Entity(_message.Message):
    __slots__ = ("key", "name", "type", "description", "source_chunk_ids", "file_paths", "doc_ids")
    KEY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_CHUNK_IDS_FIELD_NUMBER: _ClassVar[int]
    FILE_PATHS_FIELD_NUMBER: _ClassVar[int]
    DOC_IDS_FIELD_NUMBER: _ClassVar[int]
    key: str
    name: str
    type: str
    description: str
    source_chunk_ids: _containers.RepeatedScalarFieldContainer[str]
    file_paths: _containers.RepeatedScalarFieldContainer[str]
    doc_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, key: _Optional[str] = ..., name: _Optional[str] = ..., type: _Optional[str] = ..., description: _Optional[str] = ..., source_chunk_ids: _Optional[_Iterable[str]] = ..., file_paths: _Optional[_Iterable[str]] = ..., doc_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class Relation(_message.Message):
    __slots__ = ("source", "target", "source_name", "target_name", "keywords", "description", "weight", "source_chunk_ids", "file_paths", "doc_ids")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    SOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    TARGET_NAME_FIELD_NUMBER: _ClassVar[int]
    KEYWORDS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_CHUNK_IDS_FIELD_NUMBER: _ClassVar[int]
    FILE_PATHS_FIELD_NUMBER: _ClassVar[int]
    DOC_IDS_FIELD_NUMBER: _ClassVar[int]
    source: str
    target: str
    source_name: str
    target_name: str
    keywords: _containers.RepeatedScalarFieldContainer[str]
    description: str
    weight: float
    source_chunk_ids: _containers.RepeatedScalarFieldContainer[str]
    file_paths: _containers.RepeatedScalarFieldContainer[str]
    doc_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, source: _Optional[str] = ..., target: _Optional[str] = ..., source_name: _Optional[str] = ..., target_name: _Optional[str] = ..., keywords: _Optional[_Iterable[str]] = ..., description: _Optional[str] = ..., weight: _Optional[float] = ..., source_chunk_ids: _Optional[_Iterable[str]] = ..., file_paths: _Optional[_Iterable[str]] = ..., doc_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class RetrievedEntity(_message.Message):
    __slots__ = ("entity", "score", "degree")
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    DEGREE_FIELD_NUMBER: _ClassVar[int]
    entity: Entity
    score: float
    degree: int
    def __init__(self, entity: _Optional[_Union[Entity, _Mapping]] = ..., score: _Optional[float] = ..., degree: _Optional[int] = ...) -> None: ...

class RetrievedRelation(_message.Message):
    __slots__ = ("relation", "score", "degree")
    RELATION_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    DEGREE_FIELD_NUMBER: _ClassVar[int]
    relation: Relation
    score: float
    degree: int
    def __init__(self, relation: _Optional[_Union[Relation, _Mapping]] = ..., score: _Optional[float] = ..., degree: _Optional[int] = ...) -> None: ...

class RetrievedChunk(_message.Message):
    __slots__ = ("chunk_id", "doc_id", "file_path", "text", "score")
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    DOC_ID_FIELD_NUMBER: _ClassVar[int]
    FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    chunk_id: str
    doc_id: str
    file_path: str
    text: str
    score: float
    def __init__(self, chunk_id: _Optional[str] = ..., doc_id: _Optional[str] = ..., file_path: _Optional[str] = ..., text: _Optional[str] = ..., score: _Optional[float] = ...) -> None: ...

class Reference(_message.Message):
    __slots__ = ("reference_id", "file_path", "chunk_ids")
    REFERENCE_ID_FIELD_NUMBER: _ClassVar[int]
    FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    CHUNK_IDS_FIELD_NUMBER: _ClassVar[int]
    reference_id: int
    file_path: str
    chunk_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, reference_id: _Optional[int] = ..., file_path: _Optional[str] = ..., chunk_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class RetrievalResult(_message.Message):
    __slots__ = ("mode", "keywords", "entities", "relations", "chunks", "references", "index_version")
    MODE_FIELD_NUMBER: _ClassVar[int]
    KEYWORDS_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    RELATIONS_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    REFERENCES_FIELD_NUMBER: _ClassVar[int]
    INDEX_VERSION_FIELD_NUMBER: _ClassVar[int]
    mode: QueryMode
    keywords: Keywords
    entities: _containers.RepeatedCompositeFieldContainer[RetrievedEntity]
    relations: _containers.RepeatedCompositeFieldContainer[RetrievedRelation]
    chunks: _containers.RepeatedCompositeFieldContainer[RetrievedChunk]
    references: _containers.RepeatedCompositeFieldContainer[Reference]
    index_version: int
    def __init__(self, mode: _Optional[_Union[QueryMode, str]] = ..., keywords: _Optional[_Union[Keywords, _Mapping]] = ..., entities: _Optional[_Iterable[_Union[RetrievedEntity, _Mapping]]] = ..., relations: _Optional[_Iterable[_Union[RetrievedRelation, _Mapping]]] = ..., chunks: _Optional[_Iterable[_Union[RetrievedChunk, _Mapping]]] = ..., references: _Optional[_Iterable[_Union[Reference, _Mapping]]] = ..., index_version: _Optional[int] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("prompt_tokens", "completion_tokens")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    completion_tokens: int
    def __init__(self, prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ...) -> None: ...

class QueryResponse(_message.Message):
    __slots__ = ("answer", "context", "llm_configured", "cached", "usage", "index_version")
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    LLM_CONFIGURED_FIELD_NUMBER: _ClassVar[int]
    CACHED_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    INDEX_VERSION_FIELD_NUMBER: _ClassVar[int]
    answer: str
    context: RetrievalResult
    llm_configured: bool
    cached: bool
    usage: Usage
    index_version: int
    def __init__(self, answer: _Optional[str] = ..., context: _Optional[_Union[RetrievalResult, _Mapping]] = ..., llm_configured: _Optional[bool] = ..., cached: _Optional[bool] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., index_version: _Optional[int] = ...) -> None: ...

class AnswerDelta(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class QueryDone(_message.Message):
    __slots__ = ("usage", "index_version", "llm_configured")
    USAGE_FIELD_NUMBER: _ClassVar[int]
    INDEX_VERSION_FIELD_NUMBER: _ClassVar[int]
    LLM_CONFIGURED_FIELD_NUMBER: _ClassVar[int]
    usage: Usage
    index_version: int
    llm_configured: bool
    def __init__(self, usage: _Optional[_Union[Usage, _Mapping]] = ..., index_version: _Optional[int] = ..., llm_configured: _Optional[bool] = ...) -> None: ...

class QueryEvent(_message.Message):
    __slots__ = ("context", "delta", "done")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    context: RetrievalResult
    delta: AnswerDelta
    done: QueryDone
    def __init__(self, context: _Optional[_Union[RetrievalResult, _Mapping]] = ..., delta: _Optional[_Union[AnswerDelta, _Mapping]] = ..., done: _Optional[_Union[QueryDone, _Mapping]] = ...) -> None: ...

class GetEntityRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetEntityResponse(_message.Message):
    __slots__ = ("entity", "degree", "index_version")
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    DEGREE_FIELD_NUMBER: _ClassVar[int]
    INDEX_VERSION_FIELD_NUMBER: _ClassVar[int]
    entity: Entity
    degree: int
    index_version: int
    def __init__(self, entity: _Optional[_Union[Entity, _Mapping]] = ..., degree: _Optional[int] = ..., index_version: _Optional[int] = ...) -> None: ...

class GetRelationRequest(_message.Message):
    __slots__ = ("source", "target")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    source: str
    target: str
    def __init__(self, source: _Optional[str] = ..., target: _Optional[str] = ...) -> None: ...

class GetRelationResponse(_message.Message):
    __slots__ = ("relation", "index_version")
    RELATION_FIELD_NUMBER: _ClassVar[int]
    INDEX_VERSION_FIELD_NUMBER: _ClassVar[int]
    relation: Relation
    index_version: int
    def __init__(self, relation: _Optional[_Union[Relation, _Mapping]] = ..., index_version: _Optional[int] = ...) -> None: ...

class GetSubgraphRequest(_message.Message):
    __slots__ = ("seed", "depth", "max_nodes")
    SEED_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    MAX_NODES_FIELD_NUMBER: _ClassVar[int]
    seed: str
    depth: int
    max_nodes: int
    def __init__(self, seed: _Optional[str] = ..., depth: _Optional[int] = ..., max_nodes: _Optional[int] = ...) -> None: ...

class GetSubgraphResponse(_message.Message):
    __slots__ = ("entities", "relations", "truncated", "index_version")
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    RELATIONS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    INDEX_VERSION_FIELD_NUMBER: _ClassVar[int]
    entities: _containers.RepeatedCompositeFieldContainer[Entity]
    relations: _containers.RepeatedCompositeFieldContainer[Relation]
    truncated: bool
    index_version: int
    def __init__(self, entities: _Optional[_Iterable[_Union[Entity, _Mapping]]] = ..., relations: _Optional[_Iterable[_Union[Relation, _Mapping]]] = ..., truncated: _Optional[bool] = ..., index_version: _Optional[int] = ...) -> None: ...

class Document(_message.Message):
    __slots__ = ("doc_id", "status", "file_path", "content_hash", "chunk_ids", "preview", "length", "reason", "created_at_ms", "updated_at_ms", "chunks_settled", "chunks_changed", "failure_kind")
    DOC_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    CHUNK_IDS_FIELD_NUMBER: _ClassVar[int]
    PREVIEW_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_SETTLED_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_CHANGED_FIELD_NUMBER: _ClassVar[int]
    FAILURE_KIND_FIELD_NUMBER: _ClassVar[int]
    doc_id: str
    status: DocumentStatus
    file_path: str
    content_hash: str
    chunk_ids: _containers.RepeatedScalarFieldContainer[str]
    preview: str
    length: int
    reason: str
    created_at_ms: int
    updated_at_ms: int
    chunks_settled: int
    chunks_changed: int
    failure_kind: FailureKind
    def __init__(self, doc_id: _Optional[str] = ..., status: _Optional[_Union[DocumentStatus, str]] = ..., file_path: _Optional[str] = ..., content_hash: _Optional[str] = ..., chunk_ids: _Optional[_Iterable[str]] = ..., preview: _Optional[str] = ..., length: _Optional[int] = ..., reason: _Optional[str] = ..., created_at_ms: _Optional[int] = ..., updated_at_ms: _Optional[int] = ..., chunks_settled: _Optional[int] = ..., chunks_changed: _Optional[int] = ..., failure_kind: _Optional[_Union[FailureKind, str]] = ...) -> None: ...

class GetDocumentRequest(_message.Message):
    __slots__ = ("doc_id",)
    DOC_ID_FIELD_NUMBER: _ClassVar[int]
    doc_id: str
    def __init__(self, doc_id: _Optional[str] = ...) -> None: ...

class GetDocumentResponse(_message.Message):
    __slots__ = ("document", "index_version")
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    INDEX_VERSION_FIELD_NUMBER: _ClassVar[int]
    document: Document
    index_version: int
    def __init__(self, document: _Optional[_Union[Document, _Mapping]] = ..., index_version: _Optional[int] = ...) -> None: ...

class ListDocumentsRequest(_message.Message):
    __slots__ = ("status", "page_size", "page_token")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    status: DocumentStatus
    page_size: int
    page_token: str
    def __init__(self, status: _Optional[_Union[DocumentStatus, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListDocumentsResponse(_message.Message):
    __slots__ = ("documents", "next_page_token", "total", "index_version")
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    INDEX_VERSION_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[Document]
    next_page_token: str
    total: int
    index_version: int
    def __init__(self, documents: _Optional[_Iterable[_Union[Document, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total: _Optional[int] = ..., index_version: _Optional[int] = ...) -> None: ...
