"""Building and running the real dataflow in tests, and the from-scratch oracle."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bytewax.dataflow import Dataflow
from bytewax.inputs import Source
from bytewax.testing import TestingSource, cluster_main, run_main

from connectors.embeddings.base import Embedder, embedding_space_name
from connectors.embeddings.remote import OpenAIEmbedder, OpenAIEmbeddingOptions
from connectors.index_export import StoredIndex, read_index
from connectors.llm.client import ChatClient
from connectors.llm.extractor import LLMExtractor, LLMExtractorOptions
from connectors.redis.graph_store import GraphStore
from connectors.redis.ports import StoredDocument
from connectors.redis.projection_control import ProjectionMode
from connectors.redis.projection_read import project_records, read_projection
from connectors.stores import Stores
from connectors.tokenizer import TiktokenTokenizer
from connectors.vectors.edge import EdgeVectorStore
from dataflow.components import Components, offline_extract_many
from dataflow.core.chunking import ChunkingOptions
from dataflow.core.contributions import Renderer, RenderOptions
from dataflow.core.documents import DocumentChange, DocumentLimits
from dataflow.core.index import IndexSnapshot, ReferenceIndex
from dataflow.core.messages import SourceEvent
from dataflow.core.offline.extractor import extract_offline
from dataflow.flow import build_flow
from dataflow.state.fragment_log import LogPolicy

TOKENIZER = TiktokenTokenizer()
CHUNKING = ChunkingOptions(chunk_token_size=60, chunk_overlap_tokens=8, split_by_character="\n\n")
RENDER_OPTIONS = RenderOptions(summarize_over_fragments=3, summary_max_tokens=60)
_workspaces = itertools.count()


def renderer() -> Renderer:
    return Renderer(TOKENIZER.count, RENDER_OPTIONS)


def new_components(
    redis_url: str,
    embeddings_url: str,
    vector_dir: Path,
    workspace: str | None = None,
    projection: ProjectionMode = ProjectionMode.OFF,
) -> Components:
    """Components embedding through the OpenAI-compatible test server (fast hash vectors),
    writing the graph projection as `projection` says."""
    embedder = OpenAIEmbedder(
        OpenAIEmbeddingOptions(base_url=embeddings_url, model="test-embedding-model", dimension=384)
    )
    components = components_with(embedder, redis_url, vector_dir, workspace)
    graph = components.stores.graph
    assert isinstance(graph, GraphStore)
    graph.open_projection(projection)
    return components


@contextmanager
def llm_components(
    redis_url: str, llm_url: str, vector_dir: Path, client: ChatClient
) -> Iterator[Components]:
    """`new_components` extracting through `client` (one pass, no gleaning); the stores are
    cleared and closed afterwards (the caller closes `client`)."""
    components = new_components(redis_url, llm_url, vector_dir)
    components.extract_many = LLMExtractor(client, LLMExtractorOptions(max_gleaning=0)).extract_many
    try:
        yield components
    finally:
        components.stores.graph.clear()
        components.stores.vectors.close()


def components_with(
    embedder: Embedder, redis_url: str, vector_dir: Path, workspace: str | None = None
) -> Components:
    """Offline extraction into empty stores in a fresh workspace (or `workspace`, another
    process's), embedding with `embedder`."""
    graph = GraphStore.from_url(redis_url, workspace or f"flowtest{next(_workspaces)}")
    vectors = EdgeVectorStore(vector_dir, graph.workspace)
    vectors.ensure_collections(embedding_space_name(embedder), embedder.dimension)
    return Components(
        tokenizer=TOKENIZER,
        chunking=CHUNKING,
        limits=DocumentLimits(),
        extract_many=offline_extract_many,
        embedder=embedder,
        renderer=renderer(),
        stores=Stores(graph, vectors),
        # Low, so that the flow tests' entities and relations keep running totals and
        # snapshot as logs from their fourth fragment, drop both under two, and draft from
        # fragments and snapshot them whole in between.
        tally_over_fragments=4,
        snapshot_logs=LogPolicy(over=4),
    )


def events(changes: Iterable[DocumentChange], start: float = 1.0) -> list[SourceEvent]:
    return [SourceEvent(change, f"test:{i}", start + i) for i, change in enumerate(changes)]


EntryPoint = Callable[[Dataflow], None]
"""Runs a dataflow to completion in this process (Bytewax's suite calls it `entry_point`)."""


def entry_point_for(workers: int) -> EntryPoint:
    """One worker through `run_main`, several through `cluster_main` in this process."""
    if workers == 1:
        return run_main

    def run_workers(flow: Dataflow) -> None:
        cluster_main(flow, [], 0, worker_count_per_proc=workers)

    return run_workers


def run_flow(
    components: Components,
    source_events: list[SourceEvent] | Source[SourceEvent],
    entry_point: EntryPoint = run_main,
) -> None:
    source = source_events if isinstance(source_events, Source) else TestingSource(source_events)
    entry_point(build_flow(source, components))


def fresh_build(changes: Iterable[DocumentChange]) -> IndexSnapshot:
    index = ReferenceIndex(TOKENIZER, extract_offline, CHUNKING)
    index.apply_all(changes)
    return index.snapshot(renderer())


def stored(components: Components) -> StoredIndex:
    return read_index(components.stores)


def assert_projection_is_of(components: Components, expected: IndexSnapshot) -> None:
    """The graph projection in FalkorDB is the projection of `expected`'s records (a fresh
    build's), at the records' version: placeholders none, every edge and property as the
    records say, the times of writing aside."""
    graph = components.stores.graph
    assert isinstance(graph, GraphStore) and graph.projection is not None
    found = read_projection(graph.client, graph.projection.key)
    assert found.version == graph.version()
    wanted = project_records(
        expected.entities.values(),
        expected.relations.values(),
        expected.chunks.values(),
        (StoredDocument(record, 0.0, 0.0) for record in expected.documents.values()),
    )
    assert found.without_write_times() == wanted.without_write_times()
