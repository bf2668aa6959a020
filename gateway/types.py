"""The query engine's vocabulary, independent of gRPC (gateway/convert.py converts).

Defaults are LightRAG's (QueryParam): top_k 40, chunk_top_k 20, entity tokens
6000, relation tokens 8000, total tokens 30000, mode mix.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

from dataflow.core.contributions import EntityRecord, RelationRecord


class Mode(enum.Enum):
    """LightRAG's query modes, by the names every door takes (`parse_mode`); `plan` is what
    each one runs (`PLANS`)."""

    LOCAL = "local"
    GLOBAL = "global"
    HYBRID = "hybrid"
    NAIVE = "naive"
    MIX = "mix"

    @property
    def plan(self) -> QueryPlan:
        return PLANS[self]


@dataclass(frozen=True)
class QueryPlan:
    """What a query mode retrieves: gateway/engine.py executes a plan, the lanes are in
    gateway/retrieval.py.

    `entity_lane`: entities found by the low-level keywords (names first, then vectors),
    and their one-hop relations. `relation_lane`: relations found by the high-level
    keywords, and their endpoint entities. `question_chunks`: the question's own chunk
    searches; alone they are the answer (its dense hits, best first), beside a graph lane
    they are two more lanes (dense and lexical) of the chunk fusion.
    `graph_chunk_weight`: the weight, in that fusion, of the lanes of chunks the graph
    lanes' entities and relations cite (0 without a graph lane).
    """

    entity_lane: bool
    relation_lane: bool
    question_chunks: bool
    graph_chunk_weight: float

    def __post_init__(self) -> None:
        if not (self.reads_graph or self.question_chunks):
            raise ValueError(f"a query plan runs at least one lane; got {self}")
        if (self.graph_chunk_weight > 0) != self.reads_graph:
            raise ValueError(
                f"graph_chunk_weight must be > 0 with a graph lane and 0 without one; got {self}"
            )

    @property
    def reads_graph(self) -> bool:
        """Whether an entity or relation lane runs (naive reads no graph)."""
        return self.entity_lane or self.relation_lane

    @property
    def extracts_keywords(self) -> bool:
        """Whether the question's keywords are extracted: they steer the graph lanes only,
        so a plan without one asks no LLM for them."""
        return self.reads_graph


# The one table of what each mode runs: the engine reads it, every door parses into it.
PLANS: Mapping[Mode, QueryPlan] = MappingProxyType(
    {
        Mode.LOCAL: QueryPlan(
            entity_lane=True, relation_lane=False, question_chunks=False, graph_chunk_weight=1.0
        ),
        Mode.GLOBAL: QueryPlan(
            entity_lane=False, relation_lane=True, question_chunks=False, graph_chunk_weight=1.0
        ),
        Mode.HYBRID: QueryPlan(
            entity_lane=True, relation_lane=True, question_chunks=False, graph_chunk_weight=1.0
        ),
        Mode.NAIVE: QueryPlan(
            entity_lane=False, relation_lane=False, question_chunks=True, graph_chunk_weight=0.0
        ),
        # The graph's chunk lanes weigh less beside the question's own searches.
        Mode.MIX: QueryPlan(
            entity_lane=True, relation_lane=True, question_chunks=True, graph_chunk_weight=0.3
        ),
    }
)
MODE_NAMES: tuple[str, ...] = tuple(mode.value for mode in Mode)
DEFAULT_MODE = Mode.MIX


def _as_named(name: str) -> str:
    return name


def parse_mode(
    value: object,
    field: str = "mode",
    spelling: Callable[[str], str] = _as_named,
    default: Mode | None = DEFAULT_MODE,
) -> Mode:
    """The mode `value` names, in a door's spelling of `MODE_NAMES` (chat's models are
    "kgstream-mix", the gRPC enum's values QUERY_MODE_MIX); None (unset) is `default`.

    Every door parses its mode here, so each refuses one the table does not have with
    the same message: `InvalidQuery` naming the field, the value and the names it takes.
    """
    if value is None and default is not None:
        return default
    for mode in Mode:
        if value == spelling(mode.value):
            return mode
    names = ", ".join(spelling(name) for name in MODE_NAMES)
    unset = f" (or leave it unset for {spelling(default.value)})" if default is not None else ""
    raise InvalidQuery(field, f"must be one of {names}{unset}; got {shown(value)}")


HISTORY_ROLES = ("user", "assistant")


@dataclass(frozen=True)
class Turn:
    """One message of conversation history."""

    role: str  # one of HISTORY_ROLES
    content: str


@dataclass(frozen=True)
class QueryParams:
    question: str
    mode: Mode = DEFAULT_MODE
    top_k: int = 40
    chunk_top_k: int = 20
    max_entity_tokens: int = 6000
    max_relation_tokens: int = 8000
    max_total_tokens: int = 30000
    response_type: str = "Multiple Paragraphs"
    history: tuple[Turn, ...] = ()
    user_prompt: str = ""
    high_level_keywords: tuple[str, ...] = ()
    low_level_keywords: tuple[str, ...] = ()
    include_references: bool = True
    min_index_version: int = 0
    doc_ids: tuple[str, ...] = ()
    file_path_prefix: str | None = None


@dataclass(frozen=True)
class Keywords:
    high_level: tuple[str, ...]
    low_level: tuple[str, ...]


@dataclass(frozen=True)
class RetrievedEntity:
    record: EntityRecord
    score: float  # vector similarity of the best keyword match (0 when reached via a relation)
    degree: int


@dataclass(frozen=True)
class RetrievedRelation:
    record: RelationRecord
    score: float
    degree: int  # edge degree: sum of the endpoints' degrees


@dataclass(frozen=True)
class RetrievedChunk:
    chunk_id: str
    doc_id: str
    file_path: str
    text: str
    score: float


@dataclass(frozen=True)
class Reference:
    """A source the context drew on, in rank order (LightRAG's reference list)."""

    reference_id: int
    file_path: str
    chunk_ids: tuple[str, ...]


@dataclass(frozen=True)
class Retrieval:
    """The context of one question: what `Retrieve` returns and `Query` answers from."""

    mode: Mode
    keywords: Keywords
    entities: tuple[RetrievedEntity, ...]
    relations: tuple[RetrievedRelation, ...]
    chunks: tuple[RetrievedChunk, ...]
    references: tuple[Reference, ...]
    index_version: int


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class Answer:
    retrieval: Retrieval
    text: str
    llm_configured: bool
    cached: bool
    usage: Usage


MAX_QUESTION_CHARS = 4000
"""The longest question accepted by default, in characters (setting `max_question_chars`;
-> INVALID_ARGUMENT naming the limit).

A question is a sentence or a paragraph; 4000 characters is about 800 words, far more
than a question needs. Keyword extraction (offline or by the LLM), the embedding and the
answer prompt take the whole question on every call, so an unbounded one costs time and
tokens for nothing (a 10 MB question keeps a core busy for minutes); longer text belongs
in a document, not a query.
"""

MAX_KEYWORDS = 100
"""Keywords a request may pass, both levels together, by default (setting `max_keywords`):
each is embedded and looked up, so 10,000 of them take most of a minute. Keywords the LLM
extracts are cut to the same number."""

MAX_KEYWORD_CHARS = 200
"""The longest keyword accepted by default (setting `max_keyword_chars`): a keyword is a
name or a theme of a few words."""

MAX_USER_PROMPT_CHARS = 4000
"""The longest `user_prompt` (and `response_type`) accepted by default, in characters
(setting `max_user_prompt_chars`). Both are instructions added to the answer prompt on
every call ("answer in a table"); like the question, an unbounded one costs tokens and CPU
on every call, and long text belongs in a document."""

MAX_HISTORY_TURNS = 100
"""Conversation turns a request may carry by default (setting `max_history_turns`). Chat
front ends send the whole conversation with each message; every turn goes to the LLM with
the answer prompt, so a request of 10,000 messages would cost a long call for nothing."""

MAX_HISTORY_CHARS = 100_000
"""The history's characters, every turn together, accepted by default (setting
`max_history_chars`): about 25,000 tokens, as much again as the default context budget
(`max_total_tokens`), so a long conversation fits while a 10 MB one is refused."""


@dataclass(frozen=True)
class RequestLimits:
    """The largest request the engine takes (settings of the same names); over one:
    INVALID_ARGUMENT naming the limit and the size received."""

    max_question_chars: int = MAX_QUESTION_CHARS
    max_keywords: int = MAX_KEYWORDS
    max_keyword_chars: int = MAX_KEYWORD_CHARS
    max_user_prompt_chars: int = MAX_USER_PROMPT_CHARS
    max_history_turns: int = MAX_HISTORY_TURNS
    max_history_chars: int = MAX_HISTORY_CHARS

    def __post_init__(self) -> None:
        for field_ in dataclasses.fields(self):
            if getattr(self, field_.name) < 1:
                raise ValueError(f"{field_.name} must be >= 1; got {getattr(self, field_.name)}")


NO_LLM_ANSWER = (
    "No LLM is configured, so kgstream returns the retrieved context without an answer. "
    "Set OPENAI_BASE_URL (and OPENAI_API_KEY, KGSTREAM_LLM_MODEL) to get answers."
)


class AnswerStream(Protocol):
    """Answer text deltas; closing it stops the LLM call. `llm_configured` is False for
    the extractive answer made without a model (QueryStream's done event says so)."""

    llm_configured: bool

    def __iter__(self) -> Iterator[str]: ...

    def close(self) -> None: ...


SHOWN_CHARS = 100
"""How much of a client's value an error message quotes. Status details travel in the
trailing metadata, whose size clients cap (8 KiB by default): an echoed 1 MB name would
turn the answer into RESOURCE_EXHAUSTED, and would fill logs besides."""


def shown(value: object) -> str:
    """`value` for an error message, quoted when it is text: whole up to `SHOWN_CHARS`,
    else its start and its length (`'Carla Diaz ...'... (1048576 characters)`)."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= SHOWN_CHARS:
        return repr(value)
    start = repr(text[:SHOWN_CHARS]) if isinstance(value, str) else text[:SHOWN_CHARS]
    return f"{start}... ({len(text)} characters)"


class InvalidQuery(ValueError):
    """A request the engine cannot run; `field` names the culprit (-> INVALID_ARGUMENT)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.detail = message  # what is wrong with the field, without its name


class IndexVersionTimeout(TimeoutError):
    """`min_index_version` was not reached before the deadline (-> DEADLINE_EXCEEDED)."""


class TooManyVersionWaits(RuntimeError):
    """As many calls as allowed wait for `min_index_version` already (-> RESOURCE_EXHAUSTED):
    each waiting call holds a gRPC worker, and the others must stay free for everyone else."""


class CallAbandoned(RuntimeError):
    """The client cancelled the call or left: the work stops (-> CANCELLED)."""


class DeadlinePassed(CallAbandoned):
    """The call's deadline passed before its work was done (-> DEADLINE_EXCEEDED)."""


def _always_active() -> bool:
    return True


@dataclass(frozen=True)
class CallDeadline:
    """When a call stops being worth working on: at `at` (`time.monotonic()` seconds; None:
    no deadline), or as soon as `is_active` turns False (the client cancelled or left).

    The engine checks it between stages (`check`), so a call the client gave up on does
    not go on to embed, search or ask the LLM."""

    at: float | None = None
    is_active: Callable[[], bool] = _always_active

    def remaining(self) -> float | None:
        return None if self.at is None else self.at - time.monotonic()

    def passed(self) -> bool:
        return self.at is not None and time.monotonic() >= self.at

    def abandoned(self) -> bool:
        return self.passed() or not self.is_active()

    def check(self, stage: str) -> None:
        """Raise `DeadlinePassed` or `CallAbandoned` naming `stage` (what would have run
        next) when the call is abandoned."""
        if self.passed():
            raise DeadlinePassed(f"the call's deadline passed before {stage}")
        if not self.is_active():
            raise CallAbandoned(f"the call was cancelled before {stage}")


def call_deadline(deadline: float | CallDeadline | None) -> CallDeadline:
    """The engine's `deadline` argument as a `CallDeadline` (a bare float is `at`)."""
    if isinstance(deadline, CallDeadline):
        return deadline
    return CallDeadline(at=deadline)
