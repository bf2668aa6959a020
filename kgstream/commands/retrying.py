"""`kgstream retry-failed`: ask the indexer to extract again what the LLM failed to.

It writes one retry request (`IndexControl.request_retry`) when FAILED documents whose
extraction failed (a transient cause: LLM errors, timeouts, garbage replies) exist; the
running indexer reads it at once, and `kgstream index` or `kgstream run` at their next start,
and re-extracts those documents' failed chunks (`connectors/redis/retry_requests.py`).
Documents that failed for a reason a retry cannot fix (bad encoding, binary, empty, too
large, a bad doc id) are listed, not retried: their content has to change.
"""

from __future__ import annotations

import argparse
import time

from connectors.redis.failures import failed_documents
from kgstream.commands.common import open_index_graph
from kgstream.settings import Settings

_SHOWN = 10


def command_retry_failed(settings: Settings, args: argparse.Namespace) -> int:
    graph, control, embedded = open_index_graph(settings)
    try:
        retried, permanent = failed_documents(graph)
        if retried:
            control.request_retry(time.time())
    finally:
        if embedded is not None:
            embedded.stop()
    print(
        f"kgstream: asked the indexer to retry {len(retried)} document(s) whose extraction "
        "failed (a running indexer retries them now, else the next `kgstream run` or "
        "`kgstream index` does)"
    )
    if permanent:
        print(
            f"kgstream: {len(permanent)} document(s) failed for a reason a retry cannot fix; "
            "fix the file, or send a corrected event:"
        )
        for doc_id, reason in permanent[:_SHOWN]:
            print(f"  {doc_id}: {reason}")
        if len(permanent) > _SHOWN:
            print(f"  ... and {len(permanent) - _SHOWN} more (kgstream status --json lists them)")
    return 0
