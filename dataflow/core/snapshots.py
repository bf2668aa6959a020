"""How the big keyed states are written into Bytewax's recovery database.

Bytewax pickles every key a step touched in an epoch. Pickled as objects, the chunk, entity
and relation states were 35 times the corpus text at 16,000 documents (docs/design.md,
"Compact snapshots"): each object pickles its class and field names, and the rows repeat
chunk ids, paths and descriptions that compress well. So these states pickle as one
compressed blob of plain values (`pack`), restored by a module-level function that pickle
names once per state.
"""

from __future__ import annotations

import pickle
import threading

import zstandard

COMPRESSION_LEVEL = 1
"""Zstandard's level 1: on the 16,000-document index's entity states, 5.6x in 0.28 s, where
zlib's fastest level gave 4.8x in 1.00 s; a hub is packed again in every epoch that touches
it, so packing is on the path of the edit that ends an epoch."""

# A zstandard (de)compressor serves one thread at a time, and making one costs 20 us against
# 1 us to pack a small state with it, so each thread keeps its own: by thread id, not in a
# threading.local, whose data Bytewax's threads lose each time they release the GIL
# (dataflow/flow.py, `_WORKERS`). A thread id is reused only once its thread has ended.
_COMPRESSORS: dict[int, zstandard.ZstdCompressor] = {}
_DECOMPRESSORS: dict[int, zstandard.ZstdDecompressor] = {}


def pack(value: object) -> bytes:
    """`value` (plain data: tuples, strings, numbers, classes) as compressed bytes."""
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return _compressor().compress(data)


def unpack(blob: bytes) -> object:
    """The value `pack` made `blob` from."""
    return pickle.loads(_decompressor().decompress(blob))


def _compressor() -> zstandard.ZstdCompressor:
    thread = threading.get_ident()
    compressor = _COMPRESSORS.get(thread)
    if compressor is None:
        compressor = _COMPRESSORS[thread] = zstandard.ZstdCompressor(level=COMPRESSION_LEVEL)
    return compressor


def _decompressor() -> zstandard.ZstdDecompressor:
    thread = threading.get_ident()
    decompressor = _DECOMPRESSORS.get(thread)
    if decompressor is None:
        decompressor = _DECOMPRESSORS[thread] = zstandard.ZstdDecompressor()
    return decompressor
