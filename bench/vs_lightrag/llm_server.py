"""The one test LLM and embedding server that kgstream and LightRAG both talk to.

A child process of `bench/vs_lightrag/run.py`, built on tests/support/llm_server.py (the
real OpenAI wire format). It answers both systems' prompts from the same deterministic
model, so the two build their graphs from the same replies:

* extraction (kgstream's ``---Text---`` fence, LightRAG's ``---Input Text---`` fence): the
  offline extractor's records for the chunk in the prompt, in LightRAG 1.5's own delimited
  format (relation rows of five fields: LightRAG drops a row with a sixth; kgstream reads
  the missing strength as 1.0);
* gleaning ("what did you miss"): nothing was missed, ``<|COMPLETE|>``;
* description summaries (either system's prompt): the descriptions joined, cut at 1,200
  characters;
* query keywords (either system's prompt): kgstream's offline keyword extractor on the
  question, as LightRAG's JSON object;
* anything else: a fixed short answer.

Embeddings (`--embeddings`): ``words`` (default), a bag of words hashed into the vector's
dimensions (stopwords dropped, 1 + log(count) per word, a hash-chosen sign, unit length), so
texts that share words are near and a dense-only retriever finds something; or ``hash``,
the test server's own vectors (a hash of the whole text: no two texts are similar).

Chat calls wait `delay` seconds first (`--delay`, or a ``delay SECONDS`` line on stdin
later); embeddings come from a second server that never waits. Calls are counted by kind; a
``counts`` line on stdin prints them as one JSON line. The first line printed is the two base
URLs (``{"llm": ..., "embeddings": ...}``); closing stdin stops the servers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.harness import format_extraction  # noqa: E402
from dataflow.core.offline.extractor import extract_offline  # noqa: E402
from gateway.keywords import STOPWORDS, OfflineKeywordExtractor  # noqa: E402
from tests.support.llm_server import (  # noqa: E402
    EMBEDDINGS,
    OpenAICompatibleServer,
    embed_text,
)

CALL_KINDS = ("extract", "glean", "summary", "keywords", "other")
SUMMARY_CHARS = 1200
COMPLETE = "<|COMPLETE|>"
OTHER_REPLY = "I cannot answer that from this test model."

_KGSTREAM_TEXT = re.compile(r"---Text---\n(`{3,})\n(.*?)\n\1\n", re.DOTALL)
_LIGHTRAG_TEXT = re.compile(r"---Input Text---\n```\n(.*?)\n```\n\n---Output---", re.DOTALL)
_KGSTREAM_QUESTION = re.compile(r"\AQuestion: (.*)\nOutput:\Z", re.DOTALL)
_LIGHTRAG_QUESTION = re.compile(r"---Real Data---\nUser Query: (.*?)\n\n---Output---", re.DOTALL)
_LIGHTRAG_DESCRIPTIONS = re.compile(r"Description List:\n\n```\n(.*?)\n```", re.DOTALL)
_WORD = re.compile(r"[a-z0-9]+")


def chunk_text(prompt: str) -> str | None:
    """The chunk an extraction prompt (kgstream's or LightRAG's) asks about, if it is one."""
    kgstream = _KGSTREAM_TEXT.search(prompt)
    if kgstream is not None:
        return kgstream.group(2)
    lightrag = _LIGHTRAG_TEXT.search(prompt)
    return lightrag.group(1) if lightrag is not None else None


def summary_descriptions(system: str, prompt: str) -> list[str] | None:
    """The descriptions a summary prompt (kgstream's or LightRAG's) lists, if it is one."""
    if system.startswith("You merge descriptions"):
        listing = prompt.split("Descriptions:\n", 1)[-1]
        return [line[2:] for line in listing.splitlines() if line.startswith("- ")]
    lightrag = _LIGHTRAG_DESCRIPTIONS.search(prompt)
    if lightrag is None:
        return None
    return [str(json.loads(line)["Description"]) for line in lightrag.group(1).splitlines()]


def question_of(prompt: str) -> str | None:
    """The question a keyword prompt (kgstream's or LightRAG's) asks about, if it is one."""
    match = _KGSTREAM_QUESTION.match(prompt) or _LIGHTRAG_QUESTION.search(prompt)
    return match.group(1).strip() if match is not None else None


def answer(messages: Sequence[dict[str, Any]]) -> tuple[str, str]:
    """(kind of call, reply) for a chat request's messages."""
    system = str(messages[0]["content"]) if messages[0].get("role") == "system" else ""
    prompt = str(messages[-1]["content"])
    text = chunk_text(prompt)
    if text is not None:
        return "extract", format_extraction(extract_offline(text), strength=False)
    if len(messages) > 2 and any(chunk_text(str(m["content"])) for m in messages[:-1]):
        return "glean", COMPLETE
    descriptions = summary_descriptions(system, prompt)
    if descriptions is not None:
        return "summary", " ".join(descriptions)[:SUMMARY_CHARS]
    question = question_of(prompt)
    if question is not None:
        keywords = OfflineKeywordExtractor().extract(question)
        reply = {
            "high_level_keywords": list(keywords.high_level),
            "low_level_keywords": list(keywords.low_level),
        }
        return "keywords", json.dumps(reply)
    return "other", OTHER_REPLY


def word_vector(text: str, dimension: int) -> list[float]:
    """A unit bag-of-words vector: each word's weight (1 + log count) added, with a sign,
    to one dimension picked by its hash. A text without words gets the hash vector."""
    counts = Counter(w for w in _WORD.findall(text.casefold()) if w not in STOPWORDS)
    vector = [0.0] * dimension
    for word, count in counts.items():
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        sign = 1.0 if digest[0] & 1 else -1.0
        vector[int.from_bytes(digest[1:5], "little") % dimension] += sign * (1 + math.log(count))
    norm = math.sqrt(sum(v * v for v in vector))
    if norm == 0:
        return embed_text(text, dimension)
    return [v / norm for v in vector]


EMBEDDERS: dict[str, Callable[[str, int], list[float]]] = {"words": word_vector, "hash": embed_text}


class CountingResponder:
    """`answer` as the server's responder, counting calls by kind (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def __call__(self, body: dict[str, Any]) -> str:
        kind, reply = answer(body["messages"])
        with self._lock:
            self.counts[kind] += 1
        return reply


class CountingEmbedder:
    """An embedder that counts the texts it embeds (thread-safe)."""

    def __init__(self, inner: Callable[[str, int], list[float]]) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self.texts = 0

    def __call__(self, text: str, dimension: int) -> list[float]:
        with self._lock:
            self.texts += 1
        return self._inner(text, dimension)


def serve(delay: float, embeddings: str) -> int:
    """Serve until stdin closes; stdin lines ``counts`` and ``delay SECONDS`` are commands.

    Two servers: chat calls wait `delay`, embeddings never do (the latency under test is
    the LLM's; an embedding endpoint answers in milliseconds).
    """
    responder = CountingResponder()
    embedder = CountingEmbedder(EMBEDDERS[embeddings])
    with OpenAICompatibleServer() as chat, OpenAICompatibleServer() as embedding:
        chat.responder = responder
        chat.delay_seconds = delay
        embedding.embedder = embedder
        print(json.dumps({"llm": chat.base_url, "embeddings": embedding.base_url}), flush=True)
        for line in sys.stdin:
            command, _, argument = line.strip().partition(" ")
            if command == "delay":
                chat.delay_seconds = float(argument)
                print(json.dumps({"delay": chat.delay_seconds}), flush=True)
            elif command == "counts":
                counts = {kind: responder.counts[kind] for kind in CALL_KINDS}
                counts["chat"] = chat.chat_calls
                counts["max_in_flight"] = chat.max_in_flight
                counts["embedding_requests"] = embedding.count(EMBEDDINGS)
                counts["embedded_texts"] = embedder.texts
                print(json.dumps(counts), flush=True)
            else:
                print(json.dumps({"error": f"unknown command {line.strip()!r}"}), flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before every reply")
    parser.add_argument("--embeddings", choices=sorted(EMBEDDERS), default="words")
    args = parser.parse_args(argv)
    return serve(args.delay, args.embeddings)


if __name__ == "__main__":
    sys.exit(main())
