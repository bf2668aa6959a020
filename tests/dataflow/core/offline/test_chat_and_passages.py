"""The offline extractor on chat logs (speaker labels, greetings) and on titled
encyclopaedia passages (the Wikipedia paragraphs of multi-hop QA sets)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataflow.core.extraction import Extraction
from dataflow.core.naming import relation_key
from dataflow.core.offline.extractor import extract_offline
from dataflow.core.offline.speakers import find_speakers, label_name
from dataflow.core.offline.titles import find_title


def types_by_name(extraction: Extraction) -> dict[str, str]:
    return {entity.name: entity.type for entity in extraction.entities}


def related_pairs(extraction: Extraction) -> set[tuple[str, str] | None]:
    return {relation_key(r.source, r.target) for r in extraction.relations}


CHAT = """\
AdamSmith: Hey Adam, did you see the match last night?
BellaJones: Nah, I missed it. Was it good?
AdamSmith: Yeah. Tough game, Manchester United lost to Arsenal.
BellaJones: Lol. Thanks for telling me, Adam. Sorry, I was out with Zorbania Quillfeather.
AdamSmith: Wow. Ok, see you at the Riverside Cafe then.
Zorbania Quillfeather: Hi Bella! Hello Adam. Well, congrats on the new job.
"""


# 1. Speaker labels


@pytest.mark.parametrize(
    ("label", "name"),
    [("AdamSmith", "Adam Smith"), ("Adam Smith", "Adam Smith"), ("JohnMcDonald", "John McDonald")],
)
def test_camel_case_speaker_labels_split_into_the_persons_name(label, name):
    assert label_name(label) == name


def test_chat_speaker_labels_are_people_named_in_words():
    types = types_by_name(extract_offline(CHAT))
    assert types["Adam Smith"] == "person"
    assert types["Bella Jones"] == "person"
    assert types["Zorbania Quillfeather"] == "person"
    assert "AdamSmith" not in types and "BellaJones" not in types


def test_a_speaker_is_related_to_the_entities_of_their_utterance():
    pairs = related_pairs(extract_offline(CHAT))
    assert ("adam smith", "manchester united") in pairs  # a later sentence of the same line
    assert ("adam smith", "riverside cafe") in pairs
    assert ("adam smith", "bella jones") in pairs  # "Thanks for telling me, Adam."


def test_a_single_label_line_or_a_list_of_headings_is_not_a_transcript():
    assert find_speakers("Key Findings: sales rose.\nThe board met on Monday.") == {}
    assert find_speakers("Key Findings: sales rose.\nNext Steps: hire staff.") == {}
    assert find_speakers("AdamSmith: hi\nBellaJones: hello") == {
        "AdamSmith": "Adam Smith",
        "BellaJones": "Bella Jones",
    }


# 2. Greetings, interjections and fillers


def test_greetings_interjections_and_fillers_are_never_entities_nor_parts_of_them():
    names = set(types_by_name(extract_offline(CHAT)))
    for filler in ("Hey Adam", "Nah", "Yeah", "Tough", "Lol", "Thanks", "Sorry", "Wow", "Ok"):
        assert filler not in names
    for filler in ("Hi Bella", "Hello Adam", "Well", "Congrats", "Hey", "Hi", "Hello"):
        assert filler not in names


@pytest.mark.parametrize(
    "line",
    [
        "Hey Adam, see you at Acme Corp.",
        "LOL Adam, see you at Acme Corp.",
        "OMG, see you at Acme Corp.",
    ],
)
def test_a_greeting_before_a_name_is_cut_off_in_prose_too(line):
    names = set(types_by_name(extract_offline(f"{line} Adam Smith works there.")))
    assert names == {"Adam Smith", "Acme Corp"}


@pytest.mark.parametrize(
    "line", ["Good Morning Bella, ready?", "Happy Birthday Bella!", "XD Bella, ready?"]
)
def test_a_two_word_greeting_or_chat_abbreviation_before_a_name_is_cut_off(line):
    text = f"AdamSmith: {line}\nBellaJones: Thanks Adam."
    assert set(types_by_name(extract_offline(text))) == {"Adam Smith", "Bella Jones"}


def test_the_word_after_an_utterances_filler_needs_evidence_like_a_sentence_start():
    text = "BellaJones: Yeah, Brilliant idea.\nAdamSmith: Honestly Great stuff."
    assert set(types_by_name(extract_offline(text))) == {"Bella Jones", "Adam Smith"}


# 3. First names resolve to the full name in the same text


def test_a_speakers_first_name_resolves_to_the_speaker():
    extraction = extract_offline(CHAT)
    names = set(types_by_name(extraction))
    assert "Adam" not in names and "Bella" not in names
    assert "Adam Smith" in names and "Bella Jones" in names


def test_a_speakers_label_and_first_name_are_aliases_of_the_speaker():
    aliases = {e.name: e.aliases for e in extract_offline(CHAT).entities}

    assert aliases["Adam Smith"] == ("Adam", "AdamSmith")
    assert aliases["Bella Jones"] == ("Bella", "BellaJones")
    assert aliases["Zorbania Quillfeather"] == ()  # labelled in words: no other form
    assert aliases["Arsenal"] == ()


def test_a_first_name_shared_by_two_speakers_stays_as_written():
    text = "AdamSmith: Is Adam coming?\nAdamJones: No idea.\nBellaJones: Adam said maybe."
    names = set(types_by_name(extract_offline(text)))
    assert {"Adam Smith", "Adam Jones", "Bella Jones", "Adam"} <= names


def test_a_first_name_mentioned_in_another_paragraph_resolves_to_the_full_name():
    text = "Zorbania Quillfeather said the ferry was late.\n\nLater, Zorbania called the port."
    assert set(types_by_name(extract_offline(text))) == {"Zorbania Quillfeather"}


def test_a_bare_given_name_resolves_to_a_person_shaped_full_name_in_prose_too():
    text = "I met Zorbania Quillfeather at the port. Later, Zorbania left for Oslo."
    assert set(types_by_name(extract_offline(text))) == {"Zorbania Quillfeather", "Oslo"}


def test_in_a_chat_a_bare_given_name_used_as_a_persons_makes_the_full_name_a_person():
    text = (
        "AdamSmith: I met Zorbania Quillfeather today.\n"
        "BellaJones: What did Zorbania say? Zorbania said nothing."
    )
    assert types_by_name(extract_offline(text))["Zorbania Quillfeather"] == "person"


def test_in_prose_a_bare_first_word_does_not_make_a_place_a_person():
    text = "Riverside Cafe opened in 2019. Later, Riverside expanded."
    assert types_by_name(extract_offline(text)) == {"Riverside Cafe": "category"}


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("AdamSmith: Sarah Quill called.\nBellaJones: Tell Sarah I said hi.", {"Sarah Quill"}),
        ("Ask Adam Smith about the ferry.", {"Adam Smith"}),
        ("Queen Elizabeth I was crowned in 1559.", {"Elizabeth I"}),
    ],
)
def test_an_imperative_before_a_name_and_the_pronoun_i_after_it_are_not_part_of_it(text, names):
    assert names <= set(types_by_name(extract_offline(text)))
    assert not any(
        name.startswith(("Tell", "Ask")) for name in types_by_name(extract_offline(text))
    )
    assert "Sarah I" not in types_by_name(extract_offline(text))


# 5. People typed as person


@pytest.mark.parametrize(
    "text",
    [
        "AdamSmith: I met Zorbania Quillfeather.\nZorbania Quillfeather: Hello!",
        "AdamSmith: Zorbania Brightwater is here.\nZorbaniaQuillfeather: Hi!",
        "Zorbania Quillfeather asked for the report.",
        "Zorbania Quillfeather replied that it was late.",
        "Zorbania Quillfeather wrote to the council.",
        "Zorbania Quillfeather said the ferry was late.",
    ],
)
def test_a_name_shaped_like_a_persons_with_a_person_cue_is_a_person(text):
    types = types_by_name(extract_offline(text))
    person = next(name for name in types if name.startswith("Zorbania"))
    assert types[person] == "person"


def test_a_name_with_a_known_given_name_is_a_person_in_chat():
    types = types_by_name(extract_offline("AdamSmith: Did you see Sarah Quill?\nBellaJones: No."))
    assert types["Sarah Quill"] == "person"


# 4. Passage titles (verbatim from HotpotQA dev, CC BY-SA 4.0)

SHIRLEY_TEMPLE = """\
Shirley Temple
Shirley Temple Black (April 23, 1928 – February 10, 2014) was an American actress, singer, \
dancer, businesswoman, and diplomat who was Hollywood's number one box-office draw as a child \
actress from 1935 to 1938.  As an adult, she was named United States ambassador to Ghana and to \
Czechoslovakia and also served as Chief of Protocol of the United States."""

KISS_AND_TELL = """\
Kiss and Tell (1945 film)
Kiss and Tell is a 1945 American comedy film starring then 17-year-old Shirley Temple as \
Corliss Archer.  In the film, two teenage girls cause their respective parents much concern \
when they start to become interested in boys.  The parents' bickering about which girl is the \
worse influence causes more problems than it solves."""

BIG_STONE_GAP = """\
Big Stone Gap (film)
Big Stone Gap is a 2014 American drama romantic comedy film written and directed by Adriana \
Trigiani and produced by Donna Gigliotti for Altar Identity Studios, a subsidiary of Media \
Society.  Based on Trigiani's 2000 best-selling novel of the same name, the story is set in the \
actual Virginia town of Big Stone Gap circa 1970s.  The film had its world premiere at the \
Virginia Film Festival on November 6, 2014."""


def test_a_passage_title_is_an_entity_without_its_disambiguator():
    extraction = extract_offline(KISS_AND_TELL)
    types = types_by_name(extraction)
    assert types["Kiss and Tell"] == "category"  # a film: a work, no organisation
    assert "Kiss and Tell (1945 film)" not in types
    assert extraction.entities[0].name == "Kiss and Tell"
    assert extraction.entities[0].description.startswith("Kiss and Tell is a 1945")


def test_the_title_replaces_its_fragments_where_the_passage_spells_it_out():
    names = set(types_by_name(extract_offline(KISS_AND_TELL)))
    assert "Tell" not in names and "Kiss" not in names


def test_the_title_is_related_to_the_entities_of_its_first_sentence():
    pairs = related_pairs(extract_offline(KISS_AND_TELL))
    assert ("kiss and tell", "shirley temple") in pairs
    assert ("corliss archer", "kiss and tell") in pairs


def test_the_title_is_related_to_entities_of_sentences_that_do_not_name_it():
    extraction = extract_offline(SHIRLEY_TEMPLE)
    types = types_by_name(extraction)
    assert types["Shirley Temple"] == "person"
    pairs = related_pairs(extraction)
    assert ("shirley temple", "shirley temple black") in pairs
    assert ("ghana", "shirley temple") in pairs  # second sentence: "she was named ..."
    big_stone_gap = related_pairs(extract_offline(BIG_STONE_GAP))
    assert ("adriana trigiani", "big stone gap") in big_stone_gap
    assert ("big stone gap", "virginia film festival") in big_stone_gap


def test_two_passages_meet_in_the_entity_one_names_and_the_other_is_titled():
    """The two-hop path: "Kiss and Tell" -> "Shirley Temple" (named in its passage)
    -> the Shirley Temple passage, whose title entity has the same key."""
    kiss = {entity.name for entity in extract_offline(KISS_AND_TELL).entities}
    temple = {entity.name for entity in extract_offline(SHIRLEY_TEMPLE).entities}
    assert "Shirley Temple" in kiss & temple


@pytest.mark.parametrize(
    ("text", "name", "kind"),
    [
        (
            "Live (band)\nLive is an American rock band from York, Pennsylvania.",
            "Live",
            "organization",
        ),
        (
            "Marion, South Australia\nMarion is a suburb in the City of Marion in Adelaide.",
            "Marion",
            None,
        ),
        ("George Gordon (bishop)\nGeorge Gordon was a Scottish bishop.", "George Gordon", "person"),
        (
            "He, She and It\nHe, She and It is a novel by Marge Piercy, set in the future.",
            "He, She and It",
            None,
        ),
    ],
)
def test_the_disambiguator_types_the_title_and_stays_out_of_its_name(text, name, kind):
    title = find_title(text)
    assert title is not None and title.name == name and title.type == kind


@pytest.mark.parametrize(
    "text",
    [
        "Meeting notes\nThe meeting agreed the budget for the new ferry.",
        "# Quarterly update\n\nAcme Corp announced a new lab in Berlin.",
        "Acme Corp announced a lab.\nIt opens in Berlin next spring, the company said.",
        "Acme Corp\nAcme.",
        "A single line with no body",
    ],
)
def test_a_first_line_that_is_no_passage_title_is_not_made_an_entity(text):
    assert find_title(text) is None


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["AdamSmith", "Bella Jones", "ZoeQuill", "Hey", "Title (film)"]),
            st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=60),
        ),
        max_size=6,
    )
)
def test_any_chat_or_titled_text_yields_a_well_formed_extraction(lines):
    text = "\n".join(
        f"{label}: {said}" if i else f"{label}\n{said}" for i, (label, said) in enumerate(lines)
    )
    extraction = extract_offline(text)
    keys = {entity.name.casefold() for entity in extraction.entities}
    assert len(keys) == len(extraction.entities)
    for relation in extraction.relations:
        assert relation.source.casefold() in keys and relation.target.casefold() in keys
        assert relation.source.casefold() != relation.target.casefold()
    assert extract_offline(text) == extraction


DELMER_DAVES = """\
Delmer Daves
Delmer Lawrence Daves (July 24, 1904 – August 17, 1977) was an American screenwriter, director \
and producer."""


def test_a_biographys_full_name_is_its_title_and_life_dates_make_it_a_person():
    extraction = extract_offline(DELMER_DAVES)
    assert types_by_name(extraction) == {"Delmer Daves": "person"}


@pytest.mark.parametrize(
    ("first_line", "name"),
    [("Boston United F.C.", "Boston United F.C."), ("Feel Good Inc.", "Feel Good Inc.")],
)
def test_a_title_may_end_in_an_abbreviations_dot(first_line, name):
    title = find_title(f"{first_line}\n{name} is a name that this longer paragraph repeats.")
    assert title is not None and title.name == name
