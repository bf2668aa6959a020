"""A key's fragments in segments (dataflow/core/fragments.py): the same mapping and the same
records as the plain dict of its fragments, folds that copy only what they touch, snapshots
that pickle only what changed."""

import math
import pickle
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from dataflow.core.contributions import (
    EntityFragment,
    RelationFragment,
    Renderer,
    RenderOptions,
    apply,
    retract,
)
from dataflow.core.fragments import JOIN_AT, SEGMENTS, SPLIT_AT, Fragments, segment_of
from dataflow.core.steps import update_fragments

# Descriptions are joined, never summarised, so a record shows every description in order.
RENDER = Renderer(lambda text: len(text.split()), RenderOptions(summarize_over_fragments=10**6))

small_text = st.sampled_from(["", "a", "b", "c", "ab", "a b"])
chunk_ids = st.sampled_from([f"chunk-{n:03d}" for n in range(60)])
entity_fragments = st.builds(
    EntityFragment,
    name=st.sampled_from(["Ada", "ada", "ADA", "Ada L."]),
    type=st.sampled_from([None, "person", "org", "unknown"]),
    description=small_text,
    chunk_id=chunk_ids,
    file_path=st.sampled_from(["", "a.md", "b.md", "z/c.md"]),
    doc_id=st.sampled_from(["a.md", "b.md", "z/c.md"]),
    aliases=st.lists(st.sampled_from(["ada", "al", "lovelace"]), max_size=2).map(
        lambda names: tuple(sorted(set(names)))
    ),
)
relation_fragments = st.builds(
    RelationFragment,
    source_name=st.sampled_from(["Ada", "ada"]),
    target_name=st.sampled_from(["Bob", "bob"]),
    keywords=st.lists(st.sampled_from(["met", "wrote", "paid"]), max_size=2).map(tuple),
    description=small_text,
    strength=st.sampled_from([0.1, 0.2, 0.3, 1.0, 1e16, -1e16, 2.5]),
    chunk_id=chunk_ids,
    file_path=st.sampled_from(["", "a.md", "b.md"]),
    doc_id=st.sampled_from(["a.md", "b.md"]),
)
contribution_ids = st.one_of(chunk_ids, st.tuples(chunk_ids, st.sampled_from(["bob", "eve"])))
entity_states = st.dictionaries(
    contribution_ids.map(lambda c: c if isinstance(c, str) else "|".join(c)),
    entity_fragments,
    min_size=1,
    max_size=120,
)
relation_states = st.dictionaries(chunk_ids, relation_fragments, min_size=1, max_size=120)


def hub(count: int = SPLIT_AT + 76, offset: int = 0) -> dict[str, EntityFragment]:
    """A big entity state: split into segments."""
    return {
        f"hub-{n:05d}": EntityFragment(
            ["Ada", "ada"][n % 5 == 0],
            [None, "person", "org"][n % 3],
            f"said {n % 7}" if n % 4 else "",
            f"hub-{n:05d}",
            f"d{n % 9}.md",
            f"d{n % 9}.md",
            ("al",) if n % 11 == 0 else (),
        )
        for n in range(offset, offset + count)
    }


def reference_entity(key: str, state: dict[str, EntityFragment]) -> tuple[object, ...]:
    """The entity record's fields computed the plain way, fragment by fragment."""
    fragments = list(state.values())
    typed = [f for f in fragments if f.type is not None]

    def vote(values: list[str]) -> str | None:
        counts = Counter(values)
        return min(counts, key=lambda v: (-counts[v], v)) if counts else None

    def ordered(chosen: list[EntityFragment]) -> list[str]:
        support = Counter(f.description for f in chosen if f.description)
        first = {}
        for f in chosen:
            if f.description:
                place = (f.file_path, f.chunk_id, f.description)
                first[f.description] = min(first.get(f.description, place), place)
        return sorted(support, key=lambda text: (-support[text], first[text]))

    name = vote([f.name for f in fragments]) or key
    described = typed if any(f.description for f in typed) else fragments
    return (
        name,
        vote([f.type for f in typed if f.type is not None]) or "unknown",
        "\n".join(ordered(described)),
        tuple(sorted({f.chunk_id for f in fragments})),
        tuple(sorted({f.file_path for f in fragments if f.file_path})),
        tuple(sorted({f.doc_id for f in fragments})),
        tuple(sorted({a for f in fragments for a in f.aliases} - {key})),
    )


def entity_fields(record) -> tuple[object, ...]:
    return (
        record.name,
        record.type,
        record.description,
        record.source_chunk_ids,
        record.file_paths,
        record.doc_ids,
        record.aliases,
    )


@settings(max_examples=150, deadline=None)
@given(entity_states, st.booleans())
def test_a_state_is_the_same_mapping_and_renders_the_reference_record_small_or_split(state, big):
    if big:  # a hub's many fragments, split into segments, plus the random ones
        state = {**hub(), **state}
    held = Fragments.of(state)
    assert held is not None and held.split == big
    assert held == state and dict(held) == state and len(held) == len(state)
    assert all(held[cid] == fragment for cid, fragment in state.items())
    assert RENDER.entity("ada", held) == RENDER.entity("ada", state)
    assert entity_fields(RENDER.entity("ada", held)) == reference_entity("ada", state)


@settings(max_examples=100, deadline=None)
@given(relation_states, st.booleans())
def test_a_relation_renders_the_plain_record_with_an_exact_weight_small_or_split(state, big):
    if big:
        base = next(iter(state.values()))
        extra = {f"x{n:05d}": base for n in range(SPLIT_AT)}
        state = {**extra, **state}
    held = Fragments.of(state)
    assert held is not None and held.split == big
    record = RENDER.relation(("ada", "bob"), held)
    assert record == RENDER.relation(("ada", "bob"), state)
    assert record.weight == math.fsum(f.strength for f in state.values())
    assert record.keywords == tuple(sorted({k for f in state.values() for k in f.keywords}))


folds = st.lists(
    st.tuples(chunk_ids, st.one_of(st.none(), entity_fragments)), min_size=1, max_size=40
)


@settings(max_examples=150, deadline=None)
@given(entity_states, folds, st.booleans())
def test_a_fold_equals_applying_each_delta_and_copies_only_the_segments_it_touches(
    state, deltas, big
):
    if big:
        state = {**hub(), **state}
    before = Fragments.of(state)
    after = update_fragments(before, deltas)
    expected = dict(state)
    for contribution_id, fragment in deltas:
        if fragment is None:
            expected = retract(expected, contribution_id)
        else:
            expected = apply(expected, contribution_id, fragment)
    assert (after or {}) == expected
    if big:  # still split: the segments no delta fell in are the very same objects
        touched = {segment_of(contribution_id) for contribution_id, _ in deltas}
        assert after.split
        for number in set(range(SEGMENTS)) - touched:
            assert after.segments[number] is before.segments[number]


def test_a_state_is_split_from_split_at_and_joined_again_below_join_at():
    state = Fragments.of(hub(SPLIT_AT - 1))
    assert not state.split and len(state.segments) == 1
    state = update_fragments(state, hub(1, offset=SPLIT_AT - 1).items())
    assert state.split and state == hub(SPLIT_AT)
    shrunk = update_fragments(state, [(cid, None) for cid in list(hub(SPLIT_AT - JOIN_AT))])
    assert shrunk.split and len(shrunk) == JOIN_AT  # not joined yet at JOIN_AT itself
    joined = update_fragments(shrunk, [("hub-01023", None)])
    assert not joined.split and joined == hub(JOIN_AT - 1, offset=SPLIT_AT - JOIN_AT)
    assert RENDER.entity("ada", joined) == RENDER.entity("ada", dict(joined))
    assert pickle.loads(pickle.dumps(joined)) == joined


def test_a_hub_spreads_over_every_segment_and_a_snapshot_repickles_only_the_one_changed():
    big = hub(2000)
    state = Fragments.of(big)
    assert all(segment is not None for segment in state.segments)
    restored = pickle.loads(pickle.dumps(state))
    assert restored == big and RENDER.entity("ada", restored) == RENDER.entity("ada", big)

    changed = update_fragments(restored, [("hub-00007", None)])
    pickled = {n: s.__reduce__()[1][0] for n, s in enumerate(restored.segments) if s is not None}
    again = {n: s.__reduce__()[1][0] for n, s in enumerate(changed.segments) if s is not None}
    same = [n for n in again if again[n] is pickled[n]]  # the very bytes, not pickled again
    assert sorted(set(range(SEGMENTS)) - set(same)) == [segment_of("hub-00007")]
    assert pickle.loads(pickle.dumps(changed)) == {k: v for k, v in big.items() if k != "hub-00007"}


def test_a_state_with_no_fragment_left_is_none_and_a_plain_mapping_folds_too():
    fragment = EntityFragment("Ada", "person", "x", "c1", "a.md", "a.md")
    assert update_fragments({"c1": fragment}, [("c1", None)]) is None
    assert update_fragments(None, [("c1", None)]) is None
    assert update_fragments({"c1": fragment}, [("c2", fragment)]) == {
        "c1": fragment,
        "c2": fragment,
    }
