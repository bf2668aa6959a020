"""The query engine's retrieval over a corpus indexed by the real dataflow (real Redis,
Qdrant Edge, local MiniLM): modes, merging, budgets, references, filters, versions."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from connectors.errors import StoreUnavailable
from connectors.redis.graph_store import GraphStore
from connectors.stores import Stores
from connectors.vectors.port import VectorKind
from dataflow.core.commit import GraphBatch
from dataflow.core.naming import relation_id
from gateway.context import chunk_budget, chunk_line, entity_line, reference_line, relation_line
from gateway.engine import AnswerCache, QueryEngine
from gateway.keywords import OfflineKeywordExtractor
from gateway.retrieval import AMONG_KEYS, CANDIDATE_CHUNKS, ChunkSearch, GraphScope, Scope
from gateway.types import (
    Answer,
    IndexVersionTimeout,
    InvalidQuery,
    Keywords,
    Mode,
    QueryParams,
    Reference,
    Turn,
    Usage,
)
from tests.dataflow.harness import TOKENIZER
from tests.gateway.corpus import build_corpus
from tests.support.ports import free_port
from tests.support.wait import wait_until

LEADER = "Who leads the Atlas Project?"
LEADER_CHUNK = "Carla Diaz leads the Atlas Project at Northwind Labs."
PARTNER_CHUNK = "Northwind Labs partnered with Helios Corp on renewable energy storage."


@pytest.fixture
def engine(corpus):
    return QueryEngine(corpus.stores, corpus.embedder, TOKENIZER, OfflineKeywordExtractor())


def keys(retrieval):
    return [entity.record.key for entity in retrieval.entities]


def pairs(retrieval):
    return [relation.record.pair for relation in retrieval.relations]


def texts(retrieval):
    return [chunk.text for chunk in retrieval.chunks]


# -- modes ---------------------------------------------------------------------------------


def test_local_mode_finds_the_project_its_leader_their_relation_and_the_chunk(engine):
    retrieval = engine.retrieve(QueryParams(LEADER, mode=Mode.LOCAL, top_k=3, chunk_top_k=3))

    assert retrieval.keywords == Keywords(high_level=("leads",), low_level=("Atlas Project",))
    assert set(keys(retrieval)[:2]) == {"atlas project", "carla diaz"}
    scores = [entity.score for entity in retrieval.entities]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0
    assert ("atlas project", "carla diaz") in pairs(retrieval)
    ranks = [(r.degree, r.record.weight) for r in retrieval.relations]
    assert ranks == sorted(ranks, reverse=True)
    assert all(r.score == 0.0 for r in retrieval.relations)  # reached through the graph
    assert retrieval.chunks[0].text == LEADER_CHUNK


def test_local_chunks_are_ranked_by_relevance_to_the_question_not_by_citations(engine):
    # Northwind Labs is cited by three chunks; the question asks about the partnership.
    question = "Who did Northwind Labs partner with on energy storage?"
    retrieval = engine.retrieve(
        QueryParams(question, mode=Mode.LOCAL, top_k=1, low_level_keywords=("Northwind Labs",))
    )

    assert keys(retrieval) == ["northwind labs"]
    assert texts(retrieval)[0] == PARTNER_CHUNK
    scores = [chunk.score for chunk in retrieval.chunks]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0


def test_an_entity_the_question_names_is_found_by_its_exact_name_in_any_case(engine):
    retrieval = engine.retrieve(
        QueryParams("what did lucia bianchi teach?", mode=Mode.LOCAL, top_k=3)
    )

    assert keys(retrieval)[0] == "lucia bianchi"
    assert texts(retrieval)[0] == "He learned baking from Lucia Bianchi at the Naples Bread School."


def test_the_bridge_reaches_chunks_one_entity_away_from_the_seed_chunks(engine, corpus):
    vector = corpus.embedder.embed(["Where was it founded?"])[0]
    search = ChunkSearch(corpus.stores, "Where was it founded?", vector, Scope())
    seed = search.relevant(
        [hit.key for hit in search.dense_hits(20)],
        20,
    )
    partner = next(
        chunk_id
        for chunk_id, chunk in corpus.stores.graph.get_chunks(seed).items()
        if chunk.text == PARTNER_CHUNK
    )

    reached = corpus.stores.graph.get_chunks(search.bridge([partner], 10))

    found = {chunk.text for chunk in reached.values()}
    assert "Alice Moreau founded Northwind Labs in Lisbon." in found  # via Northwind Labs
    assert "Helios Corp finances climate research with the Oslo Climate Fund." in found
    assert not any("bread" in text.lower() or "baking" in text.lower() for text in found)


def test_global_mode_finds_the_partnership_for_a_thematic_question(engine):
    question = "Which companies work on renewable energy?"
    retrieval = engine.retrieve(QueryParams(question, mode=Mode.GLOBAL, top_k=2))

    assert retrieval.keywords.high_level == ("companies work", "renewable energy")
    assert pairs(retrieval) == [
        ("helios corp", "northwind labs"),
        ("helios corp", "oslo climate fund"),
    ]
    scores = [relation.score for relation in retrieval.relations]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0
    assert keys(retrieval) == ["helios corp", "northwind labs", "oslo climate fund"]
    assert PARTNER_CHUNK in texts(retrieval)


def test_naive_mode_returns_the_answering_chunk_first_and_no_graph(engine):
    retrieval = engine.retrieve(QueryParams(LEADER, mode=Mode.NAIVE, chunk_top_k=2))

    assert texts(retrieval)[0] == LEADER_CHUNK
    assert len(retrieval.chunks) == 2
    assert retrieval.entities == () and retrieval.relations == ()
    assert retrieval.keywords == Keywords(high_level=(), low_level=())
    assert retrieval.chunks[0].score > retrieval.chunks[1].score > 0


def test_mix_mode_fuses_the_questions_own_searches_with_graph_chunks(engine):
    # The question finds bread (dense and lexical); the explicit keyword finds Atlas.
    given = {"low_level_keywords": ("Atlas Project",), "high_level_keywords": ("leadership",)}
    question = "How is sourdough bread baked?"
    naive = engine.retrieve(QueryParams(question, mode=Mode.NAIVE, chunk_top_k=4))
    mix = engine.retrieve(QueryParams(question, mode=Mode.MIX, top_k=2, chunk_top_k=4, **given))

    assert {c.file_path for c in naive.chunks[:2]} == {"kitchen/bread.md"}
    assert {c.file_path for c in mix.chunks[:2]} == {"kitchen/bread.md"}  # both searches agree
    assert len(mix.chunks) == 4  # chunk_top_k bounds the fused list
    scores = [chunk.score for chunk in mix.chunks]
    assert scores == sorted(scores, reverse=True)
    assert {"atlas project"} <= set(keys(mix)) and mix.relations

    # Over the whole corpus (8 chunks): the graph lanes add to the fused score of the
    # chunks the named entities cite.
    def score_of_leader(low_level):
        params = QueryParams(question, mode=Mode.MIX, top_k=2, chunk_top_k=8, **given)
        chunks = engine.retrieve(dataclasses.replace(params, low_level_keywords=low_level)).chunks
        return next(chunk.score for chunk in chunks if chunk.text == LEADER_CHUNK)

    assert score_of_leader(("Atlas Project",)) > score_of_leader(("Naples",))


def test_hybrid_interleaves_local_and_global_results_without_duplicates(engine):
    given = {"low_level_keywords": ("Atlas Project",), "high_level_keywords": ("funding",)}
    local = engine.retrieve(QueryParams("", mode=Mode.LOCAL, top_k=3, **given))
    far = engine.retrieve(QueryParams("", mode=Mode.GLOBAL, top_k=3, **given))
    hybrid = engine.retrieve(QueryParams("", mode=Mode.HYBRID, top_k=3, **given))

    def interleave(a, b):
        merged = []
        for i in range(max(len(a), len(b))):
            for side in (a, b):
                if i < len(side) and side[i] not in merged:
                    merged.append(side[i])
        return merged

    assert keys(hybrid) == interleave(keys(local), keys(far))
    assert pairs(hybrid) == interleave(pairs(local), pairs(far))
    best = {e.record.key: e.score for e in (*local.entities, *far.entities) if e.score > 0}
    for entity in hybrid.entities:  # a duplicate keeps its vector similarity
        assert entity.score == best.get(entity.record.key, 0.0)


def test_explicit_keywords_skip_extraction_and_are_reported(engine):
    params = QueryParams(LEADER, mode=Mode.LOCAL, top_k=1, low_level_keywords=(" Lisbon ",))
    retrieval = engine.retrieve(params)
    assert retrieval.keywords == Keywords(high_level=(), low_level=("Lisbon",))
    assert keys(retrieval) == ["lisbon"]


# -- budgets and references ----------------------------------------------------------------


def test_entity_and_relation_budgets_keep_the_longest_prefix_that_fits(engine):
    params = QueryParams(LEADER, mode=Mode.HYBRID, top_k=5)
    full = engine.retrieve(params)
    entity_costs = [TOKENIZER.count(entity_line(e)) for e in full.entities]
    relation_costs = [TOKENIZER.count(relation_line(r)) for r in full.relations]
    assert len(entity_costs) >= 4 and len(relation_costs) >= 4

    tight = engine.retrieve(
        dataclasses.replace(
            params,
            max_entity_tokens=sum(entity_costs[:3]) + entity_costs[3] - 1,
            max_relation_tokens=sum(relation_costs[:2]),
        )
    )
    assert tight.entities == full.entities[:3]
    assert tight.relations == full.relations[:2]

    nothing = engine.retrieve(dataclasses.replace(params, max_entity_tokens=1))
    assert nothing.entities == ()


def test_a_tight_total_budget_keeps_the_longest_prefix_of_the_ranked_chunks(engine):
    params = QueryParams(
        "How is sourdough bread baked?",
        mode=Mode.MIX,
        top_k=2,
        chunk_top_k=4,
        low_level_keywords=("Atlas Project",),
        high_level_keywords=("climate research funding",),
    )
    full = engine.retrieve(params)
    assert len(full.chunks) >= 3
    firsts = full.chunks[:3]

    fixed = params.max_total_tokens - chunk_budget(params, full.entities, full.relations, TOKENIZER)
    numbers = {}
    cost = 0
    for chunk in firsts:
        if chunk.file_path not in numbers:
            numbers[chunk.file_path] = len(numbers) + 1
            cost += TOKENIZER.count(reference_line(Reference(len(numbers), chunk.file_path, ())))
        cost += TOKENIZER.count(chunk_line(numbers[chunk.file_path], chunk))

    tight = engine.retrieve(dataclasses.replace(params, max_total_tokens=fixed + cost))
    assert [c.chunk_id for c in tight.chunks] == [c.chunk_id for c in firsts]
    tighter = engine.retrieve(dataclasses.replace(params, max_total_tokens=fixed + cost - 1))
    assert [c.chunk_id for c in tighter.chunks] == [c.chunk_id for c in firsts[:2]]


def test_references_number_distinct_files_in_chunk_rank_order(engine):
    retrieval = engine.retrieve(QueryParams(LEADER, mode=Mode.MIX, top_k=3, chunk_top_k=3))

    files = list(dict.fromkeys(chunk.file_path for chunk in retrieval.chunks))
    assert [r.file_path for r in retrieval.references] == files
    assert [r.reference_id for r in retrieval.references] == list(range(1, len(files) + 1))
    for reference in retrieval.references:
        assert reference.chunk_ids == tuple(
            c.chunk_id for c in retrieval.chunks if c.file_path == reference.file_path
        )
    context = engine.context_text(retrieval)
    assert f"[1] {files[0]}" in context
    assert '{"reference_id": "1", "content": "' + LEADER_CHUNK + '"}' in context

    hidden = engine.retrieve(
        QueryParams(LEADER, mode=Mode.MIX, top_k=3, chunk_top_k=3, include_references=False)
    )
    assert hidden.references == () and hidden.chunks == retrieval.chunks


# -- filters -------------------------------------------------------------------------------


def test_doc_filter_restricts_vector_hits_and_graph_expansion(engine):
    retrieval = engine.retrieve(QueryParams(LEADER, top_k=5, doc_ids=("kitchen/bread.md",)))

    assert retrieval.entities and retrieval.chunks
    assert all("kitchen/bread.md" in e.record.doc_ids for e in retrieval.entities)
    assert all("kitchen/bread.md" in r.record.doc_ids for r in retrieval.relations)
    assert {chunk.doc_id for chunk in retrieval.chunks} == {"kitchen/bread.md"}


def test_path_prefix_drops_chunks_of_shared_entities_from_other_folders(engine):
    retrieval = engine.retrieve(
        QueryParams("Northwind Labs", mode=Mode.LOCAL, top_k=3, file_path_prefix="companies/")
    )
    assert "northwind labs" in keys(retrieval)  # also cited by projects/atlas.md
    assert retrieval.chunks
    assert all(chunk.file_path.startswith("companies/") for chunk in retrieval.chunks)
    assert all(
        any(path.startswith("companies/") for path in r.record.file_paths)
        for r in retrieval.relations
    )


def test_chunk_points_name_what_they_mention_and_graph_points_no_citations(corpus):
    """What a chunk contributes is on its point (the bridge lane and scoped graph searches
    read it there); entity and relation points carry no lists that grow with a hub."""
    graph, vectors = corpus.stores.graph, corpus.stores.vectors
    entities, relations = list(graph.iter_entities()), list(graph.iter_relations())
    chunks = {point.key: point.payload for point in vectors.iter_points(VectorKind.CHUNK)}

    assert chunks and entities and relations
    for chunk_id, payload in chunks.items():
        assert payload["entities"] == sorted(
            e.key for e in entities if chunk_id in e.source_chunk_ids
        )
        assert payload["relations"] == sorted(
            relation_id(r.pair) for r in relations if chunk_id in r.source_chunk_ids
        )
    assert any(payload["entities"] for payload in chunks.values())
    for point in vectors.iter_points(VectorKind.ENTITY):
        assert point.payload == {
            "entity": point.key,
            "name": graph.get_entities([point.key])[point.key].name,
        }
    for point in vectors.iter_points(VectorKind.RELATION):
        assert set(point.payload) == {"source", "target"}


SCOPES = [
    Scope(doc_ids=("kitchen/bread.md",)),
    Scope(file_path_prefix="companies"),
    Scope(file_path_prefix="kitchen/bread.md"),
    Scope(doc_ids=("projects/atlas.md", "companies/helios.md"), file_path_prefix="companies/"),
    Scope(file_path_prefix="nowhere"),
]


@pytest.mark.parametrize("scope", SCOPES, ids=repr)
@pytest.mark.parametrize("way", ["among", "listed-deep", "deep"])
def test_a_scoped_graph_search_finds_the_best_in_scope_points(corpus, scope, way):
    """Among what the in-scope chunks mention (a point-id set), reading deeper and keeping
    those (too many to search among), or deep (a path scope too wide to list: reading deeper
    and checking the records), a scoped search returns the whole ranking's best `top_k` of
    the points an in-scope chunk mentions, ties by key."""
    stores = corpus.stores
    listed = way != "deep"
    docs = {d.record.doc_id: d.record for d in stores.graph.iter_documents()}
    chunks = {  # of the documents in scope: both parts of the scope hold for one document
        chunk_id
        for doc_id, record in docs.items()
        if (not scope.doc_ids or doc_id in scope.doc_ids)
        and Scope(file_path_prefix=scope.file_path_prefix).admits((), (record.file_path,))
        for chunk_id in record.chunk_ids
    }
    in_scope = GraphScope.of(
        stores,
        scope,
        candidate_chunks=0 if way == "deep" else CANDIDATE_CHUNKS,
        among_keys=0 if way == "listed-deep" else AMONG_KEYS,
    )
    if not listed and not scope.doc_ids and chunks:  # more in-scope chunks than 0
        assert (in_scope.entities, in_scope.relations) == (None, None)
    else:
        assert in_scope.entities is not None and in_scope.relations is not None
    vector = corpus.embedder.embed(["renewable energy companies and their founders"])[0]

    for kind in (VectorKind.ENTITY, VectorKind.RELATION):
        records = (
            {e.key: e.source_chunk_ids for e in stores.graph.iter_entities()}
            if kind is VectorKind.ENTITY
            else {relation_id(r.pair): r.source_chunk_ids for r in stores.graph.iter_relations()}
        )
        whole = stores.vectors.search(kind, vector, len(records), with_payload=False)
        expected = [hit.key for hit in whole if set(records[hit.key]) & chunks][:3]

        found = in_scope.keys(
            stores,
            kind,
            lambda limit, among, kind=kind: stores.vectors.search(
                kind, vector, limit, None, among, with_payload=False
            ),
            3,
        )

        assert found == expected
        assert len(found) == min(3, sum(1 for cited in records.values() if set(cited) & chunks))


def test_a_scopes_graph_keys_are_read_once_per_index_version(corpus, engine, monkeypatch):
    """The in-scope chunks' payloads are read by the first scoped call at a version; the
    next calls at that version reuse their keys, a new version reads them again."""
    vectors = corpus.stores.vectors
    scrolls = []
    read_payloads = vectors.payloads

    def counted(kind, filter=None, keys=None, **options):
        if filter is not None:
            scrolls.append(filter)
        return read_payloads(kind, filter, keys, **options)

    monkeypatch.setattr(vectors, "payloads", counted)
    params = QueryParams("Northwind Labs", mode=Mode.LOCAL, file_path_prefix="companies/")

    first, again = engine.retrieve(params), engine.retrieve(params)
    assert len(scrolls) == 1 and again.entities == first.entities and first.entities
    corpus.stores.graph.apply(GraphBatch())
    after = engine.retrieve(params)
    assert len(scrolls) == 2 and after.entities == first.entities


def test_empty_index_gives_an_empty_retrieval(redis_server, tmp_path):
    empty = build_corpus(redis_server.url, tmp_path, documents={})
    try:
        engine = QueryEngine(empty.stores, empty.embedder, TOKENIZER, OfflineKeywordExtractor())
        for mode in Mode:
            retrieval = engine.retrieve(QueryParams(LEADER, mode=mode))
            assert (retrieval.entities, retrieval.relations, retrieval.chunks) == ((), (), ())
            assert retrieval.references == () and retrieval.index_version == 0
    finally:
        empty.close()


# -- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"question": "  "}, "question"),
        ({"top_k": 0}, "top_k"),
        ({"top_k": 1001}, "top_k"),
        ({"chunk_top_k": 0}, "chunk_top_k"),
        ({"max_entity_tokens": 0}, "max_entity_tokens"),
        ({"max_relation_tokens": -5}, "max_relation_tokens"),
        ({"max_total_tokens": 0}, "max_total_tokens"),
        ({"history": (Turn("user", "hi"), Turn("system", "obey"))}, "history[1].role"),
        ({"min_index_version": -1}, "min_index_version"),
        ({"file_path_prefix": "/"}, "file_path_prefix"),
        ({"doc_ids": ("a.md", "")}, "doc_ids[1]"),
    ],
)
def test_invalid_requests_name_the_field(engine, change, field):
    params = dataclasses.replace(QueryParams(LEADER), **change)
    with pytest.raises(InvalidQuery) as raised:
        engine.retrieve(params)
    assert raised.value.field == field
    assert str(raised.value).startswith(f"{field}: ")


def test_keywords_alone_are_a_valid_request(engine):
    retrieval = engine.retrieve(
        QueryParams("", mode=Mode.MIX, top_k=2, low_level_keywords=("Carla Diaz",))
    )
    assert "carla diaz" in keys(retrieval)


# -- embedding beside the graph lanes ------------------------------------------------------


class NamesReadSignal(GraphStore):
    """A real GraphStore that says when the graph lanes first read it (the name look-up)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.names_read = threading.Event()

    def lookup_names(self, keys):
        self.names_read.set()
        return super().lookup_names(keys)


class OverlapProbe:
    """The corpus's embedder, recording each call's texts. Every call after the first
    returns only once the graph lanes have read the store (or after 10 s), and records
    whether they had: so it says whether the rest was embedded while the lanes ran."""

    def __init__(self, embedder, graph):
        self.inner, self.graph = embedder, graph
        self.calls, self.overlapped = [], []
        self.model_name, self.dimension = embedder.model_name, embedder.dimension

    def embed(self, texts):
        self.calls.append(list(texts))
        if len(self.calls) > 1:
            self.overlapped.append(self.graph.names_read.wait(timeout=10))
        return self.inner.embed(texts)


def test_the_first_lanes_text_is_embedded_first_and_each_other_while_the_lanes_read(
    corpus, redis_server
):
    graph = NamesReadSignal.from_url(redis_server.url, corpus.stores.graph.workspace)
    probe = OverlapProbe(corpus.embedder, graph)
    stores = Stores(graph, corpus.stores.vectors)
    params = QueryParams(
        LEADER,
        mode=Mode.HYBRID,
        high_level_keywords=("leadership",),
        low_level_keywords=("Atlas Project",),
    )
    try:
        retrieval = QueryEngine(stores, probe, TOKENIZER, OfflineKeywordExtractor()).retrieve(
            params, deadline=time.monotonic() + 30
        )
    finally:
        graph.close()
    # Relations first (hybrid's first lane), then the entities' keywords and the question,
    # each in a call of its own (a lane waits only for its own text), in the background.
    assert probe.calls == [["leadership"], ["Atlas Project"], [LEADER]]
    assert probe.overlapped == [True, True]
    plain = QueryEngine(corpus.stores, corpus.embedder, TOKENIZER, OfflineKeywordExtractor())
    assert retrieval == plain.retrieve(params)


class FailingOn:
    """The corpus's embedder, except that embedding `text` raises."""

    def __init__(self, embedder, text):
        self.inner, self.text = embedder, text
        self.model_name, self.dimension = embedder.model_name, embedder.dimension

    def embed(self, texts):
        if self.text in texts:
            raise ConnectionError(f"the embedding service refused {self.text!r}")
        return self.inner.embed(texts)


@pytest.mark.parametrize("failing", ["Atlas Project", LEADER])
def test_a_background_embedding_s_failure_is_the_call_s_error(corpus, failing):
    """A text embedded in the background that fails raises in the lane that needs it, at
    once: the call neither hangs nor answers without it."""
    params = QueryParams(
        LEADER,
        mode=Mode.HYBRID,
        high_level_keywords=("leadership",),
        low_level_keywords=("Atlas Project",),
    )
    engine = QueryEngine(
        corpus.stores, FailingOn(corpus.embedder, failing), TOKENIZER, OfflineKeywordExtractor()
    )
    began = time.monotonic()
    with pytest.raises(ConnectionError, match="refused"):
        engine.retrieve(params, deadline=time.monotonic() + 30)
    assert time.monotonic() - began < 10


# -- index versions and store failures -----------------------------------------------------


def test_min_index_version_waits_for_a_write_made_during_the_call(corpus):
    engine = QueryEngine(corpus.stores, corpus.embedder, TOKENIZER, OfflineKeywordExtractor())
    target = corpus.stores.graph.version() + 1
    waited = threading.Event()

    def write_once_the_reader_waits():
        wait_until(lambda: engine.version_waits.waiting == 1, 10, "the reader waiting")
        waited.set()
        corpus.stores.graph.apply(GraphBatch())

    writer = threading.Thread(target=write_once_the_reader_waits)
    writer.start()
    try:
        retrieval = engine.retrieve(
            QueryParams(LEADER, min_index_version=target), deadline=time.monotonic() + 10
        )
    finally:
        writer.join(timeout=10)
    assert waited.is_set()
    assert retrieval.index_version >= target
    assert retrieval.entities
    assert engine.version_waits.waiting == 0


def test_min_index_version_not_reached_by_the_deadline_times_out(engine, corpus):
    ahead = corpus.stores.graph.version() + 100
    started = time.monotonic()
    with pytest.raises(IndexVersionTimeout, match=f"min_index_version {ahead}"):
        engine.retrieve(QueryParams(LEADER, min_index_version=ahead), deadline=started + 0.05)
    assert time.monotonic() - started < 2


def test_every_retrieval_reports_the_version_it_read(engine, corpus):
    assert engine.retrieve(QueryParams(LEADER)).index_version == corpus.stores.graph.version()


def test_unreachable_redis_is_reported_as_store_unavailable(corpus):
    port = free_port()
    graph = GraphStore.from_url(f"redis://127.0.0.1:{port}/0", "down")
    engine = QueryEngine(
        Stores(graph, corpus.stores.vectors), corpus.embedder, TOKENIZER, OfflineKeywordExtractor()
    )
    with pytest.raises(StoreUnavailable, match="Redis"):
        engine.retrieve(QueryParams(LEADER))
    graph.close()


# -- the answer cache as a unit ------------------------------------------------------------


def test_answer_cache_forgets_older_versions_and_evicts_least_recently_used(engine):
    retrieval = engine.retrieve(QueryParams(LEADER, mode=Mode.NAIVE, chunk_top_k=1))
    answer = Answer(retrieval, "text", True, False, Usage())
    cache = AnswerCache(capacity=2)
    cache.put("a", 1, answer)
    cache.put("b", 1, answer)
    assert cache.get("a", 1) is answer
    cache.put("c", 1, answer)  # evicts "b", the least recently used
    assert cache.get("b", 1) is None and cache.get("a", 1) is answer
    assert cache.get("a", 2) is None  # a newer index: everything older goes
    assert len(cache) == 0
    cache.put("old", 1, answer)  # a late answer for an old version is not kept
    assert len(cache) == 0
