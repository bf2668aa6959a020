"""What sources hand to the dataflow: a document change plus where and when it came from."""

from __future__ import annotations

from dataclasses import dataclass

from dataflow.core.documents import DocumentChange


@dataclass(frozen=True)
class SourceEvent:
    """One document change as a source received it.

    `origin` names the position it came from (``kafka:<topic>/<partition>@<offset>``
    or ``folder:<relative path>``), for logs and dead letters; `event_time` is
    when the change happened (Unix seconds), for freshness figures.
    """

    change: DocumentChange
    origin: str
    event_time: float
