"""Specification of `parse_extraction`: every shape of model reply it must read."""

from __future__ import annotations

import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from dataflow.core.extraction import DropCounts, ExtractedEntity, ExtractedRelation, Extraction
from dataflow.core.naming import relation_key
from dataflow.core.parsing import parse_extraction

ALAN = ExtractedEntity("Alan Turing", "person", "Alan Turing was a British mathematician.")
BLETCHLEY = ExtractedEntity("Bletchley Park", "geo", "Bletchley Park was a codebreaking site.")
WORKED_AT = ExtractedRelation(
    "Alan Turing",
    "Bletchley Park",
    ("employment", "codebreaking"),
    "Alan Turing worked at Bletchley Park during the war.",
    0.9,
)

WELL_FORMED = (
    "entity<|#|>Alan Turing<|#|>person<|#|>Alan Turing was a British mathematician.\n"
    "entity<|#|>Bletchley Park<|#|>geo<|#|>Bletchley Park was a codebreaking site.\n"
    "relation<|#|>Alan Turing<|#|>Bletchley Park<|#|>employment, codebreaking"
    "<|#|>Alan Turing worked at Bletchley Park during the war.<|#|>0.9\n"
    "<|COMPLETE|>"
)


# --- the current delimited format --------------------------------------------


def test_well_formed_delimited_output_yields_exact_records() -> None:
    assert parse_extraction(WELL_FORMED) == Extraction(
        entities=(ALAN, BLETCHLEY), relations=(WORKED_AT,)
    )


def test_relation_without_strength_field_gets_strength_one() -> None:
    text = "relation<|#|>Alan Turing<|#|>Bletchley Park<|#|>employment<|#|>Worked there."
    (relation,) = parse_extraction(text).relations
    assert relation.strength == 1.0
    assert relation.keywords == ("employment",)
    assert relation.description == "Worked there."


def test_missing_completion_marker_still_yields_records() -> None:
    text = WELL_FORMED.replace("<|COMPLETE|>", "")
    assert parse_extraction(text) == Extraction(entities=(ALAN, BLETCHLEY), relations=(WORKED_AT,))


def test_truncated_last_record_is_dropped_and_counted_while_earlier_ones_are_kept() -> None:
    text = (
        "entity<|#|>Alan Turing<|#|>person<|#|>Alan Turing was a British mathematician.\n"
        "entity<|#|>Bletchley Park<|#|>geo<|#|>Bletchley Park was a codebreaking site.\n"
        "relation<|#|>Alan Turing<|#|>Bletchley Park<|#|>employm"
    )
    assert parse_extraction(text) == Extraction(
        entities=(ALAN, BLETCHLEY), dropped=DropCounts(malformed_relations=1)
    )


def test_truncated_entity_and_truncated_completion_marker() -> None:
    text = (
        "entity<|#|>Alan Turing<|#|>person<|#|>Alan Turing was a British mathematician.\n"
        "entity<|#|>Bletchley Park<|#|>ge\n"
        "<|COMPL"
    )
    assert parse_extraction(text) == Extraction(
        entities=(ALAN,), dropped=DropCounts(malformed_entities=1)
    )


def test_completion_marker_cut_right_after_the_last_field_does_not_leak_into_it() -> None:
    text = "entity<|#|>Alan Turing<|#|>person<|#|>Alan Turing was a British mathematician.<|COMP"
    assert parse_extraction(text).entities == (ALAN,)


def test_records_on_both_sides_of_the_completion_marker_are_kept() -> None:
    text = (
        "entity<|#|>Alan Turing<|#|>person<|#|>Alan Turing was a British mathematician."
        "<|COMPLETE|>entity<|#|>Bletchley Park<|#|>geo<|#|>Bletchley Park was a codebreaking site."
        "\n<|complete|>"
    )
    assert parse_extraction(text).entities == (ALAN, BLETCHLEY)


def test_hash_record_separators_split_records_on_one_line() -> None:
    text = (
        "entity<|#|>Alan Turing<|#|>person<|#|>Alan Turing was a British mathematician.##"
        "entity<|#|>Bletchley Park<|#|>geo<|#|>Bletchley Park was a codebreaking site.##"
        "<|COMPLETE|>"
    )
    assert parse_extraction(text).entities == (ALAN, BLETCHLEY)


def test_hashes_inside_a_description_are_not_record_separators() -> None:
    text = "entity<|#|>C Sharp<|#|>category<|#|>C## is a typo for C#, ## marks headings."
    (entity,) = parse_extraction(text).entities
    assert entity.description == "C## is a typo for C#, ## marks headings."


def test_parentheses_quotes_fences_bullets_and_prose_are_tolerated() -> None:
    text = (
        "Here are the records you asked for:\n"
        "```text\n"
        '  ("entity"<|#|>"Alan Turing"<|#|>"person"<|#|>"Alan Turing was a British '
        'mathematician.")  \n'
        "\n"
        "- entity<|#|> Bletchley Park <|#|> geo <|#|>  Bletchley   Park was a codebreaking "
        "site.\n"
        "1. relation<|#|>'Alan Turing'<|#|>“Bletchley Park”<|#|>\"employment, codebreaking\""
        '<|#|>Alan Turing worked at Bletchley Park during the war.<|#|>"0.9")\n'
        "```\n"
        "<|COMPLETE|>\n"
    )
    assert parse_extraction(text) == Extraction(entities=(ALAN, BLETCHLEY), relations=(WORKED_AT,))


def test_stray_closing_parenthesis_is_removed_but_balanced_ones_are_kept() -> None:
    text = (
        "entity<|#|>Alan Turing<|#|>person<|#|>A mathematician (and codebreaker)\n"
        "entity<|#|>Bletchley Park<|#|>geo<|#|>A codebreaking site.)\n"
    )
    entities = parse_extraction(text).entities
    assert [e.description for e in entities] == [
        "A mathematician (and codebreaker)",
        "A codebreaking site.",
    ]


def test_trailing_delimiter_is_not_an_extra_field() -> None:
    text = "entity<|#|>Alan Turing<|#|>person<|#|>Alan Turing was a British mathematician.<|#|>"
    assert parse_extraction(text).entities == (ALAN,)


def test_relationship_word_in_the_current_format_keeps_the_current_field_order() -> None:
    text = "relationship<|#|>A<|#|>B<|#|>trade, supply<|#|>A supplies B.<|#|>0.5"
    (relation,) = parse_extraction(text).relations
    assert relation == ExtractedRelation("A", "B", ("trade", "supply"), "A supplies B.", 0.5)


# --- mixed and corrupted delimiters ---------------------------------------------


def test_mixed_and_corrupted_delimiters_are_read_in_the_current_format() -> None:
    text = (
        "entity<|>Alan Turing<|#|>person<|#|>Alan Turing was a British mathematician.\n"
        "entity<|#|Bletchley Park|#|>geo|#|Bletchley Park was a codebreaking site.\n"
        "relation<|##|>Alan Turing<|#>Bletchley Park<#|>employment, codebreaking<|>"
        "Alan Turing worked at Bletchley Park during the war.<|#|>0.9\n"
        "<|COMPLETE|>"
    )
    assert parse_extraction(text) == Extraction(entities=(ALAN, BLETCHLEY), relations=(WORKED_AT,))


def test_a_lone_hash_or_pipe_in_text_is_not_a_delimiter() -> None:
    text = "entity<|#|>C#<|#|>category<|#|>C# is a language; a|b is a pipe, #1 a rank."
    (entity,) = parse_extraction(text).entities
    assert entity.description == "C# is a language; a|b is a pipe, #1 a rank."


# --- LightRAG's old format --------------------------------------------------------


OLD_FORMAT = (
    '("entity"<|>"Alex"<|>"person"<|>"Alex is a character who observes others.")##\n'
    '("entity"<|>"Taylor"<|>"person"<|>"Taylor shows authoritarian certainty.")##\n'
    '("relationship"<|>"Alex"<|>"Taylor"<|>"Alex is affected by Taylor\'s certainty."'
    '<|>"power dynamics, perspective shift"<|>7)##\n'
    '("content_keywords"<|>"power dynamics, discovery")<|COMPLETE|>'
)


def test_old_format_reads_description_before_keywords_and_ignores_content_keywords() -> None:
    assert parse_extraction(OLD_FORMAT) == Extraction(
        entities=(
            ExtractedEntity("Alex", "person", "Alex is a character who observes others."),
            ExtractedEntity("Taylor", "person", "Taylor shows authoritarian certainty."),
        ),
        relations=(
            ExtractedRelation(
                "Alex",
                "Taylor",
                ("power dynamics", "perspective shift"),
                "Alex is affected by Taylor's certainty.",
                7.0,
            ),
        ),
    )


def test_old_format_on_one_line_with_relation_word_and_quoted_strength() -> None:
    text = (
        '("entity"<|>"Alex"<|>"person"<|>"Alex observes.")##("relation"<|>"Alex"<|>"Jordan"'
        '<|>"They share a goal."<|>"shared goals"<|>"6")##<|COMPLETE|>'
    )
    result = parse_extraction(text)
    assert result.entities == (ExtractedEntity("Alex", "person", "Alex observes."),)
    assert result.relations == (
        ExtractedRelation("Alex", "Jordan", ("shared goals",), "They share a goal.", 6.0),
    )
    assert result.dropped == DropCounts()


# --- JSON -------------------------------------------------------------------------


def test_plain_json_yields_exact_records() -> None:
    text = json.dumps(
        {
            "entities": [
                {"name": ALAN.name, "type": "Person", "description": ALAN.description},
                {"name": BLETCHLEY.name, "type": "geo", "description": BLETCHLEY.description},
            ],
            "relations": [
                {
                    "source": WORKED_AT.source,
                    "target": WORKED_AT.target,
                    "keywords": ["employment", "codebreaking", "Employment"],
                    "description": WORKED_AT.description,
                    "strength": 0.9,
                }
            ],
        }
    )
    assert parse_extraction(text) == Extraction(entities=(ALAN, BLETCHLEY), relations=(WORKED_AT,))


def test_fenced_json_with_prose_and_alternative_key_names() -> None:
    text = (
        "Sure! Here is the extraction:\n```json\n"
        + json.dumps(
            {
                "Entities": [
                    {
                        "entity_name": ALAN.name,
                        "entity_type": "person",
                        "entity_description": ALAN.description,
                    },
                    {"name": "Bletchley Park", "type": "GEO", "description": BLETCHLEY.description},
                ],
                "relationships": [
                    {
                        "src_id": WORKED_AT.source,
                        "tgt_id": WORKED_AT.target,
                        "keywords": "employment, codebreaking",
                        "relationship_description": WORKED_AT.description,
                        "weight": "0.9",
                    },
                    {
                        "source_entity": "Alan Turing",
                        "target_entity": "Enigma",
                        "description": "Alan Turing helped break Enigma.",
                    },
                ],
            },
            indent=2,
        )
        + "\n```\n<|COMPLETE|>"
    )
    result = parse_extraction(text)
    assert result.entities == (ALAN, BLETCHLEY)
    assert result.relations == (
        WORKED_AT,
        ExtractedRelation("Alan Turing", "Enigma", (), "Alan Turing helped break Enigma.", 1.0),
    )
    assert result.dropped == DropCounts()


def test_json_items_with_missing_fields_or_wrong_shapes_are_counted() -> None:
    text = json.dumps(
        {
            "entities": [
                {"name": "Alan Turing", "type": "person"},
                {"name": "", "type": "person", "description": "Nameless."},
                "Bletchley Park",
                {"name": 1984, "type": "category", "description": "A year."},
            ],
            "relations": [
                {"source": "A", "target": "B", "description": "", "keywords": []},
                {"source": "A", "target": "a", "description": "Loop.", "keywords": []},
                ["A", "B"],
                {"source": "A", "target": "B", "description": "Ok.", "strength": True},
            ],
            "content_keywords": ["ignored"],
        }
    )
    result = parse_extraction(text)
    assert result.entities == (ExtractedEntity("1984", "category", "A year."),)
    assert result.relations == (ExtractedRelation("A", "B", (), "Ok.", 1.0),)
    assert result.dropped == DropCounts(
        malformed_entities=3, malformed_relations=2, unknown_records=0, self_loops=1
    )


def test_json_without_entity_keys_falls_back_to_delimited_parsing() -> None:
    text = '{"note": "x"}\n' + WELL_FORMED
    assert parse_extraction(text).entities == (ALAN, BLETCHLEY)


def test_deeply_nested_or_truncated_json_does_not_raise() -> None:
    assert parse_extraction('{"entities": ' + "[" * 100_000) == Extraction()
    assert parse_extraction('```json\n{"entities": [{"name": "A", "ty') == Extraction()


# --- field rules and drop counting --------------------------------------------------


def test_drop_counts_are_exact_for_each_reason() -> None:
    text = "\n".join(
        [
            "entity<|#|>Alan Turing<|#|>person<|#|>Alan Turing was a British mathematician.",
            "entity<|#|><|#|>person<|#|>No name.",  # malformed entity
            "entity<|#|>X<|#|><|#|>No type.",  # malformed entity
            "entity<|#|>Y<|#|>person<|#|>   ",  # malformed entity (blank description)
            "entity<|#|>Z<|#|>person<|#|>d<|#|>extra<|#|>fields",  # malformed entity
            "relation<|#|>A<|#|>B<|#|>kw",  # malformed relation (too few fields)
            "relation<|#|>A<|#|><|#|>kw<|#|>No target.",  # malformed relation
            "relation<|#|>Alan Turing<|#|>ALAN  TURING<|#|>self<|#|>Loop.",  # self loop
            "claim<|#|>A<|#|>something",  # unknown record kind
            "content_keywords<|#|>ignored, not counted",
            "just some prose without delimiters",
            "<|COMPLETE|>",
        ]
    )
    result = parse_extraction(text)
    assert result.entities == (ALAN,)
    assert result.relations == ()
    assert result.dropped == DropCounts(
        malformed_entities=4, malformed_relations=2, unknown_records=1, self_loops=1
    )


def test_unparseable_or_invalid_strength_becomes_one_without_a_drop() -> None:
    lines = [
        f"relation<|#|>A{i}<|#|>B<|#|>kw<|#|>Related.<|#|>{value}"
        for i, value in enumerate(["high", "-2", "nan", "inf", "1e999", "", "'0.4'"])
    ]
    result = parse_extraction("\n".join(lines))
    assert [r.strength for r in result.relations] == [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.4]
    assert result.dropped == DropCounts()


def test_entity_types_are_lowercased_with_underscores_and_first_of_a_list() -> None:
    text = "\n".join(
        [
            "entity<|#|>A<|#|>Market Trend<|#|>d",
            "entity<|#|>B<|#|>PERSON<|#|>d",
            "entity<|#|>C<|#|>person, organization<|#|>d",
            "entity<|#|>D<|#|>`Economic  Policy`<|#|>d",
            "entity<|#|>E<|#|>per<son<|#|>d",
        ]
    )
    result = parse_extraction(text)
    assert [(e.name, e.type) for e in result.entities] == [
        ("A", "market_trend"),
        ("B", "person"),
        ("C", "person"),
        ("D", "economic_policy"),
    ]
    assert result.dropped == DropCounts(malformed_entities=1)


def test_keywords_are_split_stripped_and_deduplicated_in_order() -> None:
    text = "relation<|#|>A<|#|>B<|#|> trade , supply,, Trade ，logistics ,<|#|>Related."
    (relation,) = parse_extraction(text).relations
    assert relation.keywords == ("trade", "supply", "logistics")


def test_names_are_cleaned_and_duplicates_merge_with_the_longer_description() -> None:
    text = "\n".join(
        [
            'entity<|#|>"  Alan   Turing "<|#|>person<|#|>Short.',
            "entity<|#|>ALAN TURING<|#|>person<|#|>A much longer description.",
            "entity<|#|>alan turing<|#|>person<|#|>Tiny.",
            "relation<|#|>Alan Turing<|#|>Enigma<|#|>kw<|#|>Broke it.",
            "relation<|#|>enigma<|#|>alan turing<|#|>kw<|#|>Broke the Enigma cipher.",
        ]
    )
    result = parse_extraction(text)
    assert result.entities == (
        ExtractedEntity("ALAN TURING", "person", "A much longer description."),
    )
    assert result.relations == (
        ExtractedRelation("enigma", "alan turing", ("kw",), "Broke the Enigma cipher.", 1.0),
    )


# --- garbage -------------------------------------------------------------------------


def test_garbage_yields_an_empty_extraction() -> None:
    noise = random.Random(20261101).randbytes(8192).decode("utf-8", errors="replace")
    for text in ["", "   \n\t", "<|COMPLETE|>", "<|", "##", "```\n```", noise, "{}", "[]"]:
        assert parse_extraction(text) == Extraction(), repr(text[:40])


def test_long_runs_of_delimiter_characters_parse_quickly() -> None:
    # Quadratic backtracking would take minutes here (and hit the pytest timeout).
    for text in ["#" * 200_000, "|#" * 100_000, "<|" * 100_000, "{" * 100_000, " ##" * 50_000]:
        assert isinstance(parse_extraction(text), Extraction)


_WORDS = st.text(alphabet="abcdefghXYZ0123 .'-", min_size=1, max_size=20).filter(
    lambda s: any(c.isalpha() for c in s)
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(_WORDS, _WORDS, _WORDS), min_size=1, max_size=5),
    st.lists(
        st.tuples(_WORDS, _WORDS, st.lists(_WORDS, max_size=3), _WORDS, st.floats(0, 10)),
        max_size=5,
    ),
)
def test_rendered_records_parse_back_to_the_same_cleaned_values(
    entities: list[tuple[str, str, str]],
    relations: list[tuple[str, str, list[str], str, float]],
) -> None:
    lines = [f"entity<|#|>{n}<|#|>{t}<|#|>{d}" for n, t, d in entities]
    lines += [
        f"relation<|#|>{s}<|#|>{t}<|#|>{', '.join(k)}<|#|>{d}<|#|>{w!r}"
        for s, t, k, d, w in relations
    ]
    result = parse_extraction("\n".join([*lines, "<|COMPLETE|>"]))
    expected = parse_extraction(
        json.dumps(
            {
                "entities": [{"name": n, "type": t, "description": d} for n, t, d in entities],
                "relations": [
                    {"source": s, "target": t, "keywords": k, "description": d, "strength": w}
                    for s, t, k, d, w in relations
                ],
            }
        )
    )
    assert result == expected
    assert len(result.entities) + result.dropped.malformed_entities <= len(entities)
    for entity in result.entities:
        assert entity.type == entity.type.lower().strip()
        assert " " not in entity.type


_RECORDISH = st.lists(
    st.sampled_from(
        [
            *"<|#>()\"'`,{}[]: \n\t\\-*1.aAb",
            *("entity", "relation", "relationship", "content_keywords", "<|COMPLETE|>", "##"),
            *("<|#|>", "<|>", '"entities"', '"relations"', '"name"', '"source"', "```json\n"),
        ]
    ),
    max_size=80,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), _RECORDISH))
def test_parse_never_raises_and_returns_a_consistent_extraction(text: str) -> None:
    result = parse_extraction(text)
    assert isinstance(result, Extraction)
    for entity in result.entities:
        assert entity.name and entity.type and entity.description
    keys = [relation_key(r.source, r.target) for r in result.relations]
    assert None not in keys
    assert len(set(keys)) == len(keys)
    assert all(r.strength >= 0 for r in result.relations)
    dropped = result.dropped
    assert (
        min(
            dropped.malformed_entities,
            dropped.malformed_relations,
            dropped.unknown_records,
            dropped.self_loops,
        )
        >= 0
    )
