"""The snapshot codec: how a step's state, as plain values, becomes the bytes Bytewax keeps.

Bytewax pickles every key a step touched in an epoch. Pickled as objects, the chunk, entity
and relation states are many times the corpus text: each object pickles its class and field
names, and the rows repeat chunk ids, paths and descriptions that compress well. So these
states are packed as one compressed blob of plain values (`SnapshotCodec.pack`;
dataflow/state/forms.py says which values each step keeps;
docs/decisions/0006-packed-snapshots-and-a-dictionary.md says why).

Most states are small (most relations hold one to four fragments), and a few hundred bytes
compress poorly on their own: the same words, paths and pickle framing in every one. So an
index trains one Zstandard dictionary on its own small states (`train_dictionary`, at the
end of its first run that has enough of them: dataflow/state/partitions.py), and its codec
packs small states with it from then on (`SnapshotCodec.use_dictionary`). Each blob names
its dictionary (Zstandard writes the id in the frame), so the blobs packed before the index
had one still read.
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Sequence

import zstandard

from dataflow.state.errors import MissingDictionaryError

COMPRESSION_LEVEL = 1
"""Zstandard's level 1: packs a hub fast enough for the edit that ends an epoch (a hub is
packed again in every epoch that touches it), where zlib's fastest level costs about three
times the CPU for no smaller a blob (docs/decisions/0006-packed-snapshots-and-a-dictionary.md).
"""

SMALL_STATE = 64 * 1024
"""The pickled size under which a state is packed with the dictionary: a bigger one finds
its repeats in itself (a hub entity's state is megabytes)."""

DICTIONARY_SIZE = 64 * 1024
DICTIONARY_SAMPLES = 2_000
"""How many small states a dictionary is trained on, at least (and at most twice that):
enough for a dictionary that packs relation states about a third smaller than without one,
trained in a fraction of a second; ten times as many samples make it barely better."""

_NO_DICTIONARY = 0  # a frame's dictionary id when it was compressed without one


class SnapshotCodec:
    """Packs the snapshots of one index, and unpacks them: small ones with the index's
    dictionary once it has one (`dictionary`). Made once per index by the composition root
    and handed to the steps (`Components.codec`) and to the sources whose snapshots it packs.

    A zstandard (de)compressor serves one thread at a time, and making one costs many times
    what packing a small state with it does, so each thread keeps its own: by thread id (and
    dictionary id), not in a threading.local, whose data Bytewax's threads lose each time they
    release the GIL (dataflow/logic/commit.py, `worker_index`). A thread id is reused only once
    its thread has ended.
    """

    def __init__(self, dictionary: bytes | None = None) -> None:
        self._dictionaries: dict[int, zstandard.ZstdCompressionDict] = {}
        self._compressors: dict[tuple[int, int], zstandard.ZstdCompressor] = {}
        self._decompressors: dict[tuple[int, int], zstandard.ZstdDecompressor] = {}
        self._current = _NO_DICTIONARY
        self.use_dictionary(dictionary)

    @property
    def dictionary(self) -> int | None:
        """The id of the dictionary small states are packed with, if any."""
        return self._current or None

    def use_dictionary(self, data: bytes | None) -> None:
        """Pack small states with the dictionary `data` from now on (None: with none), and
        read the states packed with it. Dictionaries given before stay readable. Called
        while no step packs (before a run, or after it)."""
        if data is None:
            self._current = _NO_DICTIONARY
            return
        dictionary = zstandard.ZstdCompressionDict(data)
        self._dictionaries[dictionary.dict_id()] = dictionary
        self._current = dictionary.dict_id()

    def pack(self, value: object) -> bytes:
        """`value` (plain data: tuples, strings, numbers, classes) as compressed bytes."""
        return self.compress(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))

    def unpack(self, blob: bytes) -> object:
        """The value `pack` made `blob` from."""
        return pickle.loads(self.raw(blob))

    def compress(self, data: bytes) -> bytes:
        """`data` compressed as `pack` does: with the current dictionary when it is small."""
        dictionary = self._current if len(data) < SMALL_STATE else _NO_DICTIONARY
        return self._compressor(dictionary).compress(data)

    def raw(self, blob: bytes) -> bytes:
        """The pickled state a packed `blob` holds."""
        return self._decompressor(zstandard.get_frame_parameters(blob).dict_id).decompress(blob)

    def _compressor(self, dictionary: int) -> zstandard.ZstdCompressor:
        key = (threading.get_ident(), dictionary)
        compressor = self._compressors.get(key)
        if compressor is None:
            if dictionary == _NO_DICTIONARY:
                compressor = zstandard.ZstdCompressor(level=COMPRESSION_LEVEL)
            else:
                compressor = zstandard.ZstdCompressor(
                    level=COMPRESSION_LEVEL, dict_data=self._dictionaries[dictionary]
                )
            self._compressors[key] = compressor
        return compressor

    def _decompressor(self, dictionary: int) -> zstandard.ZstdDecompressor:
        key = (threading.get_ident(), dictionary)
        decompressor = self._decompressors.get(key)
        if decompressor is None:
            if dictionary == _NO_DICTIONARY:
                decompressor = zstandard.ZstdDecompressor()
            elif dictionary in self._dictionaries:
                decompressor = zstandard.ZstdDecompressor(dict_data=self._dictionaries[dictionary])
            else:
                raise MissingDictionaryError(dictionary)
            self._decompressors[key] = decompressor
        return decompressor


def train_dictionary(samples: Sequence[bytes]) -> bytes | None:
    """A dictionary for states like `samples` (`SnapshotCodec.raw` of packed states), or None
    when they are too few to train one."""
    small: list[bytes | bytearray | memoryview] = [
        sample for sample in samples if len(sample) < SMALL_STATE
    ]
    if len(small) < DICTIONARY_SAMPLES:
        return None
    try:
        dictionary = zstandard.train_dictionary(DICTIONARY_SIZE, small)
    except zstandard.ZstdError:  # too little to learn from, whatever the count
        return None
    return bytes(dictionary.as_bytes())


def packed_with(blob: bytes) -> int | None:
    """The id of the dictionary `blob` was packed with, if any."""
    return zstandard.get_frame_parameters(blob).dict_id or None


def is_packed(blob: bytes) -> bool:
    """Whether `blob` is a packed state (a Zstandard frame)."""
    return blob[:4] == zstandard.FRAME_HEADER
