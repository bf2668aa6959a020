"""The relation search covers every entity the question names: a hub's relations fill
a single ranking, so each named entity's own relations take turns in a lane of their
own (over a corpus indexed by the real dataflow: real Redis, Qdrant Edge, local MiniLM)."""

from __future__ import annotations

import pytest

from gateway.engine import EngineOptions, QueryEngine
from gateway.keywords import OfflineKeywordExtractor
from gateway.types import Mode, QueryParams
from tests.dataflow.harness import TOKENIZER
from tests.gateway.corpus import build_corpus

HUB = "companies/helios.md"
QUIET = "people/orla.md"
PARTNERS = ["Atlas Grid", "Borealis Power", "Cobalt Works", "Delta Cells", "Ember Labs"]
DOCUMENTS = {
    HUB: " ".join(
        f"Helios Corp builds energy storage with {partner} for the national grid."
        for partner in PARTNERS
    ),
    **{
        f"partners/{partner.split()[0].lower()}.md": (
            f"{partner} researches energy storage with Helios Corp in Geneva."
        )
        for partner in PARTNERS
    },
    QUIET: "Orla Finch throws stoneware pottery at the Porto Kiln Guild.",
    # Her name's words are common here, so lexical search does not single her out.
    **{
        f"places/{place.lower()}.md": f"The {place} Orla Finch Trail follows the river to {place}."
        for place in ["Braga", "Faro", "Evora", "Sintra", "Tomar", "Viseu"]
    },
}
QUESTION = "Do Helios Corp and Orla Finch both work on energy storage?"


@pytest.fixture(scope="module")
def corpus(redis_server, tmp_path_factory):
    built = build_corpus(redis_server.url, tmp_path_factory.mktemp("named"), DOCUMENTS)
    yield built
    built.close()


def retrieve(corpus, mode: Mode, options: EngineOptions | None = None):
    engine = QueryEngine(
        corpus.stores, corpus.embedder, TOKENIZER, OfflineKeywordExtractor(), options=options
    )
    return engine.retrieve(QueryParams(QUESTION, mode=mode, top_k=8, chunk_top_k=8))


@pytest.mark.parametrize("mode", [Mode.GLOBAL, Mode.HYBRID])
def test_a_relation_lane_finds_each_named_entity_beside_the_hub(corpus, mode):
    result = retrieve(corpus, mode)

    ends = {key for relation in result.relations for key in relation.record.pair}
    assert {"helios corp", "orla finch"} <= ends
    assert QUIET in {chunk.file_path for chunk in result.chunks}


def test_without_the_named_lane_the_hub_crowds_the_quiet_entity_out(corpus):
    """The corpus really tests the lane: without it, Orla Finch is not found."""
    result = retrieve(corpus, Mode.GLOBAL, EngineOptions(named_for_relations=0))

    ends = {key for relation in result.relations for key in relation.record.pair}
    assert "orla finch" not in ends
    assert QUIET not in {chunk.file_path for chunk in result.chunks}
