"""The Bytewax logic of the dataflow's steps: what each step does with the items it gets, its
state between them and its snapshot. dataflow/flow.py wires them; the state changes are the
pure functions of dataflow/core, and the snapshots' forms are dataflow/state's.

    keyed.py      the document and chunk steps (`packed_flat_map`)
    extract.py    the extract step: chunks to the extraction pool, passed on in order
    fragments.py  the entity and relation steps, and the holder steps of their big keys' bases
    commit.py     render, write records, the document commit step and the stores sink
"""
