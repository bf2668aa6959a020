"""Running totals (dataflow/core/tally.py) draft exactly what the fragments draft."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataflow.core.contributions import (
    CITATION_LISTS,
    EntityFragment,
    ListChanges,
    RelationFragment,
    entity_draft,
    relation_draft,
)
from dataflow.core.steps import fold_fragments, update_fragments
from dataflow.core.tally import EntityTally, RelationTally

# Few values of each field, so that fragments collide on every one of them: votes tie,
# descriptions are said by several chunks, and a retraction often removes the first place
# of a description or the last carrier of a chunk id.
names = st.sampled_from(["Ada", "ADA", "ada", "Ada L."])
texts = st.sampled_from(["", "a mathematician", "a writer", "b"])
chunk_ids = st.sampled_from(["c1", "c2", "c3", "c4"])
paths = st.sampled_from(["", "a.md", "b.md", "z.md"])
doc_ids = st.sampled_from(["a", "b", "z"])

entity_fragments = st.builds(
    EntityFragment,
    name=names,
    type=st.none() | st.sampled_from(["person", "organization", ""]),
    description=texts,
    chunk_id=chunk_ids,
    file_path=paths,
    doc_id=doc_ids,
    aliases=st.lists(st.sampled_from(["ada", "lovelace", "countess"]), unique=True)
    .map(sorted)
    .map(tuple),
)
relation_fragments = st.builds(
    RelationFragment,
    source_name=names,
    target_name=st.sampled_from(["Bob", "bob"]),
    keywords=st.lists(st.sampled_from(["met", "worked", "wrote"]), max_size=3).map(tuple),
    description=texts,
    # 1e16 swallows 1.0 in a float running sum: removing it again would leave 0.0 behind
    strength=st.sampled_from([0.1, 0.2, 0.3, 1.0, 2.5, 1e16]),
    chunk_id=chunk_ids,
    file_path=paths,
    doc_id=doc_ids,
)
contribution_ids = st.sampled_from(["c1", "c2", "c3", "c1|bob", "c2|bob", "c4", "c5"])


def batches_of(fragments):
    """Batches of deltas as the entity and relation steps fold them: (contribution id,
    fragment or None for a retraction), an id possibly more than once in a batch."""
    delta = st.tuples(contribution_ids, st.none() | fragments)
    return st.lists(st.lists(delta, min_size=1, max_size=8), min_size=1, max_size=12)


def assert_drafts_agree_after_every_fold(tally, initial, batches, key, draft_of_fragments):
    """Fold `batches` in place into a dict of `initial` and `tally` (made of it) with
    `fold_fragments`, and into a copy with `update_fragments` (the definition); compare the
    states and the drafts of `key` after each batch."""
    fragments, in_place = initial or None, dict(initial)
    for batch in batches:
        fragments = update_fragments(fragments, batch)
        fold_fragments(in_place, batch, tally)
        assert in_place == (fragments or {})
        assert tally.draft(key) == draft_of_fragments(key, fragments or {})
        assert tally.fragments == len(in_place)


@settings(max_examples=300)
@given(st.dictionaries(contribution_ids, entity_fragments), batches_of(entity_fragments))
def test_an_entity_tally_drafts_what_its_fragments_draft_after_every_fold(initial, batches):
    tally = EntityTally(initial.values())
    assert_drafts_agree_after_every_fold(tally, initial, batches, "ada", entity_draft)


@settings(max_examples=300)
@given(st.dictionaries(contribution_ids, relation_fragments), batches_of(relation_fragments))
def test_a_relation_tally_drafts_what_its_fragments_draft_after_every_fold(initial, batches):
    tally = RelationTally(initial.values())
    assert_drafts_agree_after_every_fold(tally, initial, batches, ("ada", "bob"), relation_draft)


@given(st.lists(entity_fragments, min_size=1, max_size=20))
def test_a_tally_counted_in_bulk_equals_one_added_a_fragment_at_a_time(fragments):
    state = {f"id{i}": fragment for i, fragment in enumerate(fragments)}
    one_by_one = EntityTally()
    for fragment in fragments:
        one_by_one.add(fragment)
    assert EntityTally(fragments).draft("ada") == one_by_one.draft("ada")
    assert one_by_one.draft("ada") == entity_draft("ada", state)


def test_a_relations_weight_leaves_no_rounding_behind_when_a_strength_goes():
    big = RelationFragment("Ada", "Bob", (), "", 1e16, "c1", "a.md", "a")
    small = RelationFragment("Ada", "Bob", (), "", 1.0, "c2", "a.md", "a")
    tally = RelationTally([big, small])
    tally.remove(big)
    assert tally.draft(("ada", "bob")).weight == 1.0 == math.fsum([1.0])


def test_a_description_moves_to_its_next_first_place_when_the_first_goes():
    said = [
        EntityFragment("Ada", "person", "a writer", chunk, path, "d")
        for chunk, path in (("c1", "a.md"), ("c2", "b.md"))
    ]
    other = EntityFragment("Ada", "person", "a mathematician", "c3", "ab.md", "d")
    tally = EntityTally([*said, other, *said])  # "a writer" twice from each place
    assert tally.draft("ada").descriptions == ("a writer", "a mathematician")
    for fragment in (said[0], said[0], said[1]):
        tally.remove(fragment)
    # Once each: "a mathematician" (ab.md) now comes before "a writer" (b.md)
    assert tally.draft("ada").descriptions == ("a mathematician", "a writer")
    state = {"x": other, "y": said[1]}
    assert tally.draft("ada") == entity_draft("ada", state)


def citation_lists(tally, key) -> dict[str, tuple[str, ...]]:
    draft = tally.draft(key)
    return {name: getattr(draft, name) if draft else () for name in CITATION_LISTS}


def changed_by(lists: dict[str, tuple[str, ...]], changes: ListChanges):
    """`lists` with `changes` applied as a store applies them to sorted sets."""
    out = {}
    for name, values in lists.items():
        kept = set(values)
        for value, present in changes.changed.get(name, {}).items():
            (kept.add if present else kept.discard)(value)
        out[name] = tuple(sorted(kept))
    return out


@settings(max_examples=300)
@given(
    st.sampled_from([(EntityTally, entity_fragments), (RelationTally, relation_fragments)]).flatmap(
        lambda kind: st.tuples(
            st.just(kind[0]),
            st.dictionaries(contribution_ids, kind[1]),
            batches_of(kind[1]),
            st.lists(st.booleans(), min_size=12, max_size=12),
        )
    )
)
def test_list_changes_lead_from_each_draft_passed_on_to_the_next(case):
    """The changes a tally hands each draft passed on (`list_changes`, taken after some folds
    and not others) turn the lists of the draft before into this draft's, and chain by stamp;
    changes composed (`then`) turn the first draft's lists into the last one's."""
    kind, initial, batches, passed_on = case
    key = "ada" if kind is EntityTally else ("ada", "bob")
    tally, in_place = kind(initial.values()), dict(initial)
    first = tally.list_changes()
    assert first.since is None  # a new tally's first draft: written whole
    start = last_lists = citation_lists(tally, key)
    last, composed = first, None
    for batch, take in zip(batches, passed_on, strict=False):
        fold_fragments(in_place, batch, tally)
        if not take:
            continue
        changes = tally.list_changes()
        assert changes.since == last.stamp and changes.stamp != last.stamp
        now = citation_lists(tally, key)
        assert changed_by(last_lists, changes) == now
        composed = changes if composed is None else composed.then(changes)
        assert composed.since == first.stamp
        assert changed_by(start, composed) == now
        last, last_lists = changes, now


def test_changes_compose_only_in_the_order_they_were_drafted():
    earlier = ListChanges(None, 1, {"doc_ids": {"a": True}})
    later = ListChanges(1, 2, {"doc_ids": {"a": False, "b": True}})
    assert earlier.then(later) == ListChanges(None, 2, {"doc_ids": {"a": False, "b": True}})
    with pytest.raises(ValueError, match="do not follow"):
        later.then(earlier)
