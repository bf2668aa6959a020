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
from gateway.types import MAX_QUESTION_CHARS, Mode
from protos.kgstream.v1 import query_pb2 as pb
from protos.kgstream.v1 import query_pb2_grpc
from tests.gateway.corpus import Corpus
from tests.gateway.test_server import new_engine, running_gateway, status_of
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
