import io
import json
import logging
import os
import select
import time
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

from kgstream.logs import LIBRARY_LOGGERS, configure_logging
from tests.support.wait import wait_until


@pytest.fixture(autouse=True)
def restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    libraries = {name: logging.getLogger(name).level for name in LIBRARY_LOGGERS}
    yield
    for handler in root.handlers:
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)
    for name, library_level in libraries.items():
        logging.getLogger(name).setLevel(library_level)


def json_lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_mode_writes_one_parseable_object_per_record_with_fields_and_extras():
    stream = io.StringIO()
    configure_logging("json", stream=stream)
    log = logging.getLogger("kgstream.test")

    log.info("indexed %d documents", 3, extra={"doc_id": "a.md", "version": 7})
    log.warning("slow", extra={"elapsed": 1.5, "path": object.__new__(type("Odd", (), {}))})

    first, second = json_lines(stream)
    assert first["level"] == "INFO"
    assert first["logger"] == "kgstream.test"
    assert first["message"] == "indexed 3 documents"
    assert first["doc_id"] == "a.md" and first["version"] == 7
    assert "exception" not in first
    ts = datetime.fromisoformat(first["ts"])
    assert ts.utcoffset() == timedelta(0)
    assert abs(time.time() - ts.timestamp()) < 60
    assert second["level"] == "WARNING" and second["elapsed"] == 1.5
    assert "Odd object" in second["path"]  # not JSON-serialisable: written with str()


def test_json_mode_puts_the_traceback_in_exception():
    stream = io.StringIO()
    configure_logging("json", stream=stream)
    try:
        raise RuntimeError("redis went away")
    except RuntimeError:
        logging.getLogger("kgstream.sink").exception("write failed", extra={"batch": 4})

    (line,) = json_lines(stream)
    assert line["message"] == "write failed"
    assert line["level"] == "ERROR"
    assert line["batch"] == 4
    assert "Traceback" in line["exception"]
    assert "RuntimeError: redis went away" in line["exception"]


def test_level_filters_records_below_it():
    stream = io.StringIO()
    configure_logging("json", level="WARNING", stream=stream)
    logging.getLogger("kgstream.test").info("hidden")
    logging.getLogger("kgstream.test").error("shown")
    assert [line["message"] for line in json_lines(stream)] == ["shown"]


def test_auto_picks_json_for_a_stream_that_is_not_a_terminal():
    stream = io.StringIO()
    configure_logging("auto", stream=stream)
    logging.getLogger("kgstream.test").info("hello", extra={"n": 1})
    (line,) = json_lines(stream)
    assert line["message"] == "hello" and line["n"] == 1


def read_until(fd: int, needle: bytes) -> bytes:
    """What the terminal has shown, once `needle` is among it."""
    received = bytearray()

    def arrived() -> bytes:
        if select.select([fd], [], [], 0)[0]:
            received.extend(os.read(fd, 4096))
        return bytes(received) if needle in received else b""

    return wait_until(arrived, 30, f"{needle!r} on the terminal", interval=0.01)


def test_auto_picks_readable_text_for_a_terminal():
    controller, terminal = os.openpty()
    with os.fdopen(terminal, "w") as tty, os.fdopen(controller, "rb", buffering=0) as screen:
        assert tty.isatty()
        configure_logging("auto", stream=tty)
        logging.getLogger("kgstream.test").warning("disk low", extra={"free_mb": 12})
        tty.flush()

        shown = read_until(screen.fileno(), b"\n").decode()

    line = shown.strip()
    assert not line.startswith("{")
    assert "WARNING" in line
    assert "kgstream.test: disk low" in line
    assert "free_mb=12" in line


def test_text_mode_appends_the_traceback():
    stream = io.StringIO()
    configure_logging("text", stream=stream)
    try:
        raise ValueError("bad chunk")
    except ValueError:
        logging.getLogger("kgstream.test").exception("extraction failed")
    text = stream.getvalue()
    assert "ERROR" in text and "kgstream.test: extraction failed" in text
    assert "ValueError: bad chunk" in text


def test_configuring_again_replaces_the_handler_instead_of_doubling_output():
    first, second = io.StringIO(), io.StringIO()
    configure_logging("json", stream=first)
    configure_logging("json", stream=second)
    logging.getLogger("kgstream.test").info("once")
    assert first.getvalue() == ""
    assert [line["message"] for line in json_lines(second)] == ["once"]


def test_unknown_format_or_level_is_an_error_naming_the_value():
    with pytest.raises(ValueError, match="log_format = 'yaml'"):
        configure_logging("yaml")
    with pytest.raises(ValueError, match="log level 'LOUD'"):
        configure_logging("json", level="LOUD")


def test_library_chatter_is_off_by_default_and_its_level_is_a_setting():
    stream = io.StringIO()
    configure_logging("json", level="INFO", stream=stream)
    logging.getLogger("kafka.conn").info("connecting to 127.0.0.1:9092")
    logging.getLogger("kafka.conn").warning("broker went away")
    logging.getLogger("kgstream.test").info("indexed doc-1")
    assert [line["message"] for line in json_lines(stream)] == ["broker went away", "indexed doc-1"]

    stream = io.StringIO()
    configure_logging("json", level="WARNING", stream=stream, library_level="INFO")
    logging.getLogger("kafka.conn").info("connecting to 127.0.0.1:9092")
    logging.getLogger("kgstream.test").info("indexed doc-1")
    assert [line["message"] for line in json_lines(stream)] == ["connecting to 127.0.0.1:9092"]


def test_the_http_requests_of_the_model_clients_are_library_chatter(llm_server):
    """openai sends through httpx2, whose INFO line for every request used to show."""
    from connectors.embeddings.remote import OpenAIEmbedder, OpenAIEmbeddingOptions

    stream = io.StringIO()
    configure_logging("json", level="INFO", stream=stream)
    embedder = OpenAIEmbedder(OpenAIEmbeddingOptions(llm_server.base_url, "test-embedding-model"))
    try:
        assert len(embedder.embed(["a text"])) == 1
    finally:
        embedder.close()
    assert json_lines(stream) == []


def test_log_levels_are_settings_checked_by_name():
    from kgstream.settings import SettingsError, load_settings

    settings = load_settings({"KGSTREAM_LOG_LEVEL": "debug", "KGSTREAM_LIBRARY_LOG_LEVEL": "ERROR"})
    assert (settings.log_level, settings.library_log_level) == ("debug", "ERROR")
    with pytest.raises(SettingsError, match="library_log_level: log level 'chatty'"):
        load_settings({"KGSTREAM_LIBRARY_LOG_LEVEL": "chatty"})
