"""Entity/relation extraction for one chunk through a chat model, with gleaning.

A first pass asks for the chunk's records; each gleaning pass replays the
conversation and asks for what was missed (LightRAG's "gleaning"). Every pass is
its own `ChatClient.complete` call, so each one is cached by its exact prompt:
re-extracting an unchanged chunk costs no HTTP request at all.

Failures: a call that fails for good raises `connectors.llm.client.LLMError` out of
`extract`. `extract_many`, what the dataflow calls, returns that chunk's error message
in its place instead, so the dataflow marks the document FAILED with the reason and
carries on with other chunks and documents. A reply that is not the extraction format
at all (`extraction_reply_problem`: prose, an empty reply) is retried like a 5xx and then
fails the chunk; a reply in the format with malformed records is not an error:
`parse_extraction` drops what it cannot read and counts it in `dropped`.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from connectors.llm.client import ChatClient, LLMError
from dataflow.core.extraction import Extraction, merge_extractions
from dataflow.core.naming import entity_key, relation_key
from dataflow.core.parsing import extraction_reply_problem, parse_extraction
from dataflow.core.prompts import (
    ChatMessage,
    ExtractionPromptOptions,
    build_continue_messages,
    build_extraction_messages,
)


@dataclass(frozen=True)
class LLMExtractorOptions:
    """What to ask for, and how many "what did you miss?" passes to allow per chunk."""

    prompt: ExtractionPromptOptions = field(default_factory=ExtractionPromptOptions)
    max_gleaning: int = 1

    def __post_init__(self) -> None:
        if self.max_gleaning < 0:
            raise ValueError(
                "LLMExtractorOptions.max_gleaning must be >= 0 (0 = a single pass); "
                f"got {self.max_gleaning!r}"
            )


class LLMExtractor:
    """Extracts records from chunks with a chat model (see the module docstring)."""

    def __init__(self, client: ChatClient, options: LLMExtractorOptions | None = None) -> None:
        self.client = client
        self.options = options or LLMExtractorOptions()
        # Threads start on first use; the client's own bound caps the requests in flight.
        self._pool = ThreadPoolExecutor(client.max_concurrency, thread_name_prefix="extract")

    def extract(self, chunk_text: str) -> Extraction:
        """Return the merged records of the first pass and up to `max_gleaning` more.

        Gleaning stops early when a pass finds no entity or relation not already
        known (its longer descriptions are still merged). Raises `LLMError`.
        """
        prompt = self.options.prompt
        messages = build_extraction_messages(chunk_text, prompt)
        reply = self._ask(messages)
        result = parse_extraction(reply)
        for _ in range(self.options.max_gleaning):
            messages = build_continue_messages(messages, reply, prompt)
            reply = self._ask(messages)
            merged = merge_extractions(result, parse_extraction(reply))
            found_new = _record_keys(merged) != _record_keys(result)
            result = merged
            if not found_new:
                break
        return result

    def _ask(self, messages: Sequence[ChatMessage]) -> str:
        return self.client.complete(messages, kind="extract", check=extraction_reply_problem)

    def extract_many(self, texts: Sequence[str]) -> list[Extraction | str]:
        """Extract every chunk concurrently (bounded by the client); results in input order.

        A chunk whose call fails for good yields the `LLMError`'s message instead of an
        `Extraction`: one chunk's failure is a reason, not an exception (`ExtractMany`).
        """
        return list(self._pool.map(self._extract_or_reason, texts))

    def _extract_or_reason(self, text: str) -> Extraction | str:
        try:
            return self.extract(text)
        except LLMError as error:
            return str(error)


def _record_keys(extraction: Extraction) -> tuple[frozenset[str], frozenset[tuple[str, str]]]:
    entities = frozenset(entity_key(entity.name) for entity in extraction.entities)
    relations = frozenset(
        pair
        for relation in extraction.relations
        if (pair := relation_key(relation.source, relation.target)) is not None
    )
    return entities, relations
