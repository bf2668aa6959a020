"""The channel between a big key's step and its holder step, for the bases they resume with.

A big key's snapshot names its base, which the holder step ("entity_base", "relation_base";
dataflow/state/fragment_log.py) keeps. Both steps route a key to the same worker, so on a
resume the holder leaves the base here and the key claims it. Bytewax builds each step's
resumed keys before it runs them, but not one step's before the other's, so a key may ask
before its base is here: it waits, `wait_seconds` at most (dataflow/logic/fragments.py).

One channel per dataflow build, shared by the holder steps and the entity and relation
steps of every worker in the process; base ids are random, so bases never collide.
"""

from __future__ import annotations

BASE_WAIT_SECONDS = 120.0
"""How long a resumed key waits for its base before the run stops as damaged."""


class HeldBases:
    """The bases the holder steps resumed with, by id, until the key that names one claims
    it; `claimed` counts the claims."""

    def __init__(self, wait_seconds: float = BASE_WAIT_SECONDS) -> None:
        self.wait_seconds = wait_seconds
        self.claimed = 0
        self._bases: dict[bytes, bytes] = {}

    def leave(self, base_id: bytes, base: bytes) -> None:
        """A holder resumed with `base`: it waits here for its key."""
        self._bases[base_id] = base

    def withdraw(self, base_id: bytes) -> None:
        """The holder was given a new base before the key claimed this one."""
        self._bases.pop(base_id, None)

    def claim(self, base_id: bytes) -> bytes | None:
        """The base `base_id` names, once (None while its holder has not left it)."""
        base = self._bases.pop(base_id, None)
        if base is not None:
            self.claimed += 1
        return base
