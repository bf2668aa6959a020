"""LightRAG 1.5.7's own request and response examples, copied from its server's source
(lightrag-hku 1.5.7 on PyPI: `lightrag/api/routers/query_routes.py`,
`document_routes.py`, `graph_routes.py`, `lightrag/types.py` and the `/health` route of
`lightrag/api/lightrag_server.py`: the pydantic models' `json_schema_extra` examples, the
routes' OpenAPI `examples` and docstrings). The contract tests send the requests to kgstream
and check its answers against the responses with `same_shape`: every key of LightRAG's
example is there, holding the same JSON type.

Where a response model has fields its example leaves out, the example here adds them with a
value of the model's type, and says so; where an example disagrees with the code that makes
the response, the code wins, and the example says so.
"""

from __future__ import annotations

from typing import Any

# -- query_routes.py ------------------------------------------------------------------

# The docstring's "Usage Examples" of POST /query.
QUERY_REQUESTS: dict[str, dict[str, Any]] = {
    "basic": {"query": "What is machine learning?", "mode": "mix"},
    "keywords": {
        "query": "What is Retrieval-Augmented-Generation?",
        "hl_keywords": [
            "machine learning",
            "information retrieval",
            "natural language processing",
        ],
        "ll_keywords": ["retrieval augmented generation", "RAG", "knowledge base"],
        "mode": "mix",
    },
    "advanced": {
        "query": "Explain neural networks",
        "mode": "hybrid",
        "include_references": True,
        "response_type": "Multiple Paragraphs",
        "top_k": 10,
    },
    "history": {
        "query": "Can you give me more details?",
        "conversation_history": [
            {"role": "user", "content": "What is AI?"},
            {"role": "assistant", "content": "AI is artificial intelligence..."},
        ],
    },
}

# POST /query's 200 examples "with_chunk_content" and "without_references"; the model's
# response_time and llm_generated added (QueryResponse: float, bool).
QUERY_RESPONSE_WITH_CHUNK_CONTENT: dict[str, Any] = {
    "response": "Artificial Intelligence (AI) is a branch of computer science that aims to "
    "create intelligent machines capable of performing tasks that typically require human "
    "intelligence, such as learning, reasoning, and problem-solving.",
    "references": [
        {
            "reference_id": "1",
            "file_path": "/documents/ai_overview.pdf",
            "content": [
                "Artificial Intelligence (AI) represents a transformative field in computer "
                "science focused on creating systems that can perform tasks requiring "
                "human-like intelligence.",
                "AI systems can be categorized into narrow AI, which is designed for specific "
                "tasks, and general AI, which aims to match human cognitive abilities.",
            ],
        },
    ],
    "response_time": 1.234,
    "llm_generated": True,
}
QUERY_RESPONSE_WITHOUT_REFERENCES: dict[str, Any] = {
    "response": "Artificial Intelligence (AI) is a branch of computer science ...",
}

# POST /query/stream's docstring examples.
STREAM_REQUESTS: dict[str, dict[str, Any]] = {
    "streaming": {
        "query": "Explain machine learning algorithms",
        "mode": "mix",
        "stream": True,
        "include_references": True,
    },
    "complete": {
        "query": "What is deep learning?",
        "mode": "hybrid",
        "stream": False,
        "response_type": "Multiple Paragraphs",
    },
    "progress": {
        "query": "Explain neural networks",
        "mode": "mix",
        "stream": True,
        "include_progress": True,
    },
}
# The 200 examples "streaming_with_references" (first and later lines) and
# "non_streaming_with_references"; StreamChunkResponse's llm_generated on the complete line.
STREAM_REFERENCES_LINE = {
    "references": [
        {"reference_id": "1", "file_path": "/documents/ai_overview.pdf"},
        {"reference_id": "2", "file_path": "/documents/ml_basics.txt"},
    ]
}
STREAM_RESPONSE_LINE = {"response": "Artificial Intelligence (AI) is a branch of computer science"}
STREAM_COMPLETE_LINE = {
    "references": [{"reference_id": "1", "file_path": "/documents/neural_networks.pdf"}],
    "response": "Neural networks are computational models inspired by biological neural "
    "networks ...",
    "llm_generated": True,
}
STREAM_TIME_LINE = {"response_time": 1.234}

# POST /query/data's docstring examples.
DATA_REQUESTS: dict[str, dict[str, Any]] = {
    "local": {"query": "machine learning algorithms", "mode": "local", "top_k": 10},
    "global": {
        "query": "artificial intelligence trends",
        "mode": "global",
        "max_relation_tokens": 2000,
    },
    "naive": {"query": "neural network architectures", "mode": "naive", "chunk_top_k": 5},
}
# The 200 example "successful_local_mode".
QUERY_DATA_RESPONSE: dict[str, Any] = {
    "status": "success",
    "message": "Query executed successfully",
    "data": {
        "entities": [
            {
                "entity_name": "Neural Networks",
                "entity_type": "CONCEPT",
                "description": "Computational models inspired by biological neural networks",
                "source_id": "chunk-123",
                "file_path": "/documents/ai_basics.pdf",
                "reference_id": "1",
            }
        ],
        "relationships": [
            {
                "src_id": "Neural Networks",
                "tgt_id": "Machine Learning",
                "description": "Neural networks are a subset of machine learning algorithms",
                "keywords": "subset, algorithm, learning",
                "weight": 1.0,
                "source_id": "chunk-123",
                "file_path": "/documents/ai_basics.pdf",
                "reference_id": "1",
            }
        ],
        "chunks": [
            {
                "content": "Neural networks are computational models that mimic the way "
                "biological neural networks work...",
                "file_path": "/documents/ai_basics.pdf",
                "chunk_id": "chunk-123",
                "reference_id": "1",
            }
        ],
        "references": [{"reference_id": "1", "file_path": "/documents/ai_basics.pdf"}],
    },
    "metadata": {
        "query_mode": "local",
        "keywords": {
            "high_level": ["neural", "networks"],
            "low_level": ["computation", "model", "algorithm"],
        },
        "processing_info": {
            "total_entities_found": 5,
            "total_relations_found": 3,
            "entities_after_truncation": 1,
            "relations_after_truncation": 1,
            "final_chunks_count": 1,
        },
    },
}
# The 400 example of /query/data.
QUERY_DATA_FAILURE: dict[str, Any] = {
    "status": "failure",
    "message": "Validation error: body: Value error, RAG query is too short.",
    "data": {},
    "metadata": {},
}
# The 422 example of /query and /query/stream (FastAPI's RequestValidationError).
VALIDATION_ERROR: dict[str, Any] = {
    "detail": [{"type": "value_error", "loc": ["body"], "msg": "Value error, ..."}]
}

# -- document_routes.py -------------------------------------------------------------------

# InsertTextRequest's example (its `chunking` is accepted and ignored by kgstream).
INSERT_TEXT_REQUEST: dict[str, Any] = {
    "text": "This is a sample text to be inserted into the RAG system.",
    "file_source": "Source of the text (optional)",
    "chunking": {
        "strategy": "fixed_token",
        "params": {
            "chunk_token_size": 1200,
            "chunk_overlap_token_size": 100,
            "split_by_character": "\n\n",
            "split_by_character_only": True,
        },
    },
}
# InsertTextsRequest's example: two texts, one file source. LightRAG 1.5.7 itself answers it
# with 400 ("A valid file_source is required for each text").
INSERT_TEXTS_REQUEST: dict[str, Any] = {
    "texts": [
        "This is the first text to be inserted.",
        "This is the second text to be inserted.",
    ],
    "file_sources": ["First file source (optional)"],
    "chunking": {"strategy": "recursive_character", "params": {"chunk_token_size": 1000}},
}
INSERT_RESPONSE: dict[str, Any] = {
    "status": "success",
    "message": "File 'document.pdf' uploaded successfully. Processing will continue in background.",
    "track_id": "upload_20250729_170612_abc123",
}
SCAN_RESPONSE: dict[str, Any] = {
    "status": "scanning_started",
    "message": "Scanning process has been initiated in the background",
    "track_id": "scan_20250729_170612_abc123",
}
REPROCESS_RESPONSE: dict[str, Any] = {
    "status": "reprocessing_started",
    "message": "Reprocessing of failed documents has been initiated in background",
    "track_id": "",
}
CLEAR_DOCUMENTS_RESPONSE: dict[str, Any] = {
    "status": "success",
    "message": "All documents cleared successfully. Deleted 15 files.",
}
# DeleteDocByIdResponse has no example: its fields (status, message, doc_id: str).
DELETE_DOCUMENT_RESPONSE: dict[str, Any] = {
    "status": "deletion_started",
    "message": "Document deletion for 1 documents has been initiated.",
    "doc_id": "doc_123456",
}
# DocStatusResponse's example; its track_id, chunks_count and error_msg are Optional (null
# where nothing applies), so null here stands for "any", and its metadata is any object.
DOC_STATUS: dict[str, Any] = {
    "id": "doc_123456",
    "content_summary": "Research paper on machine learning",
    "content_length": 15240,
    "status": "processed",
    "created_at": "2025-03-31T12:34:56",
    "updated_at": "2025-03-31T12:35:30",
    "track_id": None,
    "chunks_count": None,
    "error_msg": None,
    "metadata": {},
    "file_path": "research_paper.pdf",
}
TRACK_STATUS_RESPONSE: dict[str, Any] = {
    "track_id": "upload_20250729_170612_abc123",
    "documents": [DOC_STATUS],
    "total_count": 1,
    # the example says "PROCESSED"; get_track_status counts str(doc_status.status), the
    # stored value: "processed"
    "status_summary": {"processed": 1},
}
DOCUMENTS_REQUEST: dict[str, Any] = {
    "status_filters": ["PREPROCESSED", "PARSING", "ANALYZING"],
    "page": 1,
    "page_size": 50,
    "sort_field": "updated_at",
    "sort_direction": "desc",
}
PAGINATED_RESPONSE: dict[str, Any] = {
    "documents": [DOC_STATUS],
    "pagination": {
        "page": 1,
        "page_size": 50,
        "total_count": 150,
        "total_pages": 3,
        "has_next": True,
        "has_prev": False,
    },
    # the example says "PENDING", ...; the storages' get_all_status_counts count every
    # DocStatus by its value, plus "all"
    "status_counts": {
        "pending": 10,
        "parsing": 0,
        "analyzing": 0,
        "processing": 5,
        "preprocessed": 5,
        "processed": 130,
        "failed": 5,
        "all": 155,
    },
}
STATUS_COUNTS_RESPONSE: dict[str, Any] = {"status_counts": PAGINATED_RESPONSE["status_counts"]}
# PipelineStatusResponse has no example: its fields with their defaults.
PIPELINE_STATUS_RESPONSE: dict[str, Any] = {
    "busy": False,
    "job_name": "Default Job",
    "job_start": None,
    "docs": 0,
    "batchs": 0,
    "cur_batch": 0,
    "latest_message": "",
    "history_messages": [],
    "update_status": {},
    "recovery_required": False,
    "recovery_kind": None,
    "recovery_message": None,
}
# GET /documents (LightRAG's DocsStatusesResponse, until it was dropped for /paginated).
DOCS_STATUSES_RESPONSE: dict[str, Any] = {"statuses": {"processed": [DOC_STATUS]}}
DELETE_DOCUMENT_REQUEST: dict[str, Any] = {
    "doc_ids": ["doc_123456"],
    "delete_file": False,
    "delete_llm_cache": False,
}

# -- graph_routes.py and lightrag/types.py ------------------------------------------------

# types.py's KnowledgeGraph has no example: its fields, with the node and edge properties
# kg/networkx_impl.py stores, and the entity of EntityCreateRequest's examples.
KNOWLEDGE_GRAPH: dict[str, Any] = {
    "nodes": [
        {
            "id": "Tesla",
            "labels": ["Tesla"],
            "properties": {
                "entity_id": "Tesla",
                "entity_type": "ORGANIZATION",
                "description": "Electric vehicle manufacturer",
                "source_id": "chunk-123",
                "file_path": "cars.md",
            },
        }
    ],
    "edges": [
        {
            "id": "Elon Musk-Tesla",
            "type": "DIRECTED",
            "source": "Elon Musk",
            "target": "Tesla",
            "properties": {
                "weight": 1.0,
                "description": "Elon Musk leads Tesla",
                "keywords": "leadership",
                "source_id": "chunk-123",
                "file_path": "cars.md",
            },
        }
    ],
    "is_truncated": False,
}
ENTITY_EXISTS: dict[str, Any] = {"exists": True}
# EntityUpdateRequest, EntityMergeRequest (its field examples) and RelationCreateRequest.
GRAPH_EDITS: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/graph/entity/edit"): {
        "entity_name": "Tesla",
        "updated_data": {"description": "Electric cars"},
    },
    ("POST", "/graph/relation/edit"): {
        "source_id": "Elon Musk",
        "target_id": "Tesla",
        "updated_data": {"weight": 2.0},
    },
    ("POST", "/graph/entity/create"): {
        "entity_name": "Tesla",
        "entity_data": {
            "description": "Electric vehicle manufacturer",
            "entity_type": "ORGANIZATION",
        },
    },
    ("POST", "/graph/relation/create"): {
        "source_entity": "Elon Musk",
        "target_entity": "Tesla",
        "relation_data": {"description": "leads", "keywords": "CEO", "weight": 1.0},
    },
    ("POST", "/graph/entities/merge"): {
        "entities_to_change": ["Elon Msk", "Ellon Musk"],
        "entity_to_change_into": "Elon Musk",
    },
    ("DELETE", "/graph/entity/delete"): {"entity_name": "Tesla"},
    ("DELETE", "/graph/relation/delete"): {
        "source_entity": "Elon Musk",
        "target_entity": "Tesla",
    },
}

# -- lightrag_server.py: GET /health (the fields every caller gets) -----------------------

HEALTH_RESPONSE: dict[str, Any] = {
    "status": "healthy",
    "auth_mode": "enabled",
    "core_version": "0.0.1",
    "api_version": "0.0.1",
    "webui_available": True,
    "workspace_available": True,
    "api_docs_available": True,
    "pipeline_busy": False,
    "pipeline_active": False,
}


def same_shape(actual: Any, example: Any, where: str = "$") -> list[str]:
    """Where `actual` differs from `example` in shape: a key of the example missing, or a
    value of another JSON type (numbers are one type; null in the example takes anything; a
    list's items are checked against the example's first item). Extra keys are allowed."""
    if example is None:
        return []
    if isinstance(example, dict):
        if not isinstance(actual, dict):
            return [f"{where}: expected an object, got {type(actual).__name__}"]
        problems = []
        for key, value in example.items():
            if key not in actual:
                problems.append(f"{where}.{key}: missing")
            else:
                problems += same_shape(actual[key], value, f"{where}.{key}")
        return problems
    if isinstance(example, list):
        if not isinstance(actual, list):
            return [f"{where}: expected a list, got {type(actual).__name__}"]
        if not example:
            return []
        return [
            p
            for i, item in enumerate(actual)
            for p in same_shape(item, example[0], f"{where}[{i}]")
        ]
    if isinstance(example, bool):
        ok = isinstance(actual, bool)
    elif isinstance(example, (int, float)):
        ok = isinstance(actual, (int, float)) and not isinstance(actual, bool)
    else:
        ok = isinstance(actual, type(example))
    return [] if ok else [f"{where}: expected {type(example).__name__}, got {actual!r}"]
