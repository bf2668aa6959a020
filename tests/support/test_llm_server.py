"""The test LLM server's embeddings: hash vectors by default, or what `embedder` makes."""

from __future__ import annotations

import openai
import pytest

from tests.support.llm_server import OpenAICompatibleServer, embed_text


def _client(server: OpenAICompatibleServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)


def test_embeddings_are_the_hash_vectors_by_default(llm_server: OpenAICompatibleServer) -> None:
    reply = _client(llm_server).embeddings.create(
        model="test-embedding-model", input=["alpha"], encoding_format="float"
    )
    assert reply.data[0].embedding == pytest.approx(embed_text("alpha", 384))


def test_embeddings_come_from_the_embedder_when_one_is_set(
    llm_server: OpenAICompatibleServer,
) -> None:
    seen: list[tuple[str, int]] = []

    def embedder(text: str, dimension: int) -> list[float]:
        seen.append((text, dimension))
        return [1.0] + [0.0] * (dimension - 1)

    llm_server.embedder = embedder
    reply = _client(llm_server).embeddings.create(
        model="test-embedding-model", input=["alpha", "beta"], dimensions=8
    )
    assert seen == [("alpha", 8), ("beta", 8)]
    assert [item.embedding for item in reply.data] == [[1.0] + [0.0] * 7] * 2
