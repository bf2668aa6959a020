"""The snapshot dictionary (dataflow/core/snapshots.py): small states packed with the index's
own Zstandard dictionary read back equal, big ones and those packed before it still read,
one packed with a dictionary this process was not given fails with a clear error, and a
document's state packs to less than its pickled object."""

import pickle

import pytest
import zstandard

from dataflow.core.snapshots import (
    DICTIONARY_SAMPLES,
    SMALL_STATE,
    MissingDictionaryError,
    current_dictionary,
    pack,
    packed_with,
    train_dictionary,
    unpack,
    use_dictionary,
)
from dataflow.core.steps import DocumentState


def relation_state(n: int) -> tuple:
    """A small state shaped like a relation's: its pair and one fragment's row."""
    a, b = f"person {n % 97}", f"place {n % 89}"
    chunk = f"chunk-{n:064x}"
    row = (a.title(), b.title(), ("visited",), f"{a.title()} visited {b.title()}.", 1.0, chunk)
    return (a, b), {chunk: (*row, f"notes/{n}.md", f"notes/{n}.md")}, (), None, None


def trained() -> bytes:
    samples = [pickle.dumps(relation_state(n), protocol=5) for n in range(DICTIONARY_SAMPLES)]
    dictionary = train_dictionary(samples)
    assert dictionary is not None
    return dictionary


@pytest.fixture
def dictionary():
    """The id of a dictionary trained on relation-like states, in use for the test."""
    data = trained()
    use_dictionary(data)
    yield zstandard.ZstdCompressionDict(data).dict_id()
    use_dictionary(None)


def test_small_states_pack_with_the_dictionary_and_read_back_equal(dictionary):
    state = relation_state(123_456)
    without = len(zstandard.ZstdCompressor(level=1).compress(pickle.dumps(state, protocol=5)))

    blob = pack(state)

    assert current_dictionary() == dictionary and packed_with(blob) == dictionary
    assert unpack(blob) == state
    assert len(blob) * 3 < without * 2, (len(blob), without)  # the point of it


def test_a_big_state_and_one_packed_before_the_dictionary_still_read():
    before = pack(relation_state(7))
    big = tuple(relation_state(n) for n in range(SMALL_STATE // 100))
    use_dictionary(trained())
    try:
        assert packed_with(before) is None and unpack(before) == relation_state(7)
        assert packed_with(pack(big)) is None and unpack(pack(big)) == big
    finally:
        use_dictionary(None)


def test_a_state_packed_with_a_dictionary_this_process_lacks_fails_clearly(dictionary):
    other = train_dictionary(
        [pickle.dumps((f"other {n}", n * 3, "x" * (n % 50)), protocol=5) for n in range(3000)]
    )
    assert other is not None
    foreign = zstandard.ZstdCompressor(dict_data=zstandard.ZstdCompressionDict(other)).compress(
        pickle.dumps(relation_state(1), protocol=5)
    )
    with pytest.raises(MissingDictionaryError, match="graph store does not hold"):
        unpack(foreign)


def test_too_few_samples_train_no_dictionary():
    samples = [pickle.dumps(relation_state(n), protocol=5) for n in range(DICTIONARY_SAMPLES - 1)]
    assert train_dictionary(samples) is None
    assert train_dictionary([b"x" * SMALL_STATE] * DICTIONARY_SAMPLES) is None  # none small


def test_a_documents_state_packs_to_less_than_its_pickled_object(dictionary):
    state = DocumentState("sha256:" + "ab" * 32, "notes/a.md", ("chunk-" + "cd" * 32,))

    objects = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    packed = pickle.dumps(state.packed(), protocol=pickle.HIGHEST_PROTOCOL)

    assert DocumentState.unpacked(pickle.loads(packed)) == state
    assert len(packed) * 2 < len(objects)
