"""A big key's fragments in segments (dataflow/core/segments.py): a mapping like a dict, whose
packing packs again only the segments changed since it last packed, and keeps a chunk's
fragments together."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataflow.core.contributions import EntityFragment, FragmentRows
from dataflow.core.segments import SegmentedFragments
from dataflow.core.snapshots import pack
from tests.core.hubs import hub_fragments


def fragment(chunk: int, about: str = "") -> tuple[str, EntityFragment]:
    chunk_id = f"chunk-{chunk}"
    contribution_id = f"{chunk_id}|{about}" if about else chunk_id
    path = f"notes/{chunk % 7}.md"
    said = f"Ada met {about or 'the board'} at meeting {chunk}."
    return contribution_id, EntityFragment("Ada", "person", said, chunk_id, path, path)


# Sets and deletes over a few chunks' own fragments and mentions, enough to double the
# segments (of 2) several times and to empty them again.
operations = st.lists(
    st.tuples(st.booleans(), st.integers(0, 40), st.sampled_from(["", "bob", "eve"])),
    max_size=120,
)


@given(operations)
def test_it_holds_what_a_dict_holds_and_unpacks_to_it_after_any_folds(ops):
    model: dict[str, EntityFragment] = {}
    held = SegmentedFragments.of({}, EntityFragment, segment_size=2)
    for keep, chunk, about in ops:
        contribution_id, value = fragment(chunk, about)
        if keep:
            model[contribution_id] = held[contribution_id] = value
        elif contribution_id in model:
            del model[contribution_id], held[contribution_id]
        assert len(held) == len(model)
        assert held.segment_count * 2 * 2 >= len(held)  # doubled as it grows

    assert dict(held) == model
    assert dict(held.items()) == model and sorted(held) == sorted(model)
    assert all(held.get(cid) == model.get(cid) for cid in ("chunk-1", "chunk-1|bob", "x"))
    resumed = SegmentedFragments.unpacked(held.packed(), EntityFragment, segment_size=2)
    assert dict(resumed) == model
    assert resumed.segment_count == held.segment_count


def test_packing_again_packs_only_the_segments_changed_since():
    held = SegmentedFragments.of(dict(map(fragment, range(64))), EntityFragment, 8)
    before = held.packed()
    assert held.segment_count == 8 and held.unpacked_segments() == 0

    contribution_id, value = fragment(5, "bob")  # a mention beside chunk 5's own fragment
    held[contribution_id] = value
    del held["chunk-5"]
    assert held.unpacked_segments() == 1  # one chunk's fragments share a segment
    after = held.packed()

    changed = [n for n, (old, new) in enumerate(zip(before, after, strict=True)) if old is not new]
    assert len(changed) == 1
    assert held.unpacked_segments() == 0


def test_a_chunk_s_fragments_share_a_segment_and_a_hub_packs_near_its_single_blob():
    """Split by whole contribution ids, a hub's segments repeat its chunks' ids apart, and
    packed to 2.9 times the bytes of one blob at 16,000 documents (segments.py)."""
    fragments = hub_fragments(4_000)
    held = SegmentedFragments.of(fragments, EntityFragment, segment_size=1024)

    segments = held.packed()
    single = pack(FragmentRows.of(fragments).rows)

    assert len(segments) == 8
    assert sum(map(len, segments)) < 1.2 * len(single)


def test_segments_come_in_powers_of_two_and_blobs_one_per_segment():
    with pytest.raises(ValueError, match="power-of-two"):
        SegmentedFragments(EntityFragment, 2, [{}, {}, {}], [])
    with pytest.raises(ValueError, match="power-of-two"):
        SegmentedFragments(EntityFragment, 2, [{}, {}], [b"x"])
