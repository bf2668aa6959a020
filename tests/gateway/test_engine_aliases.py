"""Entities found by the short forms and speaker labels the extractor resolved (aliases),
over a corpus indexed by the real dataflow (real Redis, Qdrant Edge, local MiniLM)."""

from __future__ import annotations

import pytest

from gateway.engine import QueryEngine
from gateway.keywords import OfflineKeywordExtractor
from gateway.retrieval import GraphScope, find_entities, named_in
from gateway.types import Mode, QueryParams
from tests.dataflow.harness import TOKENIZER
from tests.gateway.corpus import DOCUMENTS, build_corpus

CHAT = """\
AdamSmith: The Harbour Board signs the pier lease with Helios Corp on Monday.
BellaJones: Thanks, Adam. I will bring the lease and the keys.
AdamSmith: Good. Bella, ask Carla Diaz about the Atlas Project too.
"""
NAMESAKE = "Adam Jones runs the Kiln Cafe in Naples. Adam bakes bread there every morning."


@pytest.fixture(scope="module")
def corpus(redis_server, tmp_path_factory):
    documents = {**DOCUMENTS, "chats/harbour.md": CHAT}
    built = build_corpus(redis_server.url, tmp_path_factory.mktemp("alias-corpus"), documents)
    yield built
    built.close()


def test_a_question_naming_only_the_first_name_finds_the_full_name_first(corpus):
    engine = QueryEngine(corpus.stores, corpus.embedder, TOKENIZER, OfflineKeywordExtractor())
    question = QueryParams("What did Adam say about the lease?", mode=Mode.LOCAL, top_k=3)

    retrieval = engine.retrieve(question)

    assert retrieval.keywords.low_level == ("Adam",)
    assert corpus.stores.graph.get_entities(["adam"]) == {}  # no entity is named just that
    # Vectors alone put Bella Jones ("Thanks, Adam. I will bring the lease") first.
    assert retrieval.entities[0].record.key == "adam smith"


@pytest.fixture(scope="module")
def namesakes(redis_server, tmp_path_factory):
    """The corpus plus a second Adam: "Adam" is an alias of Adam Smith and of Adam Jones."""
    documents = {**DOCUMENTS, "chats/harbour.md": CHAT, "kitchen/cafe.md": NAMESAKE}
    built = build_corpus(redis_server.url, tmp_path_factory.mktemp("namesakes"), documents)
    yield built
    built.close()


def test_an_alias_of_several_entities_finds_them_all_first(namesakes):
    """Bella Jones says "Adam" and the cafe's sentences name Adam Jones again, so vector
    and lexical search alone put Adam Smith fifth; the alias names both Adams."""
    graph = namesakes.stores.graph
    vector = namesakes.embedder.embed(["Adam"])[0]

    found = find_entities(
        namesakes.stores,
        named_in(namesakes.stores, ["Tell me about Adam."]),
        "Adam",
        vector,
        5,
        GraphScope(),
    )

    assert graph.entities_by_alias(["adam"]) == {"adam": ["adam jones", "adam smith"]}
    assert {key for key, _ in found[:2]} == {"adam smith", "adam jones"}
