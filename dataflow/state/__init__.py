"""The indexer's saved state: how each keyed step's state becomes bytes, and what Bytewax
keeps of it in its recovery partitions. Nothing outside this package opens the recovery
partitions or imports `bytewax.recovery` (an import contract in pyproject.toml).

    codec.py         the snapshot codec: plain values pickled and Zstandard-compressed,
                     small ones with the index's own dictionary
    forms.py         the document, chunk and commit steps' states as their snapshots, and
                     an entity's or relation's fragments as rows
    fragments.py     the entity and relation steps' state, and its snapshot forms
    fragment_log.py  a big key's snapshot as the changes since its last whole packing
    held_bases.py    the channel through which a resumed big key gets its base
    partitions.py    a process's recovery partitions: made, stamped with the format, read,
                     tidied, compacted
    tables.py        every SQL statement run on Bytewax's tables
    errors.py        what can be wrong (kgstream/recovery.py says what to run about it)
"""
