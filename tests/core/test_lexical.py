from hypothesis import given
from hypothesis import strategies as st

from dataflow.core.lexical import (
    STOPWORDS,
    document_vector,
    lexical_terms,
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


def test_a_question_of_stopwords_only_has_no_vector():
    assert not query_vector("what is the?")
    assert not document_vector("")


def test_query_terms_are_weighted_one_each_and_sorted():
    vector = query_vector("battery lab battery")
    assert vector.indices == tuple(sorted({term_dimension("battery"), term_dimension("lab")}))
    assert vector.values == (1.0, 1.0)


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
    document, query = document_vector(text), query_vector(text)
    assert set(query.indices) <= set(document.indices)
    assert all(value > 0 for value in document.values)
    assert list(document.indices) == sorted(set(document.indices))
    assert not set(lexical_terms(text)) & STOPWORDS
