"""Context lines and their token counts (gateway/context.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.tokenizer import SUPPORTED_ENCODINGS, TiktokenTokenizer, load_encoding
from dataflow.core.contributions import EntityRecord
from gateway.context import ContextLines, chunk_line, chunk_line_tokens, entity_line
from gateway.types import RetrievedChunk, RetrievedEntity

# What a chunk's text may start and end with next to the line's fixed parts: digits (which
# would join the reference number if nothing kept them apart), quotes, escapes, spaces,
# newlines, letters of several scripts, emoji.
_TEXT = st.text(alphabet="0123456789\"\\'\n\r\t ,.:{}sStlé日🚀-", max_size=60)


def _chunk(text: str) -> RetrievedChunk:
    return RetrievedChunk(chunk_id="chunk-1", doc_id="d", file_path="d.md", text=text, score=0.0)


@given(number=st.integers(min_value=1, max_value=100_000), text=_TEXT)
def test_a_chunk_line_is_the_json_object_of_its_reference_and_text(number: int, text: str) -> None:
    line = chunk_line(number, _chunk(text))
    assert line == json.dumps({"reference_id": str(number), "content": text}, ensure_ascii=False)


@pytest.mark.parametrize("name", SUPPORTED_ENCODINGS)
@settings(max_examples=400, deadline=None)
@given(number=st.integers(min_value=1, max_value=100_000), text=_TEXT)
def test_a_chunk_line_counted_in_two_parts_counts_as_the_whole_line(
    name: str, number: int, text: str
) -> None:
    chunk = _chunk(text)
    whole = len(load_encoding(name).encode_ordinary(chunk_line(number, chunk)))
    assert chunk_line_tokens(number, chunk, TiktokenTokenizer(name)) == whole


def test_a_chunk_text_is_counted_once_whatever_reference_numbers_it_gets() -> None:
    class Counting:
        def __init__(self) -> None:
            self.texts: list[str] = []
            self.inner = TiktokenTokenizer()

        def count(self, text: str) -> int:
            self.texts.append(text)
            return self.inner.count(text)

    counter = Counting()
    chunk = _chunk("Tidewater Battery Lab stores solar power. " * 40)
    for number in (1, 2, 17, 1234):
        chunk_line_tokens(number, chunk, counter)
    assert sum(chunk.text in text for text in counter.texts) == 1


def _entity(description: str) -> RetrievedEntity:
    record = EntityRecord("tidewater", "Tidewater", "organization", description, (), (), ())
    return RetrievedEntity(record, score=0.0, degree=1)


def test_a_calls_context_lines_are_rendered_once_per_record_and_each_is_its_own() -> None:
    lines = ContextLines()
    first, reread = _entity("A battery lab."), _entity("A battery lab, renamed.")  # one key
    line = lines.entity(first)
    assert line == entity_line(first)
    assert lines.entity(first) is line  # the same object: rendered once
    # The same key read twice in a call (a write between the reads) keeps each record's line.
    assert lines.entity(reread) == entity_line(reread) != line
