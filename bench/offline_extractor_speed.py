"""Words per second of the offline extractor on a seeded, news-like corpus.

Run: .venv/bin/python bench/offline_extractor_speed.py [--chunks N] [--words-per-chunk W]
Prints words/s (best of --repeats passes) and how many entities/relations it
found, so a speed-up that silently stops finding things shows up here too; a
baseline row (one regex tokenisation pass, no extraction) gives the ratio.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import results
from dataflow.core.offline.extractor import extract_offline


def _split(words: str) -> list[str]:
    return words.split()


_FIRST = _split("Alan Grace Maria John Wei Fatima Pierre Satya Jane Carlos Priya Olaf")
_LAST = _split("Turing Hopper Curie Smith Zhang Khan Dubois Nadella Doe Silva Patel Berg")
_ORGS = [
    "Acme Corp",
    "Globex Inc.",
    "the University of Cambridge",
    "NASA",
    "the European Space Agency",
    "Initech Labs",
    "Umbrella Group",
    "the World Health Organization",
    "Stark Industries",
    "the Bank of England",
]
_PLACES = _split("Berlin Paris Tokyo Nairobi Toronto Lagos Mumbai Oslo Lima Seoul")
_EVENTS = ["the Paris Summit", "the 2024 Olympics", "the Climate Conference", "Expo 2020"]
_TEMPLATES = [
    "{person} joined {org} in {place} after the {event} ended.",
    "On Monday, {org} announced that {person} will lead its new office in {place}.",
    "Dr. {person}, who studied the effect for years, presented the results at {event}.",
    "Shares of {org} rose 3.5% after analysts in {place} praised the plan, e.g. the pricing.",
    "Meanwhile, {org} and {org2} signed an agreement covering research and training.",
    "{person} said the data showed a steady increase in demand across {place}.",
]
_FILLER = _split(
    "the results suggest that a careful approach to measurement and reporting can reduce "
    "errors in large systems while keeping costs low for most users over time"
)


def generate_chunk(rng: random.Random, words_per_chunk: int) -> str:
    """One chunk of template sentences mixed with filler prose, about `words_per_chunk` words."""
    sentences: list[str] = []
    count = 0
    while count < words_per_chunk:
        if rng.random() < 0.6:
            sentence = rng.choice(_TEMPLATES).format(
                person=f"{rng.choice(_FIRST)} {rng.choice(_LAST)}",
                org=rng.choice(_ORGS),
                org2=rng.choice(_ORGS),
                place=rng.choice(_PLACES),
                event=rng.choice(_EVENTS),
            )
        else:
            filler = rng.choices(_FILLER, k=rng.randint(8, 25))
            sentence = " ".join(filler).capitalize() + "."
        sentences.append(sentence)
        count += len(sentence.split())
        if rng.random() < 0.15:
            sentences.append("\n\n")
    return " ".join(sentences)


def best_seconds(work: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--words-per-chunk", type=int, default=900)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    results.add_results_option(parser)
    run = results.BenchRun.start(__file__)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    chunks = [generate_chunk(rng, args.words_per_chunk) for _ in range(args.chunks)]
    words = sum(len(chunk.split()) for chunk in chunks)
    token = re.compile(r"\w+(?:['\-.&/]\w+)*|\S")
    baseline = best_seconds(lambda: [token.findall(chunk) for chunk in chunks], args.repeats)
    extract = best_seconds(lambda: [extract_offline(chunk) for chunk in chunks], args.repeats)
    extracted = [extract_offline(chunk) for chunk in chunks]
    entities = sum(len(r.entities) for r in extracted)
    relations = sum(len(r.relations) for r in extracted)
    print(
        f"corpus: {words:,} words in {len(chunks)} chunks (seed {args.seed}), "
        f"best of {args.repeats}"
    )
    print(f"baseline, regex tokenisation only: {words / baseline:>12,.0f} words/s   1.00x")
    print(
        f"offline extractor:                 {words / extract:>12,.0f} words/s   "
        f"{baseline / extract:.2f}x  ({entities:,} entities, {relations:,} relations)"
    )
    tables = [
        results.table(
            f"{words:,} words in {len(chunks)} chunks (seed {args.seed}), best of {args.repeats}",
            ("work", "words/s", "time against the baseline", "entities", "relations"),
            [
                ("regex tokenisation only (baseline)", f"{words / baseline:,.0f}", "1.00", "", ""),
                (
                    "offline extractor",
                    f"{words / extract:,.0f}",
                    f"{extract / baseline:.2f}",
                    f"{entities:,}",
                    f"{relations:,}",
                ),
            ],
        )
    ]
    run.write(args.results, "The offline extractor's speed", tables)


if __name__ == "__main__":
    main()
