from hypothesis import given
from hypothesis import strategies as st

from dataflow.core.naming import clean_entity_name, entity_key, relation_key


def test_names_differing_in_case_whitespace_and_quotes_are_one_entity():
    forms = [
        "Alan Turing",
        '"ALAN  TURING"',
        " alan\tturing ",
        "\u201cAlan Turing\u201d",
        "'alan turing'",
    ]
    assert {entity_key(form) for form in forms} == {"alan turing"}


def test_display_name_keeps_case():
    assert clean_entity_name('  "OpenAI"  ') == "OpenAI"
    assert clean_entity_name("(Acme  Corp)") == "Acme Corp"


def test_fullwidth_characters_are_normalised():
    assert entity_key("ＡＣＭＥ") == "acme"


def test_relation_key_is_undirected_and_sorted():
    assert relation_key("Bob", "alice") == ("alice", "bob")
    assert relation_key("alice", "Bob") == ("alice", "bob")


def test_self_loops_and_empty_endpoints_have_no_key():
    assert relation_key("Acme", '"ACME"') is None
    assert relation_key("Acme", '""') is None


@given(st.text(), st.text())
def test_relation_key_symmetric(a, b):
    assert relation_key(a, b) == relation_key(b, a)


@given(st.text())
def test_entity_key_is_idempotent(name):
    assert entity_key(entity_key(name)) == entity_key(name)
