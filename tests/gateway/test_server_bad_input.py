"""Unusual questions over the real gRPC wire: every mode, with and without scoping.

Questions with no keywords, only stopwords or punctuation, in non-Latin scripts, of emoji
only, or as long as allowed must get a result; longer ones and empty ones a clear
INVALID_ARGUMENT naming the field (and the limit). Never UNKNOWN or INTERNAL.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from gateway import convert
from gateway.engine import EngineOptions, QueryEngine
from gateway.keywords import OfflineKeywordExtractor
from gateway.types import (
    MAX_HISTORY_CHARS,
    MAX_HISTORY_TURNS,
    MAX_KEYWORD_CHARS,
    MAX_KEYWORDS,
    MAX_QUESTION_CHARS,
    MAX_USER_PROMPT_CHARS,
    Mode,
    RequestLimits,
)
from kgstream_protos.v1 import query_pb2 as pb
from kgstream_protos.v1 import query_pb2_grpc
from tests.dataflow.harness import TOKENIZER
from tests.gateway.corpus import Corpus
from tests.gateway.test_server import QUESTION, new_engine, running_gateway, status_of
from tests.support.llm_server import OpenAICompatibleServer

UNUSUAL_QUESTIONS = {
    "stopwords only": "what is the",
    "punctuation only": "?!",
    "cyrillic": "Кто руководит лабораторией?",
    "japanese": "東京タワーはどこですか",
    "arabic": "من يقود مشروع أطلس؟",
    "emoji only": "🔋⚡🌊",
    "mixed scripts": "Who leads the Atlas Project? Кто? 誰?",
}
SCOPES = {
    "unscoped": None,
    "doc_ids": pb.DocumentFilter(doc_ids=["projects/atlas.md", "kitchen/bread.md"]),
    "file_path_prefix": pb.DocumentFilter(file_path_prefix="companies/"),
}
MODES = [convert.mode_to_proto(mode) for mode in Mode]


@pytest.fixture(scope="module")
def no_llm(corpus: Corpus) -> Iterator[query_pb2_grpc.KnowledgeGraphStub]:
    with running_gateway(new_engine(corpus, None), corpus.stores.graph) as (_, channel):
        yield query_pb2_grpc.KnowledgeGraphStub(channel)


def request_for(question: str, mode: pb.QueryMode, scope: str) -> pb.QueryRequest:
    return pb.QueryRequest(question=question, mode=mode, document_filter=SCOPES[scope])


def in_scope(doc_id: str, scope: str) -> bool:
    wanted = SCOPES[scope]
    if wanted is None:
        return True
    if wanted.doc_ids:
        return doc_id in wanted.doc_ids
    return doc_id.startswith(wanted.file_path_prefix)


def assert_answered(
    stub: query_pb2_grpc.KnowledgeGraphStub, question: str, mode: pb.QueryMode
) -> None:
    """In every scope, Retrieve, Query and QueryStream succeed, agree, and respect it."""
    for scope in SCOPES:
        assert_answered_in(stub, request_for(question, mode, scope), scope)


def assert_answered_in(
    stub: query_pb2_grpc.KnowledgeGraphStub, request: pb.QueryRequest, scope: str
) -> None:
    retrieval = stub.Retrieve(request, timeout=60)
    response = stub.Query(request, timeout=60)
    events = list(stub.QueryStream(request, timeout=60))

    assert response.answer
    assert all(in_scope(chunk.doc_id, scope) for chunk in retrieval.chunks)
    assert response.context.chunks == retrieval.chunks
    assert events[0].context == response.context
    assert "".join(e.delta.text for e in events if e.HasField("delta")) == response.answer
    assert events[-1].WhichOneof("event") == "done"
    assert events[-1].done.llm_configured == response.llm_configured


@pytest.mark.parametrize("mode", MODES, ids=[mode.value for mode in Mode])
@pytest.mark.parametrize("question", UNUSUAL_QUESTIONS.values(), ids=UNUSUAL_QUESTIONS.keys())
def test_unusual_questions_get_a_result_in_every_mode_and_scope_without_an_llm(
    no_llm: query_pb2_grpc.KnowledgeGraphStub, question: str, mode: pb.QueryMode
) -> None:
    assert_answered(no_llm, question, mode)


@pytest.mark.parametrize("question", UNUSUAL_QUESTIONS.values(), ids=UNUSUAL_QUESTIONS.keys())
def test_unusual_questions_get_a_result_in_every_mode_and_scope_with_an_llm(
    corpus: Corpus, llm_server: OpenAICompatibleServer, question: str
) -> None:
    llm_server.default_reply = "An answer."
    with running_gateway(new_engine(corpus, llm_server), corpus.stores.graph) as (_, channel):
        stub = query_pb2_grpc.KnowledgeGraphStub(channel)
        for mode in MODES:
            assert_answered(stub, question, mode)


@pytest.mark.parametrize("mode", MODES, ids=[mode.value for mode in Mode])
def test_a_question_as_long_as_allowed_is_answered_in_every_mode_and_scope(
    no_llm: query_pb2_grpc.KnowledgeGraphStub, mode: pb.QueryMode
) -> None:
    question = ("Who leads the Atlas Project? " * 200)[:MAX_QUESTION_CHARS]
    for scope in SCOPES:
        response = no_llm.Query(request_for(question, mode, scope), timeout=60)
        assert response.answer
        assert all(in_scope(chunk.doc_id, scope) for chunk in response.context.chunks)


@pytest.mark.parametrize("mode", MODES, ids=[mode.value for mode in Mode])
def test_a_question_over_the_length_limit_is_invalid_argument_naming_the_field_and_limit(
    no_llm: query_pb2_grpc.KnowledgeGraphStub, mode: pb.QueryMode
) -> None:
    question = "Who leads the Atlas Project? " * 345  # 10,005 characters
    for scope in SCOPES:
        request = request_for(question, mode, scope)
        for call in (
            lambda r=request: no_llm.Retrieve(r, timeout=30),
            lambda r=request: no_llm.Query(r, timeout=30),
            lambda r=request: list(no_llm.QueryStream(r, timeout=30)),
        ):
            code, details = status_of(call)
            assert code == grpc.StatusCode.INVALID_ARGUMENT, details
            assert details.startswith("question:")
            assert f"{len(question)} characters" in details
            assert f"limit is {MAX_QUESTION_CHARS}" in details


@pytest.mark.parametrize("question", ["", "   ", "\n\t"], ids=["empty", "spaces", "whitespace"])
def test_an_empty_question_is_invalid_argument_naming_the_field(
    no_llm: query_pb2_grpc.KnowledgeGraphStub, question: str
) -> None:
    for mode in MODES:
        request = request_for(question, mode, "unscoped")
        code, details = status_of(lambda r=request: no_llm.Query(r, timeout=30))
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert details.startswith("question:") and "is empty" in details


def test_keywords_over_the_count_or_length_limit_are_invalid_argument_naming_limit_and_size(
    no_llm: query_pb2_grpc.KnowledgeGraphStub,
) -> None:
    many = [f"keyword {i}" for i in range(10_000)]  # took 49 s before the limit
    cases = {
        "low_level_keywords: 10000 keywords given": pb.QueryRequest(low_level_keywords=many),
        f"high_level_keywords: {MAX_KEYWORDS + 1} keywords given": pb.QueryRequest(
            question="Who?", high_level_keywords=many[: MAX_KEYWORDS + 1]
        ),
        f"low_level_keywords: {MAX_KEYWORDS + 1} keywords given": pb.QueryRequest(
            high_level_keywords=many[:50], low_level_keywords=many[50 : MAX_KEYWORDS + 1]
        ),
        "low_level_keywords[1]: is 201 characters long": pb.QueryRequest(
            low_level_keywords=["Atlas Project", "x" * (MAX_KEYWORD_CHARS + 1)]
        ),
    }
    for expected, request in cases.items():
        for call in (
            lambda r=request: no_llm.Retrieve(r, timeout=10),
            lambda r=request: no_llm.Query(r, timeout=10),
            lambda r=request: list(no_llm.QueryStream(r, timeout=10)),
        ):
            code, details = status_of(call)
            assert code == grpc.StatusCode.INVALID_ARGUMENT, details
            assert details.startswith(expected), details
            limit = MAX_KEYWORD_CHARS if "characters" in expected else MAX_KEYWORDS
            assert f"the limit is {limit}" in details, details


def test_prompts_and_history_over_their_limits_never_reach_the_llm(
    corpus: Corpus, llm_server: OpenAICompatibleServer
) -> None:
    def turn(content: str, role: str = "user") -> pb.ConversationTurn:
        return pb.ConversationTurn(role=role, content=content)

    huge = "Tell me everything. " * 500_000  # 10 MB
    many = [turn(f"message {i}", "user" if i % 2 else "assistant") for i in range(10_002)]
    long_turns = [turn("x" * (MAX_HISTORY_CHARS // 2)), turn("y" * (MAX_HISTORY_CHARS // 2 + 1))]
    cases = {
        f"user_prompt: is {len(huge)} characters long; the limit is {MAX_USER_PROMPT_CHARS}": (
            pb.QueryRequest(question=QUESTION, user_prompt=huge)
        ),
        f"response_type: is {MAX_USER_PROMPT_CHARS + 1} characters long": pb.QueryRequest(
            question=QUESTION, response_type="x" * (MAX_USER_PROMPT_CHARS + 1)
        ),
        f"history: has 10002 turns; the limit is {MAX_HISTORY_TURNS}": pb.QueryRequest(
            question=QUESTION, history=many
        ),
        f"history: is {MAX_HISTORY_CHARS + 1} characters long, every turn together": (
            pb.QueryRequest(question=QUESTION, history=long_turns)
        ),
    }
    calls_before = llm_server.count()
    with running_gateway(new_engine(corpus, llm_server), corpus.stores.graph) as (_, channel):
        stub = query_pb2_grpc.KnowledgeGraphStub(channel)
        for expected, request in cases.items():
            for call in (
                lambda r=request: stub.Query(r, timeout=30),
                lambda r=request: list(stub.QueryStream(r, timeout=30)),
            ):
                code, details = status_of(call)
                assert code == grpc.StatusCode.INVALID_ARGUMENT, details
                assert details.startswith(expected), details
        assert llm_server.count() == calls_before
        at_limits = pb.QueryRequest(
            question=QUESTION,
            user_prompt="Answer briefly. " * (MAX_USER_PROMPT_CHARS // 16),
            history=many[-MAX_HISTORY_TURNS:],
        )
        assert stub.Query(at_limits, timeout=60).answer
    assert llm_server.count() > calls_before


def test_keywords_at_the_limits_are_answered(no_llm: query_pb2_grpc.KnowledgeGraphStub) -> None:
    request = pb.QueryRequest(
        high_level_keywords=[f"theme {i}" for i in range(MAX_KEYWORDS - 1)],
        low_level_keywords=["Atlas Project " + "x" * (MAX_KEYWORD_CHARS - 14)],
    )
    assert no_llm.Retrieve(request, timeout=60).index_version > 0


def test_request_limits_are_settings(corpus: Corpus) -> None:
    limits = RequestLimits(max_question_chars=10, max_keywords=2, max_keyword_chars=5)
    options = EngineOptions(limits=limits)
    engine = QueryEngine(
        corpus.stores, corpus.embedder, TOKENIZER, OfflineKeywordExtractor(), options=options
    )
    with running_gateway(engine, corpus.stores.graph) as (_, channel):
        stub = query_pb2_grpc.KnowledgeGraphStub(channel)
        for request, expected in (
            (pb.QueryRequest(question="Who leads it?"), "question: is 13 characters long"),
            (pb.QueryRequest(low_level_keywords=["a", "b", "c"]), "low_level_keywords: 3"),
            (pb.QueryRequest(low_level_keywords=["abcdef"]), "low_level_keywords[0]: is 6"),
        ):
            code, details = status_of(lambda r=request: stub.Retrieve(r, timeout=10))
            assert code == grpc.StatusCode.INVALID_ARGUMENT
            assert details.startswith(expected), details
        assert stub.Retrieve(pb.QueryRequest(question="Atlas?"), timeout=30).index_version > 0
