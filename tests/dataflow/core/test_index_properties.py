"""Invariant 3: after any sequence of upserts and deletes, the index equals a fresh build."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connectors.tokenizer import TiktokenTokenizer
from dataflow.core.chunking import ChunkingOptions
from dataflow.core.contributions import Renderer, RenderOptions
from dataflow.core.documents import DocumentDelete, DocumentUpsert
from dataflow.core.index import IndexSnapshot, ReferenceIndex
from dataflow.core.offline.extractor import extract_offline

TOKENIZER = TiktokenTokenizer()
CHUNKING = ChunkingOptions(chunk_token_size=40, chunk_overlap_tokens=6, split_by_character="\n\n")
# Low thresholds so that summaries (extractive) take part in the property too.
RENDERER = Renderer(
    count_tokens=lambda text: len(TOKENIZER.encode(text)),
    options=RenderOptions(
        summarize_over_fragments=3, summarize_over_tokens=60, summary_max_tokens=40
    ),
)

SENTENCES = [
    "Alice Moreau founded Northwind Labs in Lisbon.",
    "Northwind Labs partnered with Helios Corp on the Atlas Project.",
    "Bob Tanaka joined Helios Corp after the Geneva Summit.",
    "Alice Moreau met Bob Tanaka in Lisbon.",
    "The Atlas Project was funded by the European Research Council.",
    "Helios Corp opened an office in Nairobi.",
    "Carla Diaz leads the Atlas Project at Northwind Labs.",
    "Bob Tanaka and Carla Diaz spoke at the Geneva Summit.",
    "Tanaka thanked Alice for the Lisbon visit.",  # short forms: aliases in some chunks
    "",
    "   ",
]
DOC_IDS = ["a.md", "b.md", "notes/c.md", "notes/d.md"]

paragraphs = st.lists(st.sampled_from(SENTENCES), min_size=1, max_size=3).map(" ".join)
contents = st.lists(paragraphs, min_size=1, max_size=6).map("\n\n".join)
upserts = st.builds(DocumentUpsert, st.sampled_from(DOC_IDS), contents, st.sampled_from(DOC_IDS))
deletes = st.builds(DocumentDelete, st.sampled_from(DOC_IDS))
events = st.lists(upserts | deletes, max_size=12)


def new_index() -> ReferenceIndex:
    return ReferenceIndex(TOKENIZER, extract_offline, CHUNKING)


def final_documents(changes) -> dict[str, DocumentUpsert]:
    final: dict[str, DocumentUpsert] = {}
    for change in changes:
        if isinstance(change, DocumentDelete):
            final.pop(change.doc_id, None)
        else:
            final[change.doc_id] = change
    return final


def built_from_scratch(documents) -> IndexSnapshot:
    index = new_index()
    index.apply_all(documents)
    return index.snapshot(RENDERER)


def is_empty(snapshot: IndexSnapshot) -> bool:
    return not (snapshot.entities or snapshot.relations or snapshot.chunks or snapshot.documents)


property_settings = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@property_settings
@given(events)
def test_incremental_index_equals_fresh_build_of_final_documents(changes):
    incremental = new_index()
    incremental.apply_all(changes)
    final = final_documents(changes)
    assert incremental.snapshot(RENDERER) == built_from_scratch(final.values())
    # ... and a fresh build does not depend on the order documents arrive in.
    assert built_from_scratch(reversed(list(final.values()))) == built_from_scratch(final.values())


# A hub: every paragraph names Alice Moreau, over many documents, so each edit and delete
# retracts and adds some of her hundreds of fragments.
HUB_DOC_IDS = [f"hub/{number:02d}.md" for number in range(40)]
hub_paragraphs = st.lists(
    st.sampled_from([s for s in SENTENCES if "Alice" in s] + [SENTENCES[1], SENTENCES[2]]),
    min_size=1,
    max_size=2,
).map(lambda sentences: " ".join(["Alice Moreau visited Lisbon.", *sentences]))
hub_contents = st.lists(hub_paragraphs, min_size=1, max_size=4).map("\n\n".join)
hub_upserts = st.builds(
    DocumentUpsert, st.sampled_from(HUB_DOC_IDS), hub_contents, st.sampled_from(HUB_DOC_IDS)
)
hub_events = st.lists(hub_upserts | st.builds(DocumentDelete, st.sampled_from(HUB_DOC_IDS)))


hub_loads = st.lists(hub_contents, min_size=len(HUB_DOC_IDS), max_size=len(HUB_DOC_IDS)).map(
    lambda texts: [DocumentUpsert(d, text, d) for d, text in zip(HUB_DOC_IDS, texts, strict=True)]
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(load=hub_loads, changes=hub_events)
def test_incremental_equals_fresh_build_around_a_hub(load, changes):
    incremental = new_index()
    incremental.apply_all(load)
    assert len(incremental.entity_states["alice moreau"]) >= 100  # a hub: cited everywhere
    incremental.apply_all(changes)
    final = final_documents([*load, *changes])
    assert incremental.snapshot(RENDERER) == built_from_scratch(final.values())


@property_settings
@given(events)
def test_resending_unchanged_documents_changes_nothing_and_costs_no_extraction(changes):
    index = new_index()
    index.apply_all(changes)
    before, calls = index.snapshot(RENDERER), index.extraction_calls
    index.apply_all(final_documents(changes).values())
    assert index.snapshot(RENDERER) == before
    assert index.extraction_calls == calls


@property_settings
@given(events)
def test_deleting_every_document_leaves_nothing(changes):
    index = new_index()
    index.apply_all(changes)
    index.apply_all(DocumentDelete(doc_id) for doc_id in DOC_IDS)
    assert is_empty(index.snapshot(RENDERER))
    assert not (index.chunk_states or index.entity_states or index.relation_states)
    assert not index.document_states


def test_the_shared_corpus_builds_a_connected_graph():
    """Guards the property tests: the corpus really exercises merging and retraction."""
    snapshot = built_from_scratch(
        DocumentUpsert(doc_id, "\n\n".join(SENTENCES[i::2]), doc_id)
        for i, doc_id in enumerate(DOC_IDS[:2])
    )
    shared = [e for e in snapshot.entities.values() if len(e.file_paths) > 1]
    assert shared, "documents must share entities"
    assert len(snapshot.relations) >= 5


def test_the_corpus_has_short_forms_whose_aliases_retract_with_their_chunk():
    """Guards the property tests: aliases take part in them too."""
    index = new_index()
    index.apply(DocumentUpsert("a.md", f"{SENTENCES[3]} {SENTENCES[8]}", "a.md"))
    index.apply(DocumentUpsert("b.md", SENTENCES[0], "b.md"))
    assert index.snapshot(RENDERER).aliases == {
        "alice": ("alice moreau",),
        "tanaka": ("bob tanaka",),
    }
    index.apply(DocumentDelete("a.md"))
    snapshot = index.snapshot(RENDERER)
    assert snapshot.aliases == {}
    assert snapshot.entities["alice moreau"].aliases == ()


def test_deleting_a_document_keeps_shared_entities_and_drops_its_own_relations():
    index = new_index()
    index.apply(DocumentUpsert("a.md", SENTENCES[0] + "\n\n" + SENTENCES[3], "a.md"))
    index.apply(DocumentUpsert("b.md", SENTENCES[1], "b.md"))
    index.apply(DocumentDelete("a.md"))
    snapshot = index.snapshot(RENDERER)
    assert snapshot == built_from_scratch([DocumentUpsert("b.md", SENTENCES[1], "b.md")])
    northwind = snapshot.entities["northwind labs"]
    assert northwind.file_paths == ("b.md",)
    assert not any("alice moreau" in pair for pair in snapshot.relations)


def test_a_failed_version_retracts_the_previous_one_and_records_the_reason():
    index = new_index()
    index.apply(DocumentUpsert("a.md", SENTENCES[0], "a.md"))
    index.apply(DocumentUpsert("a.md", b"\xff\xfe broken", "a.md"))
    snapshot = index.snapshot(RENDERER)
    assert not (snapshot.entities or snapshot.chunks)
    assert "UTF-8" in snapshot.documents["a.md"].reason


@pytest.mark.parametrize("new_path", ["a.md", "moved/a.md"])
def test_moving_a_file_rewrites_its_paths_everywhere(new_path):
    index = new_index()
    index.apply(DocumentUpsert("a.md", SENTENCES[0], "a.md"))
    index.apply(DocumentUpsert("a.md", SENTENCES[0], new_path))
    snapshot = index.snapshot(RENDERER)
    assert snapshot == built_from_scratch([DocumentUpsert("a.md", SENTENCES[0], new_path)])
    assert {p for e in snapshot.entities.values() for p in e.file_paths} == {new_path}
