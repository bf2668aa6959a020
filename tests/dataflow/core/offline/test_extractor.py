import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataflow.core.extraction import Extraction
from dataflow.core.naming import entity_key, relation_key
from dataflow.core.offline.extractor import (
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


# --- people without a known given name: a person-shaped name plus a supporting context


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Maren Okafor, a former ferry engineer, founded it.", "Maren Okafor"),
        ("The lab is led by its director, Imogen Hale.", "Imogen Hale"),
        ("The scheme is led by Jonah Pell in the valley.", "Jonah Pell"),
        ("Tomas Reyland is Head of Projects at the cooperative.", "Tomas Reyland"),
        ("Tomas Reyland was appointed project lead.", "Tomas Reyland"),
        ("Ewan Castell joined the panel in March.", "Ewan Castell"),
        ("Ewan Castell said the fund was full.", "Ewan Castell"),
        ("Councillor Ewan Castell launched the fund.", "Ewan Castell"),
        ("Ms Dalia Orrin opened the meeting.", "Dalia Orrin"),
        ("They appointed Helena Marsh as its new chief operating officer.", "Helena Marsh"),
        ("Imogen Hale rarely travels. She works from the coast.", "Imogen Hale"),
        ("Novelist Ruth Caddick will open the festival.", "Ruth Caddick"),
    ],
)
def test_person_shaped_name_with_a_supporting_context_is_a_person(text, name):
    assert types_by_name(extract_offline(text))[name] == "person"


def test_bare_surname_used_as_a_person_makes_the_full_name_a_person_and_merges_into_it():
    text = (
        "The talk by Imogen Hale on storms drew a crowd. Hale trained as a mechanical "
        "engineer. Later the board invited Hale to lead the lab."
    )
    extraction = extract_offline(text)
    assert types_by_name(extraction) == {"Imogen Hale": "person"}
    assert all(entity_key(r.source) != "hale" for r in extraction.relations)


def test_person_shaped_name_without_context_stays_category():
    types = types_by_name(extract_offline("The report thanks Tomas Reyland and the crews."))
    assert types == {"Tomas Reyland": "category"}


PERSON_CONTEXTS = [
    "{name} said little. She was pleased.",
    "{name} joined the board in May.",
    "The wards were founded by {name} last year.",
    "{name}, a former engineer, wrote it.",
    "{name} was appointed to lead it.",
    "The crews praised {name}, whose staff stayed late.",
]


@pytest.mark.parametrize("context", PERSON_CONTEXTS)
def test_projects_programmes_funds_and_farms_never_become_people(context):
    control = types_by_name(extract_offline(context.format(name="Dalia Orrin")))
    assert control == {"Dalia Orrin": "person"}  # the context alone makes a person
    for name, kind in (
        ("Saltglass Programme", "category"),
        ("Fennick Bay Wind Farm", "category"),
        ("Coastal Transition Fund", "organization"),
        ("Brightwater Initiative", "category"),
        ("Kesh Valley Micro-Hydro Scheme", "category"),
        ("Tallis Island Microgrid", "category"),
    ):
        assert types_by_name(extract_offline(context.format(name=name))) == {name: kind}


def test_product_whose_bare_name_recurs_is_not_made_a_person():
    text = "Apache Kafka stores the events. Each Kafka topic has partitions."
    assert types_by_name(extract_offline(text)) == {"Apache Kafka": "category"}


def test_person_of_an_organisation_is_split_into_both():
    text = (
        "Professor Lena Sorvik of Greyholt Polytechnic Institute visited. "
        "Tomas Reyland of Saltmarsh Energy Cooperative agreed."
    )
    assert types_by_name(extract_offline(text)) == {
        "Lena Sorvik": "person",
        "Greyholt Polytechnic Institute": "organization",
        "Tomas Reyland": "person",
        "Saltmarsh Energy Cooperative": "organization",
    }


def test_company_of_a_place_is_split_into_both():
    text = "The turbines came from Corvane Turbines Ltd of Hollin Quay last year."
    assert types_by_name(extract_offline(text)) == {
        "Corvane Turbines Ltd": "organization",
        "Hollin Quay": "geo",
    }


# --- organisations, events and places from their own words


@pytest.mark.parametrize(
    "name",
    [
        "Saltmarsh Energy Cooperative",
        "Harbour Co-operative",
        "Leith Food Co-op",
        "Aldren Community Bank",
        "Coastal Transition Fund",
        "Tidewater Battery Lab",
        "Greyholt Materials Laboratory",
        "Merrow Coast Regional Council",
        "Northern Ireland Assembly",
    ],
)
def test_organisation_suffixes_type_the_name(name):
    assert types_by_name(extract_offline(f"We met {name} again."))[name] == "organization"


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Homes were lost in the 2021 Kesh Valley Flood last spring.", "2021 Kesh Valley Flood"),
        ("Roofs were lost in Storm Idris last night.", "Storm Idris"),
        ("Crews worked through the Great Storm of the winter.", "Great Storm"),
        ("The 2019 Harbour Summit drew crowds.", "2019 Harbour Summit"),
        ("The 2023 Members' Assembly voted twice.", "2023 Members' Assembly"),
        ("Shares were issued at the Annual General Meeting in June.", "Annual General Meeting"),
        ("Trains stopped during the Dockers Strike for a week.", "Dockers Strike"),
        ("Reporters covered the Orbital Launch at dawn.", "Orbital Launch"),
    ],
)
def test_event_cues_type_the_name_and_keep_its_year(text, name):
    assert types_by_name(extract_offline(text))[name] == "event"


def test_assembly_is_an_event_only_with_a_year():
    types = types_by_name(
        extract_offline("The Welsh Assembly met at the 2023 Members' Assembly in June.")
    )
    assert types == {"Welsh Assembly": "organization", "2023 Members' Assembly": "event"}


def test_named_event_of_an_organisation_is_split_from_it():
    text = "The 2023 Members' Assembly of Saltmarsh Energy Cooperative was held in June."
    assert types_by_name(extract_offline(text)) == {
        "2023 Members' Assembly": "event",
        "Saltmarsh Energy Cooperative": "organization",
    }


def test_undated_mention_of_an_event_merges_into_its_dated_form():
    text = (
        "The 2021 Kesh Valley Flood cut the line. "
        "Reyland remembers how the Kesh Valley Flood reached the school."
    )
    extraction = extract_offline(text)
    assert "Kesh Valley Flood" not in types_by_name(extraction)
    assert types_by_name(extraction)["2021 Kesh Valley Flood"] == "event"


@pytest.mark.parametrize(
    "name",
    ["River Ardle", "Mount Kerrin", "Lake Orla", "Port Aldren", "Cape Wrath", "Isle of Skerra"],
)
def test_geographic_prefixes_type_the_name(name):
    assert types_by_name(extract_offline(f"The path follows {name} for miles."))[name] == "geo"


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Water poured over Ardle Weir at dawn.", "Ardle Weir"),
        ("He worked with the residents of Skerrow on the plans.", "Skerrow"),
        ("The island's only village, Skerrow, has 300 people.", "Skerrow"),
        ("Harlow Shipping Ltd will close its depot in Rotterdam soon.", "Rotterdam"),
    ],
)
def test_geographic_context_types_an_unknown_place(text, name):
    assert types_by_name(extract_offline(text))[name] == "geo"


# --- role words and generic capitalised words are not entities


def test_role_words_and_role_phrases_are_not_entities_but_their_organisation_is():
    text = (
        "Members were asked two questions. Treasurer Priya Anand spoke. As Treasurer she "
        "wrote the bid. Tomas Reyland is Head of Projects. The Assembly and the Board of "
        "Directors agreed. Maren Okafor, General Manager of Saltmarsh Energy Cooperative, "
        "nodded. Imogen Hale is the Director of Tidewater Battery Lab."
    )
    assert types_by_name(extract_offline(text)) == {
        "Priya Anand": "person",
        "Tomas Reyland": "person",
        "Maren Okafor": "person",
        "Saltmarsh Energy Cooperative": "organization",
        "Imogen Hale": "person",
        "Tidewater Battery Lab": "organization",
    }


def test_single_words_of_a_title_case_heading_need_evidence_elsewhere():
    text = "# How Saltmarsh Energy Cooperative Is Funded\n\nMembers buy shares in it."
    assert types_by_name(extract_offline(text)) == {"Saltmarsh Energy Cooperative": "organization"}


def test_nationality_adjectives_are_not_entities():
    text = "Oskar Lindqvist, a Swedish diplomat, met Kenyan athletes and the Americans."
    assert types_by_name(extract_offline(text)) == {"Oskar Lindqvist": "person"}


def test_title_modifiers_count_only_before_a_title():
    types = types_by_name(
        extract_offline(
            "She studied at the Massachusetts Institute of Technology. "
            "Chief Financial Officer Ruth Porat spoke. The Senior Prom was held."
        )
    )
    assert types == {
        "Massachusetts Institute of Technology": "organization",
        "Ruth Porat": "person",
        "Senior Prom": "category",
    }


# --- held-out news paragraphs (written for these tests, not taken from examples/):
# the exact entity set and types, including the known weak spots (an unknown town
# or a brand without a cue word stays "category").

HELD_OUT = [
    (
        "Harlow Shipping Ltd said on Tuesday that it would close its depot in Rotterdam. "
        "Chief Executive Nadia Brenner told reporters the decision followed two years of "
        "losses. Brenner, who joined the company in 2019, said about 120 staff would be "
        "offered jobs at the Antwerp terminal. The Transport Workers Union called the move a "
        "betrayal and announced a strike for next month.",
        {
            "Harlow Shipping Ltd": "organization",
            "Rotterdam": "geo",
            "Nadia Brenner": "person",
            "Antwerp": "category",
            "Transport Workers Union": "organization",
        },
    ),
    (
        "Flooding along the River Severn forced hundreds of families from their homes in "
        "Shrewsbury last weekend. The Environment Agency issued six severe flood warnings. "
        "Local councillor Gareth Pryce said residents had been given too little notice. He "
        "asked the government to fund new defences before the winter.",
        {
            "River Severn": "geo",
            "Shrewsbury": "category",
            "Environment Agency": "organization",
            "Gareth Pryce": "person",
        },
    ),
    (
        "The 2022 Lisbon Climate Summit ended with a pledge from forty countries to phase out "
        "coal by 2040. Delegates from Brazil and Indonesia pushed for more finance. Oskar "
        "Lindqvist, a Swedish diplomat who chaired the final session, called the agreement "
        "fragile. Campaigners from Greenpeace staged a protest outside the venue.",
        {
            "2022 Lisbon Climate Summit": "event",
            "Brazil": "geo",
            "Indonesia": "geo",
            "Oskar Lindqvist": "person",
            "Greenpeace": "category",
        },
    ),
    (
        "Professor Amara Okoye of the University of Lagos has won the Kessler Prize for her "
        "work on malaria vaccines. Okoye trained in Nairobi and spent a decade at the Wellcome "
        "Trust before returning to Nigeria. She plans to use the prize money to fund "
        "scholarships. The award will be presented at a ceremony in Geneva in May.",
        {
            "Amara Okoye": "person",
            "University of Lagos": "organization",
            "Kessler Prize": "event",
            "Nairobi": "geo",
            "Wellcome Trust": "organization",
            "Nigeria": "geo",
            "Geneva": "geo",
        },
    ),
    (
        "Mount Kerrin Hospital opened a new cancer ward on Friday. The project, known as the "
        "Brightwater Initiative, was funded by the Halden Foundation and took three years to "
        "build. Dr. Felix Amsel, the hospital's medical director, said the ward would treat "
        "4,000 patients a year. Members of the Halden family attended the opening.",
        {
            "Mount Kerrin Hospital": "organization",
            "Brightwater Initiative": "category",
            "Halden Foundation": "organization",
            "Felix Amsel": "person",
            "Halden": "category",
        },
    ),
    (
        "Vantor Robotics has appointed Helena Marsh as its new chief operating officer. Marsh "
        "previously ran logistics at Ostrava Steel Group in the Czech Republic. The company, "
        "which is based in Leeds, plans to double its workforce by 2026. Shares in Vantor "
        "Robotics rose 3 percent on the news.",
        {
            "Vantor Robotics": "category",
            "Helena Marsh": "person",
            "Ostrava Steel Group": "organization",
            "Czech Republic": "geo",
            "Leeds": "geo",
        },
    ),
    (
        "Brackwater Council has approved plans for 300 new homes on the edge of Ellesford. "
        "Council leader Joan Whitby said the scheme would include a school and a health "
        "centre. Opponents, led by local farmer Dafydd Rees, say the site floods every winter. "
        "Rees has promised to take the decision to the High Court.",
        {
            "Brackwater Council": "organization",
            "Ellesford": "category",
            "Joan Whitby": "person",
            "Dafydd Rees": "person",
            "High Court": "organization",
        },
    ),
    (
        "Quillon Pharmaceuticals reported a sharp fall in profit for the first quarter. The "
        "firm blamed delays at its plant in Basel and the expiry of a patent on its "
        "best-selling drug. Finance director Tobias Lenk said costs would fall next year. "
        "Analysts at Morgan Stanley cut their price target.",
        {
            "Quillon Pharmaceuticals": "organization",
            "Basel": "geo",
            "Tobias Lenk": "person",
            "Morgan Stanley": "category",
        },
    ),
    (
        "Thousands of runners took part in the 2024 Harbourside Marathon on Sunday. The race "
        "was won by Kenyan athlete Grace Wanjiru in two hours and twenty minutes. She said the "
        "hills near Castle Point made the final miles hard. The event raised money for the "
        "Red Cross.",
        {
            "2024 Harbourside Marathon": "event",
            "Grace Wanjiru": "person",
            "Castle Point": "geo",
            "Red Cross": "category",
        },
    ),
]


@pytest.mark.parametrize(("text", "expected"), HELD_OUT, ids=lambda v: str(v)[:30])
def test_held_out_news_paragraph_yields_exactly_its_entities_and_types(text, expected):
    assert types_by_name(extract_offline(text)) == expected


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
