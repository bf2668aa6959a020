"""Questions about the generated corpus whose gold documents are known by construction.

bench/corpus.py writes every document from a world of named people, organisations, places
and events, so which documents mention a name is a string search, not a judgement. Two kinds
of question, half each (seeded):

* ``pair``: two names that share a sentence somewhere in the corpus, asked as "How are A and
  B connected?"; gold: every document that mentions both (1 to `MAX_GOLD` of them). The
  relation between them is what a knowledge graph is for.
* ``entity``: one name mentioned in 2 to `MAX_GOLD` documents, asked as "What is known about
  A?"; gold: every document that mentions it.

A name counts where it is not part of a longer name of the world ("Kesh Valley" inside "the
2021 Kesh Valley Flood" is the event, not the valley), so gold sets follow what a reader
would say the document is about. Recall@10 is the share of a question's gold documents among
the first ten distinct documents of the retrieved chunks, in the order the system gives them
(bench/retrieval_eval.py's `score`, as for the team's dev set).
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from itertools import combinations

from bench.corpus import World
from bench.retrieval_eval import Question

MAX_GOLD = 4
SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")


class NameFinder:
    """Finds the world's names in a text; where names overlap, the longest one counts."""

    def __init__(self, names: Sequence[str]) -> None:
        longest_first = sorted(set(names), key=lambda name: (-len(name), name))
        alternatives = "|".join(re.escape(name) for name in longest_first)
        self._pattern = re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)")

    def mentions(self, text: str) -> set[str]:
        return {match.group(0) for match in self._pattern.finditer(text)}


def build_questions(
    world: World, corpus: Mapping[str, str], count: int, seed: int
) -> list[Question]:
    """`count` questions (half ``pair``, half ``entity``) with their gold documents."""
    finder = NameFinder(world.entity_names())
    documents_of: dict[str, set[str]] = defaultdict(set)
    pairs: set[tuple[str, str]] = set()
    for doc_id, text in corpus.items():
        for name in finder.mentions(text):
            documents_of[name].add(doc_id)
        for sentence in SENTENCE_BREAK.split(text):
            pairs.update(combinations(sorted(finder.mentions(sentence)), 2))
    rng = random.Random(f"kgstream-vs-lightrag-questions-{seed}")
    pair_gold = {
        pair: gold
        for pair in sorted(pairs)
        if 1 <= len(gold := documents_of[pair[0]] & documents_of[pair[1]]) <= MAX_GOLD
    }
    entity_gold = {
        name: gold for name, gold in sorted(documents_of.items()) if 2 <= len(gold) <= MAX_GOLD
    }
    wanted_pairs = min(count - count // 2, len(pair_gold))
    wanted_entities = min(count - wanted_pairs, len(entity_gold))
    questions = [
        Question(
            f"pair-{n}", f"How are {a} and {b} connected?", frozenset(pair_gold[(a, b)]), "pair"
        )
        for n, (a, b) in enumerate(rng.sample(sorted(pair_gold), wanted_pairs))
    ]
    questions += [
        Question(
            f"entity-{n}", f"What is known about {name}?", frozenset(entity_gold[name]), "entity"
        )
        for n, name in enumerate(rng.sample(sorted(entity_gold), wanted_entities))
    ]
    return questions
