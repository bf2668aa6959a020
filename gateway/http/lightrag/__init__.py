"""LightRAG's server API (LightRAG 1.5.7's routes, request and response JSON) on the HTTP
port, so that scripts, client libraries and LightRAG MCP servers written for LightRAG work
against kgstream: queries (`query.py`), documents (`documents.py`), the graph (`graph.py`)
and `/health` (`health.py`).

Like every route of the HTTP API, each builds the gRPC request message and calls the same
servicer method the gRPC server calls (`gateway/http/app.py` `invoke`), so validation,
limits, deadlines, auth and read-your-writes are kgstream's; `wire.py` gives the answers
LightRAG's shapes. docs/lightrag-api.md maps the parameters and says what is ignored and
what is refused.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from gateway.http.app import HttpApi
from gateway.http.auth import LIGHTRAG_ROOTS
from gateway.http.lightrag.documents import DocumentRoutes
from gateway.http.lightrag.graph import GRAPH_FIELDS, GraphRoutes
from gateway.http.lightrag.health import health
from gateway.http.lightrag.query import QUERY_FIELDS, QueryRoutes
from gateway.http.lightrag.wire import FieldNames, Handler, fastapi_error, lightrag_route
from gateway.http.routes import ApiRoute, Door

# LightRAG's routes that edit the graph by hand: refused (graph.py says why).
GRAPH_EDITS = (
    ("POST", "/graph/entity/edit"),
    ("POST", "/graph/relation/edit"),
    ("POST", "/graph/entity/create"),
    ("POST", "/graph/relation/create"),
    ("POST", "/graph/entities/merge"),
    ("DELETE", "/graph/entity/delete"),
    ("DELETE", "/graph/relation/delete"),
)


def lightrag_door(api: HttpApi) -> Door:
    """LightRAG's routes, with FastAPI's error body under their paths (the paths the token
    guards), as LightRAG's clients read it."""
    shapes = dict.fromkeys(LIGHTRAG_ROOTS, fastapi_error)
    return Door(tuple(lightrag_routes(api)), error_shapes=shapes)


def lightrag_routes(api: HttpApi) -> list[ApiRoute]:
    queries, documents, graph = (
        QueryRoutes(api.knowledge_graph),
        DocumentRoutes(api),
        GraphRoutes(api),
    )

    async def health_of(request: Request) -> Response:
        return await health(api, request)

    def route(
        method: str,
        path: str,
        handler: Handler,
        summary: str,
        names: FieldNames | None = None,
        location: str = "body",
    ) -> ApiRoute:
        endpoint = lightrag_route(handler, names, location)
        return ApiRoute(method, path, endpoint, f"LightRAG: {summary}")

    return [
        route("POST", "/query", queries.query, "answer a question", names=QUERY_FIELDS),
        route(
            "POST",
            "/query/stream",
            queries.query_stream,
            "answer a question as NDJSON lines (references, then response chunks)",
            names=QUERY_FIELDS,
        ),
        route("POST", "/query/data", queries.query_data, "the retrieved context as data"),
        route("POST", "/documents/text", documents.insert_text, "insert one text"),
        route("POST", "/documents/texts", documents.insert_texts, "insert several texts"),
        route("POST", "/documents/upload", documents.upload, "upload a file (multipart)"),
        route("POST", "/documents/scan", documents.scan, "scan (nothing to do: kgstream watches)"),
        route("GET", "/documents", documents.list_documents, "documents by status (up to 1000)"),
        route(
            "DELETE",
            "/documents",
            documents.clear,
            "delete every document (needs ?confirm=delete-all-documents)",
        ),
        route("POST", "/documents/paginated", documents.paginated, "a page of documents"),
        route("GET", "/documents/status_counts", documents.status_counts, "documents by status"),
        route(
            "GET", "/documents/pipeline_status", documents.pipeline_status, "the indexer's state"
        ),
        route(
            "GET",
            "/documents/track_status/{track_id}",
            documents.track_status,
            "the documents an insert or upload published, and where each stands",
        ),
        route(
            "POST",
            "/documents/reprocess_failed",
            documents.reprocess_failed,
            "retry the documents whose extraction failed",
        ),
        route(
            "DELETE",
            "/documents/delete_document",
            documents.delete_documents,
            "delete documents by id",
        ),
        route(
            "GET",
            "/graphs",
            graph.graphs,
            "an entity's neighbourhood (label=*: the best-connected entities)",
            names=GRAPH_FIELDS,
            location="query",
        ),
        route("GET", "/graph/label/list", graph.labels, "every entity's name"),
        route(
            "GET",
            "/graph/entity/exists",
            graph.entity_exists,
            "whether an entity exists",
            location="query",
        ),
        *(
            route(method, path, graph.edit, "refused: the graph is derived from the documents")
            for method, path in GRAPH_EDITS
        ),
        route("GET", "/health", health_of, "liveness, auth mode and whether the indexer is busy"),
    ]
