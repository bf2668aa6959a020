"""Reading a whole index back out of the stores, as plain data.

Used by `kgstream export` and by the tests that compare an incrementally
maintained index with a fresh build ("graph and vectors compared as data").
"""

from __future__ import annotations

from dataclasses import dataclass

from connectors.redis.ports import GraphRecords
from connectors.stores import Stores
from connectors.vectors.port import JsonValue, VectorKind
from dataflow.core.index import IndexSnapshot


@dataclass(frozen=True)
class StoredIndex:
    graph: IndexSnapshot
    vectors: dict[VectorKind, dict[str, tuple[tuple[float, ...], dict[str, JsonValue]]]]


def read_graph(graph: GraphRecords) -> IndexSnapshot:
    """Everything the graph store holds for a workspace, sorted by id."""
    return IndexSnapshot(
        entities={e.key: e for e in sorted(graph.iter_entities(), key=lambda e: e.key)},
        relations={r.pair: r for r in sorted(graph.iter_relations(), key=lambda r: r.pair)},
        chunks={c.chunk_id: c for c in sorted(graph.iter_chunks(), key=lambda c: c.chunk_id)},
        documents={
            d.record.doc_id: d.record
            for d in sorted(graph.iter_documents(), key=lambda d: d.record.doc_id)
        },
        aliases=dict(sorted(graph.iter_aliases())),
    )


def read_index(stores: Stores) -> StoredIndex:
    snapshot = read_graph(stores.graph)
    vectors = {
        kind: {
            point.key: (tuple(point.vector), dict(point.payload))
            for point in stores.vectors.iter_points(kind)
        }
        for kind in VectorKind
    }
    return StoredIndex(snapshot, vectors)
