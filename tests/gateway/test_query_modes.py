"""The query modes are one table (gateway/types.py `PLANS`): each mode's plan says what it
retrieves, and every door (the gRPC enum, the HTTP JSON, the chat models, Ollama's models,
the CLI, the OpenAPI document) parses into it through `parse_mode`, taking exactly the table's modes
and refusing any other with the same message."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gateway import convert
from gateway.engine import LaneTexts
from gateway.http import ollama
from gateway.http.chat import MODELS, parse_chat_request
from gateway.http.errors import Refusal
from gateway.http.messages import BadJson, from_json
from gateway.http.openapi import openapi_document
from gateway.http.routes import ApiRoute
from gateway.types import (
    DEFAULT_MODE,
    MODE_NAMES,
    PLANS,
    InvalidQuery,
    Keywords,
    Mode,
    QueryParams,
    QueryPlan,
    RequestLimits,
    parse_mode,
)
from kgstream.cli import build_parser
from kgstream_protos.v1 import query_pb2 as pb

UNKNOWN = "sideways"
NAMES = "local, global, hybrid, naive, mix"


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


# -- the doors ---------------------------------------------------------------------------


def _grpc(name: str) -> Mode:
    return convert.mode_from_proto(pb.QueryMode.Value(f"QUERY_MODE_{name.upper()}"))


def _http(name: str) -> Mode:
    return convert.mode_from_proto(from_json({"mode": name}, pb.QueryRequest).mode)


def _chat(name: str) -> Mode:
    body = {"model": f"kgstream-{name}", "messages": [{"role": "user", "content": "q"}]}
    model, request, _, _ = parse_chat_request(body)
    assert model == f"kgstream-{name}"
    return convert.mode_from_proto(request.mode)


def _ollama(name: str) -> Mode:
    tagged = ollama.mode_of(f"kgstream-{name}:latest")
    assert ollama.mode_of(f"kgstream-{name}") is tagged  # no tag is the latest
    return tagged


def _cli(name: str) -> Mode:
    mode: Mode = build_parser().parse_args(["query", "q", "--mode", name]).mode
    return mode


DOORS: dict[str, Callable[[str], Mode]] = {
    "grpc": _grpc,
    "http": _http,
    "chat": _chat,
    "ollama": _ollama,
    "cli": _cli,
}


@pytest.mark.parametrize("door", DOORS.values(), ids=DOORS.keys())
@pytest.mark.parametrize("mode", list(Mode), ids=MODE_NAMES)
def test_every_door_takes_every_mode_of_the_table(door: Callable[[str], Mode], mode: Mode) -> None:
    assert door(mode.value) is mode


def test_the_grpc_enum_holds_the_modes_of_the_table_and_no_other() -> None:
    values = [value for value in pb.QueryMode.values() if value != pb.QUERY_MODE_UNSPECIFIED]
    assert sorted(convert.mode_from_proto(value).value for value in values) == sorted(MODE_NAMES)
    assert convert.mode_from_proto(pb.QUERY_MODE_UNSPECIFIED) is DEFAULT_MODE
    assert all(convert.mode_from_proto(convert.mode_to_proto(mode)) is mode for mode in Mode)


def test_the_chat_models_are_the_modes_of_the_table_the_default_first() -> None:
    assert sorted(MODELS) == sorted(f"kgstream-{name}" for name in MODE_NAMES)
    assert MODELS[0] == f"kgstream-{DEFAULT_MODE.value}"
    assert sorted(ollama.MODELS) == sorted(f"kgstream-{name}:latest" for name in MODE_NAMES)
    assert ollama.MODELS[0] == f"kgstream-{DEFAULT_MODE.value}:latest"


def test_the_openapi_document_lists_the_modes_of_the_table_and_no_other() -> None:
    route = ApiRoute("POST", "/q", lambda _: None, "q", body=pb.QueryRequest)
    schemas = openapi_document([route], RequestLimits())["components"]["schemas"]
    names = schemas["kgstream.v1.QueryRequest"]["properties"]["mode"]["enum"]
    assert [name for name in names if name in MODE_NAMES] == list(MODE_NAMES)
    # every name listed is taken by the HTTP door, and means a mode of the table
    reached = {convert.mode_from_proto(convert.mode_from_json(name)) for name in names}
    assert reached == set(Mode)


def test_the_http_door_takes_proto3_json_forms_of_the_enum_too() -> None:
    for value in ("QUERY_MODE_GLOBAL", pb.QUERY_MODE_GLOBAL):
        assert from_json({"mode": value}, pb.QueryRequest).mode == pb.QUERY_MODE_GLOBAL
    for unset in ("QUERY_MODE_UNSPECIFIED", 0, None):
        assert from_json({"mode": unset}, pb.QueryRequest).mode == convert.mode_to_proto(
            DEFAULT_MODE
        )


# -- refusals: the same message at every door -------------------------------------------


def _refusal(spelling: Callable[[str], str], unset: str | None, got: str) -> str:
    names = ", ".join(spelling(name) for name in MODE_NAMES)
    tail = f" (or leave it unset for {spelling(unset)})" if unset else ""
    return f"must be one of {names}{tail}; got {got}"


def test_parse_mode_names_the_field_the_value_and_the_modes() -> None:
    with pytest.raises(InvalidQuery) as raised:
        parse_mode(UNKNOWN)
    assert (
        str(raised.value)
        == f"mode: must be one of {NAMES} (or leave it unset for mix); got 'sideways'"
    )
    assert raised.value.field == "mode"


def test_the_grpc_door_refuses_an_unknown_value_naming_the_enum_values() -> None:
    with pytest.raises(InvalidQuery) as raised:
        convert.query_params_from(pb.QueryRequest(question="q", mode=42))  # type: ignore[arg-type]
    enum = "QUERY_MODE_{}".format
    assert raised.value.field == "mode"
    assert raised.value.detail == _refusal(lambda n: enum(n.upper()), "mix", "42")


@pytest.mark.parametrize("value", [UNKNOWN, "Mix", "mode_mix", 42, True, ["mix"]])
def test_the_http_door_refuses_what_is_no_mode(value: object) -> None:
    with pytest.raises(BadJson) as raised:
        from_json({"question": "q", "mode": value}, pb.QueryRequest)
    assert raised.value.field == "mode"
    assert raised.value.detail == _refusal(str, "mix", repr(value))


@pytest.mark.parametrize(("model", "status"), [("kgstream-sideways", 404), (None, 400)])
def test_the_chat_door_refuses_a_model_that_is_no_mode(model: str | None, status: int) -> None:
    with pytest.raises(Refusal) as raised:
        parse_chat_request({"model": model, "messages": [{"role": "user", "content": "q"}]})
    assert (raised.value.status, raised.value.param) == (status, "model")
    assert raised.value.message == "model: " + _refusal("kgstream-{}".format, None, repr(model))


@pytest.mark.parametrize(("model", "status"), [("kgstream-sideways", 404), (3, 400)])
def test_the_ollama_door_refuses_a_model_that_is_no_mode(model: object, status: int) -> None:
    with pytest.raises(Refusal) as raised:
        ollama.mode_of(model)
    assert (raised.value.status, raised.value.param) == (status, "model")
    got = repr("kgstream-sideways:latest") if isinstance(model, str) else repr(model)
    assert raised.value.message == "model: " + _refusal("kgstream-{}:latest".format, None, got)


def test_the_cli_door_refuses_an_unknown_mode(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["query", "q", "--mode", UNKNOWN])
    assert f"argument --mode: {_refusal(str, 'mix', repr(UNKNOWN))}" in capsys.readouterr().err
