"""Assembling kgstream's parts from the settings: the one place that knows which
extractor, embedder and stores a configuration means."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from connectors.embeddings.base import Embedder, embedding_space_name
from connectors.embeddings.cache import CachedEmbedder
from connectors.embeddings.local import (
    LocalEmbeddingOptions,
    LocalMiniLMEmbedder,
    LongTextMode,
    automatic_threads,
)
from connectors.embeddings.remote import OpenAIEmbedder, OpenAIEmbeddingOptions
from connectors.errors import OutageWait
from connectors.llm.client import ChatClient, LLMError, LLMOptions, SqliteResponseCache
from connectors.llm.extractor import LLMExtractor, LLMExtractorOptions
from connectors.redis.projection_control import ProjectionMode
from connectors.retry import Backoff
from connectors.stores import StoreLocations, Stores, open_stores
from connectors.tokenizer import TiktokenTokenizer
from dataflow.components import Components, offline_extract_many
from dataflow.core.contributions import (
    Renderer,
    Summarizer,
    SummaryRequest,
    extractive_summary,
)
from dataflow.core.prompts import build_summary_messages
from dataflow.extraction_pool import ExtractMany
from gateway.engine import EngineOptions, QueryEngine
from gateway.ingest import EventPublisher
from gateway.keywords import KeywordExtractor, LLMKeywordExtractor, OfflineKeywordExtractor
from gateway.knowledge_graph import Engine
from gateway.server import RunningServer, ServerOptions, serve
from kgstream.metrics import Metrics
from kgstream.settings import Settings
from kgstream.telemetry import IndexerMetrics, MeteredEngine, observe_llm

logger = logging.getLogger("kgstream.indexer")


def build_chat_client(settings: Settings, metrics: Metrics | None = None) -> ChatClient | None:
    """The LLM client, or None when no endpoint is configured (the offline default)."""
    if not settings.llm_base_url:
        return None
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    options = LLMOptions(
        base_url=settings.llm_base_url,
        model=settings.llm_model,
        api_key=settings.llm_api_key or "not-needed",
        timeout_seconds=settings.llm_timeout_seconds,
        max_concurrency=settings.llm_max_concurrency,
        max_retries=settings.llm_max_retries,
        backoff=Backoff(base=1.0, cap=30.0),
    )
    return ChatClient(
        options,
        cache=SqliteResponseCache(settings.data_dir / "llm-cache.sqlite"),
        observer=observe_llm(metrics) if metrics is not None else None,
    )


def build_embedder(settings: Settings) -> Embedder:
    """The configured embedder, behind a cache of recent texts (edits re-render many
    entities to the same text)."""
    return CachedEmbedder(model_embedder(settings))


def model_embedder(settings: Settings) -> Embedder:
    """The configured embedding model itself: an OpenAI-compatible endpoint when
    `embedding_base_url` is set, else the local MiniLM."""
    if settings.embedding_base_url:
        return OpenAIEmbedder(
            OpenAIEmbeddingOptions(
                base_url=settings.embedding_base_url,
                model=settings.embedding_model,
                api_key=settings.embedding_api_key or "not-needed",
                dimension=settings.embedding_dimension,
            )
        )
    long_text: LongTextMode = (
        "truncate" if settings.embedding_long_text == "truncate" else "windows"
    )
    threads = settings.embedding_threads or automatic_threads()
    return LocalMiniLMEmbedder(
        LocalEmbeddingOptions(
            threads=threads, long_text=long_text, quantized=settings.embedding_quantized
        )
    )


def store_locations(settings: Settings) -> StoreLocations:
    """Where the settings put the stores (the Redis password joined to its URL)."""
    return StoreLocations(
        data_dir=settings.data_dir,
        workspace=settings.workspace,
        redis_url=settings.redis_connection_url(),
        graph_projection=ProjectionMode(settings.graph_projection),
        qdrant_url=settings.qdrant_url,
        qdrant_cluster=settings.qdrant_cluster_options(),
    )


def open_settings_stores(settings: Settings, embedder: Embedder) -> Stores:
    locations = store_locations(settings)
    return open_stores(locations, embedding_space_name(embedder), embedder.dimension)


def llm_summarizer(
    client: ChatClient, language: str, count_tokens: Callable[[str], int]
) -> Summarizer:
    """Summaries by the LLM; when a call fails for good, the extractive summary (logged, not
    cached: the next render of that entity or relation asks the LLM again), so an LLM outage
    never stops the indexer."""

    def summarize(request: SummaryRequest) -> str:
        messages = build_summary_messages(
            request.kind, request.name, request.descriptions, request.max_tokens, language
        )
        try:
            return client.complete(messages, kind="summary").strip()
        except LLMError as error:
            logger.warning(
                "summary of %s %r falls back to the extractive one: %s",
                request.kind,
                request.name,
                error,
            )
            return extractive_summary(request, count_tokens)

    return summarize


def build_components(
    settings: Settings, metrics: Metrics | None = None, client: ChatClient | None = None
) -> Components:
    """Everything the dataflow needs; the caller closes it (which stops embedded stores).

    Pass `client` to share one LLM client (its concurrency bound and cache) with the
    gateway; by default one is built from the settings.
    """
    tokenizer = TiktokenTokenizer(settings.tokenizer_encoding)
    embedder = build_embedder(settings)
    client = client or build_chat_client(settings, metrics)
    extract_many: ExtractMany
    if client is None:
        extract_many = offline_extract_many
        renderer = Renderer(tokenizer.count, settings.render_options())
        render_concurrency, coalesce_seconds = 1, 0.0
    else:
        options = LLMExtractorOptions(settings.prompt_options(), settings.max_gleaning)
        extract_many = LLMExtractor(client, options).extract_many
        summarize = llm_summarizer(client, settings.language, tokenizer.count)
        renderer = Renderer(tokenizer.count, settings.render_options(), summarize)
        render_concurrency = settings.llm_max_concurrency
        coalesce_seconds = settings.summary_coalesce_seconds
    stores = open_settings_stores(settings, embedder)
    observer = IndexerMetrics(metrics) if metrics is not None else None
    return Components(
        tokenizer=tokenizer,
        chunking=settings.chunking_options(),
        limits=settings.document_limits(),
        extract_many=extract_many,
        embedder=embedder,
        renderer=renderer,
        stores=stores,
        render_concurrency=render_concurrency,
        extract_concurrency=1 if client is None else settings.llm_max_concurrency,
        coalesce_seconds=coalesce_seconds,
        chunks_per_round=settings.document_chunks_per_round,
        observer=observer,
        on_close=client.close if client is not None else None,
        outages=OutageWait(
            on_outage=observer.store_outage if observer is not None else None,
            revive=stores.revive,
        ),
    )


# Retrievals at once in `kgstream run` (unless max_concurrent_retrievals is set): one keeps
# edits visible within seconds under a query load, for somewhat fewer queries answered per
# second (docs/decisions/0024-retrieval-slots.md; bench/indexer_bench.py --only fresh-folder
# --query-clients 8 measures it).
RETRIEVALS_BESIDE_INDEXER = 1


def build_engine(
    settings: Settings,
    stores: Stores,
    embedder: Embedder,
    metrics: Metrics | None = None,
    client: ChatClient | None = None,
    beside_indexer: bool = False,
) -> Engine:
    """The query engine over the same stores, embedder and tokenizer the indexer uses;
    `beside_indexer`: the indexer runs in this process (`kgstream run`), so retrievals are
    bounded to one at a time unless `max_concurrent_retrievals` says otherwise."""
    client = client or build_chat_client(settings, metrics)
    keywords: KeywordExtractor = (
        OfflineKeywordExtractor() if client is None else LLMKeywordExtractor(client)
    )
    tokenizer = TiktokenTokenizer(settings.tokenizer_encoding)
    options = engine_options(settings, beside_indexer)
    engine = QueryEngine(stores, embedder, tokenizer, keywords, llm=client, options=options)
    return MeteredEngine(engine, metrics) if metrics is not None else engine


def engine_options(settings: Settings, beside_indexer: bool) -> EngineOptions:
    slots = settings.max_concurrent_retrievals
    if slots is None:
        slots = RETRIEVALS_BESIDE_INDEXER if beside_indexer else 0
    return EngineOptions(
        version_wait_seconds=settings.version_wait_seconds,
        max_version_waits=settings.max_version_waits,
        max_concurrent_retrievals=slots,
        limits=settings.request_limits(),
    )


def build_publisher(settings: Settings, folder: Path | None = None) -> EventPublisher | None:
    """Where Ingest publishes document changes: into `folder` when the indexer watches one,
    else to the Kafka topic when one is set, else nowhere (Ingest then refuses)."""
    if folder is not None:
        from connectors.folder.publisher import FolderPublisher

        return FolderPublisher(folder)
    if settings.kafka_bootstrap_servers:
        from connectors.kafka.producer import DocumentEventProducer

        return DocumentEventProducer(settings.kafka_bootstrap_servers, settings.kafka_topic)
    return None


def serve_gateway(
    settings: Settings, engine: Engine, stores: Stores, folder: Path | None = None
) -> RunningServer:
    """The gateway over `engine`, its health following Redis and the vector store, its
    Ingest publishing through `build_publisher`."""
    producer = build_publisher(settings, folder)
    options = ServerOptions(
        address=settings.grpc_address,
        auth_token=settings.grpc_auth_token,
        tls_cert_path=settings.grpc_tls_cert_path,
        tls_key_path=settings.grpc_tls_key_path,
        http_address=settings.http_address or None,
        http_cors_origins=settings.http_cors_origins,
        http_allowed_hosts=settings.http_allowed_hosts,
    )
    checks = {"Redis": stores.graph.ping, "the vector store": stores.vectors.ping}
    return serve(engine, stores.graph, stores.control, options, producer, health_checks=checks)
