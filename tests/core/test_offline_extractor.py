import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataflow.core.extraction import Extraction
from dataflow.core.naming import entity_key, relation_key
from dataflow.core.offline_extractor import (
    OfflineExtractorOptions,
    extract_offline,
    split_sentences,
)

NEWS = """\
# Quarterly update

Acme Corp. announced on Monday that it will open a research lab in Berlin. Dr. Jane Smith, who
leads the Acme Robotics Group, said the lab will work with the University of Cambridge and the
Max Planck Institute. Smith previously worked at IBM in New York.

Meanwhile, President Joe Biden met Prime Minister Keir Starmer at the G7 Summit in Hiroshima on
March 3, 2024. Shares of Acme rose 4.5% after the news. Researchers at NASA and the European Space
Agency praised the U.S. initiative.
"""


def types_by_name(extraction: Extraction) -> dict[str, str]:
    return {entity.name: entity.type for entity in extraction.entities}


def relations_by_key(extraction: Extraction) -> dict[tuple[str, str], object]:
    found = {}
    for relation in extraction.relations:
        pair = relation_key(relation.source, relation.target)
        assert pair is not None
        found[pair] = relation
    return found


def test_news_paragraph_yields_exactly_its_named_entities():
    names = set(types_by_name(extract_offline(NEWS)))
    assert names == {
        "Acme Corp",
        "Berlin",
        "Jane Smith",
        "Acme Robotics Group",
        "University of Cambridge",
        "Max Planck Institute",
        "IBM",
        "New York",
        "Joe Biden",
        "Keir Starmer",
        "G7 Summit",
        "Hiroshima",
        "NASA",
        "European Space Agency",
        "U.S.",
    }


def test_news_paragraph_types_follow_the_cues():
    types = types_by_name(extract_offline(NEWS))
    assert types["Acme Corp"] == "organization"  # legal-form suffix
    assert types["University of Cambridge"] == "organization"  # head word
    assert types["IBM"] == "organization"  # acronym
    assert types["Jane Smith"] == "person"  # "Dr." before the name
    assert types["Keir Starmer"] == "person"  # "Prime Minister" before the name
    assert types["Joe Biden"] == "person"
    assert types["Berlin"] == "geo"  # gazetteer
    assert types["Hiroshima"] == "geo"  # "Summit in X"
    assert types["G7 Summit"] == "event"


def test_news_paragraph_relates_entities_that_share_a_sentence():
    relations = relations_by_key(extract_offline(NEWS))
    acme_berlin = relations[("acme corp", "berlin")]
    assert acme_berlin.keywords == ("announced", "open", "research")
    assert acme_berlin.description.startswith("Acme Corp. announced on Monday")
    assert relations[("joe biden", "keir starmer")].keywords == ("met",)
    assert ("european space agency", "nasa") in relations
    # a bare later mention of a surname or company name resolves to the full name
    assert relations[("ibm", "jane smith")].keywords == ("worked",)
    # entities in different sentences are not related
    assert ("berlin", "joe biden") not in relations


def test_sentence_splitting_respects_abbreviations_initials_and_decimals():
    text = (
        "Dr. Smith met Mr. Jones at 3.5 p.m. on the 4th floor. "
        "Acme Inc. announced a deal, e.g. with Globex Corp. The deal closed. "
        "J. R. R. Tolkien taught at Oxford. He lived in the U.S. It rained! Did it? Yes."
    )
    assert split_sentences(text) == (
        "Dr. Smith met Mr. Jones at 3.5 p.m. on the 4th floor.",
        "Acme Inc. announced a deal, e.g. with Globex Corp.",
        "The deal closed.",
        "J. R. R. Tolkien taught at Oxford.",
        "He lived in the U.S.",
        "It rained!",
        "Did it?",
        "Yes.",
    )


def test_sentence_splitting_breaks_at_headings_bullets_and_blank_lines_but_joins_wrapped_lines():
    text = (
        "## Results\n"
        "Acme grew fast in the first quarter of the year and then it\n"
        "slowed down\n"
        "\n"
        "- Alpha launched\n"
        "- Beta followed\n"
        "Summary Table\n"
        "Numbers are preliminary."
    )
    assert split_sentences(text) == (
        "Results",
        "Acme grew fast in the first quarter of the year and then it slowed down",
        "Alpha launched",
        "Beta followed",
        "Summary Table",
        "Numbers are preliminary.",
    )


def test_sentence_initial_common_words_are_not_entities():
    text = (
        "Yesterday Acme Corp hired staff. Researchers praised it. "
        "However, Globex Inc disagreed. Shares of Initech Labs fell."
    )
    assert set(types_by_name(extract_offline(text))) == {"Acme Corp", "Globex Inc", "Initech Labs"}


def test_sentence_initial_word_is_kept_when_capitalised_elsewhere_mid_sentence():
    text = "Zorblat released a tool. Engineers at Zorblat use it."
    assert "Zorblat" in types_by_name(extract_offline(text))


def test_surface_forms_of_one_entity_are_deduplicated():
    text = (
        "Acme Corp. hired Alan Turing. Later Acme Corp said Turing's work on the Enigma code "
        "was vital. The ACME CORP board agreed with Acme."
    )
    extraction = extract_offline(text)
    keys = [entity_key(entity.name) for entity in extraction.entities]
    assert sorted(keys) == ["acme corp", "alan turing", "enigma"]
    relations = relations_by_key(extraction)
    assert relations[("acme corp", "alan turing")].strength == 2.0
    assert relations[("acme corp", "alan turing")].description == "Acme Corp. hired Alan Turing."


def test_and_splits_people_but_not_an_organisation_name():
    types = types_by_name(
        extract_offline(
            "Alice and Bob joined Procter & Gamble before the Food and Drug Administration."
        )
    )
    assert types == {
        "Alice": "person",
        "Bob": "person",
        "Procter & Gamble": "organization",
        "Food and Drug Administration": "organization",
    }


def test_titles_are_cut_off_and_mark_people():
    types = types_by_name(
        extract_offline(
            "The CEO spoke. We saw Acme CEO Ada Lovelace and Professor Charles Babbage."
        )
    )
    assert types == {"Acme": "category", "Ada Lovelace": "person", "Charles Babbage": "person"}


def test_context_cues_type_names_without_suffixes():
    text = (
        "Zorblat is headquartered in Springfield. Tesla, Inc. hired Zed Quux, who moved to "
        "Oslo. During World War I and World War II the Battle of Verdun was fought."
    )
    assert types_by_name(extract_offline(text)) == {
        "Springfield": "geo",  # "headquartered in"
        "Tesla": "organization",  # ", Inc."
        "Zed Quux": "person",  # ", who"
        "Oslo": "geo",
        "World War I": "event",
        "World War II": "event",
        "Battle of Verdun": "event",
    }


def test_short_names_resolve_to_the_one_full_name_and_ambiguous_ones_stay():
    text = (
        "Harry Potter met Marie Curie and Pierre Curie. Harry said Curie was right. Potter agreed."
    )
    extraction = extract_offline(text)
    assert set(types_by_name(extraction)) == {
        "Harry Potter",
        "Marie Curie",
        "Pierre Curie",
        "Curie",
    }
    relations = relations_by_key(extraction)
    assert relations[("curie", "harry potter")].keywords == ("right",)


def test_months_weekdays_pure_numbers_and_single_letters_are_not_entities():
    text = "On Monday, 5 March 2024, team A met in room 12. In January Acme Labs grew."
    assert set(types_by_name(extract_offline(text))) == {"Acme Labs"}


def test_code_identifiers_and_allcaps_headlines_are_not_entities():
    text = "Set `KGSTREAM_REDIS_URL` before start. BREAKING NEWS: ACME BUYS GLOBEX FOR CASH TODAY."
    assert extract_offline(text).entities == ()


def test_derived_types_map_onto_the_configured_types():
    text = "Dr. Jane Smith visited Acme Corp in Berlin with Zorblat Quux."
    upper = OfflineExtractorOptions(entity_types=("PERSON", "ORGANIZATION", "CATEGORY"))
    assert types_by_name(extract_offline(text, upper)) == {
        "Jane Smith": "PERSON",
        "Acme Corp": "ORGANIZATION",
        "Berlin": "CATEGORY",  # geo is not configured: falls back to category
        "Zorblat Quux": "CATEGORY",
    }
    no_category = OfflineExtractorOptions(entity_types=("person", "other"))
    assert set(types_by_name(extract_offline(text, no_category)).values()) == {"person", "other"}


def test_relations_per_sentence_are_capped_by_max_entities_per_sentence():
    names = [f"Zed{letter}" for letter in "ABCDEFGHIJKL"]
    text = "The panel included " + ", ".join(names) + "."
    default = extract_offline(text)
    assert len(default.entities) == 12  # every entity is kept
    assert len(default.relations) == 8 * 7 // 2
    capped = extract_offline(text, OfflineExtractorOptions(max_entities_per_sentence=3))
    assert len(capped.relations) == 3


def test_descriptions_are_trimmed_at_a_word_boundary():
    text = "Acme Corp signed with Globex Inc " + "because of a very long reason " * 30 + "."
    options = OfflineExtractorOptions(description_max_chars=60)
    extraction = extract_offline(text, options)
    for description in [e.description for e in extraction.entities] + [
        r.description for r in extraction.relations
    ]:
        assert len(description) <= 61
        assert description.endswith("…")
        assert description.startswith("Acme Corp signed with Globex Inc because")


def test_relation_without_content_words_between_falls_back_to_the_sentence_then_co_occurrence():
    fallback = relations_by_key(extract_offline("Acme Corp and Globex Inc merged operations."))
    assert fallback[("acme corp", "globex inc")].keywords == ("merged", "operations")
    bare = relations_by_key(extract_offline("Acme Corp, Globex Inc."))
    assert bare[("acme corp", "globex inc")].keywords == ("co-occurrence",)


def test_invalid_options_name_the_field():
    with pytest.raises(ValueError, match="max_entities_per_sentence"):
        OfflineExtractorOptions(max_entities_per_sentence=0)
    with pytest.raises(ValueError, match="entity_types"):
        OfflineExtractorOptions(entity_types=())


def test_extraction_is_deterministic():
    assert extract_offline(NEWS) == extract_offline(NEWS)
    assert extract_offline("") == Extraction()


TRICKY_TOKENS = [
    "Dr.",
    "Mr",
    "Acme",
    "Corp.",
    "Inc.",
    "and",
    "of",
    "the",
    "The",
    "&",
    "J.",
    "U.S.",
    "Turing's",
    "Alan",
    "Turing",
    "CEO",
    "President",
    "Berlin",
    "in",
    "said",
    ",",
    ".",
    "!",
    "\n",
    "\n\n",
    "# ",
    "- ",
    "2024",
    "11",
    "GPT-4",
    "iPhone",
    "May",
    "Monday",
    "'",
    '"',
    "(",
    ")",
    "e.g.",
    "who",
    "KG_URL",
    "Über",
    "İstanbul",
    "ǅemal",
    "ﬁnance",
    "…",
    "Ltd",
]
tricky_text = st.lists(
    st.one_of(st.sampled_from(TRICKY_TOKENS), st.text(max_size=6)), max_size=60
).map(" ".join)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), tricky_text))
def test_any_text_yields_a_well_formed_extraction(text):
    extraction = extract_offline(text)
    keys = [entity_key(entity.name) for entity in extraction.entities]
    assert all(keys) and all(entity.name.strip() for entity in extraction.entities)
    assert len(set(keys)) == len(keys)
    assert all(
        entity.type in OfflineExtractorOptions().entity_types for entity in extraction.entities
    )
    pairs = []
    for relation in extraction.relations:
        assert entity_key(relation.source) in keys and entity_key(relation.target) in keys
        pair = relation_key(relation.source, relation.target)
        assert pair is not None  # no self-loops
        pairs.append(pair)
        assert relation.strength >= 1.0 and relation.keywords and relation.description
    assert len(set(pairs)) == len(pairs)
    assert extract_offline(text) == extraction
