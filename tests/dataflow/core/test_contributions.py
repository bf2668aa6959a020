from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from dataflow.core.chunking import Chunk
from dataflow.core.contributions import (
    EntityFragment,
    RelationFragment,
    Renderer,
    RenderOptions,
    SummaryRequest,
    apply,
    contributions_for_chunk,
    extractive_summary,
    fragments_hash,
    retract,
)
from dataflow.core.extraction import (
    ExtractedEntity,
    ExtractedRelation,
    Extraction,
    merge_extractions,
)


def count_words(text: str) -> int:
    return len(text.split())


RENDER = Renderer(count_tokens=count_words)


def chunk(chunk_id: str, file_path: str = "a.md") -> Chunk:
    return Chunk(chunk_id, "doc", 0, "text", 1, file_path)


def entity_fragment(
    chunk_id: str, type_: str | None = "person", description: str = "d", name: str = "Ada"
):
    return EntityFragment(name, type_, description, chunk_id, f"{chunk_id}.md", "doc")


def relation_fragment(chunk_id: str, strength: float = 1.0, keywords=("k",), description="r"):
    return RelationFragment(
        "Ada", "Bob", tuple(keywords), description, strength, chunk_id, f"{chunk_id}.md", "doc"
    )


fragments = st.builds(
    EntityFragment,
    name=st.sampled_from(["Ada", "ADA", "ada"]),
    type=st.none() | st.sampled_from(["person", "organization"]),
    description=st.text(max_size=20),
    chunk_id=st.sampled_from(["c1", "c2", "c3"]),
    file_path=st.sampled_from(["a.md", "b.md"]),
    doc_id=st.sampled_from(["a", "b"]),
)
states = st.dictionaries(st.text(min_size=1, max_size=6), fragments, max_size=6)


@given(states, st.text(min_size=1, max_size=6), fragments)
def test_retract_undoes_apply(state, contribution_id, fragment):
    state = retract(state, contribution_id)
    assert retract(apply(state, contribution_id, fragment), contribution_id) == state


@given(states, st.text(min_size=1, max_size=6), fragments)
def test_apply_is_idempotent(state, contribution_id, fragment):
    once = apply(state, contribution_id, fragment)
    assert apply(once, contribution_id, fragment) == once


@given(st.lists(st.tuples(st.text(min_size=1, max_size=4), fragments), max_size=8))
def test_render_does_not_depend_on_arrival_order(items):
    forward: dict = {}
    for cid, fragment in items:
        forward = apply(forward, cid, fragment)
    backward: dict = {}
    for cid, _fragment in reversed(items):
        if cid not in backward:
            backward = apply(backward, cid, forward[cid])
    assert RENDER.entity("ada", forward) == RENDER.entity("ada", backward)


def test_type_is_majority_vote_with_alphabetical_tie_break():
    state = {
        "c1": entity_fragment("c1", "person"),
        "c2": entity_fragment("c2", "organization"),
        "c3": entity_fragment("c3", "person"),
    }
    assert RENDER.entity("ada", state).type == "person"
    tie = {"c1": entity_fragment("c1", "person"), "c2": entity_fragment("c2", "organization")}
    assert RENDER.entity("ada", tie).type == "organization"


def test_endpoint_mentions_keep_an_entity_alive_but_do_not_vote():
    state = {"c1|bob": entity_fragment("c1", None, "Ada knows Bob")}
    record = RENDER.entity("ada", state)
    assert record.type == "unknown"
    assert record.description == "Ada knows Bob"
    assert RENDER.entity("ada", {}) is None


def test_description_joins_distinct_fragments_most_supported_first():
    state = {
        "c1": entity_fragment("c1", description="a mathematician"),
        "c2": entity_fragment("c2", description="wrote the first program"),
        "c3": entity_fragment("c3", description="wrote the first program"),
    }
    assert RENDER.entity("ada", state).description == "wrote the first program\na mathematician"


def test_relation_record_sums_weights_and_unions_keywords_sources_and_paths():
    state = {
        "c1": relation_fragment("c1", 0.5, ("mentor",)),
        "c2": relation_fragment("c2", 2.0, ("mentor", "friend")),
    }
    record = RENDER.relation(("ada", "bob"), state)
    assert record.weight == 2.5
    assert record.keywords == ("friend", "mentor")
    assert record.source_chunk_ids == ("c1", "c2")
    assert record.file_paths == ("c1.md", "c2.md")
    assert record.embedding_text == "Ada\tBob\nfriend, mentor\nr"
    assert RENDER.relation(("ada", "bob"), {}) is None


def test_entity_embedding_text_is_name_then_description():
    record = RENDER.entity("ada", {"c1": entity_fragment("c1", description="a mathematician")})
    assert record.embedding_text == "Ada\na mathematician"


def test_summarizer_is_called_over_the_fragment_threshold_with_a_stable_hash():
    seen: list[SummaryRequest] = []

    def summarize(request: SummaryRequest) -> str:
        seen.append(request)
        return "summary"

    renderer = Renderer(count_words, RenderOptions(summarize_over_fragments=2), summarize)
    state = {f"c{i}": entity_fragment(f"c{i}", description=f"fact {i}") for i in range(3)}
    assert renderer.entity("ada", state).description == "summary"
    assert seen[0].fragments_hash == fragments_hash(["fact 2", "fact 1", "fact 0"])
    assert renderer.entity("ada", dict(list(state.items())[:2])).description == "fact 0\nfact 1"
    assert len(seen) == 1


def test_hub_entity_description_stays_under_the_token_cap_without_an_llm():
    options = RenderOptions(summarize_over_fragments=8, summary_max_tokens=50)
    renderer = Renderer(count_words, options)
    state = {
        f"c{i}": entity_fragment(f"c{i}", description=f"mentioned in report number {i}")
        for i in range(1000)
    }
    record = renderer.entity("ada", state)
    assert 0 < count_words(record.description) <= 50
    assert len(record.source_chunk_ids) == 1000


def test_extractive_summary_cuts_a_single_oversized_description():
    request = SummaryRequest("entity", "Ada", ("word " * 100,), max_tokens=10)
    assert 0 < count_words(extractive_summary(request, count_words)) <= 10


def test_extractive_summary_takes_the_best_supported_descriptions_until_one_does_not_fit():
    counted: list[str] = []

    def count(text: str) -> int:
        counted.append(text)
        return count_words(text)

    descriptions = ("one two three", "four five six seven", "eight", "nine ten", "eleven")
    request = SummaryRequest("entity", "Ada", descriptions, max_tokens=8)
    # 3 words, then 4 + 1 for the newline = 8; "eight" would fit after the first alone, but
    # the order is support's: the summary is a prefix of it, and nothing past it is counted
    assert extractive_summary(request, count) == "one two three\nfour five six seven"
    assert counted == ["one two three", "four five six seven", "eight"]


def test_chunk_contributions_include_endpoint_mentions_and_drop_self_loops():
    extraction = Extraction(
        entities=(ExtractedEntity("Ada Lovelace", "PERSON", "mathematician"),),
        relations=(
            ExtractedRelation(
                "Charles Babbage", "Ada Lovelace", ("collaboration",), "worked together", 2.0
            ),
            ExtractedRelation("Ada Lovelace", '"ADA LOVELACE"', ("self",), "loop"),
        ),
    )
    contributions = contributions_for_chunk(chunk("c1"), extraction)
    assert [(c.key, c.contribution_id) for c in contributions.entities] == [
        ("ada lovelace", "c1"),
        ("ada lovelace", "c1|charles babbage"),
        ("charles babbage", "c1|ada lovelace"),
    ]
    (relation,) = contributions.relations
    assert relation.key == ("ada lovelace", "charles babbage")
    assert (relation.fragment.source_name, relation.fragment.target_name) == (
        "Ada Lovelace",
        "Charles Babbage",
    )
    assert contributions.entities[0].fragment.type == "person"


def test_a_fragment_carries_its_alias_keys_without_the_entitys_own():
    extraction = Extraction(
        entities=(
            ExtractedEntity("Adam Smith", "person", "d", ("Adam", "AdamSmith", "ADAM SMITH")),
        )
    )

    (contribution,) = contributions_for_chunk(chunk("c1"), extraction).entities

    assert contribution.fragment.aliases == ("adam", "adamsmith")


def test_an_entitys_aliases_are_the_union_of_its_live_fragments():
    state = {
        "c1": replace(entity_fragment("c1"), aliases=("ada", "lovelace")),
        "c2": replace(entity_fragment("c2"), aliases=("ada",)),
        "c2|bob": entity_fragment("c2", type_=None),
    }

    assert RENDER.entity("ada lovelace", state).aliases == ("ada", "lovelace")
    assert RENDER.entity("ada lovelace", retract(state, "c1")).aliases == ("ada",)
    assert RENDER.entity("ada lovelace", retract(retract(state, "c1"), "c2")).aliases == ()


def test_gleaning_keeps_the_aliases_of_both_passes():
    first = Extraction(entities=(ExtractedEntity("Adam Smith", "person", "long one", ("Adam",)),))
    second = Extraction(entities=(ExtractedEntity("adam smith", "person", "x", ("Smith",)),))

    (merged,) = merge_extractions(first, second).entities

    assert (merged.description, merged.aliases) == ("long one", ("Adam", "Smith"))
