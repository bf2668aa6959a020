"""Answers, the answer cache, streaming and keyword extraction, against the
OpenAI-compatible test server over real HTTP and a corpus indexed by the real dataflow."""

from __future__ import annotations

import threading

import pytest

from connectors.llm.client import ChatClient, InMemoryResponseCache, LLMOptions
from dataflow.core.commit import GraphBatch
from gateway.engine import QueryEngine
from gateway.extractive import EXTRACTIVE_NOTE
from gateway.keywords import (
    LLMKeywordExtractor,
    OfflineKeywordExtractor,
    UnparseableKeywords,
    parse_keywords,
)
from gateway.prompts import NO_CONTEXT_ANSWER
from gateway.types import NO_LLM_ANSWER, Keywords, Mode, QueryParams, Turn, Usage
from tests.dataflow.harness import TOKENIZER
from tests.support.wait import wait_until

LEADER = "Who leads the Atlas Project?"
LEADER_CHUNK = "Carla Diaz leads the Atlas Project at Northwind Labs."
PARAMS = QueryParams(
    LEADER,
    mode=Mode.MIX,
    top_k=3,
    chunk_top_k=3,
    user_prompt="Answer in one sentence.",
    history=(Turn("user", "Hello"), Turn("assistant", "Hi, ask me about the corpus.")),
)


def chat_client(server, cache=None):
    return ChatClient(
        LLMOptions(base_url=server.base_url, model="test-chat-model", max_retries=0),
        cache=cache,
    )


@pytest.fixture
def llm(llm_server):
    client = chat_client(llm_server)
    yield client
    client.close()


def engine_for(corpus, llm=None, keywords=None):
    return QueryEngine(
        corpus.stores, corpus.embedder, TOKENIZER, keywords or OfflineKeywordExtractor(), llm
    )


# -- answers -------------------------------------------------------------------------------


def test_without_an_llm_the_answer_quotes_the_best_matching_sentence_and_says_why(corpus):
    answer = engine_for(corpus).answer(PARAMS)

    reference = {r.file_path: r.reference_id for r in answer.retrieval.references}
    first_line = answer.text.splitlines()[0]
    assert first_line == f"{LEADER_CHUNK} [{reference['projects/atlas.md']}]"
    assert answer.text.endswith(EXTRACTIVE_NOTE)
    assert answer.llm_configured is False and answer.cached is False
    assert LEADER_CHUNK in [chunk.text for chunk in answer.retrieval.chunks]
    assert "carla diaz" in [entity.record.key for entity in answer.retrieval.entities]

    retrieval, stream = engine_for(corpus).stream_answer(PARAMS)
    assert "".join(stream) == answer.text and retrieval == answer.retrieval
    assert stream.llm_configured is False


def test_without_an_llm_and_nothing_retrieved_the_answer_says_no_llm_is_configured(corpus):
    params = QueryParams(LEADER, mode=Mode.LOCAL, doc_ids=("no-such-document.md",))
    answer = engine_for(corpus).answer(params)

    assert answer.text == NO_LLM_ANSWER and answer.retrieval.chunks == ()


def test_answer_sends_the_context_history_and_question_and_returns_the_reply(
    corpus, llm, llm_server
):
    llm_server.queue_replies("Carla Diaz leads the Atlas Project [1].")
    answer = engine_for(corpus, llm).answer(PARAMS)

    assert answer.text == "Carla Diaz leads the Atlas Project [1]."
    assert answer.llm_configured is True and answer.cached is False
    assert answer.usage.prompt_tokens > 100
    assert answer.usage.completion_tokens == TOKENIZER.count(answer.text)
    (body,) = llm_server.bodies()
    roles = [message["role"] for message in body["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    system = body["messages"][0]["content"]
    assert '"content": "' + LEADER_CHUNK + '"' in system
    assert '"entity": "Carla Diaz"' in system
    assert "[1] projects/atlas.md" in system
    assert "Additional user prompt: Answer in one sentence." in system
    assert "Target format and length: Multiple Paragraphs" in system
    assert body["messages"][1]["content"] == "Hello"
    assert body["messages"][-1]["content"] == LEADER


def test_a_repeated_question_is_answered_from_the_cache_until_the_index_changes(
    corpus, llm, llm_server
):
    llm_server.queue_replies("first answer", "second answer")
    engine = engine_for(corpus, llm)

    first = engine.answer(PARAMS)
    again = engine.answer(PARAMS)
    assert (first.text, again.text) == ("first answer", "first answer")
    assert again.cached is True and again.usage.prompt_tokens == 0
    assert again.retrieval == first.retrieval
    assert llm_server.chat_calls == 1

    other = engine.answer(QueryParams(LEADER, mode=Mode.MIX, top_k=3, chunk_top_k=3))
    assert other.text == "second answer" and llm_server.chat_calls == 2  # other fields

    llm_server.queue_replies("after the change")
    corpus.stores.graph.apply(GraphBatch())  # a new index version, same content
    fresh = engine.answer(PARAMS)
    assert fresh.text == "after the change" and fresh.cached is False
    assert fresh.retrieval.index_version == first.retrieval.index_version + 1
    assert llm_server.chat_calls == 3


def test_nothing_retrieved_means_no_llm_call(corpus, llm, llm_server):
    params = QueryParams(LEADER, mode=Mode.LOCAL, doc_ids=("no-such-document.md",))
    answer = engine_for(corpus, llm).answer(params)
    assert answer.text == NO_CONTEXT_ANSWER
    assert answer.retrieval.chunks == () and llm_server.chat_calls == 0


# -- streaming -----------------------------------------------------------------------------


def test_stream_answer_gives_the_retrieval_then_the_deltas_in_order(corpus, llm, llm_server):
    llm_server.queue_replies(["Carla ", "Diaz ", "leads ", "it."])
    engine = engine_for(corpus, llm)

    retrieval, stream = engine.stream_answer(PARAMS)
    assert LEADER_CHUNK in [chunk.text for chunk in retrieval.chunks]
    assert list(stream) == ["Carla ", "Diaz ", "leads ", "it."]
    assert stream.usage.completion_tokens == TOKENIZER.count("Carla Diaz leads it.")
    assert stream.usage.prompt_tokens > 100

    cached = engine.answer(PARAMS)  # a finished stream fills the answer cache
    assert cached.text == "Carla Diaz leads it." and cached.cached is True
    assert llm_server.chat_calls == 1
    _, replay = engine.stream_answer(PARAMS)
    assert list(replay) == ["Carla Diaz leads it."] and llm_server.chat_calls == 1


def test_closing_a_stream_early_drops_the_http_stream_and_caches_nothing(corpus, llm, llm_server):
    llm_server.delta_delay_seconds = 0.02
    llm_server.queue_replies([f"word{i} " for i in range(100)])
    engine = engine_for(corpus, llm)

    _, stream = engine.stream_answer(PARAMS)
    deltas = iter(stream)
    assert next(deltas) == "word0 "
    stream.close()
    wait_until(lambda: llm_server.aborted_streams == 1, 30, "the stream to be aborted")

    llm_server.delta_delay_seconds = 0.0
    llm_server.queue_replies("complete answer")
    assert engine.answer(PARAMS).text == "complete answer"
    assert llm_server.chat_calls == 2


# -- keywords ------------------------------------------------------------------------------


def test_llm_keyword_extraction_parses_the_json_and_is_cached(llm_server):
    client = chat_client(llm_server, cache=InMemoryResponseCache())
    llm_server.queue_replies(
        '```json\n{"high_level_keywords": ["Project leadership"], '
        '"low_level_keywords": ["Atlas Project", "Carla Diaz"]}\n```'
    )
    extractor = LLMKeywordExtractor(client)
    expected = Keywords(
        high_level=("Project leadership",), low_level=("Atlas Project", "Carla Diaz")
    )

    assert extractor.extract(LEADER) == expected
    assert extractor.extract(LEADER) == expected
    assert llm_server.chat_calls == 1
    (body,) = llm_server.bodies()
    assert LEADER in body["messages"][-1]["content"]
    assert "high_level_keywords" in body["messages"][0]["content"]
    client.close()


def test_explicit_keywords_skip_llm_extraction(corpus, llm, llm_server):
    engine = engine_for(corpus, keywords=LLMKeywordExtractor(llm))
    params = QueryParams(LEADER, mode=Mode.LOCAL, top_k=2, low_level_keywords=("Carla Diaz",))

    retrieval = engine.retrieve(params)
    assert retrieval.keywords == Keywords(high_level=(), low_level=("Carla Diaz",))
    assert llm_server.chat_calls == 0

    llm_server.queue_replies('{"high_level_keywords": [], "low_level_keywords": ["Kenya"]}')
    extracted = engine.retrieve(QueryParams(LEADER, mode=Mode.LOCAL, top_k=1))
    assert extracted.keywords.low_level == ("Kenya",)
    assert [entity.record.key for entity in extracted.entities] == ["kenya"]
    assert llm_server.chat_calls == 1


def test_an_unparseable_keyword_reply_falls_back_to_offline_keywords(llm, llm_server):
    llm_server.queue_replies("Sorry, I can't help with that.")
    keywords = LLMKeywordExtractor(llm).extract(LEADER)
    assert keywords == OfflineKeywordExtractor().extract(LEADER)


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (
            '{"high_level_keywords": ["a b"], "low_level_keywords": ["X"]}',
            Keywords(("a b",), ("X",)),
        ),
        (
            "<think>plan</think>Here you go:\n{'high_level_keywords': ['theme',], "
            "'low_level_keywords': 'Alpha, Beta'} Done.",
            Keywords(("theme",), ("Alpha", "Beta")),
        ),
        (
            '{"low_level_keywords": ["X", " x ", ""], "other": 1}',
            Keywords((), ("X",)),
        ),
    ],
)
def test_keyword_replies_are_parsed_tolerantly(reply, expected):
    assert parse_keywords(reply) == expected


@pytest.mark.parametrize("reply", ["no json here", '{"answer": 42}', "[1, 2]"])
def test_keyword_replies_without_keyword_lists_are_rejected(reply):
    with pytest.raises(UnparseableKeywords):
        parse_keywords(reply)


@pytest.mark.parametrize(
    ("question", "high", "low"),
    [
        (LEADER, ("leads",), ("Atlas Project",)),
        (
            "Which companies work on renewable energy?",
            ("companies work", "renewable energy"),
            ("companies work", "renewable energy"),
        ),
        ('What are "solar batteries" used for in Kenya?', ("used",), ("solar batteries", "Kenya")),
        ("Who's Bob Tanaka's employer?", ("employer",), ("Bob Tanaka",)),
        ("what?", (), ("what?",)),
    ],
)
def test_offline_keywords_split_names_from_themes_and_are_never_empty(question, high, low):
    assert OfflineKeywordExtractor().extract(question) == Keywords(high_level=high, low_level=low)


def test_closing_a_stream_from_another_thread_ends_the_reader_quietly(corpus, llm, llm_server):
    llm_server.delta_delay_seconds = 0.2
    llm_server.queue_replies([f"word{i} " for i in range(100)])
    _, stream = engine_for(corpus, llm).stream_answer(PARAMS)
    received, failures = [], []
    first = threading.Event()

    def read():
        try:
            for delta in stream:
                received.append(delta)
                first.set()
        except Exception as error:  # the test asserts there is none
            failures.append(error)

    reader = threading.Thread(target=read)
    reader.start()
    assert first.wait(timeout=5)
    stream.close()
    reader.join(timeout=5)
    assert not reader.is_alive()
    assert failures == [] and 1 <= len(received) < 100
    assert stream.usage == Usage()  # not completed: no usage, nothing cached
