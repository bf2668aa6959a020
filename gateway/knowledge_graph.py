"""kgstream.v1.KnowledgeGraph: queries through the engine, graph and document look-ups
straight from the graph records."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Protocol

import grpc

from connectors.embeddings.base import Embedder
from connectors.redis.ports import GraphRecords
from dataflow.core.contributions import RelationPair, RelationRecord
from dataflow.core.documents import DocumentStatus
from dataflow.core.naming import entity_key, relation_pair
from gateway import convert
from gateway.status import abort, call_deadline_of, in_range, invalid, statuses
from gateway.types import (
    Answer,
    AnswerStream,
    CallDeadline,
    QueryParams,
    RequestLimits,
    Retrieval,
    Usage,
    shown,
)
from gateway.version_waits import VersionWaits
from kgstream_protos.v1 import query_pb2, query_pb2_grpc

DEFAULT_SUBGRAPH_DEPTH = 3  # LightRAG's max_depth
MAX_SUBGRAPH_DEPTH = 10
DEFAULT_SUBGRAPH_NODES = 1000  # LightRAG's max_nodes
MAX_SUBGRAPH_NODES = 10_000
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000


class Engine(Protocol):
    """What the gateway needs from the query engine (gateway/engine.QueryEngine).

    `deadline` is the call's deadline and liveness (`CallDeadline`); the engine raises
    IndexVersionTimeout when `min_index_version` is not reached by then, and
    CallAbandoned when the client cancelled or left between two stages of the work.
    `limits` are what `validate` holds requests to; `embedder` embeds the questions;
    `version_waits` bounds every wait for `min_index_version`.
    """

    @property
    def limits(self) -> RequestLimits: ...

    @property
    def embedder(self) -> Embedder: ...

    @property
    def version_waits(self) -> VersionWaits: ...

    def validate(self, params: QueryParams) -> None: ...

    def retrieve(self, params: QueryParams, deadline: CallDeadline | None) -> Retrieval: ...

    def answer(self, params: QueryParams, deadline: CallDeadline | None) -> Answer: ...

    def stream_answer(
        self, params: QueryParams, deadline: CallDeadline | None
    ) -> tuple[Retrieval, AnswerStream]: ...


class KnowledgeGraphService(query_pb2_grpc.KnowledgeGraphServicer):
    def __init__(self, engine: Engine, graph: GraphRecords) -> None:
        self._engine = engine
        self._graph = graph

    @property
    def limits(self) -> RequestLimits:
        """The limits a QueryRequest is held to (the OpenAPI document states them)."""
        return self._engine.limits

    @property
    def version_waits(self) -> VersionWaits:
        """The waits for an index version, which the HTTP API's own waits share."""
        return self._engine.version_waits

    # -- queries ---------------------------------------------------------------

    async def reach_version(
        self,
        request: query_pb2.QueryRequest,
        timeout_seconds: float | None,
        left: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        """Wait for the request's `min_index_version` on the event loop, holding no thread,
        under the bounds a gRPC call's wait has (`VersionWaits.reach_async`): the HTTP API
        and MCP await it before the call itself takes a worker thread, and the call then
        finds the version reached. An invalid request does not wait: its call says why."""
        if request.min_index_version <= 0:
            return
        try:
            minimum = self._params(request).min_index_version
        except ValueError:  # InvalidQuery included
            return
        await self._engine.version_waits.reach_async(minimum, timeout_seconds, left)

    def _params(self, request: query_pb2.QueryRequest) -> QueryParams:
        params = convert.query_params_from(request)
        self._engine.validate(params)
        return params

    def Query(
        self, request: query_pb2.QueryRequest, context: grpc.ServicerContext
    ) -> query_pb2.QueryResponse:
        with statuses(context):
            answer = self._engine.answer(self._params(request), call_deadline_of(context))
        return convert.answer_to_proto(answer)

    def Retrieve(
        self, request: query_pb2.QueryRequest, context: grpc.ServicerContext
    ) -> query_pb2.RetrievalResult:
        with statuses(context):
            retrieval = self._engine.retrieve(self._params(request), call_deadline_of(context))
        return convert.retrieval_to_proto(retrieval)

    def QueryStream(
        self, request: query_pb2.QueryRequest, context: grpc.ServicerContext
    ) -> Iterator[query_pb2.QueryEvent]:
        """Context first, then deltas; a cancelled call closes the stream (and the LLM call)."""
        with statuses(context):
            retrieval, stream = self._engine.stream_answer(
                self._params(request), call_deadline_of(context)
            )
        # Runs when the call ends for any reason, cancellation included, even while
        # this thread is blocked waiting for the next delta.
        context.add_callback(stream.close)
        try:
            yield convert.context_event(retrieval)
            with statuses(context):
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
            invalid(context, field, f"must name an entity; got {shown(name)}")
        return key

    def GetEntity(
        self, request: query_pb2.GetEntityRequest, context: grpc.ServicerContext
    ) -> query_pb2.GetEntityResponse:
        key = self._entity_key(context, "name", request.name)
        with statuses(context):
            version = self._graph.version()
            record = self._graph.get_entities([key]).get(key)
            degree = self._graph.node_degrees([key])[key]
        if record is None:
            abort(
                context,
                grpc.StatusCode.NOT_FOUND,
                f"no entity {shown(request.name)} (key {shown(key)}) at index version {version}",
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
            invalid(context, "target", f"must differ from source; both are {shown(source)}")
        pair = relation_pair(source, target)
        with statuses(context):
            version = self._graph.version()
            record = self._graph.get_relations([pair]).get(pair)
        if record is None:
            abort(
                context,
                grpc.StatusCode.NOT_FOUND,
                f"no relation between {shown(request.source)} and {shown(request.target)} "
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
            in_range(context, "depth", request.depth, 0, MAX_SUBGRAPH_DEPTH)
            if request.HasField("depth")
            else DEFAULT_SUBGRAPH_DEPTH
        )
        max_nodes = (
            in_range(context, "max_nodes", request.max_nodes, 1, MAX_SUBGRAPH_NODES)
            if request.HasField("max_nodes")
            else DEFAULT_SUBGRAPH_NODES
        )
        with statuses(context):
            version = self._graph.version()
            if not self._graph.get_entities([seed]):
                abort(
                    context,
                    grpc.StatusCode.NOT_FOUND,
                    f"no entity {shown(request.seed)} (key {shown(seed)}) "
                    f"at index version {version}",
                )
            order, truncated = _walk(self._graph, seed, depth, max_nodes)
            entities = self._graph.get_entities(order)
            relations = relations_among(self._graph, order)
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
            invalid(context, "doc_id", "must be non-empty")
        with statuses(context):
            version = self._graph.version()
            stored = self._graph.get_documents([request.doc_id]).get(request.doc_id)
        if stored is None:
            abort(
                context,
                grpc.StatusCode.NOT_FOUND,
                f"no document {shown(request.doc_id)} at index version {version}",
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
            invalid(context, "status", str(error))
        page_size = (
            in_range(context, "page_size", request.page_size, 1, MAX_PAGE_SIZE)
            if request.HasField("page_size")
            else DEFAULT_PAGE_SIZE
        )
        token = request.page_token
        if token and not token.isdigit():
            invalid(context, "page_token", "is not a token this server issued")
        offset = int(token or 0)
        listed = [status] if status is not None else list(DocumentStatus)
        with statuses(context):
            version = self._graph.version()
            ids, total = _page_of_ids(self._graph, listed, offset, page_size)
            documents = self._graph.get_documents(ids)
        end = offset + len(ids)
        return query_pb2.ListDocumentsResponse(
            documents=[convert.document_to_proto(documents[i]) for i in ids if i in documents],
            next_page_token=str(end) if end < total else "",
            total=total,
            index_version=version,
        )


def relations_among(graph: GraphRecords, keys: Sequence[str]) -> dict[RelationPair, RelationRecord]:
    """Every relation between two of the entities `keys`, by pair."""
    members = set(keys)
    pairs = {
        pair
        for edges in graph.edges_of(keys).values()
        for pair in edges
        if pair[0] in members and pair[1] in members
    }
    return graph.get_relations(sorted(pairs))


def _walk(graph: GraphRecords, seed: str, depth: int, max_nodes: int) -> tuple[list[str], bool]:
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
    graph: GraphRecords, statuses: list[DocumentStatus], offset: int, limit: int
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
