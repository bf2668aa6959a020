"""The chunk step's state in recovery snapshots (dataflow/core/snapshots.py): packed as one
compressed blob of rows, equal after a round trip, and a snapshot pickled as objects (before
packing) still resumes."""

import copyreg
import hashlib
import io
import pickle

from hypothesis import given
from hypothesis import strategies as st

from dataflow.core.chunking import Chunk
from dataflow.core.contributions import (
    ChunkContributions,
    EntityFragment,
    RelationFragment,
    contributions_for_chunk,
)
from dataflow.core.extraction import ExtractedEntity, ExtractedRelation, Extraction

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


def pickled_as_objects(state: object) -> bytes:
    """`state` pickled as the code before packing pickled it: the dataclass's own fields."""

    class Before(pickle.Pickler):
        def reducer_override(self, obj):
            if isinstance(obj, ChunkContributions):
                return copyreg.__newobj__, (type(obj),), dict(vars(obj))
            return NotImplemented

    buffer = io.BytesIO()
    Before(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(state)
    return buffer.getvalue()


@given(extractions)
def test_a_chunk_state_round_trips_through_its_packed_snapshot(extraction):
    state = contributions_for_chunk(chunk(), extraction)
    restored = pickle.loads(pickle.dumps(state))
    assert restored == state
    assert {type(c.fragment) for c in restored.entities} <= {EntityFragment}
    assert {type(c.fragment) for c in restored.relations} <= {RelationFragment}
    assert hash(restored) == hash(state)


@given(extractions)
def test_a_chunk_state_pickled_as_objects_still_resumes(extraction):
    state = contributions_for_chunk(chunk(), extraction)
    assert pickle.loads(pickled_as_objects(state)) == state


def test_a_chunk_state_packs_to_a_fraction_of_its_objects():
    """A chunk as the extractor sees one: entities and relations whose descriptions repeat
    the chunk's phrases. Pickled as objects, every fragment repeats its class and field
    names; packed, the rows compress (6x on the 16,000-document index's chunks)."""
    people = [f"Person {n}" for n in range(10)]
    extraction = Extraction(
        entities=tuple(
            ExtractedEntity(name, "person", f"{name} spoke at the Fallow Energy Forum in Lind.")
            for name in people
        ),
        relations=tuple(
            ExtractedRelation(a, b, ("forum", "energy"), f"{a} and {b} met at the forum.", 1.0)
            for a, b in zip(people, people[1:] + people[:1], strict=True)
        ),
    )
    state = contributions_for_chunk(chunk(), extraction)

    packed, objects = len(pickle.dumps(state)), len(pickled_as_objects(state))

    assert packed * 4 < objects, (packed, objects)
