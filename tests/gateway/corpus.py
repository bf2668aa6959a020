"""A small hand-made corpus indexed through the real dataflow, for query-engine tests.

`build_corpus` runs the real Bytewax flow (offline extractor, real Redis, Qdrant Edge)
with the local MiniLM embedder, so vector search means something: "Who leads the Atlas
Project?" really lands on the Atlas Project. The gRPC gateway tests reuse it; build it
once per module (indexing takes a few seconds, most of it embedding).

The documents, their directories and the facts the tests rely on:

- ``projects/atlas.md``: Carla Diaz leads the Atlas Project (at Northwind Labs); the
  project builds solar batteries for villages in Kenya.
- ``companies/northwind.md``: Alice Moreau founded Northwind Labs in Lisbon; Northwind
  Labs partnered with Helios Corp on renewable energy storage.
- ``companies/helios.md``: Bob Tanaka joined Helios Corp after the Geneva Summit; Helios
  Corp finances climate research with the Oslo Climate Fund.
- ``kitchen/bread.md``: Marco Rossi bakes sourdough bread in Naples, taught by Lucia
  Bianchi at the Naples Bread School (a topic far from the others, for filters).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from connectors.embeddings.local import LocalMiniLMEmbedder
from connectors.stores import Stores
from dataflow.components import Components
from dataflow.core.documents import DocumentChange, DocumentUpsert
from tests.dataflow.harness import components_with, events, run_flow

DOCUMENTS: Mapping[str, str] = {
    "projects/atlas.md": (
        "Carla Diaz leads the Atlas Project at Northwind Labs.\n\n"
        "The Atlas Project builds solar batteries for remote villages in Kenya."
    ),
    "companies/northwind.md": (
        "Alice Moreau founded Northwind Labs in Lisbon.\n\n"
        "Northwind Labs partnered with Helios Corp on renewable energy storage."
    ),
    "companies/helios.md": (
        "Bob Tanaka joined Helios Corp after the Geneva Summit.\n\n"
        "Helios Corp finances climate research with the Oslo Climate Fund."
    ),
    "kitchen/bread.md": (
        "Marco Rossi bakes sourdough bread in Naples.\n\n"
        "He learned baking from Lucia Bianchi at the Naples Bread School."
    ),
}
"""doc_id (= file path) -> content."""


@functools.cache
def shared_embedder() -> LocalMiniLMEmbedder:
    """One loaded MiniLM per test process (loading the model is the slow part)."""
    embedder = LocalMiniLMEmbedder()
    embedder.load()
    return embedder


@dataclass
class Corpus:
    """The indexed corpus: its stores, the embedder that made the vectors, the flow inputs."""

    components: Components
    embedder: LocalMiniLMEmbedder

    @property
    def stores(self) -> Stores:
        return self.components.stores

    def apply(self, changes: Iterable[DocumentChange]) -> None:
        """Run more document changes through the real flow into the same stores."""
        run_flow(self.components, events(list(changes)))

    def close(self) -> None:
        """Delete the workspace's Redis keys and close the vector store."""
        self.stores.graph.clear()
        self.stores.graph.close()
        self.stores.vectors.close()


def new_corpus_components(redis_url: str, vector_dir: Path) -> Components:
    """Empty stores in a fresh workspace, wired like tests/dataflow/harness.py but with the
    local MiniLM embedder instead of the test server's hash vectors."""
    return components_with(shared_embedder(), redis_url, vector_dir)


def build_corpus(
    redis_url: str, tmp_path: Path, documents: Mapping[str, str] = DOCUMENTS
) -> Corpus:
    """Index `documents` (doc_id = file path -> text) through the real dataflow.

    `redis_url` is a running Redis (the `redis_server` fixture's ``.url``); vectors go
    to Qdrant Edge under `tmp_path`. Pass ``documents={}`` for an empty index.
    Close the returned corpus when done.
    """
    corpus = Corpus(new_corpus_components(redis_url, tmp_path / "vectors"), shared_embedder())
    changes = [DocumentUpsert(path, text, path) for path, text in documents.items()]
    if changes:
        corpus.apply(changes)
    return corpus
