import pytest

from connectors.embeddings.cache import CachedEmbedder


class CountingEmbedder:
    """A real (if tiny) embedder: vectors from character counts, and a call log."""

    model_name = "counting"
    dimension = 3

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        return [[float(len(t)), float(t.count("a")), 1.0] for t in texts]


def test_texts_seen_before_are_not_embedded_again_and_order_is_kept():
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, capacity=10)
    first = cached.embed(["alpha", "beta"])
    again = cached.embed(["beta", "gamma", "alpha", "gamma"])
    assert inner.calls == [["alpha", "beta"], ["gamma"]]
    assert again == [first[1], inner.embed(["gamma"])[0], first[0], inner.embed(["gamma"])[0]]
    assert (cached.hits, cached.misses) == (3, 3)  # a repeat within one call is a hit


def test_least_recently_used_texts_leave_first():
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, capacity=2)
    cached.embed(["a", "bb"])
    cached.embed(["a"])  # "a" is now more recent than "bb"
    cached.embed(["ccc"])  # evicts "bb"
    inner.calls.clear()
    cached.embed(["a", "bb", "ccc"])
    assert inner.calls == [["bb"]]


def test_capacity_must_be_positive():
    with pytest.raises(ValueError, match="capacity"):
        CachedEmbedder(CountingEmbedder(), capacity=0)
