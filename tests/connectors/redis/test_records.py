"""List fields of graph records: what `dump_list` writes, `load_list` reads back exactly,
and anything else is a clear error."""

from __future__ import annotations

import pytest

from connectors.redis.records import dump_list, load_list


@pytest.mark.parametrize(
    "values",
    [
        (),
        ("chunk-0a1b",),
        ("news/2017/flood.md", "notes/ünïcödé \u65e5\u672c.md", 'quote " and \\ backslash'),
        ("line\nbreak", "tab\tand \u2028 separator", ""),
    ],
)
def test_a_dumped_list_loads_back_exactly(values: tuple[str, ...]) -> None:
    assert load_list(dump_list(values)) == values


@pytest.mark.parametrize("text", ["", "{}", '"a"', "[] []", '["a"', "[1,]", "nope"])
def test_anything_but_one_json_array_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        load_list(text)
