"""The chunk step's state, its ledger (`ChunkLedger`): the deltas a chunk's next extraction
or removal emits from it alone (its snapshot: tests/dataflow/state/test_forms.py)."""

import hashlib
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataflow.core.chunking import Chunk
from dataflow.core.contributions import ChunkContributions, ChunkLedger, contributions_for_chunk
from dataflow.core.extraction import ExtractedEntity, ExtractedRelation, Extraction
from dataflow.core.steps import (
    ChunkExtracted,
    ChunkRemoved,
    EntityDelta,
    RelationDelta,
    update_chunk,
)

names = st.sampled_from(["Ada", "Bob", "Lind", "Elskholm", "Fallow Forum", "ada"])
entities = st.builds(
    ExtractedEntity,
    name=names,
    type=st.sampled_from(["person", "place", ""]),
    description=st.text(max_size=30),
    aliases=st.lists(names, max_size=2).map(tuple),
)
relations = st.builds(
    ExtractedRelation,
    source=names,
    target=names,
    keywords=st.lists(st.text(min_size=1, max_size=8), max_size=3).map(tuple),
    description=st.text(max_size=30),
    strength=st.floats(min_value=0, max_value=10),
)
extractions = st.builds(
    Extraction,
    entities=st.lists(entities, max_size=5).map(tuple),
    relations=st.lists(relations, max_size=5).map(tuple),
)


def chunk_id(n: int) -> str:
    return "chunk-" + hashlib.sha256(str(n).encode()).hexdigest()


def chunk(n: int = 1) -> Chunk:
    return Chunk(chunk_id(n), "news/2021/forum.md", 0, "text", 1, "news/2021/forum.md")


def extracted(extraction: Extraction, n: int = 1) -> ChunkExtracted:
    return ChunkExtracted(chunk(n), extraction)


def identities(deltas):
    return {(type(d).__name__, d.key, d.contribution_id, d.retracted) for d in deltas}


def added(state: ChunkContributions):
    return {
        *((EntityDelta(c.key, c.contribution_id, c.fragment)) for c in state.entities),
        *((RelationDelta(c.key, c.contribution_id, c.fragment)) for c in state.relations),
    }


@given(extractions)
def test_a_first_extraction_adds_every_contribution_and_keeps_only_their_ledger(extraction):
    ledger, deltas = update_chunk(None, extracted(extraction))

    contributions = contributions_for_chunk(chunk(), extraction)
    assert set(deltas) == added(contributions) and len(deltas) == len(added(contributions))
    assert ledger == ChunkLedger.of(contributions)


@given(extractions)
def test_the_same_extraction_again_emits_nothing(extraction):
    ledger, _ = update_chunk(None, extracted(extraction))

    again, deltas = update_chunk(ledger, extracted(extraction))

    assert deltas == () and again == ledger


@given(extractions, extractions)
def test_a_new_extraction_retracts_what_it_lost_and_adds_what_it_found(first, second):
    """From the ledger alone: a retraction (key and id, no fragment) of each contribution
    the new extraction lost, and each contribution it found, changed or not (the ledger
    keeps one digest for the chunk); nothing when no contribution changed."""
    ledger, _ = update_chunk(None, extracted(first))
    before, after = (contributions_for_chunk(chunk(), e) for e in (first, second))

    new_ledger, deltas = update_chunk(ledger, extracted(second))

    assert new_ledger == ChunkLedger.of(after)
    if before == after:
        assert deltas == ()
        return
    lost = {(type(d).__name__, d.key, d.contribution_id) for d in added(before)} - {
        (type(d).__name__, d.key, d.contribution_id) for d in added(after)
    }
    retractions = [d for d in deltas if d.retracted]
    assert identities(retractions) == {(*entry, True) for entry in lost}
    assert len(retractions) == len(lost)
    assert all(d.fragment is None for d in retractions)
    additions = [d for d in deltas if not d.retracted]
    assert set(additions) == added(after) and len(additions) == len(added(after))


def test_an_extraction_with_one_changed_fragment_is_told_from_the_same_one():
    """The ledger's digest covers every fragment's every field: one changed strength, of
    one relation, makes the chunk emit again."""
    extraction = realistic_extraction()
    relation = extraction.relations[3]
    changed = Extraction(
        extraction.entities,
        (*extraction.relations[:3], replace(relation, strength=2.0), *extraction.relations[4:]),
    )
    ledger, _ = update_chunk(None, extracted(extraction))

    _, deltas = update_chunk(ledger, extracted(changed))

    assert deltas and not any(d.retracted for d in deltas)
    assert (
        RelationDelta(
            *next(
                iter(
                    (c.key, c.contribution_id, c.fragment)
                    for c in contributions_for_chunk(chunk(), changed).relations
                    if c.fragment.strength == 2.0
                )
            )
        )
        in deltas
    )


def test_a_ledger_refuses_contributions_it_could_not_name():
    """Its entries follow from the ids of dataflow/core/contributions.py's docstring; a
    contribution under another id would be lost on retraction, so it is refused."""
    state = contributions_for_chunk(chunk(), realistic_extraction())
    odd = replace(state.entities[0], contribution_id=state.chunk_id + "|nobody")

    with pytest.raises(ValueError, match="cannot name"):
        ChunkLedger.of(replace(state, entities=(*state.entities, odd)))


@given(extractions)
def test_a_removed_chunk_retracts_every_contribution_it_made(extraction):
    ledger, _ = update_chunk(None, extracted(extraction))

    state, deltas = update_chunk(ledger, ChunkRemoved(chunk().chunk_id))

    contributions = contributions_for_chunk(chunk(), extraction)
    assert state is None
    assert identities(deltas) == {
        (type(d).__name__, d.key, d.contribution_id, True) for d in added(contributions)
    }


def realistic_extraction() -> Extraction:
    """A chunk as the extractor sees one: entities and relations whose descriptions repeat
    the chunk's phrases."""
    people = [f"Person {n}" for n in range(10)]
    return Extraction(
        entities=tuple(
            ExtractedEntity(name, "person", f"{name} spoke at the Fallow Energy Forum in Lind.")
            for name in people
        ),
        relations=tuple(
            ExtractedRelation(a, b, ("forum", "energy"), f"{a} and {b} met at the forum.", 1.0)
            for a, b in zip(people, people[1:] + people[:1], strict=True)
        ),
    )
