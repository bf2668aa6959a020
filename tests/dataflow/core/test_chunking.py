"""Chunking by tokens, chunk ids and chunk diffs, with the real offline tiktoken."""

from __future__ import annotations

import hashlib
import itertools

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from connectors.tokenizer import TiktokenTokenizer
from dataflow.core.chunking import (
    Chunk,
    ChunkingOptions,
    chunk_document,
    chunk_id_for,
    diff_chunks,
    split_text,
    token_windows,
)

# Each of these is exactly one cl100k token, alone and after a space, so a
# text of them separated by single spaces has one token per word.
WORDS = (
    *("the", "cat", "dog", "house", "river", "blue", "green", "apple", "stone", "light"),
    *("water", "fire", "tree", "bird", "road", "city", "moon", "star", "sun", "rain"),
)

TOKENIZER = TiktokenTokenizer("cl100k_base")  # loaded once for the module

# Seeded: the same examples on every run, so a failure reproduces.
PROPERTY = settings(max_examples=60, deadline=None, derandomize=True)

words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=120)
small_options = st.integers(min_value=1, max_value=40).flatmap(
    lambda size: st.builds(
        ChunkingOptions,
        chunk_token_size=st.just(size),
        chunk_overlap_tokens=st.integers(min_value=0, max_value=size - 1),
    )
)


@pytest.fixture(scope="module")
def tokenizer() -> TiktokenTokenizer:
    return TOKENIZER


def test_every_word_is_one_token(tokenizer: TiktokenTokenizer) -> None:
    for word in WORDS:
        assert len(tokenizer.encode(word)) == 1, word
        assert len(tokenizer.encode(" " + word)) == 1, word


def _strip_edges(text: str) -> str:
    """Drop whitespace and cut-character markers (U+FFFD) from both ends."""
    previous = None
    while previous != text:
        previous = text
        text = text.strip().strip("\ufffd")
    return text


# --- windows -----------------------------------------------------------------


@settings(max_examples=200, derandomize=True)
@given(token_count=st.integers(min_value=0, max_value=3000), options=small_options)
def test_windows_cover_all_tokens_and_overlap_by_exactly_the_overlap(
    token_count: int, options: ChunkingOptions
) -> None:
    windows = token_windows(token_count, options)
    if token_count == 0:
        assert windows == ()
        return
    assert windows[0][0] == 0
    assert windows[-1][1] == token_count
    for start, end in windows:
        assert 0 < end - start <= options.chunk_token_size
    for (start, end), (next_start, next_end) in itertools.pairwise(windows):
        assert end - start == options.chunk_token_size  # only the last may be short
        assert end - next_start == options.chunk_overlap_tokens
        assert next_end > end  # every window adds tokens


# --- split_text ----------------------------------------------------------------


@PROPERTY
@given(text=st.text(max_size=400), options=small_options)
def test_chunks_are_non_empty_stripped_within_size_and_taken_from_the_text(
    text: str, options: ChunkingOptions
) -> None:
    pieces = split_text(text, TOKENIZER, options)
    for chunk_text, tokens in pieces:
        assert chunk_text
        assert chunk_text == chunk_text.strip()
        assert 1 <= tokens <= options.chunk_token_size
        assert _strip_edges(chunk_text) in text
    if not text.strip():
        assert pieces == []


@PROPERTY
@given(document_words=words, options=small_options)
def test_chunks_hold_every_token_once_plus_exactly_the_overlap(
    document_words: list[str], options: ChunkingOptions
) -> None:
    document = " ".join(document_words)
    pieces = split_text(document, TOKENIZER, options)
    chunk_words = [chunk_text.split(" ") for chunk_text, _ in pieces]
    assert [tokens for _, tokens in pieces] == [len(w) for w in chunk_words]
    overlap = options.chunk_overlap_tokens
    rebuilt = list(chunk_words[0])
    for previous, current in itertools.pairwise(chunk_words):
        assert current[:overlap] == previous[len(previous) - overlap :]
        rebuilt.extend(current[overlap:])
    assert rebuilt == document_words


def test_long_text_is_windowed_like_lightrag_without_its_redundant_tail(
    tokenizer: TiktokenTokenizer,
) -> None:
    document = " ".join(WORDS[i % len(WORDS)] for i in range(25))
    options = ChunkingOptions(chunk_token_size=10, chunk_overlap_tokens=3)
    pieces = split_text(document, tokenizer, options)
    # Same windows as LightRAG's range(0, 25, 7): starts 0, 7, 14 and 21.
    assert [tokens for _, tokens in pieces] == [10, 10, 10, 4]
    assert pieces[-1][0] == " ".join(WORDS[i % len(WORDS)] for i in range(21, 25))


def test_text_shorter_than_the_overlap_tail_gives_one_chunk(tokenizer: TiktokenTokenizer) -> None:
    # LightRAG emits a second window [7, 9) here, wholly inside the first.
    document = " ".join(WORDS[:9])
    options = ChunkingOptions(chunk_token_size=10, chunk_overlap_tokens=3)
    assert split_text(document, tokenizer, options) == [(document, 9)]


def test_split_by_character_keeps_fitting_pieces_whole_and_windows_long_ones(
    tokenizer: TiktokenTokenizer,
) -> None:
    long_piece = " ".join(WORDS[:12])
    document = f"  cat dog \n\n\n\n{long_piece}\n\n   \n\nsun"
    options = ChunkingOptions(chunk_token_size=5, chunk_overlap_tokens=1, split_by_character="\n\n")
    assert split_text(document, tokenizer, options) == [
        ("cat dog", 2),
        (" ".join(WORDS[0:5]), 5),
        (" ".join(WORDS[4:9]), 5),
        (" ".join(WORDS[8:12]), 4),
        ("sun", 1),
    ]


def test_split_by_character_only_windows_an_oversize_piece_instead_of_failing(
    tokenizer: TiktokenTokenizer,
) -> None:
    document = "cat dog\n\n" + " ".join(WORDS[:12])
    only = ChunkingOptions(
        chunk_token_size=5,
        chunk_overlap_tokens=1,
        split_by_character="\n\n",
        split_by_character_only=True,
    )
    not_only = ChunkingOptions(
        chunk_token_size=5, chunk_overlap_tokens=1, split_by_character="\n\n"
    )
    pieces = split_text(document, tokenizer, only)
    assert pieces == split_text(document, tokenizer, not_only)
    assert all(tokens <= 5 for _, tokens in pieces)
    assert len(pieces) == 4


def test_text_spelling_special_tokens_is_chunked_as_ordinary_text(
    tokenizer: TiktokenTokenizer,
) -> None:
    document = "intro <|endoftext|> middle <|endofprompt|> end"
    chunks = chunk_document("doc", "doc.txt", document, tokenizer, ChunkingOptions())
    assert [chunk.text for chunk in chunks] == [document]
    assert chunks[0].tokens == len(tokenizer.encode(document))


def test_blank_document_has_no_chunks(tokenizer: TiktokenTokenizer) -> None:
    options = ChunkingOptions(split_by_character="\n\n")
    assert chunk_document("doc", "doc.txt", " \n\n\t\n\n ", tokenizer, options) == ()
    assert chunk_document("doc", "doc.txt", "", tokenizer, ChunkingOptions()) == ()


# --- chunk_document and ids -------------------------------------------------------


@PROPERTY
@given(text=st.text(max_size=300), options=small_options)
def test_chunking_is_deterministic_and_ids_are_unique(text: str, options: ChunkingOptions) -> None:
    first = chunk_document("docs/a.md", "a.md", text, TOKENIZER, options)
    second = chunk_document("docs/a.md", "a.md", text, TiktokenTokenizer(), options)
    assert first == second
    assert [chunk.order for chunk in first] == list(range(len(first)))
    assert len({chunk.chunk_id for chunk in first}) == len(first)
    assert [(c.text, c.tokens) for c in first] == split_text(text, TOKENIZER, options)


paragraphs = st.lists(
    st.lists(st.sampled_from(WORDS), min_size=3, max_size=30).map(" ".join),
    min_size=1,
    max_size=8,
)


@PROPERTY
@given(
    before=paragraphs,
    data=st.data(),
    replacement=st.lists(st.sampled_from(WORDS), min_size=3, max_size=30).map(" ".join),
)
def test_editing_one_paragraph_keeps_the_other_paragraphs_chunk_ids(
    before: list[str], data: st.DataObject, replacement: str
) -> None:
    options = ChunkingOptions(
        chunk_token_size=12, chunk_overlap_tokens=3, split_by_character="\n\n"
    )
    k = data.draw(st.integers(min_value=0, max_value=len(before) - 1), label="k")
    after = [*before[:k], replacement, *before[k + 1 :]]
    old_texts = {text for text, _ in split_text(before[k], TOKENIZER, options)}
    new_texts = {text for text, _ in split_text(replacement, TOKENIZER, options)}
    other_texts = {
        text
        for i, paragraph in enumerate(before)
        if i != k
        for text, _ in split_text(paragraph, TOKENIZER, options)
    }
    # A repeated chunk text is numbered by occurrence, so an edit that creates
    # or removes a copy of another paragraph's chunk may renumber that copy.
    assume(not (old_texts | new_texts) & other_texts)

    old_chunks = chunk_document("doc", "doc.txt", "\n\n".join(before), TOKENIZER, options)
    new_chunks = chunk_document("doc", "doc.txt", "\n\n".join(after), TOKENIZER, options)
    new_ids = {chunk.chunk_id for chunk in new_chunks}
    untouched = [chunk.chunk_id for chunk in old_chunks if chunk.text not in old_texts]
    assert set(untouched) <= new_ids

    diff = diff_chunks([chunk.chunk_id for chunk in old_chunks], new_chunks)
    assert all(chunk.text in new_texts for chunk in diff.added)
    removed_texts = {chunk.chunk_id: chunk.text for chunk in old_chunks}
    assert all(removed_texts[chunk_id] in old_texts for chunk_id in diff.removed)


def test_identical_chunk_texts_get_distinct_ids_numbered_by_occurrence(
    tokenizer: TiktokenTokenizer,
) -> None:
    options = ChunkingOptions(split_by_character="\n\n")
    chunks = chunk_document("doc", "doc.txt", "same\n\nother\n\nsame\n\nsame", tokenizer, options)
    plain = chunk_id_for("doc", "same")
    assert [chunk.chunk_id for chunk in chunks] == [
        plain,
        chunk_id_for("doc", "other"),
        f"{plain}#1",
        f"{plain}#2",
    ]
    fewer = chunk_document("doc", "doc.txt", "same\n\nother\n\nsame", tokenizer, options)
    diff = diff_chunks([chunk.chunk_id for chunk in chunks], fewer)
    assert diff.added == ()
    assert diff.removed == (f"{plain}#2",)


def test_chunk_id_is_sha256_of_doc_id_nul_and_text() -> None:
    expected = "chunk-" + hashlib.sha256(b"docs/a.md\x00Hello").hexdigest()
    assert chunk_id_for("docs/a.md", "Hello") == expected
    assert chunk_id_for("a", "bc") != chunk_id_for("ab", "c")
    assert chunk_id_for("a", "text") != chunk_id_for("b", "text")


def test_chunk_id_rejects_doc_ids_that_would_be_ambiguous() -> None:
    with pytest.raises(ValueError, match="doc_id must not contain NUL"):
        chunk_id_for("a\x00b", "c")
    with pytest.raises(ValueError, match="doc_id must not be empty"):
        chunk_id_for("", "c")


def test_chunks_carry_document_identity_and_path(tokenizer: TiktokenTokenizer) -> None:
    options = ChunkingOptions(split_by_character="\n\n")
    chunks = chunk_document("k1", "notes/x.md", "cat dog\n\nsun", tokenizer, options)
    assert chunks == (
        Chunk(chunk_id_for("k1", "cat dog"), "k1", 0, "cat dog", 2, "notes/x.md"),
        Chunk(chunk_id_for("k1", "sun"), "k1", 1, "sun", 1, "notes/x.md"),
    )


# --- options -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"chunk_token_size": 0}, r"chunk_token_size must be > 0; got 0"),
        ({"chunk_token_size": -5}, r"chunk_token_size must be > 0; got -5"),
        (
            {"chunk_token_size": 100, "chunk_overlap_tokens": 100},
            r"chunk_overlap_tokens must be >= 0 and < chunk_token_size \(100\); got 100",
        ),
        (
            {"chunk_overlap_tokens": -1},
            r"chunk_overlap_tokens must be >= 0 and < chunk_token_size \(1200\); got -1",
        ),
        ({"split_by_character": ""}, r"split_by_character must be a non-empty string"),
    ],
)
def test_invalid_options_name_the_field_value_and_limit(
    kwargs: dict[str, object], expected: str
) -> None:
    with pytest.raises(ValueError, match=expected):
        ChunkingOptions(**kwargs)  # type: ignore[arg-type]


def test_default_options_are_lightrags() -> None:
    options = ChunkingOptions()
    assert (options.chunk_token_size, options.chunk_overlap_tokens) == (1200, 100)
    assert options.split_by_character is None
    assert options.split_by_character_only is False
    assert options.window_step == 1100


# --- diff_chunks ----------------------------------------------------------------


def _chunk(chunk_id: str, order: int = 0) -> Chunk:
    return Chunk(chunk_id, "doc", order, f"text of {chunk_id}", 3, "doc.txt")


def test_diff_of_an_unchanged_document_keeps_everything() -> None:
    chunks = [_chunk("a", 0), _chunk("b", 1)]
    diff = diff_chunks(["a", "b"], chunks)
    assert (diff.added, diff.removed, diff.kept) == ((), (), ("a", "b"))


def test_diff_of_a_new_document_adds_every_chunk_in_order() -> None:
    chunks = [_chunk("b", 0), _chunk("a", 1)]
    diff = diff_chunks([], chunks)
    assert diff.added == tuple(chunks)
    assert (diff.removed, diff.kept) == ((), ())


def test_diff_of_an_emptied_document_removes_every_previous_id_in_previous_order() -> None:
    diff = diff_chunks(["c", "a", "b"], [])
    assert (diff.added, diff.removed, diff.kept) == ((), ("c", "a", "b"), ())


def test_diff_of_an_edit_adds_new_removes_gone_and_keeps_the_rest() -> None:
    new = [_chunk("a", 0), _chunk("x", 1), _chunk("c", 2), _chunk("y", 3)]
    diff = diff_chunks(["a", "b", "c", "d"], new)
    assert diff.added == (new[1], new[3])
    assert diff.removed == ("b", "d")
    assert diff.kept == ("a", "c")


def test_diff_reports_repeated_ids_once() -> None:
    diff = diff_chunks(["a", "b", "b"], [_chunk("c"), _chunk("c")])
    assert diff.added == (_chunk("c"),)
    assert diff.removed == ("a", "b")
    assert diff.kept == ()
