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
import zlib

COMPRESSION_LEVEL = 1
"""zlib's fastest level: 4.8x on the entity states at 16,000 documents, against 5.7x at the
default level for twice the time; a hub is packed again in every epoch it is touched."""


def pack(value: object) -> bytes:
    """`value` (plain data: tuples, strings, numbers, classes) as compressed bytes."""
    return zlib.compress(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), COMPRESSION_LEVEL)


def unpack(blob: bytes) -> object:
    """The value `pack` made `blob` from."""
    return pickle.loads(zlib.decompress(blob))
