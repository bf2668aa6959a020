"""No test reaches a private name of our packages (tests/support/private_names.py): it
injects the value it needs or reads a public property. And the scan finds what it must, and
only that."""

import ast
import textwrap
from pathlib import Path

from tests.support.private_names import (
    OUR_PACKAGES,
    defined_private_attributes,
    defined_private_names,
    parsed_modules,
    private_reaches,
)

ROOT = Path(__file__).resolve().parents[2]


def test_no_test_patches_assigns_reads_or_imports_a_private_name_of_our_packages():
    production = defined_private_names(
        module for package in sorted(OUR_PACKAGES) for _, module in parsed_modules(ROOT / package)
    )
    tests = parsed_modules(ROOT / "tests")
    tests_define = defined_private_attributes(module for _, module in tests)
    found = [
        reach
        for path, module in tests
        for reach in private_reaches(str(path.relative_to(ROOT)), module, production, tests_define)
    ]
    assert found == [], (
        "tests reach private names of our packages; build the object with the value the "
        "test needs (an injected parameter) or read a public property instead:\n"
        + "\n".join(map(str, found))
    )


PRODUCTION = frozenset({"_FIRST_READ", "_retrieve_keys", "_keys", "_control_client"})
TESTS_DEFINE = frozenset({"_control_client", "_helper"})


def reaches(source: str) -> list[str]:
    module = ast.parse(textwrap.dedent(source))
    found = private_reaches("t.py", module, PRODUCTION, TESTS_DEFINE)
    return [reach.what for reach in found]


def test_patching_assigning_reading_or_importing_a_private_name_of_ours_is_found():
    assert reaches(
        """
        import gateway.engine as engine_module
        from connectors.tokenizer import _parts
        from unittest import mock
        def test(monkeypatch, store):
            monkeypatch.setattr(engine_module, "_FIRST_READ", 1)
            monkeypatch.setattr("gateway.engine._FIRST_READ", 1)
            mock.patch.object(store, "_retrieve_keys")
            store._keys = {}
            assert len(store._keys) == 2
            setattr(engine_module, "_OTHER", 3)
        """
    ) == [
        "imports _parts from connectors.tokenizer",
        "setattr engine_module._FIRST_READ",
        "setattr gateway.engine._FIRST_READ",
        "object store._retrieve_keys",
        "assigns store._keys",
        "reads store._keys",
        "setattr engine_module._OTHER",
    ]


def test_own_state_a_test_helpers_private_method_and_third_party_names_are_left_alone():
    assert (
        reaches(
            """
            import tiktoken
            from tests.support.redis import RedisTestServer
            class Helper:
                def __init__(self):
                    self._keys = {}
                def run(self, node):
                    self._keys.clear()
                    return node._control_client()
            def test(monkeypatch, encoding):
                monkeypatch.setattr(tiktoken, "_private", 1)
                assert encoding._pat_str and encoding.__dict__
                assert RedisTestServer._helper
            """
        )
        == []
    )
