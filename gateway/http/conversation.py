"""The answer to a conversation, shared by the chat doors: OpenAI's `/v1/chat/completions`
(`gateway/http/chat.py`) and Ollama's `/api/chat` and `/api/generate`
(`gateway/http/ollama.py`). Each door reads its own request shape into turns and a model,
and writes the answer in its own reply shape; between the two, one path: the turns become a
`QueryRequest` here, and `Query` (or `QueryStream`) answers it, as over gRPC.

The last turn is the question (it must be the user's); the earlier user and assistant turns
are the conversation history, and system turns become the answer's extra instructions
(`user_prompt`). Without an LLM the answer is the extractive one. The answer text ends with a
"References" list of the sources (added when the answer has none of its own), and the
references themselves travel beside it (`Completion.references`, `Opened.references`), with
the `index_version` answered at.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from gateway.convert import mode_to_proto
from gateway.http.app import call_of, started
from gateway.http.calls import CallFailed, HttpCall
from gateway.http.errors import Refusal
from gateway.http.messages import to_json
from gateway.knowledge_graph import KnowledgeGraphService
from gateway.types import DEFAULT_MODE, MODE_NAMES, InvalidQuery, Mode, parse_mode
from kgstream_protos.v1 import query_pb2

TURN_ROLES = ("system", "user", "assistant")
_REFERENCES_HEADING = re.compile(r"^\W*references\b", re.IGNORECASE | re.MULTILINE)


def model_names(spelling: Callable[[str], str]) -> tuple[str, ...]:
    """The modes' models in a door's `spelling`, the default mode's first: chat front ends
    preselect the first model listed."""
    others = (name for name in MODE_NAMES if name != DEFAULT_MODE.value)
    return tuple(spelling(name) for name in (DEFAULT_MODE.value, *others))


def mode_of_model(model: object, spelling: Callable[[str], str]) -> Mode:
    """The query mode a door's model name answers in (`spelling`: a mode's name as the
    door's model name); an unknown name is 404 `model_not_found`, as OpenAI and Ollama
    answer for a model they do not have, listing the models there are."""
    try:
        return parse_mode(model, "model", spelling=spelling, default=None)
    except InvalidQuery as error:
        if isinstance(model, str) and model:
            raise Refusal(404, str(error), "model", "model_not_found") from None
        raise Refusal(400, str(error), "model", "invalid_model") from None


def conversation_request(
    mode: Mode, turns: Sequence[tuple[str, str]], field: str = "messages"
) -> query_pb2.QueryRequest:
    """The `QueryRequest` of a conversation: `turns` are (role, text), roles `TURN_ROLES`,
    oldest first; `field` is where the door's request holds them (for the messages)."""
    if not turns:
        raise Refusal(400, f"{field}: must be a non-empty list", field, "invalid_messages")
    if turns[-1][0] != "user":
        raise Refusal(
            400, f"{field}: the last message must be the user's question", field, "invalid_messages"
        )
    instructions = "\n".join(text for role, text in turns if role == "system")
    history = [
        query_pb2.ConversationTurn(role=role, content=text)
        for role, text in turns[:-1]
        if role != "system"
    ]
    return query_pb2.QueryRequest(
        question=turns[-1][1], mode=mode_to_proto(mode), history=history, user_prompt=instructions
    )


def references_tail(answer: str, references: Sequence[query_pb2.Reference]) -> str:
    """What ends `answer` with a "References" list of `references`: "" when it has one
    already (the LLM is asked to write one) or there are none. A streamed answer appends it
    to the text it sent, a whole one to its text, so both read the same."""
    if not references or _REFERENCES_HEADING.search(answer):
        return ""
    listed = "\n".join(f"- [{r.reference_id}] {r.file_path}" for r in references)
    newlines = len(answer) - len(answer.rstrip("\n"))
    separator = "\n" * max(0, 2 - newlines) if answer.strip() else ""
    return f"{separator}References:\n{listed}"


@dataclass(frozen=True)
class Tokens:
    """The answer's token counts, as the LLM client counted them (0 without an LLM)."""

    prompt: int
    completion: int

    @classmethod
    def of(cls, usage: query_pb2.Usage) -> Tokens:
        return cls(int(usage.prompt_tokens), int(usage.completion_tokens))


@dataclass(frozen=True)
class Completion:
    """A whole answer: its text (with the references list), the references as JSON, the
    token counts and the index version it was answered at."""

    text: str
    references: list[dict[str, Any]]
    tokens: Tokens
    index_version: int


# The pieces of a streamed answer, in order: Opened, Delta 0..n, then Closed or Broken.
@dataclass(frozen=True)
class Opened:
    """The context is retrieved: the references and the index version, before any text."""

    references: list[dict[str, Any]]
    index_version: int


@dataclass(frozen=True)
class Delta:
    text: str


@dataclass(frozen=True)
class Closed:
    tokens: Tokens


@dataclass(frozen=True)
class Broken:
    """The call failed after the answer started (a 200 was sent): the door says so in-band."""

    refusal: Refusal


Piece = Opened | Delta | Closed | Broken


@dataclass(frozen=True)
class StreamedAnswer:
    """A started answer: its pieces, and the call, which the door's response finishes."""

    pieces: Iterator[Piece]
    call: HttpCall


class Answers:
    """`Query` and `QueryStream` for the chat doors, with `Refusal`s for failed calls."""

    def __init__(self, knowledge_graph: KnowledgeGraphService) -> None:
        self._knowledge_graph = knowledge_graph

    async def complete(self, request: Request, message: query_pb2.QueryRequest) -> Completion:
        call = call_of(request)
        try:
            reply = await run_in_threadpool(self._knowledge_graph.Query, message, call)
        except CallFailed as failure:
            raise Refusal.of(failure) from None
        finally:
            call.finish()
        return Completion(
            text=reply.answer + references_tail(reply.answer, reply.context.references),
            references=[to_json(r) for r in reply.context.references],
            tokens=Tokens.of(reply.usage),
            index_version=reply.index_version,
        )

    async def stream(self, request: Request, message: query_pb2.QueryRequest) -> StreamedAnswer:
        """The answer as pieces; a request refused before the answer starts raises
        `Refusal` here, so the door can still answer with its status."""
        call = call_of(request)
        try:
            events = await started(self._knowledge_graph.QueryStream(message, call), call)
        except CallFailed as failure:
            raise Refusal.of(failure) from None
        return StreamedAnswer(_pieces(events), call)


def _pieces(events: Iterator[query_pb2.QueryEvent]) -> Iterator[Piece]:
    references: list[query_pb2.Reference] = []
    answer: list[str] = []
    try:
        for event in events:
            kind = event.WhichOneof("event")
            if kind == "context":
                references = list(event.context.references)
                yield Opened([to_json(r) for r in references], event.context.index_version)
            elif kind == "delta":
                answer.append(event.delta.text)
                yield Delta(event.delta.text)
            elif kind == "done":
                tail = references_tail("".join(answer), references)
                if tail:
                    yield Delta(tail)
                yield Closed(Tokens.of(event.done.usage))
    except CallFailed as failure:
        yield Broken(Refusal.of(failure))
