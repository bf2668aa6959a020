"""LightRAG's graph routes: `GET /graphs` (an entity's neighbourhood: GetSubgraph; the label
"*": the best-connected entities of the whole graph), `/graph/label/list` (every entity's
name) and `/graph/entity/exists` (GetEntity). Nodes are named by the entities' display
names, as LightRAG names them.

The routes that edit the graph by hand (edit, create, merge or delete an entity or a
relation) are refused with 400: kgstream derives the graph from the documents, so a hand
edit would be undone by the next change of any document that mentions the entity. Edit the
document instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import grpc
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from connectors.redis.ports import GraphRecords
from gateway import convert
from gateway.http.app import HttpApi, guarded, invoke
from gateway.http.calls import CallFailed
from gateway.http.lightrag.query import SEPARATOR
from gateway.http.lightrag.wire import Fields, Refused
from gateway.knowledge_graph import MAX_SUBGRAPH_NODES, relations_among
from kgstream_protos.v1 import query_pb2 as pb

WHOLE_GRAPH = "*"  # LightRAG's label for the whole graph
DEFAULT_DEPTH = 3  # LightRAG's defaults of /graphs
DEFAULT_NODES = 1000
GRAPH_FIELDS = {"seed": "label", "depth": "max_depth"}  # GetSubgraph's names -> /graphs'
EDITS_REFUSED = (
    "kgstream derives its knowledge graph from the documents: entities and relations are "
    "not edited, created, merged or deleted by hand (the next change of a document that "
    "mentions them would undo it). Edit the documents instead: POST /documents/text or "
    "/documents/upload replaces a document, DELETE /documents/delete_document removes one."
)


def knowledge_graph(
    entities: Iterable[pb.Entity], relations: Iterable[pb.Relation], truncated: bool
) -> dict[str, Any]:
    """LightRAG's KnowledgeGraph: nodes by display name, undirected edges between them."""
    nodes, names = [], {}
    for entity in entities:
        names[entity.key] = entity.name
        properties: dict[str, Any] = {
            "entity_id": entity.name,
            "entity_type": entity.type,
            "description": entity.description,
            "source_id": SEPARATOR.join(entity.source_chunk_ids),
            "file_path": SEPARATOR.join(entity.file_paths),
        }
        nodes.append({"id": entity.name, "labels": [entity.name], "properties": properties})
    edges = []
    for relation in relations:
        source, target = sorted((names[relation.source], names[relation.target]))
        properties = {
            "weight": relation.weight,
            "description": relation.description,
            "keywords": ", ".join(relation.keywords),
            "source_id": SEPARATOR.join(relation.source_chunk_ids),
            "file_path": SEPARATOR.join(relation.file_paths),
        }
        edges.append(
            {
                "id": f"{source}-{target}",
                "type": "DIRECTED",
                "source": source,
                "target": target,
                "properties": properties,
            }
        )
    return {"nodes": nodes, "edges": edges, "is_truncated": truncated}


def best_connected(graph: GraphRecords, max_nodes: int) -> dict[str, Any]:
    """The `max_nodes` entities with the most relations (then by name), and the relations
    between them: LightRAG's graph of the label "*". Reads every entity."""
    records = {record.key: record for record in graph.iter_entities()}
    degrees = graph.node_degrees(records)
    ranked = sorted(records, key=lambda key: (-degrees[key], records[key].name))
    kept = ranked[:max_nodes]
    relations = relations_among(graph, kept)
    return knowledge_graph(
        (convert.entity_to_proto(records[key]) for key in kept),
        (convert.relation_to_proto(relations[pair]) for pair in sorted(relations)),
        len(ranked) > len(kept),
    )


class GraphRoutes:
    def __init__(self, api: HttpApi) -> None:
        self.api = api

    async def labels(self, request: Request) -> Response:
        names = await guarded(
            request, lambda: sorted({e.name for e in self.api.graph.iter_entities()})
        )
        return JSONResponse(names)

    async def graphs(self, request: Request) -> Response:
        params: dict[str, Any] = dict(request.query_params)
        for name in ("max_depth", "max_nodes"):
            if params.get(name, "").isdigit():
                params[name] = int(params[name])
        fields = Fields(params, "query")
        label = fields.text("label", required=True) or ""
        depth = fields.integer("max_depth", 1, 2**31 - 1) or DEFAULT_DEPTH
        max_nodes = fields.integer("max_nodes", 1, 2**31 - 1) or DEFAULT_NODES
        if label == WHOLE_GRAPH:  # GetSubgraph checks max_nodes for a walk
            fields.integer("max_nodes", 1, MAX_SUBGRAPH_NODES)
        fields.check()
        if label == WHOLE_GRAPH:
            graph = await guarded(request, lambda: best_connected(self.api.graph, max_nodes))
            return JSONResponse(graph)
        message = pb.GetSubgraphRequest(seed=label, depth=depth, max_nodes=max_nodes)
        try:
            reply = await invoke(request, self.api.knowledge_graph.GetSubgraph, message)
        except CallFailed as failure:
            if failure.code != grpc.StatusCode.NOT_FOUND:
                raise
            return JSONResponse(knowledge_graph((), (), False))  # LightRAG: an empty graph
        return JSONResponse(knowledge_graph(reply.entities, reply.relations, reply.truncated))

    async def entity_exists(self, request: Request) -> Response:
        fields = Fields(dict(request.query_params), "query")
        name = fields.text("name", required=True)
        fields.check()
        try:
            await invoke(
                request, self.api.knowledge_graph.GetEntity, pb.GetEntityRequest(name=name)
            )
        except CallFailed as failure:
            if failure.code != grpc.StatusCode.NOT_FOUND:
                raise
            return JSONResponse({"exists": False})
        return JSONResponse({"exists": True})

    async def edit(self, request: Request) -> Response:
        raise Refused(400, EDITS_REFUSED)
