"""The extractive no-LLM answer (gateway/extractive.py): pure, over hand-made retrievals."""

from __future__ import annotations

from gateway.context import references_of
from gateway.extractive import (
    EXTRACTIVE_NOTE,
    MAX_SENTENCES,
    MAX_WORDS,
    content_terms,
    extractive_answer,
)
from gateway.types import (
    NO_LLM_ANSWER,
    Keywords,
    Mode,
    QueryParams,
    Retrieval,
    RetrievedChunk,
)


def retrieval_of(*chunks: tuple[str, str], include_references: bool = True) -> Retrieval:
    """A retrieval of (file path, text) chunks in rank order, referenced like the engine does."""
    retrieved = tuple(
        RetrievedChunk(f"chunk-{rank}", path, path, text, 1.0 - rank / 10)
        for rank, (path, text) in enumerate(chunks)
    )
    return Retrieval(
        mode=Mode.MIX,
        keywords=Keywords((), ()),
        entities=(),
        relations=(),
        chunks=retrieved,
        references=references_of(retrieved) if include_references else (),
        index_version=1,
    )


def answer_lines(question: str, retrieval: Retrieval) -> list[str]:
    """The quoted lines of the extractive answer, without the closing note."""
    text = extractive_answer(QueryParams(question), retrieval)
    assert text.endswith("\n\n" + EXTRACTIVE_NOTE)
    return text.removesuffix("\n\n" + EXTRACTIVE_NOTE).split("\n")


ATLAS = (
    "projects/atlas.md",
    "The Atlas Project started in 2021. Carla Diaz leads the Atlas Project at Northwind "
    "Labs. The team meets on Mondays.",
)
NORTHWIND = (
    "companies/northwind.md",
    "Alice Moreau founded Northwind Labs in Lisbon. Northwind Labs partnered with Helios Corp.",
)


def test_the_sentence_sharing_the_rarest_question_words_comes_first_with_its_reference():
    lines = answer_lines("Who leads the Atlas Project?", retrieval_of(NORTHWIND, ATLAS))

    assert lines[0] == "Carla Diaz leads the Atlas Project at Northwind Labs. [2]"
    assert "The Atlas Project started in 2021. [2]" in lines
    assert not any("Mondays" in line for line in lines)  # shares no word with the question


def test_rarer_words_weigh_more_than_words_every_sentence_has():
    chunks = (
        ("a.md", "The lab tests batteries. The lab cleans floors."),
        ("b.md", "The lab in Tidewater studies tides."),
    )
    lines = answer_lines("Which lab is in Tidewater?", retrieval_of(*chunks))

    assert lines[0] == "The lab in Tidewater studies tides. [2]"


def test_on_equal_scores_the_higher_ranked_chunk_wins_and_the_order_is_stable():
    chunks = (("first.md", "Solar panels charge slowly."), ("second.md", "Solar panels are cheap."))
    retrieval = retrieval_of(*chunks)
    lines = answer_lines("solar panels", retrieval)

    assert lines == ["Solar panels charge slowly. [1]", "Solar panels are cheap. [2]"]
    assert extractive_answer(QueryParams("solar panels"), retrieval) == extractive_answer(
        QueryParams("solar panels"), retrieval
    )


def test_the_answer_quotes_at_most_three_sentences_and_about_eighty_words():
    many = " ".join(f"Battery fact number {i} is worth knowing." for i in range(10))
    lines = answer_lines("battery fact", retrieval_of(("facts.md", many)))
    assert len(lines) == MAX_SENTENCES

    long_sentence = "Battery " + " ".join(["storage"] * 200) + "."
    (only,) = answer_lines("battery", retrieval_of(("long.md", long_sentence)))
    assert len(only.split()) <= MAX_WORDS + 2  # the words, the ellipsis and the marker


def test_headings_are_never_quoted_though_they_repeat_the_question_words():
    text = "# Tidewater Battery Lab\n\nThe Tidewater Battery Lab is run by Imogen Hale."
    lines = answer_lines("Who leads the Tidewater Battery Lab?", retrieval_of(("lab.md", text)))

    assert lines == ["The Tidewater Battery Lab is run by Imogen Hale. [1]"]


def test_a_sentence_repeated_in_overlapping_chunks_is_quoted_once():
    text = "Carla Diaz leads the Atlas Project."
    lines = answer_lines("Who leads Atlas?", retrieval_of(("a.md", text), ("b.md", text)))

    assert lines == [f"{text} [1]"]


def test_without_references_the_sentences_carry_no_marker():
    retrieval = retrieval_of(ATLAS, include_references=False)

    assert answer_lines("Who leads Atlas?", retrieval)[0] == (
        "Carla Diaz leads the Atlas Project at Northwind Labs."
    )


def test_the_request_keywords_count_as_question_words():
    params = QueryParams("", low_level_keywords=("Alice Moreau",))

    assert extractive_answer(params, retrieval_of(NORTHWIND)).startswith(
        "Alice Moreau founded Northwind Labs in Lisbon. [1]"
    )


def test_with_nothing_to_quote_the_answer_says_no_llm_is_configured():
    assert extractive_answer(QueryParams("Who leads Atlas?"), retrieval_of()) == NO_LLM_ANSWER
    for question in ("what is the", "?!", "Кто руководит лабораторией?", "🔋⚡"):
        assert extractive_answer(QueryParams(question), retrieval_of(ATLAS)) == NO_LLM_ANSWER


def test_the_closing_note_says_how_to_configure_an_llm():
    assert "No LLM is configured" in EXTRACTIVE_NOTE
    assert "OPENAI_BASE_URL" in EXTRACTIVE_NOTE


def test_content_terms_drop_stopwords_possessives_and_plural_s():
    assert content_terms("Who leads Tanaka's labs?") == {"lead", "tanaka", "lab"}
    assert content_terms("Кто руководит лабораторией?") == {"кто", "руководит", "лабораторией"}
