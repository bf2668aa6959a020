"""Merging, token budgets and the rendered context (LightRAG's ``_build_query_context``).

Order of work, as in LightRAG: lanes are interleaved round-robin and deduplicated (so no
lane eats the budget), entities and relations are cut by their own budgets, the chunks
of the kept entities and relations join the vector chunks (round-robin again: vector,
entity, relation chunks), and the chunks get what is left of the total budget once the
prompt without chunks is counted. Each chunk source is cut to `chunk_top_k`, and so is
the merged list (LightRAG's process_chunks_unified): `chunk_top_k` bounds the chunks a
context holds, and the round-robin decides which sources fill it.

Every budget counts exactly the line an item contributes to the context (`entity_line`,
`relation_line`, `chunk_line` + its new `reference_line`), and cuts keep the longest
prefix whose token sum fits: a budget never skips an item to fit a later, smaller one.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import replace
from typing import Protocol, TypeVar

from dataflow.core.prompts import ChatMessage
from gateway.prompts import ANSWER_SYSTEM, CONTEXT_TEMPLATE
from gateway.types import (
    QueryParams,
    Reference,
    RetrievedChunk,
    RetrievedEntity,
    RetrievedRelation,
)

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...

    def __hash__(self) -> int: ...  # counts are cached per counter (`_tail_tokens`)


Scored = TypeVar("Scored", RetrievedEntity, RetrievedRelation, RetrievedChunk)


def round_robin(
    lists: Sequence[Sequence[Scored]], key: Callable[[Scored], Hashable]
) -> list[Scored]:
    """First of each list, then second of each, ...; an item whose key was seen is skipped.

    The kept item carries the best score any list gave its key: an entity found by
    vector search in one lane and by graph expansion (score 0) in another keeps its
    similarity.
    """
    best: dict[Hashable, Scored] = {}
    order: list[Hashable] = []
    for position in range(max((len(items) for items in lists), default=0)):
        for items in lists:
            if position < len(items):
                item = items[position]
                known = best.get(key(item))
                if known is None:
                    order.append(key(item))
                    best[key(item)] = item
                elif item.score > known.score:
                    best[key(item)] = replace(known, score=item.score)
    return [best[k] for k in order]


def round_robin_keys(lists: Sequence[Sequence[tuple[K, float]]]) -> list[tuple[K, float]]:
    """`round_robin` over (key, score) pairs: the keys in the same order, each with the
    best score any list gave it."""
    best: dict[K, float] = {}
    for position in range(max((len(items) for items in lists), default=0)):
        for items in lists:
            if position < len(items):
                key, score = items[position]
                known = best.get(key)
                if known is None or score > known:
                    best[key] = score
    return list(best.items())


def entity_line(entity: RetrievedEntity) -> str:
    record = entity.record
    return json.dumps(
        {"entity": record.name, "type": record.type, "description": record.description},
        ensure_ascii=False,
    )


def relation_line(relation: RetrievedRelation) -> str:
    record = relation.record
    return json.dumps(
        {
            "entity1": record.source_name,
            "entity2": record.target_name,
            "description": record.description,
        },
        ensure_ascii=False,
    )


class ContextLines:
    """The context lines of one call's entities and relations, each rendered once: a line
    is counted against its budget, measured for the next read of relations, and counted
    again in the whole prompt, and rendering it each time (`json.dumps`) would cost several
    percent of a graph-mode Retrieve. Lines are kept by record object (held, so its id stays
    its own): two reads of one key in a call may differ, and each item gets its own record's
    line."""

    def __init__(self) -> None:
        self._lines: dict[int, tuple[object, str]] = {}

    def entity(self, entity: RetrievedEntity) -> str:
        return self._line(entity.record, entity, entity_line)

    def relation(self, relation: RetrievedRelation) -> str:
        return self._line(relation.record, relation, relation_line)

    def _line(self, record: object, item: T, render: Callable[[T], str]) -> str:
        known = self._lines.get(id(record))
        if known is None:
            known = self._lines[id(record)] = (record, render(item))
        return known[1]


def chunk_line(reference_id: int, chunk: RetrievedChunk) -> str:
    """`{"reference_id": "<n>", "content": "<text>"}`, as `json.dumps` writes it."""
    return _chunk_line_head(reference_id) + _chunk_line_tail(chunk.text)


def _chunk_line_head(reference_id: int) -> str:
    return '{"reference_id": "' + str(reference_id)


def _chunk_line_tail(text: str) -> str:
    return '", ' + json.dumps({"content": text}, ensure_ascii=False)[1:]


def chunk_line_tokens(reference_id: int, chunk: RetrievedChunk, tokens: TokenCounter) -> int:
    """`tokens.count(chunk_line(reference_id, chunk))`, counted as the head that ends with
    the reference number and the tail that holds the text. The tail is the same whatever
    number a call gives the chunk, so it is counted once (`_tail_tokens` caches it); the
    whole line, whose number changes from call to call, would be a new text every time
    (counting chunk lines anew would be most of a Retrieve's tokenizer time). Exact: in both
    encodings' pre-tokenizers a run of digits followed by a quote ends a piece, and
    tiktoken counts pieces alone (tests/gateway/test_context.py checks it)."""
    return tokens.count(_chunk_line_head(reference_id)) + _tail_tokens(
        tokens, _chunk_line_tail(chunk.text)
    )


@functools.lru_cache(maxsize=4096)
def _tail_tokens(tokens: TokenCounter, tail: str) -> int:
    return tokens.count(tail)


def reference_line(reference: Reference) -> str:
    return f"[{reference.reference_id}] {reference.file_path}"


def source_of(chunk: RetrievedChunk) -> str:
    """What a reference names: the file path, or the doc id of a document without one."""
    return chunk.file_path or chunk.doc_id


def cut_by_tokens(
    items: Sequence[T], line: Callable[[T], str], budget: int, tokens: TokenCounter
) -> list[T]:
    """The longest prefix of `items` whose lines' token counts sum to at most `budget`."""
    kept: list[T] = []
    used = 0
    for item in items:
        used += tokens.count(line(item))
        if used > budget:
            break
        kept.append(item)
    return kept


def references_of(chunks: Iterable[RetrievedChunk]) -> tuple[Reference, ...]:
    """Distinct sources in first-use order, numbered from 1, each with its chunk ids."""
    ids: dict[str, list[str]] = {}
    for chunk in chunks:
        ids.setdefault(source_of(chunk), []).append(chunk.chunk_id)
    return tuple(
        Reference(reference_id=number, file_path=path, chunk_ids=tuple(chunk_ids))
        for number, (path, chunk_ids) in enumerate(ids.items(), start=1)
    )


def cut_chunks(
    chunks: Sequence[RetrievedChunk], budget: int, tokens: TokenCounter
) -> list[RetrievedChunk]:
    """The longest prefix of chunks whose context lines fit `budget`.

    A chunk costs its `chunk_line` plus, when it is the first chunk of its source, that
    source's `reference_line`. Reference ids are given in first-use order over the kept
    prefix, which is exactly the numbering `references_of` gives the result.
    """
    kept: list[RetrievedChunk] = []
    numbers: dict[str, int] = {}
    used = 0
    for chunk in chunks:
        source = source_of(chunk)
        cost = 0
        if source not in numbers:
            number = len(numbers) + 1
            cost += tokens.count(reference_line(Reference(number, source, ())))
        else:
            number = numbers[source]
        cost += chunk_line_tokens(number, chunk, tokens)
        if used + cost > budget:
            break
        used += cost
        numbers.setdefault(source, number)
        kept.append(chunk)
    return kept


def render_context(
    entities: Sequence[RetrievedEntity],
    relations: Sequence[RetrievedRelation],
    chunks: Sequence[RetrievedChunk],
    references: Sequence[Reference],
    lines: ContextLines | None = None,
) -> str:
    """The context block of the answer prompt (LightRAG's kg_query_context layout);
    `lines`: the call's lines rendered so far."""
    lines = lines or ContextLines()
    numbers = {reference.file_path: reference.reference_id for reference in references}
    return CONTEXT_TEMPLATE.format(
        entities="\n".join(lines.entity(e) for e in entities),
        relations="\n".join(lines.relation(r) for r in relations),
        chunks="\n".join(chunk_line(numbers[source_of(c)], c) for c in chunks),
        references="\n".join(reference_line(r) for r in references),
    )


def answer_messages(params: QueryParams, context: str) -> tuple[ChatMessage, ...]:
    """System prompt with the context, then the history turns, then the question."""
    system = ANSWER_SYSTEM.format(
        context_data=context,
        response_type=params.response_type or "Multiple Paragraphs",
        user_prompt=params.user_prompt or "n/a",
    )
    history = tuple(ChatMessage(turn.role, turn.content) for turn in params.history)
    return (ChatMessage("system", system), *history, ChatMessage("user", params.question))


def chunk_budget(
    params: QueryParams,
    entities: Sequence[RetrievedEntity],
    relations: Sequence[RetrievedRelation],
    tokens: TokenCounter,
    lines: ContextLines | None = None,
) -> int:
    """What `max_total_tokens` leaves for chunks and references: the whole prompt (system
    template with entities and relations, history, question) is counted first."""
    messages = answer_messages(params, render_context(entities, relations, (), (), lines))
    return params.max_total_tokens - sum(tokens.count(m.content) for m in messages)
