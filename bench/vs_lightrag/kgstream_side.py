"""kgstream's side of bench/vs_lightrag, through its own commands.

1. `kgstream index CORPUS --data DATA`, timed from the command's start to its exit (start-up
   included), with the test server as LLM and embedding endpoint.
2. `kgstream run --watch CORPUS --data DATA` (one process: the indexer and the gRPC gateway),
   then, once it has caught up: Retrieve over gRPC for every question and mode; the edits
   (a file saved, timed until Redis shows the document PROCESSED with the new content); the
   deletes (a file removed, timed until its document record is gone).
3. With `run` stopped: the residue, read from the stores themselves (see `residue`).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from bench.harness import (
    POLL_SECONDS,
    VISIBLE_TIMEOUT_SECONDS,
    allocated_bytes,
    attach_graph,
    clean_environment,
    expected_hash,
    kgstream_command,
    kgstream_gateway,
    progress,
    stop_process,
    wait_caught_up,
    wait_visible,
)
from bench.queries import open_channel, retrieve_stub
from bench.vs_lightrag.llm_server import EMBEDDERS
from bench.vs_lightrag.measure import (
    MODES,
    GraphSize,
    LLMServer,
    ModeRun,
    Operation,
    PeakRss,
    SystemRun,
)
from bench.vs_lightrag.workload import Workload

CHAT_MODEL = "test-chat-model"
EMBEDDING_MODEL = "test-embedding-model"
CALL_TIMEOUT_SECONDS = 120.0
STALE_COSINE = 0.999  # a stored vector further than this from its text's vector is stale


def settings_env(server: LLMServer) -> dict[str, str]:
    return {
        "KGSTREAM_LLM_BASE_URL": server.llm_url,
        "KGSTREAM_LLM_MODEL": CHAT_MODEL,
        "KGSTREAM_EMBEDDING_BASE_URL": server.embedding_url,
        "KGSTREAM_EMBEDDING_MODEL": EMBEDDING_MODEL,
    }


def write_folder(folder: Path, corpus: Mapping[str, str]) -> None:
    for relative, text in corpus.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def run_kgstream(
    server: LLMServer,
    workload: Workload,
    work: Path,
    warmup: Sequence[str],
    settings: Mapping[str, str] | None = None,
) -> SystemRun:
    """kgstream's side of the comparison; `settings`: extra `KGSTREAM_*` environment."""
    folder, data = work / "kgstream-corpus", work / "kgstream-data"
    write_folder(folder, workload.corpus)
    env = {**settings_env(server), **(settings or {})}
    result = SystemRun("kgstream")
    before = server.calls()
    result.index_seconds, result.peak_rss_index = index(folder, data, env, work / "index.log")
    result.index_calls = server.calls() - before
    result.disk_bytes = allocated_bytes(data)
    progress(f"kgstream: indexed in {result.index_seconds:.1f} s, {result.index_calls.describe()}")
    chunk_ids = chunks_of(data, workload.deletes)
    result.residue_before = residue(env, data, workload, chunk_ids, server.embeddings)
    log = work / "run.log"
    arguments = ("run", "--watch", str(folder), "--data", str(data))
    with kgstream_gateway(log, *arguments, env=env) as (process, address):
        rss = PeakRss(process.pid)
        graph = attach_graph(data, process, log)
        try:
            wait_caught_up(graph, dict(workload.corpus), process, log)
            result.graph = graph_size(graph)
            result.queries = ask(server, address, workload, warmup)

            for doc_id, text in workload.edits:
                wanted = expected_hash(doc_id, text)
                change = partial(save, folder, doc_id, text)
                wait = partial(wait_visible, graph, doc_id, wanted, process, log)
                result.edits.append(timed(server, doc_id, change, wait))
            for doc_id in workload.deletes:
                wait = partial(wait_gone, graph, doc_id, process, log)
                result.deletes.append(timed(server, doc_id, (folder / doc_id).unlink, wait))
            result.peak_rss_serving = rss.take()
        finally:
            rss.stop()
            graph.close()
    result.residue = residue(env, data, workload, chunk_ids, server.embeddings)
    return result


def index(folder: Path, data: Path, env: dict[str, str], log_path: Path) -> tuple[float, int]:
    """`kgstream index FOLDER --data DATA`: (seconds from start to exit, peak RSS bytes of it
    and its embedded redis-server)."""
    command = kgstream_command("index", str(folder), "--data", str(data))
    began = time.perf_counter()
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            env={**clean_environment(), **env},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        rss = PeakRss(process.pid)
        try:
            code = process.wait()
        finally:
            rss.stop()
            stop_process(process)
    seconds = time.perf_counter() - began
    if code != 0:
        raise RuntimeError(f"kgstream index exited with {code}; see {log_path}")
    return seconds, rss.take()


def graph_size(graph: Any) -> GraphSize:
    return GraphSize(
        documents=sum(graph.status_counts().values()),
        chunks=sum(1 for _ in graph.iter_chunks()),
        entities=sum(1 for _ in graph.iter_entities()),
        relations=sum(1 for _ in graph.iter_relations()),
    )


def ask(
    server: LLMServer, address: str, workload: Workload, warmup: Sequence[str]
) -> dict[str, ModeRun]:
    """Every question in every mode, one Retrieve at a time; a mode's warm-up questions first
    (untimed, not scored)."""
    from gateway.types import parse_mode
    from kgstream.query_command import build_request

    runs = {}
    with open_channel(address) as channel:
        stub = retrieve_stub(channel)
        for mode in MODES:
            for text in warmup:
                stub.Retrieve(
                    build_request(text, parse_mode(mode), None), timeout=CALL_TIMEOUT_SECONDS
                )
            before = server.calls()
            seconds, files = [], {}
            for question in workload.questions:
                request = build_request(question.text, parse_mode(mode), None)
                began = time.perf_counter()
                reply = stub.Retrieve(request, timeout=CALL_TIMEOUT_SECONDS)
                seconds.append(time.perf_counter() - began)
                files[question.id] = tuple(chunk.file_path for chunk in reply.chunks)
            runs[mode] = ModeRun(tuple(seconds), files, server.calls() - before)
            progress(f"kgstream: {mode}: {len(seconds)} questions")
    return runs


def save(folder: Path, doc_id: str, text: str) -> None:
    (folder / doc_id).write_text(text, encoding="utf-8")


def timed(
    server: LLMServer, doc_id: str, change: Callable[[], object], wait: Callable[[], float]
) -> Operation:
    """Make `change`, then `wait` until the stores show it: the seconds in between (`wait`
    returns the perf_counter() it saw it at) and the calls made meanwhile."""
    before = server.calls()
    began = time.perf_counter()
    change()
    seen = wait()
    return Operation(doc_id, seen - began, server.calls() - before)


def wait_gone(graph: Any, doc_id: str, process: Any, log: Path) -> float:
    """perf_counter() at the first poll that finds no record of `doc_id`."""
    deadline = time.perf_counter() + VISIBLE_TIMEOUT_SECONDS
    while True:
        now = time.perf_counter()
        if doc_id not in graph.get_documents([doc_id]):
            return now
        if now > deadline:
            raise TimeoutError(
                f"{doc_id} still stored {VISIBLE_TIMEOUT_SECONDS} s after its delete; see {log}"
            )
        if process.poll() is not None:
            raise RuntimeError(f"kgstream run exited with {process.returncode}; see {log}")
        time.sleep(POLL_SECONDS)


def chunks_of(data: Path, doc_ids: Sequence[str]) -> set[str]:
    """The chunk ids of documents in the index at `data` (no kgstream process running)."""
    from connectors.stores import StoreLocations, open_graph_store

    graph, embedded = open_graph_store(StoreLocations(data))
    try:
        return {
            c for stored in graph.get_documents(doc_ids).values() for c in stored.record.chunk_ids
        }
    finally:
        graph.close()
        if embedded is not None:
            embedded.stop()


def residue(
    env: dict[str, str],
    data: Path,
    workload: Workload,
    gone_chunks: set[str],
    embeddings: str,
) -> dict[str, int]:
    """What still names a deleted document (its record, its chunks, records citing its chunks
    or file) or quotes a sentence no live document has, in the graph; and vectors that are
    orphans (no record), cite what is deleted, or are not the embedding of their record's
    current text."""
    from connectors.embeddings.base import embedding_space_name
    from connectors.index_export import read_graph
    from connectors.stores import StoreLocations, open_graph_store, open_vector_store
    from connectors.vectors.port import VectorKind
    from dataflow.core.naming import relation_id
    from kgstream.assembly import build_embedder
    from kgstream.settings import Settings

    deleted = set(workload.deletes)
    gone_sentences = workload.gone_sentences()
    settings = Settings(
        data_dir=data,
        embedding_base_url=env["KGSTREAM_EMBEDDING_BASE_URL"],
        embedding_model=EMBEDDING_MODEL,
    )
    locations = StoreLocations(data)
    graph, embedded = open_graph_store(locations)
    vectors = open_vector_store(locations)
    try:
        vectors.ensure_collections(embedding_space_name(build_embedder(settings)), 384)
        snapshot = read_graph(graph)

        def cites_gone(record: Any) -> bool:
            if deleted & set(record.doc_ids) or deleted & set(record.file_paths):
                return True
            if gone_chunks & set(record.source_chunk_ids):
                return True
            text = " ".join(record.description.split())
            return any(sentence in text for sentence in gone_sentences)

        texts = {
            VectorKind.ENTITY: {e.key: e.embedding_text for e in snapshot.entities.values()},
            VectorKind.RELATION: {
                relation_id(r.pair): r.embedding_text for r in snapshot.relations.values()
            },
            VectorKind.CHUNK: {c.chunk_id: c.text for c in snapshot.chunks.values()},
        }
        embed = EMBEDDERS[embeddings]
        stale = sum(
            1
            for kind, live in texts.items()
            for point in vectors.iter_points(kind)
            if is_stale(point, live.get(point.key), deleted, gone_chunks, embed)
        )
        return {
            "documents": sum(1 for d in deleted if d in snapshot.documents),
            "chunks": sum(
                1
                for c in snapshot.chunks.values()
                if c.doc_id in deleted or c.chunk_id in gone_chunks
            ),
            "entities": sum(1 for e in snapshot.entities.values() if cites_gone(e)),
            "relations": sum(1 for r in snapshot.relations.values() if cites_gone(r)),
            "vectors": stale,
        }
    finally:
        vectors.close()
        graph.close()
        if embedded is not None:
            embedded.stop()


def is_stale(
    point: Any,
    text: str | None,
    deleted: set[str],
    gone_chunks: set[str],
    embed: Callable[[str, int], list[float]],
) -> bool:
    """Whether a vector point has no record (`text` None), cites something deleted, or is
    not the embedding of its record's current `text`."""
    payload = point.payload
    cited = set(_strings(payload.get("doc_ids"))) | set(_strings(payload.get("doc_id")))
    cited_chunks = set(_strings(payload.get("chunk_ids"))) | {point.key}
    if text is None or cited & deleted or cited_chunks & gone_chunks:
        return True
    return _cosine(point.vector, embed(text, len(point.vector))) < STALE_COSINE


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(v) for v in value]
    return []


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = (sum(x * x for x in a) * sum(y * y for y in b)) ** 0.5
    return dot / norm if norm else 0.0
