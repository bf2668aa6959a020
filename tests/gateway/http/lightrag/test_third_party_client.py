"""A real third-party LightRAG client, unchanged, against `kgstream run`: `lightrag-api`
0.1.4 from PyPI (a typed client of LightRAG's REST routes: httpx and pydantic models of
LightRAG's responses, which it builds from every answer, so a missing or mistyped field
fails the call). It inserts, uploads, tracks, queries three ways, lists, reads the graph and
deletes, as a LightRAG user's script would."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

import pydantic
import pytest
from lightrag.api import AsyncLightRagClient

from tests.gateway.http.lightrag.conftest import RunningKgstream
from tests.support.wait import wait_until

pytestmark = pytest.mark.services  # the package's fixture runs `kgstream run`
T = TypeVar("T")


class Script:
    """The client's calls, each run to completion on one event loop (the client's httpx
    connections belong to it), so that waits go through `wait_until`."""

    def __init__(self, url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.client = AsyncLightRagClient(base_url=url, client_timeout=60)

    def run(self, call: Awaitable[T]) -> T:
        return self.loop.run_until_complete(call)

    def lines(self, stream: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
        async def collect() -> list[dict[str, Any]]:
            return [line async for line in stream]

        return self.run(collect())

    def settled(self, track_id: str) -> Any:
        """The client's TrackStatusResponse once every document of the track is done."""

        def done() -> Any:
            track = self.run(self.client.get_track_status(track_id))
            statuses = {d.status for d in track.documents}
            return track if track.documents and statuses <= {"processed", "failed"} else None

        return wait_until(done, 60, f"track {track_id} to settle")

    def close(self) -> None:
        self.run(self.client.close())
        self.loop.close()


def test_lightrag_api_client_works_unchanged(lightrag_server: RunningKgstream) -> None:
    folder = lightrag_server.folder
    script = Script(lightrag_server.url)
    client, run = script.client, script.run
    try:
        assert run(client.get_health())["status"] == "healthy"

        inserted = run(
            client.insert_text(
                "Sofia Berg designs wind turbines for Nordvind in Aarhus.",
                file_source="nordvind.md",
            )
        )
        assert inserted.status == "success"
        track = script.settled(inserted.track_id)
        assert [(d.id, d.status) for d in track.documents] == [("nordvind.md", "processed")]

        batch = run(client.insert_texts(["Tomas Kral brews beer in Plzen."]))
        assert script.settled(batch.track_id).documents[0].id.startswith("doc-")

        uploaded = run(client.upload_document(b"Uma Patel teaches chess in Pune.", "chess.md"))
        assert script.settled(uploaded.track_id).documents[0].status == "processed"
        assert (folder / "chess.md").exists()

        answer = run(client.query("Who designs wind turbines?", ll_keywords=["Sofia Berg"]))
        assert "Sofia Berg" in answer.response
        assert "nordvind.md" in [r.file_path for r in answer.references or ()]
        lines = script.lines(client.query_stream("Who brews beer?", ll_keywords=["Tomas Kral"]))
        assert "references" in lines[0] and any("response" in line for line in lines[1:])
        data = run(client.query_data("Who teaches chess?", mode="local", ll_keywords=["Uma Patel"]))
        assert data.status == "success"
        assert "Uma Patel" in [e["entity_name"] for e in data.data["entities"]]

        listed = run(client.get_documents())
        assert "nordvind.md" in [d.id for d in listed.statuses["processed"]]
        page = run(client.get_documents_paginated(status_filter="processed", page_size=10))
        assert page.pagination.total_count == page.status_counts["processed"]
        assert run(client.get_pipeline_status()).busy is False
        assert run(client.scan_documents()).status == "scanning_started"
        assert run(client.reprocess_failed()).status == "reprocessing_started"

        assert "Sofia Berg" in run(client.get_graph_labels())
        graph = run(client.get_knowledge_graph("Sofia Berg", max_depth=1))
        assert "Nordvind" in [node["id"] for node in graph["nodes"]]
        assert run(client.check_entity_exists("Sofia Berg")) == {"exists": True}

        deleted = run(client.delete_document(["nordvind.md"]))
        assert deleted.status == "deletion_started"
        assert not (folder / "nordvind.md").exists()
        wait_until(
            lambda: run(client.check_entity_exists("Sofia Berg")) == {"exists": False},
            60,
            "the deletion to be indexed",
        )

        # clearing needs kgstream's confirmation, which this client cannot send: refused
        with pytest.raises(pydantic.ValidationError):
            run(client.clear_documents())
        assert (folder / "chess.md").exists()
    finally:
        script.close()
