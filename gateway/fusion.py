"""Reciprocal-rank fusion: one ranking from several, without comparing their scores.

Cosine similarities, BM25 sums and graph reachability live on different scales, so
kgstream fuses lanes by rank (Cormack et al., 2009): an item's fused score is the sum
over the lanes that found it of `weight / (k + rank)`. A small `k` favours the items a
lane ranks first; on the two-hop dev set (bench/retrieval_eval.py) k=10 keeps more of
both gold passages in the top five than the customary 60 (docs/decisions/0022-retrieval.md).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

RRF_K = 10


@dataclass(frozen=True)
class Lane(Generic[K]):
    """One ranking to fuse: keys best first (repeats ignored), and how much it counts."""

    keys: Sequence[K]
    weight: float = 1.0


def fuse(lanes: Sequence[Lane[K]], k: int = RRF_K) -> list[tuple[K, float]]:
    """Keys by fused score, highest first; ties keep the order in which keys were first
    seen (lane by lane), so the result is deterministic."""
    scores: dict[K, float] = {}
    for lane in lanes:
        for rank, key in enumerate(dict.fromkeys(lane.keys), start=1):
            scores[key] = scores.get(key, 0.0) + lane.weight / (k + rank)
    order = {key: position for position, key in enumerate(scores)}
    return sorted(scores.items(), key=lambda item: (-item[1], order[item[0]]))
