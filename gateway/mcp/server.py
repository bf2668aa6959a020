"""The MCP server over the gateway's servicers: the tools (gateway/mcp/tools.py), and two
resources, a document's text and an entity's record. One server serves either transport:
stdio (`kgstream mcp`) and Streamable HTTP at /mcp (gateway/mcp/http.py).

It is the SDK's low-level server, so each tool's schema is exactly the one declared (with
its limits), and an error is the servicers' message: a tool answers `isError` with it
(the status and the field in the structured result); a resource read answers the JSON-RPC
error (the specification's "resource not found" for NOT_FOUND).
"""

from __future__ import annotations

import logging
from importlib import metadata
from typing import Any
from urllib.parse import quote, unquote

import grpc
import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

from gateway.http.calls import CallFailed, error_body
from gateway.http.messages import to_json
from gateway.knowledge_graph import DEFAULT_PAGE_SIZE
from gateway.mcp.arguments import BadArgument, checked_arguments
from gateway.mcp.render import as_json, document_text
from gateway.mcp.servicers import Servicers
from gateway.mcp.tools import DEFAULT_TOOL_LIMITS, ToolLimits, tool_table
from gateway.types import InvalidQuery
from kgstream_protos.v1 import query_pb2 as pb

logger = logging.getLogger("kgstream.mcp")

DOCUMENTS_URI = "kgstream://documents/"
ENTITIES_URI = "kgstream://entities/"
RESOURCE_NOT_FOUND = -32002  # the MCP specification's code for an unknown resource
INSTRUCTIONS = (
    "kgstream is a live knowledge graph over a set of documents (LightRAG style): "
    "entities, relations and text chunks, exact after every edit and deletion. Ask with "
    "`query` (an answer citing numbered references) or `retrieve` (the context only); look "
    "things up with search_entities, get_entity, get_relation and get_subgraph. Documents "
    "change through upsert_document and delete_document; indexing is asynchronous, so pass "
    "their min_index_version to wait_for_version before reading your own writes. Every "
    "result says the index version it reflects."
)


def _version() -> str:
    try:
        return metadata.version("kgstream")
    except metadata.PackageNotFoundError:
        return ""


def document_uri(doc_id: str) -> str:
    """The resource of a document (its id percent-encoded; a "/" may stay as it is)."""
    return DOCUMENTS_URI + quote(doc_id, safe="/")


def build_server(servicers: Servicers, limits: ToolLimits = DEFAULT_TOOL_LIMITS) -> Server[Any]:
    """The MCP server of the tools and resources, calling `servicers`."""
    tools = tool_table(limits)
    listed = [tool.listed() for tool in tools.values()]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = tools.get(params.name)
        if tool is None:
            names = ", ".join(tools)
            raise MCPError(types.INVALID_PARAMS, f"no tool {params.name!r}; the tools: {names}")
        try:
            arguments = checked_arguments(tool.name, tool.params, params.arguments)
            output = await tool.run(servicers, arguments)
        except CallFailed as failure:
            return _tool_error(failure.code, failure.message)
        except (BadArgument, InvalidQuery) as error:
            return _tool_error(grpc.StatusCode.INVALID_ARGUMENT, str(error))
        return types.CallToolResult(
            content=[types.TextContent(text=output.text)], structured_content=output.data
        )

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        cursor = params.cursor if params is not None else None
        request = pb.ListDocumentsRequest(page_size=DEFAULT_PAGE_SIZE, page_token=cursor or "")
        page = await _read(servicers, "ListDocuments", request)
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=document_uri(document.doc_id),
                    name=document.doc_id,
                    title=document.file_path or document.doc_id,
                    description=pb.DocumentStatus.Name(document.status).removeprefix(
                        "DOCUMENT_STATUS_"
                    ),
                    mime_type="text/plain",
                )
                for document in page.documents
            ],
            next_cursor=page.next_page_token or None,
        )

    async def list_templates(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=DOCUMENTS_URI + "{doc_id}",
                    name="document",
                    title="A document's text",
                    description="A document's indexed text, chunk by chunk in order, or why "
                    "it has none (its status and reason); the doc id percent-encoded.",
                    mime_type="text/plain",
                ),
                types.ResourceTemplate(
                    uri_template=ENTITIES_URI + "{name}",
                    name="entity",
                    title="An entity's record",
                    description="An entity's record as get_entity returns it (JSON); the "
                    "name percent-encoded.",
                    mime_type="application/json",
                ),
            ]
        )

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri.startswith(DOCUMENTS_URI):
            request = pb.GetDocumentRequest(doc_id=unquote(uri.removeprefix(DOCUMENTS_URI)))
            found = await _read(servicers, "GetDocument", request)
            document = found.document
            texts = await servicers.chunk_texts(list(document.chunk_ids))
            contents = [
                types.TextResourceContents(
                    uri=uri, mime_type="text/plain", text=document_text(document, texts)
                )
            ]
        elif uri.startswith(ENTITIES_URI):
            request = pb.GetEntityRequest(name=unquote(uri.removeprefix(ENTITIES_URI)))
            entity = await _read(servicers, "GetEntity", request)
            contents = [
                types.TextResourceContents(
                    uri=uri, mime_type="application/json", text=as_json(to_json(entity)).text
                )
            ]
        else:
            raise MCPError(
                RESOURCE_NOT_FOUND,
                f"no resource {uri!r}: kgstream's are {DOCUMENTS_URI}{{doc_id}} and "
                f"{ENTITIES_URI}{{name}}",
            )
        return types.ReadResourceResult(contents=list(contents))

    schemas = {tool.name: tool.input_schema for tool in listed}  # for Mcp-Param-* headers

    return Server(
        "kgstream",
        get_tool_input_schema=schemas.get,
        version=_version(),
        title="kgstream",
        description="A live LightRAG-style knowledge graph over your documents",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )


def _tool_error(code: grpc.StatusCode, message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=message)],
        structured_content=error_body(code, message),
        is_error=True,
    )


async def _read(servicers: Servicers, method: str, request: Any) -> Any:
    """A servicer's reply for a resource request; its failure as the JSON-RPC error."""
    try:
        return await servicers.call(method, request)
    except CallFailed as failure:
        code = {
            grpc.StatusCode.NOT_FOUND: RESOURCE_NOT_FOUND,
            grpc.StatusCode.INVALID_ARGUMENT: types.INVALID_PARAMS,
        }.get(failure.code, types.INTERNAL_ERROR)
        raise MCPError(code, failure.message) from None
