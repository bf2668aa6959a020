"""Offline query keywords: names (low level) and themes (high level) without an LLM."""

import pytest

from gateway.keywords import OfflineKeywordExtractor, capitalised_spans


def keywords(question: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    found = OfflineKeywordExtractor().extract(question)
    return found.low_level, found.high_level


def test_a_title_with_a_lowercase_connector_is_one_low_level_keyword():
    low, high = keywords(
        "What government position was held by the woman who portrayed Corliss Archer in the "
        "film Kiss and Tell?"
    )
    assert low == ("Corliss Archer", "Kiss and Tell")
    assert high == ("government position", "held", "woman", "portrayed", "film")


@pytest.mark.parametrize(
    ("question", "span"),
    [
        ("Who served as Chief of Protocol of the United States?", "Chief of Protocol"),
        ("Who wrote Seven Brief Lessons on Physics?", "Seven Brief Lessons on Physics"),
        ("What is the name for the adventure in Tunnels and Trolls?", "Tunnels and Trolls"),
        ("A game designed by Ken St. Andre?", "Ken St Andre"),
    ],
)
def test_capitalised_spans_run_over_connectors_and_initials(question, span):
    assert any(found.startswith(span) for found in capitalised_spans(question))


def test_and_between_two_multi_word_names_keeps_them_apart():
    low, high = keywords("Were Scott Derrickson and Ed Wood of the same nationality?")
    assert low == ("Scott Derrickson", "Ed Wood")
    assert high == ("nationality",)


@pytest.mark.parametrize(
    ("question", "names"),
    [
        ("Who won the 2014 FIFA World Cup?", ("2014 FIFA World Cup", "FIFA World Cup")),
        ("Name the astronaut who flew on Apollo 11 in 1969.", ("Apollo 11",)),
    ],
)
def test_years_and_numbers_next_to_a_name_stay_with_it(question, names):
    low, _ = keywords(question)
    assert low == names


@pytest.mark.parametrize(
    "question",
    [
        "Which film starred Shirley Temple?",
        "What film starred Shirley Temple?",
        "Who starred in the film with Shirley Temple?",
        "Name the film that starred Shirley Temple.",
        "Describe the film that starred Shirley Temple.",
    ],
)
def test_a_capitalised_question_word_is_never_a_keyword(question):
    low, high = keywords(question)
    assert low == ("Shirley Temple",)
    assert all(word not in " ".join(high) for word in ("Which", "What", "Who", "Name", "Describe"))


def test_a_lowercase_question_takes_its_multi_word_phrases_as_names():
    low, high = keywords("who is older, annie morton or terry richardson?")
    assert low == ("annie morton", "terry richardson")
    assert high == ("older",)


def test_a_question_without_names_still_gives_both_levels():
    low, high = keywords("which companies work on renewable energy?")
    assert low == ("companies work", "renewable energy")
    assert high == low


def test_content_words_that_are_not_names_are_the_high_level_keywords():
    low, high = keywords("The director of the romantic comedy Big Stone Gap is based in what city?")
    assert low == ("Big Stone Gap",)
    assert high == ("director", "romantic comedy", "based", "city")
