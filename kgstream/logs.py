"""Logging set-up: JSON lines for machines, readable text for people.

`auto` picks JSON when the stream is not a terminal (a container, a pipe, a
log shipper) and text when a person is watching, so neither has to configure
anything. A JSON line is one object per record: `ts` (ISO 8601, UTC), `level`,
`logger`, `message`, every `extra=` field, and `exception` when there is one.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

LOG_FORMATS = ("auto", "json", "text")
# Attributes every LogRecord has; anything else on a record came from `extra=`.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", logging.INFO, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


def extra_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The fields a caller attached with `extra=`, in the order given."""
    return {k: v for k, v in vars(record).items() if k not in _RECORD_ATTRIBUTES}


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonLinesFormatter(logging.Formatter):
    """One JSON object per record; values JSON cannot hold are written with `str`."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in extra_fields(record).items():
            line.setdefault(key, value)  # the fixed fields above win over a clashing extra
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """`HH:MM:SS.mmm LEVEL logger: message key=value ...`, then any traceback."""

    def __init__(self) -> None:
        super().__init__(
            "%(asctime)s.%(msecs)03d %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S"
        )

    def formatMessage(self, record: logging.LogRecord) -> str:
        text = super().formatMessage(record)
        extras = extra_fields(record)
        if extras:
            text += " " + " ".join(f"{key}={value!r}" for key, value in extras.items())
        return text


class _KgstreamHandler(logging.StreamHandler[TextIO]):
    """Marks the handler this module installed, so a second call replaces it."""


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


#: The libraries whose loggers `library_level` governs: their INFO records are about their own
#: connections (kafka-python logs every broker connect and metadata refresh), not about kgstream.
LIBRARY_LOGGERS = (
    "kafka",
    "httpx",
    "httpx2",
    "httpcore",
    "urllib3",
    "openai",
    "grpc",
    "qdrant_client",
    "mcp",  # the MCP SDK logs its HTTP session manager's start and stop at INFO
)


def configure_logging(
    format: str = "auto",
    level: str | int = "INFO",
    stream: TextIO | None = None,
    library_level: str | int = "WARNING",
) -> logging.Handler:
    """Send the root logger's records to `stream` (default stderr) in the chosen format:
    kgstream's from `level` up, the `LIBRARY_LOGGERS`' from `library_level` up.

    Calling it again replaces the handler it installed earlier and leaves other
    handlers (pytest's capture, a library's own) alone. Returns the handler.
    """
    if format not in LOG_FORMATS:
        raise ValueError(
            f"log_format = {format!r} is not one of {', '.join(LOG_FORMATS)}; "
            "set KGSTREAM_LOG_FORMAT to one of them"
        )
    numeric_level = level_number(level)
    numeric_library_level = level_number(library_level)
    target = stream if stream is not None else sys.stderr
    use_json = format == "json" or (format == "auto" and not is_terminal(target))
    handler = _KgstreamHandler(target)
    handler.setFormatter(JsonLinesFormatter() if use_json else TextFormatter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _KgstreamHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric_level)
    for name in LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(numeric_library_level)
    return handler


def level_number(level: str | int) -> int:
    """The logging level a name (DEBUG, INFO, WARNING, ERROR, CRITICAL) or number means."""
    if isinstance(level, int):
        return level
    known = logging.getLevelNamesMapping()
    number = known.get(level.strip().upper())
    if number is None:
        raise ValueError(f"log level {level!r} is not one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
    return number
