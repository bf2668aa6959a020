"""The HTTP/JSON API (Starlette): every gRPC method as a route, server-sent events for
streamed answers and index changes, the doors that speak other APIs (OpenAI's, Ollama's:
`Door`s), the OpenAPI document with its docs page, and the web UI.

Each route turns the HTTP request into the gRPC request message (`gateway/http/messages.py`)
and calls the very servicer method the gRPC server calls (`gateway/http/calls.py` says why),
so the two transports cannot drift apart. `HttpApi.routes()` and the doors' routes are the
table the OpenAPI document is generated from (`gateway/http/openapi.py`); docs/http-api.md
describes the API for users.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypeVar

import anyio.from_thread
import grpc
from google.protobuf.message import Message
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from connectors.redis.failures import failed_documents
from connectors.redis.ports import GraphRecords, IndexControl
from dataflow.core.documents import DocumentStatus
from gateway.convert import DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT, entity_search_request
from gateway.http.auth import BearerTokenMiddleware
from gateway.http.calls import HTTP_STATUS, MAX_TIMEOUT_MS, CallFailed, HttpCall, error_body
from gateway.http.errors import ErrorShapes
from gateway.http.hosts import HostCheckMiddleware
from gateway.http.messages import BadJson, from_json, parse_json, to_json
from gateway.http.openapi import openapi_document
from gateway.http.routes import ApiRoute, Door, Param
from gateway.ingest import IngestService
from gateway.knowledge_graph import KnowledgeGraphService
from gateway.status import statuses
from gateway.types import InvalidQuery
from kgstream_protos.v1 import ingest_pb2, query_pb2

T = TypeVar("T")

EVENTS_RETRY_SECONDS = 0.25  # how soon /api/v1/events reads again after a store outage
EVENTS_PING_SECONDS = 15.0  # an SSE comment keeps proxies from closing an idle stream
DEFAULT_VERSION_WAIT_MS = 30_000
MAX_INDEX_VERSION = 2**62
WEBUI_PACKAGE = "gateway.http"
WEBUI_FOLDER = "webui"
DOCS_FOLDER = "docs"  # the API docs page (Swagger UI), built beside the web UI


@dataclass(frozen=True)
class HttpOptions:
    """What the HTTP app needs beyond the services: auth, body limit, CORS."""

    auth_token: str | None = None
    max_body_bytes: int = 16 * 1024 * 1024  # as the gRPC gateway's message limit
    cors_origins: tuple[str, ...] = ()  # none: CORS off (same-origin only)
    # The names a request's Host may give when there is no auth token (gateway/http/hosts.py);
    # None: any.
    allowed_hosts: frozenset[str] | None = None
    # Headers beyond authorization and content-type that a browser may send, and read.
    cors_request_headers: tuple[str, ...] = ()
    cors_response_headers: tuple[str, ...] = ()


class VersionWatch:
    """The index version and when this server first saw it (freshness for the UI)."""

    def __init__(self, graph: GraphRecords) -> None:
        self._graph = graph
        self._version = -1
        self._changed_at_ms = 0

    def read(self) -> dict[str, Any]:
        version = self._graph.version()
        if version != self._version:
            self._version, self._changed_at_ms = version, int(time.time() * 1000)
        counts = self._graph.status_counts()
        return {
            "index_version": version,
            "changed_at_ms": self._changed_at_ms,
            "documents": {status.name.lower(): counts[status] for status in DocumentStatus},
        }


class HttpApi:
    """The routes over one gateway's services."""

    def __init__(
        self,
        knowledge_graph: KnowledgeGraphService,
        ingest: IngestService,
        graph: GraphRecords,
        control: IndexControl,
        serving: Callable[[], bool],
    ) -> None:
        self.knowledge_graph = knowledge_graph
        self.ingest = ingest
        self.graph = graph
        self.control = control
        self.serving = serving
        self.versions = VersionWatch(graph)

    # -- queries ---------------------------------------------------------------

    async def query(self, request: Request) -> Response:
        message = await _body(request, query_pb2.QueryRequest)
        return await _unary(request, self.knowledge_graph.Query, message)

    async def retrieve(self, request: Request) -> Response:
        message = await _body(request, query_pb2.QueryRequest)
        return await _unary(request, self.knowledge_graph.Retrieve, message)

    async def query_stream(self, request: Request) -> Response:
        message = await _body(request, query_pb2.QueryRequest)
        call = call_of(request)
        try:
            await reach_version(request, message, call)
            events = await started(self.knowledge_graph.QueryStream(message, call), call)
        except CallFailed as failure:
            call.finish()
            return _failed(failure)

        def stream() -> Iterator[str]:
            try:
                for event in events:
                    kind = event.WhichOneof("event") or ""
                    yield sse(kind, to_json(getattr(event, kind)))
            except CallFailed as failure:
                yield sse("error", error_body(failure.code, failure.message))

        return event_stream(stream(), call)

    # -- graph -----------------------------------------------------------------

    async def search_entities(self, request: Request) -> Response:
        limit = _int_param(request, "limit", DEFAULT_SEARCH_LIMIT, 1, MAX_SEARCH_LIMIT)
        try:
            message = entity_search_request(request.query_params.get("q", ""), limit, "q")
        except InvalidQuery as error:
            return _bad_request(error.field, error.detail)
        result = await _call(request, self.knowledge_graph.Retrieve, message)
        if isinstance(result, Response):
            return result
        return JSONResponse(
            {
                "entities": [to_json(entity) for entity in result.entities[:limit]],
                "index_version": result.index_version,
            }
        )

    async def entity(self, request: Request) -> Response:
        message = query_pb2.GetEntityRequest(name=request.path_params["name"])
        return await _unary(request, self.knowledge_graph.GetEntity, message)

    async def relation(self, request: Request) -> Response:
        message = await _query(request, query_pb2.GetRelationRequest)
        return await _unary(request, self.knowledge_graph.GetRelation, message)

    async def subgraph(self, request: Request) -> Response:
        message = await _query(request, query_pb2.GetSubgraphRequest)
        return await _unary(request, self.knowledge_graph.GetSubgraph, message)

    async def chunk(self, request: Request) -> Response:
        chunk_id = request.path_params["chunk_id"]

        def read() -> tuple[int, Any]:
            version = self.graph.version()
            return version, self.graph.get_chunks([chunk_id]).get(chunk_id)

        result = await _guarded(request, read)
        if isinstance(result, Response):
            return result
        version, chunk = result
        if chunk is None:
            return _error(
                grpc.StatusCode.NOT_FOUND, f"no chunk {chunk_id!r} at index version {version}"
            )
        return JSONResponse(
            {
                "chunk_id": chunk.chunk_id,
                "doc_id": chunk.doc_id,
                "file_path": chunk.file_path,
                "order": chunk.order,
                "text": chunk.text,
                "index_version": version,
            }
        )

    # -- documents -------------------------------------------------------------

    async def documents(self, request: Request) -> Response:
        message = await _query(request, query_pb2.ListDocumentsRequest)
        return await _unary(request, self.knowledge_graph.ListDocuments, message)

    async def document(self, request: Request) -> Response:
        message = query_pb2.GetDocumentRequest(doc_id=request.path_params["doc_id"])
        return await _unary(request, self.knowledge_graph.GetDocument, message)

    async def upsert_document(self, request: Request) -> Response:
        body = await json_object(request)
        content = body.get("content")
        if not isinstance(content, str):
            return _bad_request("content", "must be the document's text (a JSON string)")
        file_path = body.get("file_path", "")
        if not isinstance(file_path, str):
            return _bad_request("file_path", "must be a string")
        unknown = sorted(set(body) - {"content", "file_path"})
        if unknown:
            return _bad_request(unknown[0], "is not a field of a document upsert")
        message = ingest_pb2.UpsertDocumentRequest(
            doc_id=request.path_params["doc_id"],
            content=content.encode("utf-8", "surrogatepass"),
            file_path=file_path,
        )
        return await _unary(request, self.ingest.UpsertDocument, message)

    async def delete_document(self, request: Request) -> Response:
        message = ingest_pb2.DeleteDocumentRequest(doc_id=request.path_params["doc_id"])
        return await _unary(request, self.ingest.DeleteDocument, message)

    def retry_failed_documents(self) -> tuple[list[str], list[tuple[str, str]]]:
        """Ask the indexer to retry the FAILED documents a retry can fix; returns their ids
        and the other FAILED documents with their reasons (they need new content)."""
        retried, permanent = failed_documents(self.graph)
        if retried:
            self.control.request_retry(time.time())
        return retried, permanent

    async def retry_failed(self, request: Request) -> Response:
        def retry() -> dict[str, Any]:
            retried, permanent = self.retry_failed_documents()
            return {
                "retried": retried,
                "not_retried": [{"doc_id": d, "reason": r} for d, r in permanent],
            }

        result = await _guarded(request, retry)
        return result if isinstance(result, Response) else JSONResponse(result)

    # -- the index -------------------------------------------------------------

    async def version(self, request: Request) -> Response:
        """The version and counts, after the wait for `min_index_version` when asked: the
        gRPC calls' wait, on the event loop (`VersionWaits.reach_async`), so a waiting
        client holds no worker thread, leaving frees its place, and no wait outlasts the
        server's `version_wait_seconds` whatever `timeout_ms` asks."""
        wanted = _int_param(request, "min_index_version", 0, 0, MAX_INDEX_VERSION)
        timeout_ms = _int_param(request, "timeout_ms", DEFAULT_VERSION_WAIT_MS, 0, MAX_TIMEOUT_MS)
        if wanted:
            call = HttpCall(timeout_ms / 1000)
            try:
                with statuses(call):
                    waits = self.knowledge_graph.version_waits
                    await waits.reach_async(wanted, timeout_ms / 1000, _left(request))
            except CallFailed as failure:
                return _failed(failure)
        result = await _guarded(request, self.versions.read)
        return result if isinstance(result, Response) else JSONResponse(result)

    async def events(self, request: Request) -> Response:
        """Server-sent `version` events. The stream follows the version through the
        gateway's one poller of it (`VersionWaits.changed`), so open streams cost no
        store reads of their own and no worker thread between changes."""
        read, waits = self.versions.read, self.knowledge_graph.version_waits

        async def stream() -> AsyncIterator[str]:
            last: dict[str, Any] | None = None
            while True:
                try:  # a store outage is said, then waited out
                    state = await run_in_threadpool(_with_statuses, HttpCall(None), read)
                    if state != last:
                        last = state
                        yield sse("version", state)
                    with statuses(HttpCall(None)):
                        moved = await waits.changed(state["index_version"], EVENTS_PING_SECONDS)
                    if moved is None:
                        yield ": ping\n\n"
                except CallFailed as failure:
                    yield sse("error", error_body(failure.code, failure.message))
                    await asyncio.sleep(EVENTS_RETRY_SECONDS)

        return event_stream(stream())

    async def health(self, request: Request) -> Response:
        serving = self.serving()
        return JSONResponse(
            {"status": "SERVING" if serving else "NOT_SERVING"}, status_code=200 if serving else 503
        )

    def routes(self) -> list[ApiRoute]:
        Q, I = query_pb2, ingest_pb2  # noqa: E741 (short names keep the table readable)
        return [
            ApiRoute(
                "GET",
                "/healthz",
                self.health,
                "Whether the stores can be reached",
                response="Health",
            ),
            ApiRoute(
                "GET",
                "/api/v1/version",
                self.version,
                "The index version and document counts; waits for min_index_version",
                response="Version",
                params=(
                    Param(
                        "min_index_version",
                        {
                            "type": "integer",
                            "minimum": 0,
                            "maximum": MAX_INDEX_VERSION,
                            "default": 0,
                        },
                        "wait until the index reaches this version [0: no wait]",
                    ),
                    Param(
                        "timeout_ms",
                        {
                            "type": "integer",
                            "minimum": 0,
                            "maximum": MAX_TIMEOUT_MS,
                            "default": DEFAULT_VERSION_WAIT_MS,
                        },
                        "how long to wait for min_index_version, in milliseconds (never "
                        "past the server's version_wait_seconds)",
                    ),
                ),
            ),
            ApiRoute(
                "GET",
                "/api/v1/events",
                self.events,
                "Server-sent `version` events whenever the index version moves",
                response="Version",
                streams=True,
            ),
            ApiRoute(
                "POST",
                "/api/v1/query",
                self.query,
                "Answer a question (Query)",
                body=Q.QueryRequest,
                response=Q.QueryResponse,
            ),
            ApiRoute(
                "POST",
                "/api/v1/query/stream",
                self.query_stream,
                "Answer a question as server-sent events: context, deltas, done (QueryStream)",
                body=Q.QueryRequest,
                response=Q.QueryEvent,
                streams=True,
            ),
            ApiRoute(
                "POST",
                "/api/v1/retrieve",
                self.retrieve,
                "Retrieve the context only (Retrieve)",
                body=Q.QueryRequest,
                response=Q.RetrievalResult,
            ),
            ApiRoute(
                "GET",
                "/api/v1/entities",
                self.search_entities,
                "Search entities: exact names and aliases first, then by similarity",
                response="EntitySearch",
                params=(
                    Param("q", {"type": "string", "minLength": 1}, "what to search for"),
                    Param(
                        "limit",
                        {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_SEARCH_LIMIT,
                            "default": DEFAULT_SEARCH_LIMIT,
                        },
                        "entities to return",
                    ),
                ),
            ),
            ApiRoute(
                "GET",
                "/api/v1/entities/{name}",
                self.entity,
                "One entity by name or key (GetEntity)",
                response=Q.GetEntityResponse,
                path_fields=("name",),
            ),
            ApiRoute(
                "GET",
                "/api/v1/relations",
                self.relation,
                "The relation between two entities (GetRelation)",
                query=Q.GetRelationRequest,
                response=Q.GetRelationResponse,
            ),
            ApiRoute(
                "GET",
                "/api/v1/subgraph",
                self.subgraph,
                "An entity's neighbourhood (GetSubgraph)",
                query=Q.GetSubgraphRequest,
                response=Q.GetSubgraphResponse,
            ),
            ApiRoute(
                "GET",
                "/api/v1/chunks/{chunk_id}",
                self.chunk,
                "One chunk's text and source",
                response="Chunk",
                path_fields=("chunk_id",),
            ),
            ApiRoute(
                "GET",
                "/api/v1/documents",
                self.documents,
                "Documents by status, a page at a time (ListDocuments)",
                query=Q.ListDocumentsRequest,
                response=Q.ListDocumentsResponse,
            ),
            ApiRoute(
                "GET",
                "/api/v1/documents/{doc_id:path}",
                self.document,
                "One document's status (GetDocument)",
                response=Q.GetDocumentResponse,
                path_fields=("doc_id",),
            ),
            ApiRoute(
                "PUT",
                "/api/v1/documents/{doc_id:path}",
                self.upsert_document,
                "Add or replace a document (UpsertDocument)",
                response=I.IngestResponse,
                path_fields=("doc_id",),
            ),
            ApiRoute(
                "DELETE",
                "/api/v1/documents/{doc_id:path}",
                self.delete_document,
                "Delete a document (DeleteDocument)",
                response=I.IngestResponse,
                path_fields=("doc_id",),
            ),
            ApiRoute(
                "POST",
                "/api/v1/retry-failed",
                self.retry_failed,
                "Ask the indexer to retry the documents whose extraction failed",
                response="RetryFailed",
            ),
        ]


def create_app(api: HttpApi, options: HttpOptions, doors: Sequence[Door] = ()) -> Starlette:
    """The ASGI app: `api`'s routes and the `doors`', /openapi.json, /docs and the web UI.

    Routing is Starlette's, with one route per path taking all of its methods, and the web
    UI's files as routes of their own rather than a catch-all mount at "/": so a known path
    asked with a method it does not take is 405 with `Allow`, and an unknown path is 404,
    for every route registered here. Every error the app writes itself (401, 404, 405, 413)
    has the error shape of its path (`gateway/http/errors.py`)."""
    table = [*api.routes(), *(route for door in doors for route in door.routes)]
    errors = ErrorShapes(
        {prefix: shape for door in doors for prefix, shape in door.error_shapes.items()}
    )
    schemas = {name: dict(schema) for door in doors for name, schema in door.schemas.items()}
    document = openapi_document(table, api.knowledge_graph.limits, schemas)
    routes = _one_route_per_path(table)
    routes.extend(mount for door in doors for mount in door.mounts)
    routes.append(Route("/openapi.json", lambda _: JSONResponse(document), methods=["GET"]))
    routes.extend(_webui_routes())
    middleware = []
    if options.cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(options.cors_origins),
                allow_methods=["GET", "POST", "PUT", "DELETE"],
                allow_headers=["authorization", "content-type", *options.cors_request_headers],
                expose_headers=list(options.cors_response_headers),
            )
        )
    if options.auth_token:
        middleware.append(
            Middleware(BearerTokenMiddleware, token=options.auth_token, errors=errors)
        )
    elif options.allowed_hosts is not None:
        middleware.insert(
            0, Middleware(HostCheckMiddleware, hosts=options.allowed_hosts, errors=errors)
        )
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={HTTPException: _http_exception, Refused: _refused},
        lifespan=_lifespan(doors),
    )
    app.state.max_body_bytes = options.max_body_bytes
    app.state.auth_required = options.auth_token is not None
    app.state.errors = errors
    app.state.knowledge_graph = api.knowledge_graph
    return app


def _lifespan(doors: Sequence[Door]) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """The doors' lifespans, entered in order while the app serves."""

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for door in doors:
                if door.lifespan is not None:
                    await stack.enter_async_context(door.lifespan(app))
            yield

    return lifespan


Endpoint = Callable[[Request], Awaitable[Response]]


def _one_route_per_path(table: Sequence[ApiRoute]) -> list[BaseRoute]:
    """A Starlette route per path, taking the methods of every `ApiRoute` of that path
    (Starlette's own 405 names the methods of the first route matching a path only)."""
    by_path: dict[str, dict[str, Endpoint]] = {}
    for route in table:
        endpoints = by_path.setdefault(route.path, {})
        if route.method in endpoints:
            raise ValueError(f"two routes for {route.method} {route.path}")
        endpoints[route.method] = route.endpoint
    return [
        Route(path, _by_method(endpoints), methods=list(endpoints))
        for path, endpoints in by_path.items()
    ]


def _by_method(endpoints: Mapping[str, Endpoint]) -> Endpoint:
    if len(endpoints) == 1:
        return next(iter(endpoints.values()))

    async def endpoint(request: Request) -> Response:
        method = "GET" if request.method == "HEAD" else request.method
        return await endpoints[method](request)

    return endpoint


def _webui_routes() -> list[BaseRoute]:
    """The built web UI (index.html at "/", its folders as static mounts) and the API docs
    page at /docs; none when the package was built without them."""
    webui = resources.files(WEBUI_PACKAGE) / WEBUI_FOLDER
    if not (webui.is_dir() and (webui / "index.html").is_file()):
        return []

    routes: list[BaseRoute] = [_file_route("/", str(webui / "index.html"))]
    docs = webui / DOCS_FOLDER / "index.html"
    if docs.is_file():
        routes.append(_file_route("/docs", str(docs)))
    for entry in sorted(webui.iterdir(), key=lambda entry: entry.name):
        if entry.is_dir():
            routes.append(Mount(f"/{entry.name}", StaticFiles(directory=str(entry))))
        elif entry.is_file():
            routes.append(_file_route(f"/{entry.name}", str(entry)))
    return routes


def _file_route(path: str, file: str) -> Route:
    return Route(path, lambda _: FileResponse(file), methods=["GET"])


# -- helpers -------------------------------------------------------------------

_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse(event: str, data: Mapping[str, Any]) -> str:
    """One server-sent event; the data is one line of JSON."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


async def started(events: Iterator[T], call: HttpCall) -> Iterator[T]:
    """`events` with the first one read now, so that a request refused before it raises
    `CallFailed` here, while the response can still carry its status (not a 200 whose
    stream holds the error); the call is finished then."""
    try:
        first = await run_in_threadpool(next, events)
    except CallFailed:
        call.finish()
        raise
    return itertools.chain([first], events)


def event_stream(
    lines: Iterator[str] | AsyncIterator[str],
    call: HttpCall | None = None,
    media_type: str = "text/event-stream",
) -> StreamingResponse:
    """A streamed response, server-sent events unless `media_type` says otherwise (Ollama's
    NDJSON); `call` finishes when it ends, for any reason."""
    return StreamingResponse(
        lines,
        media_type=media_type,
        headers=_SSE_HEADERS,
        background=BackgroundTask(call.finish) if call is not None else None,
    )


async def _http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's 404 (no route has the path) and 405 (a route has it, not the method:
    `Allow` names the methods it takes), in the error shape of the path."""
    if not isinstance(exc, HTTPException):
        raise exc
    path, status, headers = request.url.path, exc.status_code, dict(exc.headers or {})
    if status == 404:
        code, message = grpc.StatusCode.NOT_FOUND, f"no route {path} (see /openapi.json)"
    elif status == 405:
        # In a stable order: Starlette joins a set.
        allowed = ", ".join(sorted(headers.get("Allow", "").split(", ")))
        headers["Allow"] = allowed
        code = grpc.StatusCode.UNIMPLEMENTED
        message = f"{request.method} {path} is not allowed; {path} takes {allowed}"
    else:
        code, message = grpc.StatusCode.INVALID_ARGUMENT, str(exc.detail)
    errors: ErrorShapes = request.app.state.errors
    return errors.response(path, status, code, message, headers=headers)


class Refused(Exception):
    """A request refused outside its route's own answers (a body over the limit, a bad
    `timeout_ms`, a body that is not the message): the app answers it in the error shape
    of its path, so every door's clients read it."""

    def __init__(self, status: int, code: grpc.StatusCode, message: str, field: str = "") -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field

    @classmethod
    def bad(cls, field: str, message: str) -> Refused:
        return cls(400, grpc.StatusCode.INVALID_ARGUMENT, f"{field}: {message}", field)


async def _refused(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, Refused):
        raise exc
    errors: ErrorShapes = request.app.state.errors
    return errors.response(request.url.path, exc.status, exc.code, exc.message, exc.field)


def _error(code: grpc.StatusCode, message: str) -> Response:
    return JSONResponse(error_body(code, message), status_code=HTTP_STATUS.get(code, 500))


def _failed(failure: CallFailed) -> Response:
    return _error(failure.code, failure.message)


def _bad_request(field_name: str, message: str) -> Response:
    return JSONResponse(
        error_body(grpc.StatusCode.INVALID_ARGUMENT, f"{field_name}: {message}", field_name),
        status_code=400,
    )


class BodyTooLarge(Exception):
    """A request body over the app's `max_body_bytes` (`limit`)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is over the server's limit of {limit} bytes")
        self.limit = limit


async def read_body_within_limit(request: Request) -> bytes:
    """The request body; `BodyTooLarge` once it is over the app's `max_body_bytes`
    (declared or streamed: a body without Content-Length is counted as it arrives)."""
    limit: int = request.app.state.max_body_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def read_body(request: Request) -> bytes:
    """The request body, refused with 413 once it is over the app's `max_body_bytes`."""
    try:
        return await read_body_within_limit(request)
    except BodyTooLarge as error:
        raise _too_large(error.limit) from None


def _too_large(limit: int) -> Refused:
    return Refused(413, grpc.StatusCode.RESOURCE_EXHAUSTED, str(BodyTooLarge(limit)))


async def json_object(request: Request) -> dict[str, Any]:
    """The body as a JSON object (empty: {}); `Refused` naming `body` otherwise."""
    raw = await read_body(request)
    try:
        body = parse_json(raw or b"{}")
    except ValueError as error:
        raise Refused.bad("body", f"is not JSON: {error}") from None
    if not isinstance(body, dict):
        raise Refused.bad("body", f"must be a JSON object; got {type(body).__name__}")
    return body


async def _body(request: Request, message_type: type[Message]) -> Any:
    body = await json_object(request)
    try:
        return from_json(body, message_type)
    except BadJson as error:
        raise Refused.bad(error.field or "body", error.detail) from None


async def _query(request: Request, message_type: type[Message]) -> Any:
    """The message from the query parameters (scalar fields; `timeout_ms` is the call's)."""
    params = {k: v for k, v in request.query_params.items() if k != "timeout_ms"}
    try:
        return from_json(params, message_type)
    except BadJson as error:
        raise Refused.bad(error.field or "query", error.detail) from None


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        raise Refused.bad(name, f"must be an integer from {low} to {high}; got {raw!r}")
    return int(raw)


def call_of(request: Request) -> HttpCall:
    timeout_ms = _int_param(request, "timeout_ms", 0, 0, MAX_TIMEOUT_MS)

    def connected() -> bool:  # runs in a worker thread of the call
        return not anyio.from_thread.run(request.is_disconnected)

    return HttpCall(timeout_ms / 1000 if timeout_ms else None, connected)


async def invoke(request: Request, method: Callable[[Any, Any], Any], message: Message) -> Any:
    """The servicer's reply to `message`, called as the gRPC server calls it (in a worker
    thread, with the request's deadline and liveness); `CallFailed` for an error status.
    A query's `min_index_version` is awaited first, on the event loop (`reach_version`)."""
    call = call_of(request)
    try:
        await reach_version(request, message, call)
        return await run_in_threadpool(method, message, call)
    finally:
        call.finish()


async def reach_version(request: Request, message: Message, call: HttpCall) -> None:
    """Wait for a query's `min_index_version` without a worker thread, bounded as a gRPC
    call's wait is (at most `max_version_waits` at once, `version_wait_seconds` long), and
    ended as soon as the client leaves; the servicer called next finds the version reached.
    `CallFailed` (429, 504, 499) when the wait is refused or ends without it."""
    if not isinstance(message, query_pb2.QueryRequest) or message.min_index_version <= 0:
        return
    knowledge_graph: KnowledgeGraphService = request.app.state.knowledge_graph
    with statuses(call):
        await knowledge_graph.reach_version(message, call.time_remaining(), _left(request))


def _left(request: Request) -> Callable[[], Awaitable[None]]:
    """What returns once the client of `request` has gone (its connection closed). Only
    for a request whose body was read, or has none: the messages before the disconnect
    are dropped."""

    async def left() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    return left


async def _call(request: Request, method: Callable[[Any, Any], Any], message: Message) -> Any:
    """The servicer's reply, or the error response its status makes."""
    try:
        return await invoke(request, method, message)
    except CallFailed as failure:
        return _failed(failure)


async def _unary(request: Request, method: Callable[[Any, Any], Any], message: Message) -> Response:
    result = await _call(request, method, message)
    return result if isinstance(result, Response) else JSONResponse(to_json(result))


def _with_statuses(call: HttpCall, work: Callable[[], T]) -> T:
    """`work()`, with the stores' errors as the servicers' statuses (`CallFailed`)."""
    with statuses(call):
        try:
            return work()
        except TimeoutError as error:
            call.abort(grpc.StatusCode.DEADLINE_EXCEEDED, str(error))


async def guarded(request: Request, work: Callable[[], T]) -> T:
    """`work()` in a worker thread, with the stores' errors as the servicers' statuses
    (`CallFailed`)."""
    call = call_of(request)
    try:
        return await run_in_threadpool(_with_statuses, call, work)
    finally:
        call.finish()


async def _guarded(request: Request, work: Callable[[], Any]) -> Any:
    """`guarded`, or the error response its status makes."""
    try:
        return await guarded(request, work)
    except CallFailed as failure:
        return _failed(failure)
