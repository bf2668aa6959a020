"""The query engine: LightRAG's five modes over our stores, answers and an answer cache.

`QueryEngine` is what the gRPC server calls; it knows nothing of protobuf. One call:

1. `validate` the request (errors name the field);
2. wait for `min_index_version` (read-your-writes) within the deadline, capped by the
   server's maximum and by how many calls may wait at once, then read the index version
   once: the `Retrieval` says which version it reflects;
3. keywords: the request's own, else the `KeywordExtractor` (when the plan needs them);
4. the lanes the mode's `QueryPlan` runs (gateway/retrieval.py), merged and cut by the
   token budgets (gateway/context.py);
5. for `answer` / `stream_answer`: LightRAG's rag_response prompt to the chat model.

Answers are cached in memory (LRU) under every request field that shapes them plus the
index version and the model name, so an answer is never served for an index it was not
made from. Thread-safe: the server calls one engine from many threads.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from connectors.embeddings.base import Embedder
from connectors.errors import store_outages
from connectors.llm.client import ChatClient, DeltaStream, LLMError
from connectors.stores import Stores
from dataflow.core.contributions import EntityRecord, RelationRecord
from dataflow.core.prompts import ChatMessage
from gateway.context import (
    ContextLines,
    TokenCounter,
    answer_messages,
    chunk_budget,
    cut_by_tokens,
    cut_chunks,
    references_of,
    render_context,
    round_robin,
    round_robin_keys,
)
from gateway.extractive import extractive_answer
from gateway.fusion import Lane, fuse
from gateway.keywords import KeywordExtractor
from gateway.prompts import NO_CONTEXT_ANSWER
from gateway.retrieval import (
    ChunkSearch,
    EntityReads,
    GraphLane,
    GraphScope,
    NamedEntities,
    OneHop,
    Scope,
    cited_chunks,
    fetch_chunks,
    find_entities,
    find_relations,
    hit_keys,
    named_in,
    one_hop,
)
from gateway.types import (
    HISTORY_ROLES,
    Answer,
    AnswerStream,
    CallDeadline,
    InvalidQuery,
    Keywords,
    Mode,
    QueryParams,
    QueryPlan,
    RequestLimits,
    Retrieval,
    RetrievedEntity,
    RetrievedRelation,
    Usage,
    call_deadline,
    shown,
)
from gateway.version_waits import VersionWaits

MAX_TOP_K = 1000
_SLOT_POLL_SECONDS = 0.05  # a call waiting for a retrieval slot checks its deadline this often
_MIN_LANE = 40  # chunks each lane contributes to a fusion, at least
_BRIDGE_WEIGHT = 0.7


_RANKED_DEPTH = 50  # graph candidates ranked by relevance per lane, at most
_ITEM_ORDER_WEIGHT = 1.0


def _best_per_item(cited: Sequence[Sequence[str]], ranked: Sequence[str]) -> list[str]:
    """Each item's most relevant chunk, in the items' own rank order: the entity the
    question names first keeps its passage near the top even when a hub entity's many
    chunks outrank it on relevance alone."""
    position = {chunk: index for index, chunk in enumerate(ranked)}
    best: list[str] = []
    for ids in cited:
        known = [chunk for chunk in ids if chunk in position and chunk not in best]
        if known:
            best.append(min(known, key=position.__getitem__))
    return best


DEFAULT_LIMITS = RequestLimits()
_EMBEDDING_WORKERS = 16  # background embeddings at once: one per gRPC worker
_GRAPH_SCOPES = 64  # scopes whose graph keys are kept for the current index version

T = TypeVar("T")


class _QueryVectors:
    """The vectors of one call's texts, embedded one by one in the background in the order
    the lanes use them, while the lanes read the stores (the name look-up while the first
    is embedded); each is ready as soon as it is embedded, so a lane waits only for its
    own text (the entity lane's keywords, not the question behind them).

    An embedder spends its time outside the GIL (onnxruntime, an HTTP call), so the
    background costs a graph mode little wall time, as long as it is one call at a time:
    concurrent onnxruntime runs fight the lanes for the cores, and on a small machine one
    at a time gives a lower p95 than concurrent runs, one batch or all up front
    (docs/decisions/0022-retrieval.md)."""

    def __init__(self, embedder: Embedder, texts: Sequence[str], pool: ThreadPoolExecutor) -> None:
        self._vectors: dict[str, Sequence[float]] = {}
        self._pending: dict[str, Future[Sequence[float]]] = {text: Future() for text in texts}
        pool.submit(_embed_each, embedder, list(self._pending.items()))

    def __getitem__(self, text: str) -> Sequence[float]:
        if text not in self._vectors:
            self._vectors[text] = self._pending.pop(text).result()
        return self._vectors[text]


def _embed_each(embedder: Embedder, texts: Sequence[tuple[str, Future[Sequence[float]]]]) -> None:
    """Embed each text in a call of its own, in order, settling its future with the vector
    or with the call's exception."""
    for text, future in texts:
        try:
            future.set_result(embedder.embed([text])[0])
        except BaseException as error:  # whatever it is, the waiting lane must not hang
            future.set_exception(error)


@dataclass(frozen=True)
class LaneTexts:
    """What a plan's searches read, and so the texts a call embeds.

    `question`: the question, or its keywords when it has none; every plan ranks chunks
    against it. `entities`, `relations`: the entity and relation lanes' search texts, their
    level's keywords, or the question when there are none of that level. `embedded`: the
    texts the plan's lanes search with, once each, in the order the lanes use them.
    """

    question: str
    entities: str
    relations: str
    embedded: tuple[str, ...]

    @classmethod
    def of(cls, plan: QueryPlan, question: str, keywords: Keywords) -> LaneTexts:
        asked = question.strip() or ", ".join((*keywords.low_level, *keywords.high_level))
        low = ", ".join(keywords.low_level) or asked
        high = ", ".join(keywords.high_level) or asked
        # Relations first, then entities, then the chunk searches.
        used = ((plan.relation_lane, high), (plan.entity_lane, low), (True, asked))
        return cls(asked, low, high, tuple(dict.fromkeys(text for runs, text in used if runs)))


@dataclass(frozen=True)
class EngineOptions:
    """`answer_cache_size`: answers kept (LRU; 0 disables the cache).
    `version_wait_seconds`: the longest wait for `min_index_version`, whatever the call's
    own deadline (a call without one waits this long at most).
    `max_version_waits`: calls waiting for `min_index_version` at once, over every transport
    together (gateway/version_waits.py); one more is RESOURCE_EXHAUSTED at once. A waiting
    gRPC call holds a worker, so keep it under the gateway's gRPC workers (16), leaving
    workers for health checks and other calls; an HTTP wait holds none.
    `max_concurrent_retrievals`: retrievals running at once (embedding the question, the
    store searches, the context); a call beyond them waits for a slot within its deadline
    (0: no bound). Retrieval is CPU work under the GIL: in `kgstream run` the gateway
    shares its process with the indexer, and each retrieval running takes an equal share
    of it, so the bound is what keeps indexing going under query load.
    `limits`: the largest request taken (gateway/types.py says why each limit exists).
    `first_relation_read`, `first_entity_read`: the one-hop relations and the entity
    records read before the token budget is known; then about as many more as the budget
    has room for (at least a quarter of these), until it cuts inside what was read. The
    result is the same whatever they are: larger reads more of a hub than the budget
    keeps, smaller takes more round trips.
    `named_for_relations`: the entities the question names whose own relations the
    relation lane ranks beside its searches (`find_relations`; 0: no such lane).
    """

    answer_cache_size: int = 1024
    version_wait_seconds: float = 30.0
    max_version_waits: int = 8
    max_concurrent_retrievals: int = 0
    limits: RequestLimits = DEFAULT_LIMITS
    first_relation_read: int = 64
    first_entity_read: int = 32
    named_for_relations: int = 4

    def __post_init__(self) -> None:
        if self.max_concurrent_retrievals < 0:
            raise ValueError(
                "EngineOptions.max_concurrent_retrievals must be >= 0 (0: no bound); "
                f"got {self.max_concurrent_retrievals}"
            )
        if self.max_version_waits < 1:
            raise ValueError(
                f"EngineOptions.max_version_waits must be >= 1; got {self.max_version_waits}"
            )
        if self.answer_cache_size < 0:
            raise ValueError(
                f"EngineOptions.answer_cache_size must be >= 0 (0 disables); "
                f"got {self.answer_cache_size}"
            )
        if not self.version_wait_seconds >= 0:
            raise ValueError(
                f"EngineOptions.version_wait_seconds must be >= 0; got {self.version_wait_seconds}"
            )
        for name in ("first_relation_read", "first_entity_read"):
            if getattr(self, name) < 1:
                raise ValueError(f"EngineOptions.{name} must be >= 1; got {getattr(self, name)}")
        if self.named_for_relations < 0:
            raise ValueError(
                f"EngineOptions.named_for_relations must be >= 0 (0: no named lane); "
                f"got {self.named_for_relations}"
            )


class VersionedCache(Generic[T]):
    """LRU of values by key, each made at one index version; entries older than the newest
    index version seen are dropped."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[Hashable, tuple[int, T]] = OrderedDict()
        self._newest_version = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable, version: int) -> T | None:
        with self._lock:
            self._advance(version)
            entry = self._entries.get(key)
            if entry is None or entry[0] != version:
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: Hashable, version: int, value: T) -> None:
        if self.capacity == 0:
            return
        with self._lock:
            self._advance(version)
            if version < self._newest_version:
                return
            self._entries[key] = (version, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def _advance(self, version: int) -> None:
        if version > self._newest_version:
            self._newest_version = version
            stale = [key for key, (v, _) in self._entries.items() if v < version]
            for key in stale:
                del self._entries[key]


class AnswerCache(VersionedCache[Answer]):
    """Answers by question and parameters (`EngineOptions.answer_cache_size`)."""


class _TextStream:
    """A finished text as a one-delta stream (cache hits, no LLM, no context).

    `usage` is zero: no model tokens are spent on it.
    """

    def __init__(self, text: str, llm_configured: bool = True) -> None:
        self._text: str | None = text
        self.usage = Usage()
        self.llm_configured = llm_configured

    def __iter__(self) -> Iterator[str]:
        while self._text is not None:
            text, self._text = self._text, None
            yield text

    def close(self) -> None:
        self._text = None


class _LLMStream:
    """The chat model's deltas; once the stream ends normally, `usage` is set and the full
    answer goes to `on_complete` (the answer cache). A closed stream caches nothing."""

    def __init__(self, deltas: DeltaStream, on_complete: Callable[[str], Usage]) -> None:
        self._deltas = deltas
        self._on_complete = on_complete
        self._parts: list[str] = []
        self._closed = False
        self.usage = Usage()
        self.llm_configured = True

    def __iter__(self) -> Iterator[str]:
        try:
            for delta in self._deltas:
                self._parts.append(delta)
                yield delta
        except LLMError:
            if self._closed:  # a read cut short by close() from another thread
                return
            raise
        if not self._closed:
            self.usage = self._on_complete("".join(self._parts))

    def close(self) -> None:
        """Close the HTTP stream. A read blocked in another thread ends with the next
        bytes from the server (closing a socket does not wake a blocked read)."""
        self._closed = True
        self._deltas.close()


def _has_context(retrieval: Retrieval) -> bool:
    return bool(retrieval.entities or retrieval.relations or retrieval.chunks)


def validate(params: QueryParams, limits: RequestLimits = DEFAULT_LIMITS) -> None:
    """Raise `InvalidQuery` naming the first field the engine cannot run with."""
    if not isinstance(params.mode, Mode):  # a caller in this process passed a name
        raise InvalidQuery(
            "mode", f"must be a Mode (parse_mode reads a name); got {shown(params.mode)}"
        )
    keywords = [k for k in (*params.high_level_keywords, *params.low_level_keywords) if k.strip()]
    if not params.question.strip() and not keywords:
        raise InvalidQuery("question", "is empty; ask a question or pass high/low-level keywords")
    if len(params.question) > limits.max_question_chars:
        raise InvalidQuery(
            "question",
            f"is {len(params.question)} characters long; the limit is "
            f"{limits.max_question_chars} (max_question_chars; shorten it, or index long "
            "text as a document and ask about it)",
        )
    given = len(params.high_level_keywords) + len(params.low_level_keywords)
    if given > limits.max_keywords:
        raise InvalidQuery(
            "low_level_keywords" if params.low_level_keywords else "high_level_keywords",
            f"{given} keywords given (high and low level together); the limit is "
            f"{limits.max_keywords} (max_keywords)",
        )
    for level in ("high_level_keywords", "low_level_keywords"):
        for index, keyword in enumerate(getattr(params, level)):
            if len(keyword) > limits.max_keyword_chars:
                raise InvalidQuery(
                    f"{level}[{index}]",
                    f"is {len(keyword)} characters long; the limit is "
                    f"{limits.max_keyword_chars} (max_keyword_chars)",
                )
    for name in ("top_k", "chunk_top_k"):
        value = getattr(params, name)
        if not 1 <= value <= MAX_TOP_K:
            raise InvalidQuery(name, f"must be between 1 and {MAX_TOP_K}; got {value}")
    for name in ("max_entity_tokens", "max_relation_tokens", "max_total_tokens"):
        value = getattr(params, name)
        if value < 1:
            raise InvalidQuery(name, f"must be a token budget >= 1; got {value}")
    for name in ("user_prompt", "response_type"):
        value = getattr(params, name)
        if len(value) > limits.max_user_prompt_chars:
            raise InvalidQuery(
                name,
                f"is {len(value)} characters long; the limit is "
                f"{limits.max_user_prompt_chars} (max_user_prompt_chars)",
            )
    if len(params.history) > limits.max_history_turns:
        raise InvalidQuery(
            "history",
            f"has {len(params.history)} turns; the limit is {limits.max_history_turns} "
            "(max_history_turns; send the latest turns)",
        )
    history_chars = 0
    for index, turn in enumerate(params.history):
        if turn.role not in HISTORY_ROLES:
            raise InvalidQuery(
                f"history[{index}].role",
                f"must be one of {', '.join(HISTORY_ROLES)}; got {shown(turn.role)}",
            )
        history_chars += len(turn.content)
    if history_chars > limits.max_history_chars:
        raise InvalidQuery(
            "history",
            f"is {history_chars} characters long, every turn together; the limit is "
            f"{limits.max_history_chars} (max_history_chars; send the latest turns)",
        )
    if params.min_index_version < 0:
        raise InvalidQuery(
            "min_index_version", f"must be >= 0 (0: do not wait); got {params.min_index_version}"
        )
    for index, doc_id in enumerate(params.doc_ids):
        if not doc_id:
            raise InvalidQuery(f"doc_ids[{index}]", "is empty; pass document ids or none")
    prefix = params.file_path_prefix
    if prefix is not None and not prefix.strip("/"):
        raise InvalidQuery(
            "file_path_prefix",
            f"must name a file or directory; got {shown(prefix)} (omit it for all)",
        )


class QueryEngine:
    """Retrieval and answers over one workspace's stores (see the module docstring).

    `deadline` arguments are a `CallDeadline` (the gateway's: the call's deadline and
    whether the client is still there) or absolute `time.monotonic()` seconds (None: no
    deadline). Work stops between stages once the call is abandoned (`CallAbandoned`);
    the version wait is bounded by `EngineOptions.version_wait_seconds` in any case. `llm` None
    means no generated answers: `answer` quotes the retrieved sentences that best match
    the question (an extractive answer) with the retrieved context.
    """

    def __init__(
        self,
        stores: Stores,
        embedder: Embedder,
        tokenizer: TokenCounter,
        keywords: KeywordExtractor,
        llm: ChatClient | None = None,
        options: EngineOptions | None = None,
    ) -> None:
        self.stores = stores
        self.embedder = embedder
        self.tokenizer = tokenizer
        self.keywords = keywords
        self.llm = llm
        self.options = options or EngineOptions()
        self.answer_cache = AnswerCache(self.options.answer_cache_size)
        # A scope's entity and relation keys (a scroll of its chunks' payloads), per version.
        self._graph_scopes: VersionedCache[GraphScope] = VersionedCache(_GRAPH_SCOPES)

        # Shared with the HTTP API, which awaits the same waits on its event loop.
        self.version_waits = VersionWaits(
            stores.graph.version, self.options.max_version_waits, self.options.version_wait_seconds
        )
        self._embedding_pool = ThreadPoolExecutor(
            _EMBEDDING_WORKERS, thread_name_prefix="kgstream-query-embed"
        )
        slots = self.options.max_concurrent_retrievals
        self._retrieval_slots = threading.BoundedSemaphore(slots) if slots else None

    @property
    def limits(self) -> RequestLimits:
        return self.options.limits

    def validate(self, params: QueryParams) -> None:
        validate(params, self.options.limits)

    # ------------------------------------------------------------------ public API

    def retrieve(
        self, params: QueryParams, deadline: float | CallDeadline | None = None
    ) -> Retrieval:
        call = call_deadline(deadline)
        self.validate(params)
        with store_outages(self.stores.graph.workspace):
            version = self._await_version(params.min_index_version, call)
            return self._retrieve_at(params, version, call)

    def answer(self, params: QueryParams, deadline: float | CallDeadline | None = None) -> Answer:
        call = call_deadline(deadline)
        version, key, cached, retrieval = self._cached_or_retrieved(params, call)
        if cached is not None:
            return replace(cached, cached=True, usage=Usage())
        llm = self.llm
        if llm is None or not _has_context(retrieval):
            return self._fixed_answer(params, retrieval)
        call.check("the LLM answer")
        messages = self.messages(params, retrieval)
        text = llm.complete(messages, kind="answer")
        answer = Answer(
            retrieval=retrieval,
            text=text,
            llm_configured=True,
            cached=False,
            usage=self._usage(messages, text),
        )
        if key is not None:
            self.answer_cache.put(key, version, answer)
        return answer

    def stream_answer(
        self, params: QueryParams, deadline: float | CallDeadline | None = None
    ) -> tuple[Retrieval, AnswerStream]:
        """The retrieval at once, then the answer's deltas; close the stream to stop the LLM."""
        call = call_deadline(deadline)
        version, key, cached, retrieval = self._cached_or_retrieved(params, call)
        if cached is not None:
            return cached.retrieval, _TextStream(cached.text)
        llm = self.llm
        if llm is None or not _has_context(retrieval):
            fixed = self._fixed_answer(params, retrieval)
            return retrieval, _TextStream(fixed.text, fixed.llm_configured)
        call.check("the LLM answer")
        messages = self.messages(params, retrieval)
        deltas = llm.stream(messages, kind="answer")

        def remember(text: str) -> Usage:
            usage = self._usage(messages, text)
            if key is not None:
                self.answer_cache.put(key, version, Answer(retrieval, text, True, False, usage))
            return usage

        return retrieval, _LLMStream(deltas, remember)

    def _cached_or_retrieved(
        self, params: QueryParams, call: CallDeadline
    ) -> tuple[int, Hashable | None, Answer | None, Retrieval]:
        """The version read, the answer-cache key, a cached answer, else a fresh retrieval."""
        self.validate(params)
        with store_outages(self.stores.graph.workspace):
            version = self._await_version(params.min_index_version, call)
            key = self._cache_key(params, version)
            cached = self.answer_cache.get(key, version) if key is not None else None
            if cached is not None:
                return version, key, cached, cached.retrieval
            return version, key, None, self._retrieve_at(params, version, call)

    def messages(self, params: QueryParams, retrieval: Retrieval) -> tuple[ChatMessage, ...]:
        """The answer prompt for `retrieval` (LightRAG's rag_response with its context)."""
        return answer_messages(params, self.context_text(retrieval))

    @staticmethod
    def context_text(retrieval: Retrieval) -> str:
        """The context block the LLM sees: entities, relations, chunks, references."""
        return render_context(
            retrieval.entities,
            retrieval.relations,
            retrieval.chunks,
            references_of(retrieval.chunks),
        )

    # ------------------------------------------------------------------ internals

    def _retrieve_at(self, params: QueryParams, version: int, call: CallDeadline) -> Retrieval:
        call.check("keyword extraction")
        keywords = self._keywords_for(params)  # may wait on the LLM: outside a slot
        with self._retrieval_slot(call):
            return self._retrieve_with(params, keywords, version, call)

    @contextmanager
    def _retrieval_slot(self, call: CallDeadline) -> Iterator[None]:
        """One of `max_concurrent_retrievals`, waited for until the call is abandoned."""
        slots = self._retrieval_slots
        if slots is None:
            yield
            return
        while not slots.acquire(timeout=_SLOT_POLL_SECONDS):
            call.check("a retrieval slot came free")
        try:
            yield
        finally:
            slots.release()

    def _retrieve_with(
        self, params: QueryParams, keywords: Keywords, version: int, call: CallDeadline
    ) -> Retrieval:
        call.check("embedding the question and keywords")
        scope = Scope(params.doc_ids, params.file_path_prefix)
        plan = params.mode.plan
        texts = LaneTexts.of(plan, params.question, keywords)
        vectors = _QueryVectors(self.embedder, texts.embedded, self._embedding_pool)
        call.check("the graph searches")

        stores = self.stores
        top_k = params.top_k
        question, low, high = texts.question, texts.entities, texts.relations
        # The relations' lexical search reads the whole question beside the themes: themes
        # alone ("writer") match relations at random, the names around them do not.
        wording = f"{high}, {question}" if high != question else high
        named = (
            named_in(stores, [params.question, *keywords.low_level])
            if plan.reads_graph
            else NamedEntities()
        )
        in_scope = self._graph_scope(scope, version) if plan.reads_graph else GraphScope(scope)
        far = (
            find_relations(
                stores,
                wording,
                vectors[high],
                top_k,
                in_scope,
                version,
                named.keys[: self.options.named_for_relations],
            )
            if plan.relation_lane
            else GraphLane()
        )
        near = (
            find_entities(stores, named, low, vectors[low], top_k, in_scope, version)
            if plan.entity_lane
            else []
        )
        hop = one_hop(stores, [key for key, _ in near]) if near else OneHop()
        lines = ContextLines()
        local: list[RetrievedRelation] = []
        first = self.options.first_relation_read
        read, size = 0, first
        while True:
            end = hop.slice_end(read, size)
            local += hop.read(stores, read, end, scope)
            read = end
            merged = round_robin([local, far.relations], key=lambda r: r.record.pair)
            relations = cut_by_tokens(
                merged, lines.relation, params.max_relation_tokens, self.tokenizer
            )
            kept = {relation.record.pair for relation in relations}
            if read >= len(hop.pairs) or any(r.record.pair not in kept for r in local):
                break  # the budget cut before the end of what was read: more cannot matter
            size = self._room(relations, lines.relation, params.max_relation_tokens, first // 4)
        # Entities as LightRAG merges them: the local lane's, then the relations' ends.
        ranked_entities = round_robin_keys([near, [(key, 0.0) for key in far.ends]])
        reads = EntityReads(stores, scope, dict(named.records), dict(far.degrees))
        entities = self._entities_within(ranked_entities, reads, params.max_entity_tokens, lines)

        call.check("the chunk searches")
        search = ChunkSearch(stores, question, vectors[question], scope, version)
        # Only relations the global lane found by their keywords cite chunks into the ranking:
        # one-hop relations are ranked by degree, so their chunks lean to hubs (on the dev
        # set, bench/retrieval_eval.py, local mode finds both gold passages far less often
        # with them).
        searched = {relation.record.pair for relation in far.relations}
        found = [relation for relation in relations if relation.record.pair in searched]
        ranked = self._rank_chunks(plan, search, entities, found, params.chunk_top_k)
        chunks = fetch_chunks(stores, ranked, scope)
        budget = chunk_budget(params, entities, relations, self.tokenizer, lines)
        chunks = cut_chunks(chunks, budget, self.tokenizer)
        return Retrieval(
            mode=params.mode,
            keywords=keywords,
            entities=tuple(entities),
            relations=tuple(relations),
            chunks=tuple(chunks),
            references=references_of(chunks) if params.include_references else (),
            index_version=version,
        )

    def _graph_scope(self, scope: Scope, version: int) -> GraphScope:
        """`GraphScope.of` the scope, reused by the calls that read the same index version."""
        if scope.is_everything:
            return GraphScope(scope)
        found = self._graph_scopes.get(scope, version)
        if found is None:
            found = GraphScope.of(self.stores, scope)
            self._graph_scopes.put(scope, version, found)
        return found

    def _entities_within(
        self,
        ranked: Sequence[tuple[str, float]],
        reads: EntityReads,
        budget: int,
        lines: ContextLines,
    ) -> list[RetrievedEntity]:
        """The longest prefix of the `ranked` entities whose lines fit `budget`, their
        records read a slice at a time until the budget cuts inside what was read."""
        entities: list[RetrievedEntity] = []
        first = self.options.first_entity_read
        read, size = 0, first
        while True:
            end = min(read + size, len(ranked))
            entities += reads.read(ranked[read:end])
            read = end
            kept = cut_by_tokens(entities, lines.entity, budget, self.tokenizer)
            if read >= len(ranked) or len(kept) < len(entities):
                return kept
            size = self._room(kept, lines.entity, budget, first // 4)

    def _room(self, kept: Sequence[T], line: Callable[[T], str], budget: int, least: int) -> int:
        """About how many more items the budget has room for, at the kept ones' mean line
        length (a little over: reading too few costs another round trip), at least `least`."""
        used = sum(self.tokenizer.count(line(item)) for item in kept)
        mean = max(1.0, used / max(1, len(kept)))
        return max(1, least, math.ceil(1.25 * (budget - used) / mean))

    @staticmethod
    def _rank_chunks(
        plan: QueryPlan,
        search: ChunkSearch,
        entities: list[RetrievedEntity],
        relations: list[RetrievedRelation],
        chunk_top_k: int,
    ) -> list[tuple[str, float]]:
        """The chunk ids a plan returns, best first, with their scores.

        Without a graph lane: chunk vectors alone (cosine scores). With one: the chunks its
        entities and relations cite (ranked by relevance to the question) fused by rank,
        beside the question's own dense and lexical chunk searches when the plan runs them,
        and the bridge lane from the best three chunks (see gateway/retrieval.py).
        """
        wide = max(2 * chunk_top_k, _MIN_LANE)
        if not plan.reads_graph:
            return [(hit.key, hit.score) for hit in search.dense_hits(chunk_top_k)]
        graph_weight = plan.graph_chunk_weight
        lanes: list[Lane[str]] = []
        prefer: set[str] = set()
        if plan.question_chunks:
            dense, lexical = hit_keys(search.dense_hits(wide)), hit_keys(search.lexical_hits(wide))
            lanes += [Lane(dense), Lane(lexical)]
            prefer = {*dense, *lexical}
        sources: list[list[EntityRecord | RelationRecord]] = [
            [e.record for e in entities],
            [r.record for r in relations],
        ]
        groups = [
            [cited_chunks([record], prefer) for record in items] for items in sources if items
        ]
        unions = [[chunk for cited in group for chunk in cited] for group in groups]
        for group, ranked in zip(groups, search.relevant_each(unions, _RANKED_DEPTH), strict=True):
            lanes.append(Lane(ranked[:wide], graph_weight))
            lanes.append(Lane(_best_per_item(group, ranked), graph_weight * _ITEM_ORDER_WEIGHT))
        seeds = [key for key, _ in fuse(lanes)]
        lanes.append(Lane(search.bridge(seeds, wide), _BRIDGE_WEIGHT))
        return fuse(lanes)[:chunk_top_k]

    def _keywords_for(self, params: QueryParams) -> Keywords:
        given = Keywords(
            high_level=tuple(k.strip() for k in params.high_level_keywords if k.strip()),
            low_level=tuple(k.strip() for k in params.low_level_keywords if k.strip()),
        )
        if given.high_level or given.low_level:
            return given
        if not params.mode.plan.extracts_keywords:
            return given
        found = self.keywords.extract(params.question)
        if not found.high_level and not found.low_level:
            return Keywords(high_level=(), low_level=(params.question.strip(),))
        # As many as a request may pass: an LLM reply of thousands costs as much.
        most = self.options.limits.max_keywords
        low = found.low_level[:most]
        return Keywords(high_level=found.high_level[: most - len(low)], low_level=low)

    def _await_version(self, minimum: int, call: CallDeadline) -> int:
        """The index version, once it is >= `minimum` (`VersionWaits.reach` bounds the
        wait)."""
        return self.version_waits.reach(minimum, call)

    def _cache_key(self, params: QueryParams, version: int) -> Hashable | None:
        if self.llm is None or self.answer_cache.capacity == 0:
            return None
        # repr, not the dataclass itself: callers may build params with lists (unhashable).
        return (repr(replace(params, min_index_version=0)), version, self.llm.options.model)

    def _fixed_answer(self, params: QueryParams, retrieval: Retrieval) -> Answer:
        """The answer made without an LLM call: none is configured (the best-matching
        retrieved sentences, gateway/extractive.py), or nothing was retrieved (LightRAG's
        fail_response; asking a model about an empty context invites invention)."""
        text = extractive_answer(params, retrieval) if self.llm is None else NO_CONTEXT_ANSWER
        return Answer(retrieval, text, self.llm is not None, False, Usage())

    def _usage(self, messages: tuple[ChatMessage, ...], text: str) -> Usage:
        """Token counts by the local tokenizer (the chat client does not report usage)."""
        prompt = sum(self.tokenizer.count(message.content) for message in messages)
        return Usage(prompt_tokens=prompt, completion_tokens=self.tokenizer.count(text))
