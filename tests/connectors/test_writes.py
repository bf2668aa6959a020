"""A commit batch as the stores write it: chunk vectors become chunk points keyed by their
chunk ids, with payloads naming what each chunk mentions."""

import dataclasses
import pickle

from connectors.vectors.base import VectorKind
from connectors.writes import store_write
from dataflow.core.commit import DocumentCommit
from dataflow.core.messages import ChunkMentions
from tests.dataflow.core.test_commit import KEPT, NEW, OLD, pending, settled


def test_chunk_vectors_are_written_as_chunk_points_and_chunk_deletes_by_chunk_id():
    commit = DocumentCommit()
    commit.add(pending("v1", [OLD, KEPT], awaiting=("chunk-old", "chunk-kept")))
    commit.add(
        pending("v2", [NEW, KEPT], removed=("chunk-old",), awaiting=("chunk-old", "chunk-new"))
    )
    commit.add(settled("v1", KEPT))
    commit.add(settled("v2", NEW))

    write = store_write(commit.flush())

    assert {(p.kind, p.key) for p in write.vector_upserts} == {
        (VectorKind.CHUNK, "chunk-kept"),
        (VectorKind.CHUNK, "chunk-new"),
    }
    assert set(write.vector_deletes) == {(VectorKind.CHUNK, "chunk-old")}


def test_a_chunk_point_names_what_its_settle_says_the_chunk_mentions():
    mentions = ChunkMentions(("atlas project", "carla diaz"), (("atlas project", "carla diaz"),))
    commit = DocumentCommit()
    commit.add(pending("v1", [NEW], awaiting=[NEW.chunk_id]))
    commit.add(dataclasses.replace(settled("v1", NEW), mentions=mentions))

    (point,) = store_write(commit.flush()).vector_upserts

    assert point.payload["entities"] == ["atlas project", "carla diaz"]
    assert point.payload["relations"] == ["atlas project\x1fcarla diaz"]


def test_state_snapshotted_before_chunk_mentions_resumes_with_none():
    """A settle pickled before `mentions` existed, and a vector it queued as a pair."""
    old = settled("v1", NEW)
    del old.__dict__["mentions"]  # as unpickled from a snapshot taken before the field
    commit = DocumentCommit()
    commit.add(pending("v1", [NEW], awaiting=[NEW.chunk_id]))
    commit.add(pickle.loads(pickle.dumps(old)))
    commit.chunk_vectors[KEPT.chunk_id] = (KEPT, (0.0, 1.0))  # the old (chunk, vector) pair

    points = {p.key: p.payload for p in store_write(commit.flush()).vector_upserts}

    assert points[NEW.chunk_id]["entities"] == points[KEPT.chunk_id]["entities"] == []
