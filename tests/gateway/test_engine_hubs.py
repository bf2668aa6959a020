"""Around a hub entity: only the relations and entities the budgets can use are read in
full, and the result is exactly what reading all of them gives."""

from __future__ import annotations

import pytest

from gateway.engine import EngineOptions, QueryEngine
from gateway.keywords import OfflineKeywordExtractor
from gateway.retrieval import GraphScope, Scope, find_entities, named_in, one_hop
from gateway.types import Mode, QueryParams
from tests.dataflow.harness import TOKENIZER
from tests.gateway.corpus import build_corpus

PARTNERS = 120
CITIES = ["Porto", "Geneva", "Nairobi", "Oslo"]


def partner_document(i: int) -> str:
    """Partners differ in degree (how many cities they work in), so edge degrees differ."""
    text = f"Kessler Institute signed a research agreement with Partner{i:03d} Labs."
    cities = CITIES[: i % 5]
    if cities:
        text += f" Partner{i:03d} Labs also works in {' and '.join(cities)}."
    return text


DOCUMENTS = {f"partners/p{i:03d}.md": partner_document(i) for i in range(PARTNERS)}


@pytest.fixture(scope="module")
def hub(redis_server, tmp_path_factory):
    built = build_corpus(redis_server.url, tmp_path_factory.mktemp("hub"), documents=DOCUMENTS)
    yield built
    built.close()


def test_a_limited_read_is_an_exact_prefix_of_the_full_ranking(hub):
    vector = hub.embedder.embed(["Kessler Institute"])[0]
    entities = find_entities(
        hub.stores,
        named_in(hub.stores, ["Kessler Institute"]),
        "Kessler Institute",
        vector,
        5,
        GraphScope(),
    )
    hop = one_hop(hub.stores, [key for key, _ in entities])
    full = hop.read(hub.stores, 0, len(hop.pairs), Scope())
    end = hop.slice_end(0, 20)
    limited = hop.read(hub.stores, 0, end, Scope())
    assert entities[0][0] == "kessler institute"
    assert len(full) >= PARTNERS
    assert end < len(hop.pairs)  # the slice left lower-ranked relations unread
    assert 20 <= len(limited) < len(full)
    assert limited == full[: len(limited)]


def engine_of(hub, **options) -> QueryEngine:
    return QueryEngine(
        hub.stores,
        hub.embedder,
        TOKENIZER,
        OfflineKeywordExtractor(),
        options=EngineOptions(**options),
    )


@pytest.mark.parametrize("budget", [300, 2000, 8000, 60000])
def test_local_mode_with_a_hub_equals_reading_every_relation(hub, budget):
    params = QueryParams(
        "What agreements did Kessler Institute sign?",
        mode=Mode.LOCAL,
        top_k=5,
        max_relation_tokens=budget,
    )
    quick = engine_of(hub).retrieve(params)
    assert engine_of(hub, first_relation_read=10**9).retrieve(params) == quick
    assert quick.relations


@pytest.mark.parametrize("mode", [Mode.LOCAL, Mode.GLOBAL, Mode.MIX])
@pytest.mark.parametrize("budget", [200, 400, 3000, 60000])
def test_entities_read_in_slices_equal_reading_every_entity(hub, monkeypatch, mode, budget):
    """Entity records are read a slice at a time until the entity budget cuts inside what
    was read; one slice of everything gives the same result, and so do slices of one."""
    params = QueryParams(
        "Which labs work with Kessler Institute in Porto?",
        mode=mode,
        top_k=30,
        max_entity_tokens=budget,
    )
    reads: list[int] = []
    graph = hub.stores.graph
    read_entities = graph.get_entities_and_degrees

    def counted(keys, degrees_only=()):
        keys = list(keys)
        reads.append(len(keys))
        return read_entities(keys, degrees_only)

    monkeypatch.setattr(graph, "get_entities_and_degrees", counted)
    quick = engine_of(hub, first_entity_read=4).retrieve(params)
    quick_reads = sum(reads)
    reads.clear()
    everything = engine_of(hub, first_entity_read=10**9).retrieve(params)
    every_read = sum(reads)
    assert everything == quick
    assert engine_of(hub, first_entity_read=1).retrieve(params) == quick
    assert quick.entities
    if budget == 200:  # the budget keeps a few: the rest were never read
        assert quick_reads < every_read
