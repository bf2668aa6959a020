"""`kgstream export`: the graph as JSON (every stored field), NetworkX's node-link JSON, or
GraphML (Gephi, Cytoscape, NetworkX).

Output is sorted and holds no wall-clock or history fields by default, so two exports of
the same logical index (built incrementally or from scratch) are byte-equal; `with_times`
adds the index version and the documents' creation and update times. In GraphML, whose
attributes are scalars, a list field (aliases, keywords, source chunk ids, file paths, doc
ids) is a JSON array in a string (`json.loads` gives the list back); in the JSON formats it
is a list."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from connectors.redis.ports import GraphRecords


def export_data(graph: GraphRecords, with_times: bool = False) -> dict[str, Any]:
    """The whole index as plain JSON-able data, sorted by id (see the module docstring)."""
    entities = sorted(graph.iter_entities(), key=lambda e: e.key)
    relations = sorted(graph.iter_relations(), key=lambda r: r.pair)
    chunks = sorted(graph.iter_chunks(), key=lambda c: c.chunk_id)
    documents = sorted(graph.iter_documents(), key=lambda d: d.record.doc_id)
    data: dict[str, Any] = {
        "entities": [_plain(e) for e in entities],
        "relations": [_plain(r) for r in relations],
        "chunks": [_plain(c) for c in chunks],
        "documents": [
            {**_plain(d.record), "created_at": d.created_at, "updated_at": d.updated_at}
            if with_times
            else _plain(d.record)
            for d in documents
        ],
    }
    if with_times:
        data["index_version"] = graph.version()
    return data


def _plain(record: Any) -> dict[str, Any]:
    data = dataclasses.asdict(record)
    data.pop("list_changes", None)  # how a hub's record was drafted, not part of it
    for name, value in data.items():
        if isinstance(value, tuple):
            data[name] = list(value)
        elif hasattr(value, "value"):  # enums (document status)
            data[name] = value.value
    return data


def write_json(data: dict[str, Any], output: Path) -> None:
    output.write_text(json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True) + "\n")


def write_node_link(data: dict[str, Any], output: Path) -> None:
    """NetworkX's node-link JSON (`networkx.node_link_graph(json.load(f))`, NetworkX 3.4 and
    later; older versions: `link="edges"`): entities as nodes by key, relations as edges."""
    graph = {
        "directed": False,
        "multigraph": False,
        "graph": {"name": "kgstream"},
        "nodes": [
            {"id": entity["key"], **{name: entity[name] for name in _NODE_KEYS}}
            for entity in data["entities"]
        ],
        "edges": [
            {
                "source": relation["source"],
                "target": relation["target"],
                **{name: relation[name] for name in _EDGE_KEYS},
            }
            for relation in data["relations"]
        ],
    }
    write_json(graph, output)


_NODE_KEYS = ("name", "type", "description", "aliases", "source_chunk_ids", "file_paths", "doc_ids")
_EDGE_KEYS = ("keywords", "description", "weight", "source_chunk_ids", "file_paths", "doc_ids")


def write_graphml(data: dict[str, Any], output: Path) -> None:
    """Entities as nodes, relations as undirected edges; list fields as JSON strings."""
    root = ET.Element("graphml", xmlns="http://graphml.graphdrawing.org/xmlns")
    for name in _NODE_KEYS:
        ET.SubElement(
            root,
            "key",
            id=f"n_{name}",
            attrib={"for": "node", "attr.name": name, "attr.type": "string"},
        )
    for name in _EDGE_KEYS:
        kind = "double" if name == "weight" else "string"
        ET.SubElement(
            root,
            "key",
            id=f"e_{name}",
            attrib={"for": "edge", "attr.name": name, "attr.type": kind},
        )
    graph = ET.SubElement(root, "graph", id="kgstream", edgedefault="undirected")
    for entity in data["entities"]:
        node = ET.SubElement(graph, "node", id=entity["key"])
        for name in _NODE_KEYS:
            _data(node, f"n_{name}", entity[name])
    for relation in data["relations"]:
        edge = ET.SubElement(graph, "edge", source=relation["source"], target=relation["target"])
        for name in _EDGE_KEYS:
            _data(edge, f"e_{name}", relation[name])
    ET.indent(root)
    ET.ElementTree(root).write(output, encoding="utf-8", xml_declaration=True)


def _data(parent: ET.Element, key: str, value: Any) -> None:
    element = ET.SubElement(parent, "data", key=key)
    element.text = json.dumps(value, ensure_ascii=False) if isinstance(value, list) else str(value)
