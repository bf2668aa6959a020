from hypothesis import given
from hypothesis import strategies as st

from dataflow.core.lexical import (
    STOPWORDS,
    document_vector,
    inverse_document_frequency,
    lexical_terms,
    query_terms,
    query_vector,
    term_dimension,
)


def test_terms_are_casefolded_words_without_stopwords_or_possessives():
    assert lexical_terms("The Director of Kiss and Tell's FILM, 1945!") == [
        "director",
        "kiss",
        "tell",
        "film",
        "1945",
    ]


def test_cjk_runs_become_overlapping_character_bigrams():
    assert lexical_terms("東京タワー") == ["東京", "京タ", "タワ", "ワー"]
    assert lexical_terms("東") == ["東"]


def test_a_question_of_stopwords_only_has_no_terms():
    assert query_terms("what is the?") == []
    assert not document_vector("")


def test_query_terms_are_distinct_in_order():
    assert query_terms("battery lab battery") == ["battery", "lab"]


def test_query_weights_are_idf_and_unknown_terms_are_left_out():
    vector = query_vector({"battery": 2, "lab": 10, "unheard": 0}, documents=10)
    weights = dict(zip(vector.indices, vector.values, strict=True))
    assert set(weights) == {term_dimension("battery"), term_dimension("lab")}
    assert weights[term_dimension("battery")] == inverse_document_frequency(10, 2)
    assert weights[term_dimension("battery")] > weights[term_dimension("lab")] > 0
    assert not query_vector({"unheard": 0}, documents=10)


def test_repeated_terms_weigh_more_but_saturate():
    once = dict(zip(*_pair(document_vector("turbine gearbox")), strict=True))
    thrice = dict(zip(*_pair(document_vector("turbine turbine turbine gearbox")), strict=True))
    turbine = term_dimension("turbine")
    assert once[turbine] < thrice[turbine] < 2.2  # k1 + 1 bounds a term's weight


def test_longer_texts_weigh_each_term_less():
    short = dict(zip(*_pair(document_vector("salt corrosion")), strict=True))
    long = dict(zip(*_pair(document_vector("salt corrosion " + "word " * 500)), strict=True))
    assert long[term_dimension("salt")] < short[term_dimension("salt")]


def _pair(vector):
    return vector.indices, vector.values


@given(st.text(max_size=200))
def test_a_text_matches_itself_on_every_query_term(text):
    document = document_vector(text)
    query = query_vector(dict.fromkeys(query_terms(text), 1), documents=1)
    assert set(query.indices) <= set(document.indices)
    assert all(value > 0 for value in document.values)
    assert list(document.indices) == sorted(set(document.indices))
    assert not set(lexical_terms(text)) & STOPWORDS
