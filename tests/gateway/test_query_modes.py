"""The query modes are one table (gateway/types.py `PLANS`): each mode's plan says what it
retrieves, and `parse_mode` reads a mode's name into it."""

from __future__ import annotations

import pytest

from gateway.engine import LaneTexts
from gateway.types import (
    DEFAULT_MODE,
    MODE_NAMES,
    PLANS,
    InvalidQuery,
    Keywords,
    Mode,
    QueryParams,
    QueryPlan,
    parse_mode,
)

# -- the table ---------------------------------------------------------------------------


def test_every_mode_has_one_plan_and_one_name() -> None:
    assert set(PLANS) == set(Mode)
    assert tuple(mode.value for mode in Mode) == MODE_NAMES
    assert all(mode.plan is PLANS[mode] for mode in Mode)
    assert QueryParams("q").mode is DEFAULT_MODE is Mode.MIX  # LightRAG's default


def test_the_plans_are_lightrags_modes() -> None:
    lanes = {
        mode.value: (plan.entity_lane, plan.relation_lane, plan.question_chunks)
        for mode, plan in PLANS.items()
    }
    assert lanes == {
        "local": (True, False, False),  # entities by low-level keywords, then their relations
        "global": (False, True, False),  # relations by high-level keywords, then their ends
        "hybrid": (True, True, False),
        "naive": (False, False, True),  # chunk vectors only
        "mix": (True, True, True),  # hybrid plus the question's chunk searches
    }
    assert not Mode.NAIVE.plan.reads_graph and not Mode.NAIVE.plan.extracts_keywords
    assert all(PLANS[mode].extracts_keywords for mode in Mode if mode is not Mode.NAIVE)
    # beside the question's own chunk searches, the graph's chunk lanes weigh less
    assert Mode.MIX.plan.graph_chunk_weight < Mode.HYBRID.plan.graph_chunk_weight


@pytest.mark.parametrize(
    ("lanes", "weight"),
    [
        ((False, False, False), 0.0),  # no lane at all
        ((True, False, False), 0.0),  # a graph lane whose chunks weigh nothing
        ((False, False, True), 1.0),  # a weight for graph lanes that do not run
    ],
)
def test_a_plan_that_cannot_run_is_refused(lanes: tuple[bool, bool, bool], weight: float) -> None:
    with pytest.raises(ValueError, match="lane"):
        QueryPlan(*lanes, graph_chunk_weight=weight)


@pytest.mark.parametrize("mode", list(Mode), ids=MODE_NAMES)
def test_a_plan_embeds_the_texts_of_its_lanes_and_the_question(mode: Mode) -> None:
    keywords = Keywords(high_level=("partnership",), low_level=("Carla Diaz", "Lisbon"))
    texts = LaneTexts.of(mode.plan, " Who leads Atlas? ", keywords)
    expected = [
        *(["partnership"] if mode.plan.relation_lane else []),
        *(["Carla Diaz, Lisbon"] if mode.plan.entity_lane else []),
        "Who leads Atlas?",
    ]
    assert list(texts.embedded) == expected


def test_a_lane_without_keywords_of_its_level_searches_with_the_question() -> None:
    texts = LaneTexts.of(Mode.HYBRID.plan, "Who leads Atlas?", Keywords((), ("Atlas",)))
    assert (texts.entities, texts.relations) == ("Atlas", "Who leads Atlas?")
    assert texts.embedded == ("Who leads Atlas?", "Atlas")
    keywords_only = LaneTexts.of(Mode.NAIVE.plan, "  ", Keywords(("theme",), ("Atlas",)))
    assert keywords_only.embedded == ("Atlas, theme",)


def test_parse_mode_names_the_field_the_value_and_the_modes() -> None:
    assert parse_mode("hybrid") is Mode.HYBRID and parse_mode(None) is DEFAULT_MODE
    with pytest.raises(InvalidQuery) as raised:
        parse_mode("sideways")
    assert str(raised.value) == (
        "mode: must be one of local, global, hybrid, naive, mix (or leave it unset for mix); "
        "got 'sideways'"
    )
    assert raised.value.field == "mode"
