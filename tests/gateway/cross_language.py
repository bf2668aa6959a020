"""What each cross-language client test checks (Node.js: test_node_client.py, Go:
test_go_client.py): a client in another language, calling the Python gateway over the real
wire, sees exactly what the Python engine returns. Both clients print their responses as
JSON with proto field names, every field, int64 as text and enums by name."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from google.protobuf import json_format

from gateway import convert
from gateway.engine import QueryEngine
from gateway.types import QueryParams
from tests.gateway.test_server import ANSWER, QUESTION

# The request every client sends to Query, QueryStream and Retrieve (proto field names).
REQUEST: dict[str, Any] = {"question": QUESTION, "top_k": 10, "chunk_top_k": 3}


def run_client(command: list[str]) -> dict[str, Any]:
    """Run a client program and parse the one JSON object it prints."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"{command[0]} failed:\n{done.stdout}\n{done.stderr}"
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def as_json(message: Any) -> dict[str, Any]:
    """A message as the clients print it."""
    return json_format.MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )


def expected_retrieval(engine: QueryEngine) -> dict[str, Any]:
    """What the Python engine retrieves for REQUEST, as the clients print it."""
    expected = as_json(
        convert.retrieval_to_proto(
            engine.retrieve(QueryParams(question=QUESTION, top_k=10, chunk_top_k=3))
        )
    )
    assert expected["entities"] and expected["relations"] and expected["chunks"]
    assert len(expected["chunks"]) == 3  # the knob set in the client reached the engine
    return expected


def assert_query_and_stream_match(
    result: dict[str, Any], expected: dict[str, Any], index_version: int, kinds: list[str]
) -> None:
    """Query, QueryStream (whose events are of `kinds`, in order) and Retrieve saw the
    engine's context, the LLM's answer and the index version."""
    assert result["retrieve"] == expected
    assert result["query"]["context"] == expected
    assert result["query"]["answer"] == ANSWER
    assert result["query"]["index_version"] == str(index_version)

    stream = result["stream"]
    assert kinds[0] == "context" and kinds[-1] == "done"
    assert set(kinds[1:-1]) == {"delta"}
    assert stream[0]["context"] == expected
    assert stream[0]["context"]["references"]
    assert "".join(event["delta"]["text"] for event in stream[1:-1]) == ANSWER
    assert stream[-1]["done"]["index_version"] == expected["index_version"]
