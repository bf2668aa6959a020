"""How kgstream lays out its collections on a Qdrant cluster (settings: `qdrant_*`).

Its own module, free of qdrant-client, so that reading the settings imports no vector store.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QdrantClusterOptions:
    """How each new collection is laid out on a Qdrant cluster: Qdrant's own collection
    parameters, passed to create_collection (None: Qdrant's default, which for
    `shard_number` is one shard per node at creation time, and 1 for the other two). An
    existing collection keeps its layout: change its replication and write consistency with
    Qdrant's update_collection; its shard number is fixed when it is created.

    `write_consistency_factor`: how many replicas must apply a write before Qdrant confirms
    it. The indexer writes a batch's vectors before it bumps the index version, so with it
    equal to `replication_factor` every replica holds a version's vectors once the version
    is visible; below it, a search may briefly miss a write on a lagging replica.
    """

    shard_number: int | None = None
    replication_factor: int | None = None
    write_consistency_factor: int | None = None

    def __post_init__(self) -> None:
        for name in ("shard_number", "replication_factor", "write_consistency_factor"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"qdrant_{name} must be >= 1; got {value}")
        replicas = self.replication_factor or 1
        if (self.write_consistency_factor or 1) > replicas:
            raise ValueError(
                f"qdrant_write_consistency_factor ({self.write_consistency_factor}) must not "
                f"exceed qdrant_replication_factor ({replicas}): no write could succeed"
            )

    def is_default(self) -> bool:
        return self == QdrantClusterOptions()
