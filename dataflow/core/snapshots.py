"""How the big keyed states are written into Bytewax's recovery database.

Bytewax pickles every key a step touched in an epoch. Pickled as objects, the chunk, entity
and relation states were 35 times the corpus text at 16,000 documents (docs/design.md,
"Compact snapshots"): each object pickles its class and field names, and the rows repeat
chunk ids, paths and descriptions that compress well. So these states pickle as one
compressed blob of plain values (`pack`), restored by a module-level function that pickle
names once per state.

Most states are small (74,000 relations of one to four fragments at 16,000 documents), and a
few hundred bytes compress poorly on their own: the same words, paths and pickle framing in
every one. So an index trains one Zstandard dictionary on its own small states
(`train_dictionary`, at the end of its first run that has enough of them: kgstream/recovery.py)
and packs small states with it from then on (`use_dictionary`). Each blob names its
dictionary (Zstandard writes the id in the frame), so blobs packed before it still read.
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Sequence

import zstandard

COMPRESSION_LEVEL = 1
"""Zstandard's level 1: on the 16,000-document index's entity states, 5.6x in 0.28 s, where
zlib's fastest level gave 4.8x in 1.00 s; a hub is packed again in every epoch that touches
it, so packing is on the path of the edit that ends an epoch."""

SMALL_STATE = 64 * 1024
"""The pickled size under which a state is packed with the dictionary: a bigger one finds
its repeats in itself (a hub entity's state is megabytes)."""

DICTIONARY_SIZE = 64 * 1024
DICTIONARY_SAMPLES = 2_000
"""How many small states a dictionary is trained on, at least (and at most twice that): on
the 16,000-document index's relation states, trained on 2,000 of them in 0.17 s, relations
took 28.0 MB against 41.5 MB without and 27.7 MB trained on 20,000."""

_NO_DICTIONARY = 0  # a frame's dictionary id when it was compressed without one

# A zstandard (de)compressor serves one thread at a time, and making one costs 20 us against
# 1 us to pack a small state with it, so each thread keeps its own: by thread id (and
# dictionary id), not in a threading.local, whose data Bytewax's threads lose each time they
# release the GIL (dataflow/flow.py, `_WORKERS`). A thread id is reused only once its thread
# has ended.
_COMPRESSORS: dict[tuple[int, int], zstandard.ZstdCompressor] = {}
_DECOMPRESSORS: dict[tuple[int, int], zstandard.ZstdDecompressor] = {}
_DICTIONARIES: dict[int, zstandard.ZstdCompressionDict] = {}
_current = _NO_DICTIONARY  # the dictionary `pack` uses for small states


class MissingDictionaryError(LookupError):
    """A snapshot was packed with a dictionary this process has not been given."""


def use_dictionary(data: bytes | None) -> None:
    """Pack small states with the dictionary `data` from now on (None: with none), and read
    the states packed with it. Dictionaries given before stay readable."""
    global _current
    if data is None:
        _current = _NO_DICTIONARY
        return
    dictionary = zstandard.ZstdCompressionDict(data)
    _DICTIONARIES[dictionary.dict_id()] = dictionary
    _current = dictionary.dict_id()


def current_dictionary() -> int | None:
    """The id of the dictionary `pack` uses, if any."""
    return _current or None


def train_dictionary(samples: Sequence[bytes]) -> bytes | None:
    """A dictionary for states like `samples` (`raw` of packed states), or None when they
    are too few to train one."""
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


def pack(value: object) -> bytes:
    """`value` (plain data: tuples, strings, numbers, classes) as compressed bytes."""
    return compress(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def unpack(blob: bytes) -> object:
    """The value `pack` made `blob` from."""
    return pickle.loads(raw(blob))


def compress(data: bytes) -> bytes:
    """`data` compressed as `pack` does: with the current dictionary when it is small."""
    dictionary = _current if len(data) < SMALL_STATE else _NO_DICTIONARY
    return _compressor(dictionary).compress(data)


def raw(blob: bytes) -> bytes:
    """The pickled state a packed `blob` holds."""
    return _decompressor(zstandard.get_frame_parameters(blob).dict_id).decompress(blob)


def packed_with(blob: bytes) -> int | None:
    """The id of the dictionary `blob` was packed with, if any."""
    return zstandard.get_frame_parameters(blob).dict_id or None


def is_packed(blob: bytes) -> bool:
    """Whether `blob` is a packed state (a Zstandard frame)."""
    return blob[:4] == zstandard.FRAME_HEADER


def _compressor(dictionary: int) -> zstandard.ZstdCompressor:
    key = (threading.get_ident(), dictionary)
    compressor = _COMPRESSORS.get(key)
    if compressor is None:
        if dictionary == _NO_DICTIONARY:
            compressor = zstandard.ZstdCompressor(level=COMPRESSION_LEVEL)
        else:
            compressor = zstandard.ZstdCompressor(
                level=COMPRESSION_LEVEL, dict_data=_DICTIONARIES[dictionary]
            )
        _COMPRESSORS[key] = compressor
    return compressor


def _decompressor(dictionary: int) -> zstandard.ZstdDecompressor:
    key = (threading.get_ident(), dictionary)
    decompressor = _DECOMPRESSORS.get(key)
    if decompressor is None:
        if dictionary == _NO_DICTIONARY:
            decompressor = zstandard.ZstdDecompressor()
        elif dictionary in _DICTIONARIES:
            decompressor = zstandard.ZstdDecompressor(dict_data=_DICTIONARIES[dictionary])
        else:
            raise MissingDictionaryError(
                f"a recovery snapshot was compressed with dictionary {dictionary}, which the "
                "graph store does not hold: the recovery database and the stores are of "
                "different indexes (start from an empty data directory, or from both of "
                "one index)"
            )
        _DECOMPRESSORS[key] = decompressor
    return decompressor
