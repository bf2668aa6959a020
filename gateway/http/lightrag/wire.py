"""LightRAG's wire conventions, shared by its routes: FastAPI's error bodies and checks of a
JSON body's fields in the spirit of LightRAG's pydantic models.

Errors: a refused request is `{"detail": "<message>"}` with its status, a bad field is 422
with `{"detail": [{"type", "loc", "msg", "input"}]}` (FastAPI's `RequestValidationError`),
as LightRAG's clients expect. A servicer's INVALID_ARGUMENT names a kgstream field
("question: ..."); each route says what that field is called in its request
(`FieldNames`), so the 422 points at the field the client sent ("query").

Fields: unknown ones are ignored and `null` is "not given", as pydantic models do; a given
value of the wrong JSON type is a 422 naming the field (a number is never read from a
string, unlike pydantic's lax mode).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

import grpc
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.http.app import BodyTooLarge, read_body_within_limit
from gateway.http.calls import HTTP_STATUS, CallFailed, field_of
from gateway.http.messages import parse_json
from gateway.types import shown

T = TypeVar("T")
Handler = Callable[[Request], Awaitable[Response]]
FieldNames = Mapping[str, str]
"""A kgstream request field (the head of a servicer's INVALID_ARGUMENT message) -> the name
of the LightRAG field it comes from."""

# "history[2].role" -> "history", "2", "role"
_PATH_PART = re.compile(r"[^.\[\]]+")


def fastapi_error(status: int, code: grpc.StatusCode, message: str, field: str) -> dict[str, Any]:
    """FastAPI's error body, for the errors no route writes (401, 404, 405, 413)."""
    return {"detail": message}


class Refused(Exception):
    """A request LightRAG would answer with `status` and `{"detail": detail}`."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class Invalid(Exception):
    """Fields that do not validate: FastAPI's 422 (`errors` as its `detail` list)."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(
            "; ".join(f"{' -> '.join(map(str, e['loc']))}: {e['msg']}" for e in errors)
        )
        self.errors = errors


def field_error(location: str, path: list[str | int], message: str, value: Any = None) -> Any:
    """One entry of a 422's `detail`: `location` is "body" or "query"."""
    return {"type": "value_error", "loc": [location, *path], "msg": message, "input": value}


def lightrag_route(
    handler: Handler, names: FieldNames | None = None, location: str = "body"
) -> Handler:
    """`handler` with its failures in LightRAG's shapes: `Refused`, `Invalid`, a body over
    the limit (413), and the servicers' statuses (`CallFailed`), an INVALID_ARGUMENT as a
    422 at the field `names` gives its kgstream name."""

    async def route(request: Request) -> Response:
        try:
            return await handler(request)
        except Refused as refused:
            return JSONResponse({"detail": refused.detail}, status_code=refused.status)
        except Invalid as invalid:
            return JSONResponse({"detail": invalid.errors}, status_code=422)
        except BodyTooLarge as error:
            return JSONResponse({"detail": f"Request too large: {error}"}, status_code=413)
        except CallFailed as failure:
            return failed(failure, names or {}, location)

    return route


def failed(failure: CallFailed, names: FieldNames, location: str) -> Response:
    """The response of a servicer's error status."""
    invalid = invalid_field(failure, names, location)
    if invalid is not None:
        return JSONResponse({"detail": invalid.errors}, status_code=422)
    return JSONResponse({"detail": failure.message}, status_code=HTTP_STATUS.get(failure.code, 500))


def invalid_field(failure: CallFailed, names: FieldNames, location: str) -> Invalid | None:
    """A servicer's INVALID_ARGUMENT as the 422 of the LightRAG field it is about (`names`
    renames the kgstream field, or the head of its path: "history[0].role")."""
    if failure.code != grpc.StatusCode.INVALID_ARGUMENT:
        return None
    field = field_of(failure.code, failure.message)
    head = field.split(".")[0].split("[")[0]
    renamed = names.get(field) or names.get(head, head) + field[len(head) :]
    return invalid_at(failure, _path(renamed), location)


def invalid_at(failure: CallFailed, path: list[str | int], location: str) -> Invalid | None:
    """A servicer's INVALID_ARGUMENT as a 422 at `path`, for a route that knows which of its
    fields the servicer's one field came from (the doc id of the third text: texts[2])."""
    if failure.code != grpc.StatusCode.INVALID_ARGUMENT:
        return None
    field = field_of(failure.code, failure.message)
    message = failure.message.removeprefix(f"{field}: ") if field else failure.message
    return Invalid([field_error(location, path, message)])


def _path(field: str) -> list[str | int]:
    """ "history[2].role" -> ["history", 2, "role"]."""
    return [int(part) if part.isdigit() else part for part in _PATH_PART.findall(field)]


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object (422 when it is not one; 413 over the size limit)."""
    raw = await read_body_within_limit(request)
    try:
        body = parse_json(raw or b"null")
    except ValueError as error:
        raise Invalid([field_error("body", [], f"JSON decode error: {error}")]) from None
    if not isinstance(body, dict):
        raise Invalid(
            [field_error("body", [], f"must be a JSON object; got {type(body).__name__}", None)]
        )
    return body


class Fields:
    """Reads the fields of one JSON object, collecting every error (FastAPI reports them
    all at once); `check()` raises them as `Invalid`."""

    def __init__(self, values: Mapping[str, Any], location: str = "body") -> None:
        self.values = values
        self.location = location
        self.errors: list[dict[str, Any]] = []

    def fail(self, path: list[str | int], message: str, value: Any = None) -> None:
        self.errors.append(field_error(self.location, path, message, value))

    def check(self) -> None:
        if self.errors:
            raise Invalid(self.errors)

    def _typed(self, name: str, kind: type[T], what: str, default: T | None) -> T | None:
        value = self.values.get(name)
        if value is None:
            return default
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            self.fail([name], f"must be {what}; got {shown(value)}", value)
            return default
        return value

    def boolean(self, name: str, default: bool | None = None) -> bool | None:
        return self._typed(name, bool, "a boolean", default)

    def text(
        self, name: str, *, required: bool = False, non_empty: bool = False, max_length: int = 0
    ) -> str | None:
        if required and self.values.get(name) is None:
            self.fail([name], "Field required")
            return None
        value = self._typed(name, str, "a string", None)
        if value is None:
            return None
        if non_empty and not value.strip():
            self.fail([name], "must not be empty or whitespace only", value)
        elif max_length and len(value) > max_length:
            self.fail(
                [name], f"is {len(value)} characters long; the limit is {max_length}", shown(value)
            )
        return value

    def integer(self, name: str, low: int, high: int, default: int | None = None) -> int | None:
        value = self._typed(name, int, "an integer", None)
        if value is None:
            return default
        if not low <= value <= high:
            self.fail([name], f"must be between {low} and {high}; got {value}", value)
            return default
        return value

    def choice(self, name: str, choices: tuple[str, ...], default: str) -> str:
        value = self._typed(name, str, "a string", None)
        if value is None:
            return default
        if value not in choices:
            self.fail([name], f"must be one of {', '.join(choices)}; got {shown(value)}", value)
            return default
        return value

    def strings(self, name: str) -> list[str] | None:
        """A list of strings (None when not given)."""
        value = self._typed(name, list, "a list of strings", None)
        if value is None:
            return None
        for index, item in enumerate(value):
            if not isinstance(item, str):
                self.fail([name, index], f"must be a string; got {shown(item)}", item)
        return [item for item in value if isinstance(item, str)]

    def objects(self, name: str) -> list[dict[str, Any]] | None:
        """A list of JSON objects (None when not given)."""
        value = self._typed(name, list, "a list of objects", None)
        if value is None:
            return None
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                self.fail([name, index], f"must be an object; got {shown(item)}", item)
        return [item for item in value if isinstance(item, dict)]


def iso_time(unix_ms: int) -> str:
    """LightRAG's timestamps: ISO 8601 with the time zone (UTC)."""
    return datetime.fromtimestamp(unix_ms / 1000, tz=UTC).isoformat()
