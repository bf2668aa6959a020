"""The snapshot codec (dataflow/state/codec.py): small states packed with the index's own
Zstandard dictionary read back equal, big ones and those packed before it still read, one
packed with a dictionary the codec was not given fails with a clear error, two codecs
(two indexes in one process) keep their own dictionaries, and each Bytewax worker thread
keeps one compressor."""

import pickle
import threading

import bytewax.operators as op
import pytest
import zstandard
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, cluster_main

from dataflow.state.codec import (
    DICTIONARY_SAMPLES,
    SMALL_STATE,
    SnapshotCodec,
    packed_with,
    train_dictionary,
)
from dataflow.state.errors import MissingDictionaryError


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


def test_small_states_pack_with_the_dictionary_and_read_back_equal():
    data = trained()
    codec = SnapshotCodec(data)
    state = relation_state(123_456)
    without = len(zstandard.ZstdCompressor(level=1).compress(pickle.dumps(state, protocol=5)))

    blob = codec.pack(state)

    dictionary = zstandard.ZstdCompressionDict(data).dict_id()
    assert codec.dictionary == dictionary and packed_with(blob) == dictionary
    assert codec.unpack(blob) == state
    assert len(blob) * 3 < without * 2, (len(blob), without)  # the point of it


def test_a_big_state_and_one_packed_before_the_dictionary_still_read():
    codec = SnapshotCodec()
    before = codec.pack(relation_state(7))
    big = tuple(relation_state(n) for n in range(SMALL_STATE // 100))
    codec.use_dictionary(trained())
    assert packed_with(before) is None and codec.unpack(before) == relation_state(7)
    assert packed_with(codec.pack(big)) is None and codec.unpack(codec.pack(big)) == big


def test_a_state_packed_with_a_dictionary_the_codec_lacks_fails_clearly():
    other = train_dictionary(
        [pickle.dumps((f"other {n}", n * 3, "x" * (n % 50)), protocol=5) for n in range(3000)]
    )
    assert other is not None
    foreign = SnapshotCodec(other).pack(relation_state(1))
    with pytest.raises(MissingDictionaryError, match="codec was not given"):
        SnapshotCodec(trained()).unpack(foreign)


def test_two_indexes_in_one_process_keep_their_own_dictionaries():
    """The dictionary is the codec's, not the process's: an index without one packs
    without it, whatever another index's codec uses."""
    trained_codec, plain = SnapshotCodec(trained()), SnapshotCodec()
    assert packed_with(trained_codec.pack(relation_state(1))) is not None
    assert packed_with(plain.pack(relation_state(1))) is None
    assert plain.dictionary is None


def test_too_few_samples_train_no_dictionary():
    samples = [pickle.dumps(relation_state(n), protocol=5) for n in range(DICTIONARY_SAMPLES - 1)]
    assert train_dictionary(samples) is None
    assert train_dictionary([b"x" * SMALL_STATE] * DICTIONARY_SAMPLES) is None  # none small


def test_each_bytewax_worker_thread_keeps_one_compressor(monkeypatch):
    """Bytewax's worker threads lose threading.local data at every activation, and a new
    zstandard compressor costs 20 times the packing of a small state (codec.py)."""
    made: list[int] = []
    make = zstandard.ZstdCompressor

    def counted(*args, **kwargs) -> zstandard.ZstdCompressor:
        made.append(threading.get_ident())
        return make(*args, **kwargs)

    monkeypatch.setattr(zstandard, "ZstdCompressor", counted)
    codec = SnapshotCodec()
    threads: set[int] = set()

    def packed(n: int) -> bytes:
        threads.add(threading.get_ident())
        return codec.pack(("state", n))

    flow = Dataflow("packing")
    stream = op.map("pack", op.input("in", flow, TestingSource(range(2_000), batch_size=5)), packed)
    op.inspect("out", stream, lambda *_: None)
    cluster_main(flow, [], 0, worker_count_per_proc=2)

    assert threads and set(made) <= threads and len(made) <= len(threads), len(made)
