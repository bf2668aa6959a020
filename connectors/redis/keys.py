"""Redis key names of one workspace, and the hash slots they fall in.

Key layout (``<ws>`` is the workspace; ``E(x)`` escapes ``%``, ``{`` and ``}``
in ``x`` as ``%25``, ``%7B`` and ``%7D``, so a brace inside an entity key can
never end or open a hash tag)::

    kg:<ws>:format                    string   the records' layout (`GRAPH_FORMAT`)
    kg:<ws>:version                   string   index version (INCR once per batch)
    kg:<ws>:ent:{E(key)}              hash     EntityRecord
    kg:<ws>:adj:{E(key)}              set      neighbour entity keys (degree = SCARD)
    kg:<ws>:alias:{E(alias)}          set      keys of the entities whose aliases hold it
    kg:<ws>:rel:{E(source)}:E(target) hash     RelationRecord (source < target)
    kg:<ws>:list:<record>:<field>     zset     a long citation list of the record
                                               `kg:<ws>:<record>` (score 0: byte order;
                                               connectors/redis/written_lists.py)
    kg:<ws>:chunk:{E(chunk_id)}       hash     Chunk
    kg:<ws>:doc:{E(doc_id)}           hash     DocumentRecord + created_at, updated_at
    kg:<ws>:docstatus:<STATUS>        zset     doc ids with that status (score 0: id order)
    kg:<ws>:track:E(track_id)         string   what one request of LightRAG's API published
                                               (JSON; expires)

plus single keys for the consumer lag, dead letters, retry requests, the source hold and
the dictionary the recovery snapshots are packed with (base64).

On a Redis Cluster the part in braces is the hash tag: an entity, its adjacency set and
the relations it is the source of share one slot, and every other record has a slot of
its own, so the graph spreads over the nodes. The format, the version, the four status sets
and the other single keys carry no tag: each is one key in one slot.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from dataflow.core.documents import DocumentStatus

Pair = tuple[str, str]

_WORKSPACE = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_ESCAPES = str.maketrans({"%": "%25", "{": "%7B", "}": "%7D"})
_UNESCAPES = {"%25": "%", "%7B": "{", "%7D": "}"}
_UNESCAPE = re.compile("%25|%7B|%7D")


def escape(text: str) -> str:
    return text.translate(_ESCAPES)


def unescape(text: str) -> str:
    return _UNESCAPE.sub(lambda match: _UNESCAPES[match.group(0)], text)


class KeyLayout:
    """Key names of one workspace (see the module docstring)."""

    def __init__(self, workspace: str) -> None:
        if not _WORKSPACE.fullmatch(workspace):
            raise ValueError(
                f"workspace {workspace!r} must be 1-64 characters of A-Z a-z 0-9 _ . - "
                "(it is part of every Redis key and SCAN pattern)"
            )
        self.workspace = workspace
        self.prefix = f"kg:{workspace}:"
        self.version = self.prefix + "version"
        self.format = self.prefix + "format"
        self.adjacency_prefix = self.prefix + "adj:{"
        self.alias_prefix = self.prefix + "alias:{"
        self.entity_side_lists = self.prefix + "list:ent:"  # how an entity's sorted sets begin

    def entity(self, key: str) -> str:
        return f"{self.prefix}ent:{{{escape(key)}}}"

    def adjacency(self, key: str) -> str:
        return f"{self.adjacency_prefix}{escape(key)}}}"

    def alias(self, alias: str) -> str:
        return f"{self.alias_prefix}{escape(alias)}}}"

    def alias_of(self, redis_key: str) -> str:
        """The alias an alias-set key names (the inverse of `alias`)."""
        return unescape(redis_key[len(self.alias_prefix) : -1])

    def relation(self, pair: Pair) -> str:
        return f"{self.prefix}rel:{{{escape(pair[0])}}}:{escape(pair[1])}"

    def side_list(self, record_key: str, field: str) -> str:
        """The sorted set of a record's long list (`record_key` is the record's Redis key;
        the list shares its hash tag, so its slot: a Redis Cluster writes both in one call)."""
        return f"{self.prefix}list:{record_key[len(self.prefix) :]}:{field}"

    def chunk(self, chunk_id: str) -> str:
        return f"{self.prefix}chunk:{{{escape(chunk_id)}}}"

    def document(self, doc_id: str) -> str:
        return f"{self.prefix}doc:{{{escape(doc_id)}}}"

    def status(self, status: DocumentStatus) -> str:
        return f"{self.prefix}docstatus:{status.value}"

    @property
    def consumer_lag(self) -> str:
        return f"{self.prefix}consumer_lag"

    @property
    def dead_letters(self) -> str:
        return f"{self.prefix}dead_letters"

    @property
    def retry_requests(self) -> str:
        return f"{self.prefix}retry_requests"

    @property
    def source_hold(self) -> str:
        return f"{self.prefix}source_hold"

    @property
    def snapshot_dictionary(self) -> str:
        return f"{self.prefix}snapshot_dictionary"

    def track(self, track_id: str) -> str:
        return f"{self.prefix}track:{escape(track_id)}"

    def pattern(self, kind: str) -> str:
        return f"{self.prefix}{kind}:*"

    def adjacency_changes(self, pairs: Iterable[Pair]) -> dict[str, list[str]]:
        """Adjacency set key -> members to add (or remove), one command per set."""
        changes: dict[str, list[str]] = {}
        for source, target in pairs:
            changes.setdefault(self.adjacency(source), []).append(target)
            changes.setdefault(self.adjacency(target), []).append(source)
        return changes
