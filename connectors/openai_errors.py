"""Which OpenAI-compatible failures are worth retrying, for every client that calls one.

The classification is the `openai` client's own (``_should_retry``): the server's
``x-should-retry`` header when it sends one, else 408 (request timeout), 409 (lock
timeout), 429 (rate limit), 5xx, timeouts and connection errors. Our clients switch the
`openai` client's retries off (``max_retries=0``) and retry with `openai_retry` instead, so
one policy applies, its delays are injectable, and the final error can say how many
attempts were made.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable

import openai

from connectors.retry import Backoff, Retry

_RETRYABLE_STATUSES = frozenset({408, 409, 429})


class UnusableReplyError(openai.OpenAIError):
    """A 200 whose text cannot be used: no text, or not the format the caller asked for.

    Retried like a 5xx (a model sampled again may follow the format), and never cached.
    """


def is_transient(error: Exception) -> bool:
    """True when trying the same request again may succeed."""
    if isinstance(error, openai.APIConnectionError | UnusableReplyError):  # and timeouts
        return True
    if isinstance(error, openai.APIStatusError):
        told = error.response.headers.get("x-should-retry")
        if told in ("true", "false"):
            return told == "true"
        return error.status_code in _RETRYABLE_STATUSES or error.status_code >= 500
    return False


def retry_after(error: Exception) -> float | None:
    """Seconds from the response's ``Retry-After`` header (seconds or an HTTP date), if any."""
    if not isinstance(error, openai.APIStatusError):
        return None
    value = error.response.headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        seconds = email.utils.mktime_tz(parsed) - time.time()
    if seconds != seconds or seconds < 0:  # NaN or in the past
        return None
    return seconds


def openai_retry(
    backoff: Backoff, retries: int, sleep: Callable[[float], None] = time.sleep
) -> Retry:
    """The retry policy for calls through the `openai` client."""
    return Retry(
        backoff,
        retries,
        supported_errors=(openai.OpenAIError,),
        is_transient=is_transient,
        retry_after=retry_after,
        sleep=sleep,
    )


def without_key(error: Exception, api_key: str | None) -> str:
    """`error`'s text with `api_key` masked: servers quote the key they were sent in their
    error bodies ("Incorrect API key provided: sk-..."), and this text goes to logs, to
    document statuses and to gRPC clients."""
    text = str(error)
    if api_key and len(api_key) >= 4:
        text = text.replace(api_key, "****")
    return text
