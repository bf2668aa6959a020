"""Local embedder throughput: paragraphs/s for all-MiniLM-L6-v2 (int8 ONNX) on this CPU.

Run: .venv/bin/python bench/embedding_speed.py [--paragraphs 200] [--chunks 24] [--seed 7]

Embeds the same seeded, generated paragraphs (40-160 words, like entity descriptions and short
chunks) with the model as shipped (float products): batch 32 (and the default padded-token cap
per batch) at 1 and 2 onnxruntime threads, then two baselines at 1 thread: plain batches of 32
(no token cap) and one text per run; then the default, quantized copy (int8 products, one text
per run, see connectors/embeddings/local.py) at 1 and 2 threads. Each figure is printed with its
ratio to the first row.

Then the long-text case: seeded chunks of about 1200 tiktoken tokens (cl100k_base, LightRAG's
default chunk size; ~1300-1400 WordPiece tokens), embedded whole as overlapping 256-token
windows (the default) and cut at 256 tokens (``long_text="truncate"``), at 1 thread;
windows are also timed without the padded-token cap, so windows of several chunks share a
batch, and with the quantized copy. Ratios there are to the truncating row. Model loading and
one warm-up call are excluded from the timings; the machine's other load is not, so compare rows
of one run.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import results
from connectors.embeddings.local import (
    LocalEmbeddingOptions,
    LocalMiniLMEmbedder,
    minilm_tokenizer_json,
)
from connectors.tokenizer import load_encoding

_WORDS = [
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "graph",
    "vector",
    "stream",
    "index",
    "document",
    "chunk",
    "entity",
    "relation",
    "query",
    "answer",
    "river",
    "mountain",
    "city",
    "market",
    "teacher",
    "engine",
    "harbour",
    "storm",
    "company",
    "founded",
    "research",
    "network",
    "protocol",
    "partition",
    "replica",
    "leader",
    "follower",
    "latency",
    "throughput",
    "memory",
    "disk",
    "snapshot",
    "recovery",
    "offset",
    "consumer",
    "producer",
    "topic",
    "cluster",
    "worker",
]


def generate_paragraphs(count: int, seed: int) -> list[str]:
    """Seeded pseudo-prose: sentences of 6-20 words, 40-160 words per paragraph."""
    rng = random.Random(seed)
    paragraphs = []
    for _ in range(count):
        target = rng.randint(40, 160)
        sentences: list[str] = []
        words = 0
        while words < target:
            length = rng.randint(6, 20)
            sentence = " ".join(rng.choice(_WORDS) for _ in range(length))
            sentences.append(sentence[0].upper() + sentence[1:] + ".")
            words += length
        paragraphs.append(" ".join(sentences))
    return paragraphs


def generate_chunks(count: int, seed: int, tokens: int = 1200) -> list[str]:
    """Seeded pseudo-prose chunks of about ``tokens`` tiktoken (cl100k_base) tokens each."""
    encoding = load_encoding("cl100k_base")
    rng = random.Random(seed)
    pool = generate_paragraphs(count * 12, seed + 1)
    chunks = []
    for _ in range(count):
        parts: list[str] = []
        while len(encoding.encode(" ".join(parts))) < tokens:
            parts.append(rng.choice(pool))
        ids = encoding.encode(" ".join(parts))[:tokens]
        chunks.append(encoding.decode(ids))
    return chunks


def count_wordpiece_tokens(texts: list[str]) -> list[int]:
    """MiniLM's own token counts ([CLS] and [SEP] included), untruncated."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(minilm_tokenizer_json())
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return [len(encoding.ids) for encoding in tokenizer.encode_batch(texts)]


_NO_TOKEN_CAP = 1_000_000


def measure(paragraphs: list[str], options: LocalEmbeddingOptions) -> float:
    """Paragraphs per second for one configuration."""
    embedder = LocalMiniLMEmbedder(options)
    embedder.embed(paragraphs[:4])  # load + warm up
    started = time.perf_counter()
    embedder.embed(paragraphs)
    return len(paragraphs) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paragraphs", type=int, default=200)
    parser.add_argument("--chunks", type=int, default=24)
    parser.add_argument("--seed", type=int, default=7)
    results.add_results_option(parser)
    run = results.BenchRun.start(__file__)
    args = parser.parse_args()
    paragraphs = generate_paragraphs(args.paragraphs, args.seed)
    words = sum(len(p.split()) for p in paragraphs) / len(paragraphs)
    print(f"{len(paragraphs)} paragraphs, mean {words:.0f} words, seed {args.seed}")
    default_cap = LocalEmbeddingOptions().max_batch_tokens
    shipped = LocalEmbeddingOptions(quantized=False)
    configurations = [
        (
            f"as shipped, batch 32, <= {default_cap} tokens, 1 thread ",
            replace(shipped, threads=1),
        ),
        (
            f"as shipped, batch 32, <= {default_cap} tokens, 2 threads",
            replace(shipped, threads=2),
        ),
        (
            "as shipped, batch 32, no token cap,    1 thread ",
            replace(shipped, threads=1, max_batch_tokens=_NO_TOKEN_CAP),
        ),
        (
            "as shipped, batch  1,                  1 thread ",
            replace(shipped, threads=1, batch_size=1),
        ),
        ("quantized, one text a run,            1 thread ", LocalEmbeddingOptions(threads=1)),
        ("quantized, one text a run,            2 threads", LocalEmbeddingOptions(threads=2)),
    ]
    baseline: float | None = None
    short_rows = []
    for label, options in configurations:
        rate = measure(paragraphs, options)
        baseline = baseline or rate
        print(f"{label}  {rate:7.1f} paragraphs/s  ({rate / baseline:.2f}x first row)")
        short_rows.append((" ".join(label.split()), f"{rate:.1f}", f"{rate / baseline:.2f}"))

    chunks = generate_chunks(args.chunks, args.seed)
    wordpieces = count_wordpiece_tokens(chunks)
    print(
        f"\n{len(chunks)} chunks of 1200 tiktoken tokens "
        f"({min(wordpieces)}-{max(wordpieces)} MiniLM tokens), seed {args.seed}"
    )
    long_configurations = [
        (
            f"as shipped, truncate at 256,  <= {default_cap} tokens, 1 thread",
            replace(shipped, threads=1, long_text="truncate"),
        ),
        (
            f"as shipped, windows 256/32,   <= {default_cap} tokens, 1 thread",
            replace(shipped, threads=1),
        ),
        (
            "as shipped, windows 256/32,   no token cap,    1 thread",
            replace(shipped, threads=1, max_batch_tokens=_NO_TOKEN_CAP),
        ),
        (
            "quantized,  windows 256/32,   one a run,       1 thread",
            LocalEmbeddingOptions(threads=1),
        ),
    ]
    baseline = None
    long_rows = []
    for label, options in long_configurations:
        rate = measure(chunks, options)
        baseline = baseline or rate
        print(f"{label}  {rate:7.2f} chunks/s  ({rate / baseline:.2f}x truncating)")
        long_rows.append((" ".join(label.split()), f"{rate:.2f}", f"{rate / baseline:.2f}"))
    tables = [
        results.table(
            f"{len(paragraphs)} paragraphs of {words:.0f} words on average",
            ("model, batches, threads", "paragraphs/s", "against the first row"),
            short_rows,
        ),
        results.table(
            f"{len(chunks)} chunks of 1,200 tiktoken tokens "
            f"({min(wordpieces)}-{max(wordpieces)} MiniLM tokens)",
            ("model, long texts, batches, threads", "chunks/s", "against truncating"),
            long_rows,
        ),
    ]
    run.write(args.results, "The local embedding model's speed", tables)


if __name__ == "__main__":
    main()
