"""The gRPC gateway: kgstream.v1.KnowledgeGraph and kgstream.v1.Ingest over one server.

Queries go to the engine; graph and document look-ups read the Redis graph store
directly; Ingest publishes to Kafka. Health checking and reflection are always on,
so load balancers and `grpcurl` work. Binds 127.0.0.1 unless told otherwise: the
gateway has no TLS, so exposing it is a deliberate choice (put it behind a proxy
and set an auth token).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from typing import NoReturn, Protocol

import grpc
import redis
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from connectors.llm.client import LLMError
from connectors.redis.graph_store import GraphStore, normalise_pair
from dataflow.core.documents import (
    DocumentChange,
    DocumentDelete,
    DocumentLimits,
    DocumentStatus,
    DocumentUpsert,
    PreparedDocument,
    prepare_document,
)
from dataflow.core.naming import entity_key
from gateway import convert
from gateway.auth import BearerTokenInterceptor
from gateway.types import (
    Answer,
    AnswerStream,
    IndexVersionTimeout,
    InvalidQuery,
    QueryParams,
    Retrieval,
    StoreUnavailable,
    Usage,
)
from protos.kgstream.v1 import events_pb2, ingest_pb2, ingest_pb2_grpc, query_pb2, query_pb2_grpc

KNOWLEDGE_GRAPH_SERVICE = query_pb2.DESCRIPTOR.services_by_name["KnowledgeGraph"].full_name
INGEST_SERVICE = ingest_pb2.DESCRIPTOR.services_by_name["Ingest"].full_name

DEFAULT_SUBGRAPH_DEPTH = 3  # LightRAG's max_depth
MAX_SUBGRAPH_DEPTH = 10
DEFAULT_SUBGRAPH_NODES = 1000  # LightRAG's max_nodes
MAX_SUBGRAPH_NODES = 10_000
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
# gRPC reports "no deadline" as a deadline centuries away.
_NO_DEADLINE_SECONDS = 1e8


class Engine(Protocol):
    """What the gateway needs from the query engine (gateway/engine.QueryEngine).

    `deadline` is the call's deadline in `time.monotonic()` seconds (None: the
    client set none); the engine raises IndexVersionTimeout when
    `min_index_version` is not reached by then.
    """

    def validate(self, params: QueryParams) -> None: ...

    def retrieve(self, params: QueryParams, deadline: float | None) -> Retrieval: ...

    def answer(self, params: QueryParams, deadline: float | None) -> Answer: ...

    def stream_answer(
        self, params: QueryParams, deadline: float | None
    ) -> tuple[Retrieval, AnswerStream]: ...


class EventPublisher(Protocol):
    """What Ingest needs from connectors.kafka.producer.DocumentEventProducer."""

    topic: str

    def send(self, change: DocumentChange, event_time_ms: int | None = None) -> tuple[int, int]: ...


@dataclass(frozen=True)
class ServerOptions:
    """How the gateway listens. `address` ending in ":0" picks a free port."""

    address: str = "127.0.0.1:50051"
    auth_token: str | None = None
    max_message_bytes: int = 16 * 1024 * 1024  # a 10 MB document fits, with room
    max_workers: int = 16  # concurrent calls; an open QueryStream holds one

    def __post_init__(self) -> None:
        host, colon, port = self.address.rpartition(":")
        if not colon or not host or not port.isdigit():
            raise ValueError(
                f"ServerOptions.address must be host:port (e.g. 127.0.0.1:50051); "
                f"got {self.address!r}"
            )
        if self.auth_token == "":
            raise ValueError("ServerOptions.auth_token must be non-empty, or None for no auth")
        if self.max_message_bytes < 1024:
            raise ValueError(
                f"ServerOptions.max_message_bytes must be >= 1024; got {self.max_message_bytes}"
            )
        if self.max_workers < 1:
            raise ValueError(f"ServerOptions.max_workers must be >= 1; got {self.max_workers}")


@dataclass(frozen=True)
class RunningServer:
    """A started gateway: `port` is the bound one (useful with address "host:0")."""

    server: grpc.Server
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def stop(self, grace: float | None = None) -> None:
        self.server.stop(grace).wait()

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        return bool(self.server.wait_for_termination(timeout))


def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
    context.abort(code, message)
    raise AssertionError("unreachable: context.abort raises")  # pragma: no cover


@contextlib.contextmanager
def _statuses(context: grpc.ServicerContext) -> Iterator[None]:
    """Turn the engine's and the stores' errors into gRPC status codes."""
    try:
        yield
    except InvalidQuery as error:
        field = convert.request_field(error.field)
        detail = str(error).removeprefix(f"{error.field}: ")
        _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{field}: {detail}")
    except IndexVersionTimeout as error:
        _abort(context, grpc.StatusCode.DEADLINE_EXCEEDED, str(error))
    except StoreUnavailable as error:
        _abort(context, grpc.StatusCode.UNAVAILABLE, str(error))
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as error:
        _abort(context, grpc.StatusCode.UNAVAILABLE, f"graph store unreachable: {error}")
    except LLMError as error:
        _abort(context, grpc.StatusCode.UNAVAILABLE, f"the LLM call failed: {error}")


def _deadline(context: grpc.ServicerContext) -> float | None:
    """The call's deadline on the `time.monotonic()` clock, or None when it has none."""
    remaining = context.time_remaining()
    if remaining is None or remaining > _NO_DEADLINE_SECONDS:
        return None
    return time.monotonic() + float(remaining)


def _invalid(context: grpc.ServicerContext, field: str, message: str) -> NoReturn:
    _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"{field}: {message}")


def _in_range(context: grpc.ServicerContext, field: str, value: int, low: int, high: int) -> int:
    if not low <= value <= high:
        _invalid(context, field, f"must be between {low} and {high}; got {value}")
    return value


class KnowledgeGraphService(query_pb2_grpc.KnowledgeGraphServicer):
    def __init__(self, engine: Engine, graph: GraphStore) -> None:
        self._engine = engine
        self._graph = graph

    # -- queries ---------------------------------------------------------------

    def _params(self, request: query_pb2.QueryRequest) -> QueryParams:
        params = convert.query_params_from(request)
        self._engine.validate(params)
        return params

    def Query(
        self, request: query_pb2.QueryRequest, context: grpc.ServicerContext
    ) -> query_pb2.QueryResponse:
        with _statuses(context):
            answer = self._engine.answer(self._params(request), _deadline(context))
        return convert.answer_to_proto(answer)

    def Retrieve(
        self, request: query_pb2.QueryRequest, context: grpc.ServicerContext
    ) -> query_pb2.RetrievalResult:
        with _statuses(context):
            retrieval = self._engine.retrieve(self._params(request), _deadline(context))
        return convert.retrieval_to_proto(retrieval)

    def QueryStream(
        self, request: query_pb2.QueryRequest, context: grpc.ServicerContext
    ) -> Iterator[query_pb2.QueryEvent]:
        """Context first, then deltas; a cancelled call closes the stream (and the LLM call)."""
        with _statuses(context):
            retrieval, stream = self._engine.stream_answer(
                self._params(request), _deadline(context)
            )
        # Runs when the call ends for any reason, cancellation included, even while
        # this thread is blocked waiting for the next delta.
        context.add_callback(stream.close)
        try:
            yield convert.context_event(retrieval)
            with _statuses(context):
                try:
                    for delta in stream:
                        if not context.is_active():
                            return
                        if delta:
                            yield convert.delta_event(delta)
                except Exception:
                    if not context.is_active():
                        return  # the stream failed because the cancelled call closed it
                    raise
            yield convert.done_event(
                _usage_of(stream), retrieval.index_version, stream.llm_configured
            )
        finally:
            stream.close()

    # -- graph look-ups --------------------------------------------------------

    def _entity_key(self, context: grpc.ServicerContext, field: str, name: str) -> str:
        key = entity_key(name)
        if not key:
            _invalid(context, field, f"must name an entity; got {name!r}")
        return key

    def GetEntity(
        self, request: query_pb2.GetEntityRequest, context: grpc.ServicerContext
    ) -> query_pb2.GetEntityResponse:
        key = self._entity_key(context, "name", request.name)
        with _statuses(context):
            version = self._graph.version()
            record = self._graph.get_entities([key]).get(key)
            degree = self._graph.node_degrees([key])[key]
        if record is None:
            _abort(
                context,
                grpc.StatusCode.NOT_FOUND,
                f"no entity {request.name!r} (key {key!r}) at index version {version}",
            )
        return query_pb2.GetEntityResponse(
            entity=convert.entity_to_proto(record), degree=degree, index_version=version
        )

    def GetRelation(
        self, request: query_pb2.GetRelationRequest, context: grpc.ServicerContext
    ) -> query_pb2.GetRelationResponse:
        source = self._entity_key(context, "source", request.source)
        target = self._entity_key(context, "target", request.target)
        if source == target:
            _invalid(context, "target", f"must differ from source; both are {source!r}")
        pair = normalise_pair(source, target)
        with _statuses(context):
            version = self._graph.version()
            record = self._graph.get_relations([pair]).get(pair)
        if record is None:
            _abort(
                context,
                grpc.StatusCode.NOT_FOUND,
                f"no relation between {request.source!r} and {request.target!r} "
                f"at index version {version}",
            )
        return query_pb2.GetRelationResponse(
            relation=convert.relation_to_proto(record), index_version=version
        )

    def GetSubgraph(
        self, request: query_pb2.GetSubgraphRequest, context: grpc.ServicerContext
    ) -> query_pb2.GetSubgraphResponse:
        seed = self._entity_key(context, "seed", request.seed)
        depth = (
            _in_range(context, "depth", request.depth, 0, MAX_SUBGRAPH_DEPTH)
            if request.HasField("depth")
            else DEFAULT_SUBGRAPH_DEPTH
        )
        max_nodes = (
            _in_range(context, "max_nodes", request.max_nodes, 1, MAX_SUBGRAPH_NODES)
            if request.HasField("max_nodes")
            else DEFAULT_SUBGRAPH_NODES
        )
        with _statuses(context):
            version = self._graph.version()
            if not self._graph.get_entities([seed]):
                _abort(
                    context,
                    grpc.StatusCode.NOT_FOUND,
                    f"no entity {request.seed!r} (key {seed!r}) at index version {version}",
                )
            order, truncated = _walk(self._graph, seed, depth, max_nodes)
            entities = self._graph.get_entities(order)
            members = set(order)
            pairs = {
                pair
                for edges in self._graph.edges_of(order).values()
                for pair in edges
                if pair[0] in members and pair[1] in members
            }
            relations = self._graph.get_relations(sorted(pairs))
        return query_pb2.GetSubgraphResponse(
            entities=[convert.entity_to_proto(entities[k]) for k in order if k in entities],
            relations=[convert.relation_to_proto(relations[p]) for p in sorted(relations)],
            truncated=truncated,
            index_version=version,
        )

    # -- documents -------------------------------------------------------------

    def GetDocument(
        self, request: query_pb2.GetDocumentRequest, context: grpc.ServicerContext
    ) -> query_pb2.GetDocumentResponse:
        if not request.doc_id:
            _invalid(context, "doc_id", "must be non-empty")
        with _statuses(context):
            version = self._graph.version()
            stored = self._graph.get_documents([request.doc_id]).get(request.doc_id)
        if stored is None:
            _abort(
                context,
                grpc.StatusCode.NOT_FOUND,
                f"no document {request.doc_id!r} at index version {version}",
            )
        return query_pb2.GetDocumentResponse(
            document=convert.document_to_proto(stored), index_version=version
        )

    def ListDocuments(
        self, request: query_pb2.ListDocumentsRequest, context: grpc.ServicerContext
    ) -> query_pb2.ListDocumentsResponse:
        try:
            status = convert.status_from_proto(request.status)
        except ValueError as error:
            _invalid(context, "status", str(error))
        page_size = (
            _in_range(context, "page_size", request.page_size, 1, MAX_PAGE_SIZE)
            if request.HasField("page_size")
            else DEFAULT_PAGE_SIZE
        )
        token = request.page_token
        if token and not token.isdigit():
            _invalid(context, "page_token", "is not a token this server issued")
        offset = int(token or 0)
        statuses = [status] if status is not None else list(DocumentStatus)
        with _statuses(context):
            version = self._graph.version()
            ids, total = _page_of_ids(self._graph, statuses, offset, page_size)
            documents = self._graph.get_documents(ids)
        end = offset + len(ids)
        return query_pb2.ListDocumentsResponse(
            documents=[convert.document_to_proto(documents[i]) for i in ids if i in documents],
            next_page_token=str(end) if end < total else "",
            total=total,
            index_version=version,
        )


def _walk(graph: GraphStore, seed: str, depth: int, max_nodes: int) -> tuple[list[str], bool]:
    """Breadth-first entity keys from `seed`; within a hop, higher degree first, then key."""
    order, seen, frontier = [seed], {seed}, [seed]
    for _ in range(depth):
        if not frontier:
            break
        candidates: dict[str, int] = {}
        for neighbours in graph.get_neighbours(frontier).values():
            for key, degree in neighbours:
                if key not in seen:
                    candidates[key] = degree
        ranked = sorted(candidates, key=lambda k: (-candidates[k], k))
        room = max_nodes - len(order)
        if len(ranked) > room:
            order.extend(ranked[:room])
            return order, True
        order.extend(ranked)
        seen.update(ranked)
        frontier = ranked
    return order, False


def _page_of_ids(
    graph: GraphStore, statuses: list[DocumentStatus], offset: int, limit: int
) -> tuple[list[str], int]:
    """One page of doc ids over the statuses in order, and the total across them."""
    counts = graph.status_counts()
    total = sum(counts[s] for s in statuses)
    ids: list[str] = []
    skip = offset
    for status in statuses:
        if len(ids) >= limit:
            break
        if skip >= counts[status]:
            skip -= counts[status]
            continue
        page, _ = graph.documents_by_status(status, skip, limit - len(ids))
        ids.extend(page)
        skip = 0
    return ids, total


def _usage_of(stream: AnswerStream) -> Usage:
    """The stream's token usage once drained, if the engine's stream reports it (else zeros)."""
    usage = getattr(stream, "usage", None)
    return usage if isinstance(usage, Usage) else Usage()


class IngestService(ingest_pb2_grpc.IngestServicer):
    def __init__(self, graph: GraphStore, producer: EventPublisher | None) -> None:
        self._graph = graph
        self._producer = producer

    def UpsertDocument(
        self, request: ingest_pb2.UpsertDocumentRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.IngestResponse:
        _check_doc_id(context, request.doc_id)
        change = DocumentUpsert(
            request.doc_id, bytes(request.content), request.file_path or request.doc_id
        )
        # Unlimited size here: only the indexer's limit decides, and it reports FAILED.
        prepared = prepare_document(change, DocumentLimits(max_bytes=len(request.content) + 1))
        digest = prepared.content_hash if isinstance(prepared, PreparedDocument) else ""
        return self._publish(context, change, events_pb2.DocumentEvent.UPSERT, digest)

    def DeleteDocument(
        self, request: ingest_pb2.DeleteDocumentRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.IngestResponse:
        _check_doc_id(context, request.doc_id)
        change = DocumentDelete(request.doc_id)
        return self._publish(context, change, events_pb2.DocumentEvent.DELETE, "")

    def _publish(
        self,
        context: grpc.ServicerContext,
        change: DocumentChange,
        op: events_pb2.DocumentEvent.Op,
        digest: str,
    ) -> ingest_pb2.IngestResponse:
        producer = self._producer
        if producer is None:
            _abort(
                context,
                grpc.StatusCode.FAILED_PRECONDITION,
                "no event log is configured: this gateway cannot publish document changes. "
                "Start it with a Kafka bootstrap server and topic, or write files into the "
                "watched folder instead.",
            )
        with _statuses(context):
            # Read before publishing: the batch holding this event is applied after
            # it, so version + 1 is a true lower bound.
            version = self._graph.version()
        try:
            partition, offset = producer.send(change, event_time_ms=int(time.time() * 1000))
        except Exception as error:  # the producer's own error already says what to check
            _abort(context, grpc.StatusCode.UNAVAILABLE, str(error))
        return ingest_pb2.IngestResponse(
            doc_id=change.doc_id,
            op=op,
            topic=producer.topic,
            partition=partition,
            offset=offset,
            content_hash=digest,
            index_version=version,
            min_index_version=version + 1,
        )


def _check_doc_id(context: grpc.ServicerContext, doc_id: str) -> None:
    if not doc_id.strip():
        _invalid(context, "doc_id", "must be non-empty")
    if "\x00" in doc_id:
        _invalid(context, "doc_id", "must not contain a NUL character")


def serve(
    engine: Engine,
    graph_store: GraphStore,
    options: ServerOptions = ServerOptions(),
    producer: EventPublisher | None = None,
) -> RunningServer:
    """Start the gateway and return it; the caller stops it (`RunningServer.stop`)."""
    interceptors = [BearerTokenInterceptor(options.auth_token)] if options.auth_token else []
    server = grpc.server(
        futures.ThreadPoolExecutor(
            max_workers=options.max_workers, thread_name_prefix="kgstream-grpc"
        ),
        interceptors=interceptors,
        options=[
            ("grpc.max_receive_message_length", options.max_message_bytes),
            ("grpc.max_send_message_length", options.max_message_bytes),
            ("grpc.so_reuseport", 0),
        ],
    )
    query_pb2_grpc.add_KnowledgeGraphServicer_to_server(  # type: ignore[no-untyped-call]
        KnowledgeGraphService(engine, graph_store), server
    )
    ingest_pb2_grpc.add_IngestServicer_to_server(  # type: ignore[no-untyped-call]
        IngestService(graph_store, producer), server
    )
    health_servicer = health.HealthServicer()
    for name in ("", KNOWLEDGE_GRAPH_SERVICE, INGEST_SERVICE):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (KNOWLEDGE_GRAPH_SERVICE, INGEST_SERVICE, health.SERVICE_NAME, reflection.SERVICE_NAME),
        server,
    )
    try:
        port = server.add_insecure_port(options.address)
    except RuntimeError as error:
        raise OSError(f"cannot bind the gateway to {options.address}: {error}") from error
    if port == 0:
        raise OSError(f"cannot bind the gateway to {options.address}: address in use or invalid")
    server.start()
    host = options.address.rpartition(":")[0]
    return RunningServer(server=server, host=host, port=port)
