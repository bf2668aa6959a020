"""The control plane in Redis (the `IndexControl` port of `connectors/redis/ports.py`):
what the indexer and the commands tell each other beside the records.

Each is one key of the workspace (`connectors/redis/keys.py`), outside the records'
transactions and never counted by the index version: the consumer lag (a hash), the source
hold (a string), the dead letters (a sorted set by time), the tracks of LightRAG's API (a
string each, JSON, expiring), the retry requests (a stream) and the recovery snapshots'
dictionary (a string, base64). Each key carries no hash tag, so on a Redis Cluster each
call touches one slot.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence

from connectors.redis.clients import RedisClient
from connectors.redis.keys import KeyLayout
from connectors.redis.ports import TrackedDocument

DEAD_LETTERS_KEPT = 10_000
"""The dead letters kept by default: the newest, the older trimmed as new ones come."""
RETRY_REQUESTS_KEPT = 1_000
"""The retry-request stream is trimmed to about this many entries (each asks for every
failed document, so an indexer that was away for more misses nothing it needs)."""


class RedisIndexControl:
    """The control plane of one workspace in Redis (`IndexControl`), on a client it shares
    with the workspace's `GraphStore` (which closes it). `dead_letters_kept`: how many of
    the newest dead letters are kept."""

    def __init__(
        self,
        client: RedisClient,
        workspace: str = "default",
        *,
        dead_letters_kept: int = DEAD_LETTERS_KEPT,
    ) -> None:
        if dead_letters_kept < 1:
            raise ValueError(f"dead_letters_kept must be >= 1; got {dead_letters_kept}")
        self._client = client
        self.keys = KeyLayout(workspace)
        self.dead_letters_kept = dead_letters_kept

    @property
    def workspace(self) -> str:
        return self.keys.workspace

    # -- the indexer's state, for `kgstream status` -------------------------------------

    def set_consumer_lag(self, lag: dict[int, int]) -> None:
        """Record the indexer's Kafka lag per partition (for `kgstream status`)."""
        pipe = self._client.pipeline(transaction=True)
        pipe.delete(self.keys.consumer_lag)
        if lag:
            pipe.hset(self.keys.consumer_lag, mapping={str(p): n for p, n in lag.items()})
        pipe.execute()

    def consumer_lag(self) -> dict[int, int]:
        raw = self._client.hgetall(self.keys.consumer_lag)
        return {int(partition): int(lag) for partition, lag in sorted(raw.items())}

    def set_source_hold(self, reason: str | None) -> None:
        """Record why the indexer's source holds (its watched folder is missing), or that it
        does not (None), for `kgstream status`."""
        if reason is None:
            self._client.delete(self.keys.source_hold)
        else:
            self._client.set(self.keys.source_hold, reason)

    def source_hold(self) -> str | None:
        reason = self._client.get(self.keys.source_hold)
        return None if reason is None else str(reason)

    def record_dead_letter(self, origin: str, reason: str, at: float) -> None:
        """Remember a message the indexer could not decode (for `kgstream status`).

        Idempotent: a replayed message (the same origin and reason) is one entry, kept with
        the time it was first seen. Only the newest `dead_letters_kept` are kept."""
        member = json.dumps([origin, reason], ensure_ascii=False)
        pipe = self._client.pipeline(transaction=True)
        pipe.zadd(self.keys.dead_letters, {member: at}, nx=True)
        pipe.zremrangebyrank(self.keys.dead_letters, 0, -self.dead_letters_kept - 1)
        pipe.execute()

    def dead_letters(self, limit: int = 10) -> tuple[int, list[tuple[str, str, float]]]:
        """How many dead letters are kept, and the newest `limit` as (origin, reason, time)."""
        pipe = self._client.pipeline(transaction=False)
        pipe.zcard(self.keys.dead_letters)
        if limit > 0:
            pipe.zrevrange(self.keys.dead_letters, 0, limit - 1, withscores=True)
        replies = pipe.execute()
        total, newest = replies[0], replies[1] if limit > 0 else []
        letters = []
        for member, at in newest:
            origin, reason = json.loads(member)
            letters.append((str(origin), str(reason), float(at)))
        return int(total), letters

    # -- tracks (the document changes one request of LightRAG's API published) --------

    def remember_track(
        self, track_id: str, documents: Sequence[TrackedDocument], keep_seconds: float
    ) -> None:
        """Keep what `track_id` published (a JSON list) for `keep_seconds`, then let Redis
        drop it: a track is for following one request's documents to PROCESSED, not a log."""
        rows = [[d.doc_id, d.content_hash, d.published_at] for d in documents]
        self._client.set(
            self.keys.track(track_id),
            json.dumps(rows, ensure_ascii=False),
            ex=max(1, round(keep_seconds)),
        )

    def tracked_documents(self, track_id: str) -> list[TrackedDocument] | None:
        raw = self._client.get(self.keys.track(track_id))
        if raw is None:
            return None
        return [
            TrackedDocument(str(doc_id), str(digest), float(at))
            for doc_id, digest, at in json.loads(raw)
        ]

    # -- retry requests (`kgstream retry-failed` to the indexer) -----------------------

    def request_retry(self, at: float) -> str:
        """Append a request to retry every document whose extraction failed to the
        retry-request stream (read by the indexer's retry input,
        `connectors/redis/retry_requests.py`); returns its stream id. A request names no
        document, so the stream keeps no trace of deleted ones."""
        entry = self._client.xadd(
            self.keys.retry_requests,
            {"at": repr(at)},
            maxlen=RETRY_REQUESTS_KEPT,
            approximate=True,
        )
        return str(entry)

    def retry_requests_after(self, last_id: str, count: int) -> list[str]:
        """The stream ids of up to `count` retry requests after `last_id` ("0" = from the
        start), oldest first; never blocks."""
        start = "-" if last_id == "0" else f"({last_id}"
        rows = self._client.xrange(self.keys.retry_requests, start, "+", count=count)
        return [str(entry) for entry, _ in rows or ()]

    def last_retry_request_id(self) -> str:
        """The newest retry request's stream id ("0" when there is none)."""
        rows = self._client.xrevrange(self.keys.retry_requests, "+", "-", count=1)
        return str(rows[0][0]) if rows else "0"

    # -- the recovery snapshots' dictionary --------------------------------------------

    def snapshot_dictionary(self) -> bytes | None:
        """The dictionary the indexer packs its small recovery snapshots with, if it has
        one (dataflow/state/codec.py). It is kept here, not in the recovery database,
        because every process of a cluster reads this store, and any of them may restore a
        key another one snapshotted."""
        encoded = self._client.get(self.keys.snapshot_dictionary)
        return None if encoded is None else base64.b64decode(encoded)

    def keep_snapshot_dictionary(self, dictionary: bytes) -> bytes:
        """Keep `dictionary` unless one is kept already (a cluster's processes may train
        one each at once): the one kept, which every snapshot must use."""
        encoded = base64.b64encode(dictionary).decode()
        while not self._client.set(self.keys.snapshot_dictionary, encoded, nx=True):
            kept = self.snapshot_dictionary()
            if kept is not None:  # else cleared since: try again
                return kept
        return dictionary
