"""`kgstream query`: ask a running gateway (--grpc) or the stores directly (--data).

Both paths go through the same protobuf result, so `--json` prints the same shape:
{answer, entities[], relations[], chunks[{chunk_id, doc_id, file_path, text, score}],
references[], index_version}.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.convert import mode_to_proto
from gateway.types import Mode
from kgstream_protos.v1 import query_pb2 as pb


def build_request(question: str, mode: Mode, top_k: int | None) -> pb.QueryRequest:
    request = pb.QueryRequest(question=question, mode=mode_to_proto(mode))
    if top_k is not None:
        request.top_k = top_k
    return request


def query_json(result: pb.RetrievalResult, answer: str | None) -> dict[str, Any]:
    return {
        "answer": answer,
        "entities": [
            {
                "key": item.entity.key,
                "name": item.entity.name,
                "type": item.entity.type,
                "description": item.entity.description,
                "file_paths": list(item.entity.file_paths),
                "score": item.score,
                "degree": item.degree,
            }
            for item in result.entities
        ],
        "relations": [
            {
                "source": item.relation.source,
                "target": item.relation.target,
                "keywords": list(item.relation.keywords),
                "description": item.relation.description,
                "weight": item.relation.weight,
                "score": item.score,
                "degree": item.degree,
            }
            for item in result.relations
        ],
        "chunks": [
            {
                "chunk_id": chunk.chunk_id,
                "doc_id": chunk.doc_id,
                "file_path": chunk.file_path,
                "text": chunk.text,
                "score": chunk.score,
            }
            for chunk in result.chunks
        ],
        "references": [
            {
                "reference_id": ref.reference_id,
                "file_path": ref.file_path,
                "chunk_ids": list(ref.chunk_ids),
            }
            for ref in result.references
        ],
        "index_version": result.index_version,
    }


def render_text(data: dict[str, Any]) -> str:
    lines = []
    if data["answer"] is not None:
        lines += [data["answer"], ""]
    else:
        lines.append(
            f"{len(data['entities'])} entities, {len(data['relations'])} relations, "
            f"{len(data['chunks'])} chunks (index version {data['index_version']})"
        )
        lines += [f"  entity   {e['name']} ({e['type']})" for e in data["entities"][:10]]
        lines += [f"  relation {r['source']} - {r['target']}" for r in data["relations"][:10]]
        lines.append("")
    lines += ["References:"] + [
        f"  [{ref['reference_id']}] {ref['file_path']}" for ref in data["references"]
    ]
    return "\n".join(lines)


def print_result(data: dict[str, Any], as_json: bool) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False) if as_json else render_text(data))
