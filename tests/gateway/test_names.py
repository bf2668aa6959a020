from dataflow.core.lexical import STOPWORDS
from gateway.names import MAX_NAME_WORDS, matched_names, name_spans, named_entities


def keys_of(question: str, known: set[str]) -> list[str]:
    return matched_names(name_spans(question, STOPWORDS), known)


def test_a_name_is_found_whatever_its_case_and_possessive():
    known = {"adam smith", "tidewater battery lab"}

    assert keys_of("what did ADAM SMITH's team say?", known) == ["adam smith"]
    assert keys_of("Who leads the Tidewater Battery Lab?", known) == ["tidewater battery lab"]


def test_a_match_inside_a_longer_match_is_dropped_but_separate_names_are_kept():
    known = {"big stone gap", "gap", "adriana trigiani"}

    found = keys_of("Did Adriana Trigiani direct Big Stone Gap?", known)

    assert found == ["big stone gap", "adriana trigiani"]  # longest first


def test_spans_neither_start_nor_end_with_a_stopword_and_keep_inner_connectors():
    spans = {span.key for span in name_spans("Who starred in Kiss and Tell?", STOPWORDS)}

    assert "kiss and tell" in spans
    assert not any(key.startswith(("who ", "in ")) or key.endswith(" and") for key in spans)


def test_spans_are_bounded_in_length():
    words = " ".join(f"Word{i}" for i in range(20))

    assert max(span.length for span in name_spans(words, STOPWORDS)) == MAX_NAME_WORDS


def test_non_latin_names_are_candidates_too():
    assert keys_of("Кто такой Лев Толстой?", {"лев толстой"}) == ["лев толстой"]


def test_aliases_are_matched_like_names_and_a_match_inside_a_longer_one_is_dropped():
    known = {"adam smith", "adam", "smith"}  # an entity key and two aliases

    assert keys_of("What did Adam Smith say?", known) == ["adam smith"]
    assert keys_of("What did Adam say to Smith?", known) == ["adam", "smith"]


def test_exact_names_come_before_alias_matches_and_namesakes_go_by_degree():
    matched = ["adam", "harbour board", "bella"]
    entities = {"harbour board", "adam"}  # "adam" is an entity of its own too
    aliases = {"adam": ["adam jones", "adam smith"], "bella": ["bella jones"]}
    degrees = {"adam jones": 2, "adam smith": 5}

    assert named_entities(matched, entities, aliases, degrees) == [
        "adam",
        "harbour board",
        "adam smith",
        "adam jones",
        "bella jones",
    ]
    tied = named_entities(["adam"], set(), aliases, {})
    assert tied == ["adam jones", "adam smith"]  # equal degrees: by key
