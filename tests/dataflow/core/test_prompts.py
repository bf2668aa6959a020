"""Specification of the extraction prompt and its cache fingerprint."""

from __future__ import annotations

import pytest

from dataflow.core.parsing import parse_extraction
from dataflow.core.prompts import (
    COMPLETION_DELIMITER,
    DEFAULT_ENTITY_TYPES,
    PROMPT_VERSION,
    TUPLE_DELIMITER,
    ChatMessage,
    ExtractionPromptOptions,
    build_continue_messages,
    build_extraction_messages,
    default_examples,
    prompt_fingerprint,
)

CHUNK = "Ada Lovelace wrote the first published algorithm for Babbage's Analytical Engine."

# The fingerprint of the default prompt for GOLDEN_CHUNK, per prompt version. Changing any
# prompt wording changes it: add the new value under a bumped PROMPT_VERSION so cached
# extractions made with the old wording are not reused.
GOLDEN_CHUNK = "golden chunk"
GOLDEN_FINGERPRINTS = {
    "kgstream-extract-1": "2ca8f6f06d8448e5f1e9dde6f978fc2aab8043bf8acbe6c80389d874d47c9a0f",
}


def _system_and_user(options: ExtractionPromptOptions) -> tuple[str, str]:
    system, user = build_extraction_messages(CHUNK, options)
    return system.content, user.content


def test_extraction_messages_are_a_system_then_a_user_message() -> None:
    messages = build_extraction_messages(CHUNK, ExtractionPromptOptions())
    assert [m.role for m in messages] == ["system", "user"]


def test_entity_types_language_and_format_appear_in_the_system_prompt() -> None:
    options = ExtractionPromptOptions(entity_types=("protein", "gene"), language="Deutsch")
    system, _ = _system_and_user(options)
    assert "[protein, gene]" in system
    assert "Deutsch" in system
    assert f"entity{TUPLE_DELIMITER}name{TUPLE_DELIMITER}type{TUPLE_DELIMITER}description" in system
    assert COMPLETION_DELIMITER in system
    assert "[" + ", ".join(DEFAULT_ENTITY_TYPES) + "]" not in system


def test_chunk_text_appears_in_the_user_prompt_only() -> None:
    system, user = _system_and_user(ExtractionPromptOptions())
    assert CHUNK in user
    assert CHUNK not in system


def test_chunk_containing_code_fences_stays_inside_a_longer_fence() -> None:
    chunk = "before\n```\ncode\n```\nafter"
    _, user = build_extraction_messages(chunk, ExtractionPromptOptions())
    assert f"````\n{chunk}\n````" in user.content.replace("\r", "")


def test_custom_examples_replace_the_built_in_ones() -> None:
    options = ExtractionPromptOptions(examples=("EXAMPLE-ONE", "EXAMPLE-TWO"))
    system, _ = _system_and_user(options)
    assert "EXAMPLE-ONE" in system and "EXAMPLE-TWO" in system
    assert "Harbor Trust" not in system


def test_default_examples_appear_and_empty_examples_remove_the_section() -> None:
    default_system, _ = _system_and_user(ExtractionPromptOptions())
    for example in default_examples("delimited"):
        assert example in default_system
    bare_system, _ = _system_and_user(ExtractionPromptOptions(examples=()))
    assert "---Examples---" not in bare_system


def test_built_in_examples_parse_cleanly_and_agree_across_formats() -> None:
    for delimited, as_json in zip(
        default_examples("delimited"), default_examples("json"), strict=True
    ):
        from_delimited = parse_extraction(delimited.split("<Output>")[1])
        from_json = parse_extraction(as_json.split("<Output>")[1])
        assert from_delimited == from_json
        assert from_delimited.entities and from_delimited.relations
        assert from_delimited.dropped.total == 0
        assert {e.type for e in from_delimited.entities} <= set(DEFAULT_ENTITY_TYPES)


def test_json_format_asks_for_json_and_shows_json_examples() -> None:
    system, user = _system_and_user(ExtractionPromptOptions(record_format="json"))
    assert '"entities"' in system and '"relations"' in system
    assert f"entity{TUPLE_DELIMITER}" not in system
    assert "JSON" in user
    for example in default_examples("json"):
        assert example in system


def test_continue_messages_extend_the_history_with_the_reply_and_a_request() -> None:
    options = ExtractionPromptOptions()
    history = build_extraction_messages(CHUNK, options)
    reply = f"entity{TUPLE_DELIMITER}Ada Lovelace{TUPLE_DELIMITER}person{TUPLE_DELIMITER}x"
    messages = build_continue_messages(history, reply, options)
    assert messages[: len(history)] == history
    assert messages[len(history)] == ChatMessage("assistant", reply)
    follow_up = messages[len(history) + 1]
    assert follow_up.role == "user"
    assert "missed" in follow_up.content
    assert COMPLETION_DELIMITER in follow_up.content
    assert len(messages) == len(history) + 2
    again = build_continue_messages(messages, "more", options)
    assert again[: len(messages)] == messages and len(again) == len(messages) + 2


def test_fingerprint_is_stable_for_equal_inputs() -> None:
    first = prompt_fingerprint(build_extraction_messages(CHUNK, ExtractionPromptOptions()))
    second = prompt_fingerprint(build_extraction_messages(CHUNK, ExtractionPromptOptions()))
    assert first == second
    assert len(first) == 64 and int(first, 16) >= 0


@pytest.mark.parametrize(
    "options",
    [
        ExtractionPromptOptions(entity_types=("person",)),
        ExtractionPromptOptions(language="French"),
        ExtractionPromptOptions(examples=()),
        ExtractionPromptOptions(examples=("custom",)),
        ExtractionPromptOptions(record_format="json"),
    ],
)
def test_fingerprint_changes_when_any_option_changes(options: ExtractionPromptOptions) -> None:
    baseline = prompt_fingerprint(build_extraction_messages(CHUNK, ExtractionPromptOptions()))
    assert prompt_fingerprint(build_extraction_messages(CHUNK, options)) != baseline


def test_fingerprint_changes_with_chunk_text_role_and_turns() -> None:
    options = ExtractionPromptOptions()
    base = build_extraction_messages(CHUNK, options)
    fingerprints = {
        prompt_fingerprint(base),
        prompt_fingerprint(build_extraction_messages(CHUNK + " ", options)),
        prompt_fingerprint(build_continue_messages(base, "reply", options)),
        prompt_fingerprint([ChatMessage("user", base[0].content), base[1]]),
    }
    assert len(fingerprints) == 4


def test_fingerprint_accepts_any_text_including_lone_surrogates() -> None:
    messages = build_extraction_messages("broken \ud800 text", ExtractionPromptOptions())
    assert len(prompt_fingerprint(messages)) == 64


def test_prompt_wording_changes_require_a_prompt_version_bump() -> None:
    fingerprint = prompt_fingerprint(
        build_extraction_messages(GOLDEN_CHUNK, ExtractionPromptOptions())
    )
    assert GOLDEN_FINGERPRINTS.get(PROMPT_VERSION) == fingerprint, (
        f"The default extraction prompt changed (fingerprint {fingerprint}). Bump "
        "PROMPT_VERSION in dataflow/core/prompts.py and record the new fingerprint in "
        "GOLDEN_FINGERPRINTS, so extractions cached under the old prompt are not reused."
    )


def test_invalid_options_are_rejected_with_the_field_name() -> None:
    with pytest.raises(ValueError, match="entity_types"):
        ExtractionPromptOptions(entity_types=())
    with pytest.raises(ValueError, match="entity_types"):
        ExtractionPromptOptions(entity_types=("person", " "))
    with pytest.raises(ValueError, match="language"):
        ExtractionPromptOptions(language="")
    with pytest.raises(ValueError, match="record_format"):
        ExtractionPromptOptions(record_format="yaml")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="role"):
        ChatMessage("narrator", "hello")
