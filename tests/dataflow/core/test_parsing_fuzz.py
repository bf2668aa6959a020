"""Fuzzing the extraction-reply parser with hostile text: invisible characters, deep JSON,
markers and delimiters in any order. It never raises, and what it returns is usable."""

from __future__ import annotations

import math
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from dataflow.core.naming import RELATION_ID_SEPARATOR, entity_key, relation_key
from dataflow.core.parsing import extraction_reply_problem, parse_extraction
from dataflow.core.prompts import ExtractionPromptOptions, build_extraction_messages

_PIECES = [
    *"<|#>()\"'`,{}[]: \n\t\\-*1.aAbZ",
    *("\u200b", "\u200d", "\ufeff", "\u202e", "\x00", "\x1f", "\x85", "\u2028", "e\u0301"),
    *("entity", "relation", "relationship", "content_keywords", "<|COMPLETE|>", "##", "<|COMPL"),
    *("<|#|>", "<|>", "|#|", '"entities"', '"relations"', '"name"', '"source"', '"target"'),
    *("```json\n", "```", "null", "1e999", "-1", "NaN", "Zoe Quist", "\u200bZoe\ufeff Quist"),
]
HOSTILE_REPLIES = st.one_of(
    st.text(), st.lists(st.sampled_from(_PIECES), max_size=120).map("".join)
)


@settings(max_examples=400, deadline=None)
@given(HOSTILE_REPLIES)
def test_parsing_hostile_replies_never_raises_and_yields_usable_records(text: str) -> None:
    result = parse_extraction(text)
    problem = extraction_reply_problem(text)

    for entity in result.entities:
        key = entity_key(entity.name)
        assert key and RELATION_ID_SEPARATOR not in key
        assert entity.type and entity.description
    for relation in result.relations:
        pair = relation_key(relation.source, relation.target)
        assert pair is not None and pair[0] != pair[1] and all(pair)
        assert math.isfinite(relation.strength) and relation.strength >= 0
    assert problem is None or isinstance(problem, str)
    if result.entities or result.relations or result.dropped.total:
        assert problem is None  # a reply with records is never called garbage
    assert parse_extraction(text) == result  # deterministic


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 20_000), st.sampled_from(["[", '{"a":', '{"entities": [']))
def test_deeply_nested_json_replies_are_garbage_not_a_recursion_error(
    depth: int, opener: str
) -> None:
    text = '{"entities": ' + opener * depth
    assert parse_extraction(text).entities == ()
    assert isinstance(extraction_reply_problem(text), str)


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.text(), st.lists(st.sampled_from(["`", "``", "```", "````", "a", "\n"])).map("".join)
    )
)
def test_a_chunk_text_cannot_leave_its_fence_in_the_extraction_prompt(text: str) -> None:
    prompt = build_extraction_messages(text, ExtractionPromptOptions())[-1].content
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))

    assert f"---Text---\n{fence}\n{text}\n{fence}\n" in prompt
    assert not re.search(rf"(?<!`){fence}`", text)  # no run in the text as long as the fence
