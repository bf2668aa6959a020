"""LightRAG's `GET /health`: open, as a liveness probe, like /healthz; it says whether the
stores answer (200 "healthy", else 503 "unhealthy"), whether auth is on, and whether the
indexer has documents waiting. LightRAG shows its configuration to authenticated callers;
kgstream shows none here (`kgstream status` and /api/v1/version do)."""

from __future__ import annotations

from importlib import metadata
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.http.app import HttpApi, guarded
from gateway.http.calls import CallFailed

LIGHTRAG_API_VERSION = "1.5.7"  # the LightRAG server API these routes follow


def _version() -> str:
    try:
        return metadata.version("kgstream")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown"


def _serves(request: Request, path: str) -> bool:
    return any(getattr(route, "path", None) == path for route in request.app.routes)


async def health(api: HttpApi, request: Request) -> Response:
    counts: dict[str, Any] | None = None
    if api.serving():
        try:
            counts = (await guarded(request, api.versions.read))["documents"]
        except CallFailed:
            counts = None
    busy = counts is not None and counts["pending"] + counts["processing"] > 0
    body = {
        "status": "healthy" if counts is not None else "unhealthy",
        "auth_mode": "enabled" if request.app.state.auth_required else "disabled",
        "core_version": _version(),
        "api_version": LIGHTRAG_API_VERSION,
        "webui_available": _serves(request, "/"),
        "workspace_available": False,
        "api_docs_available": _serves(request, "/docs"),
        "webui_title": "kgstream",
        "webui_description": "a streaming knowledge-graph index",
        "ai_content_notice_enabled": False,
        "pipeline_busy": busy,
        "pipeline_active": busy,
    }
    return JSONResponse(body, status_code=200 if counts is not None else 503)
