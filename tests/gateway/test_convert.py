"""gateway/convert.py: the core's values in their protobuf forms."""

import pytest

from connectors.redis.ports import StoredDocument
from dataflow.core.documents import DocumentRecord, DocumentStatus, FailureKind
from gateway.convert import document_to_proto
from kgstream_protos.v1 import query_pb2 as pb


@pytest.mark.parametrize("kind", [None, *FailureKind])
def test_a_document_s_failure_kind_is_the_proto_value_of_the_same_name(
    kind: FailureKind | None,
) -> None:
    status = DocumentStatus.PROCESSED if kind is None else DocumentStatus.FAILED
    record = DocumentRecord("a.md", status, "a.md", failure_kind=kind)

    message = document_to_proto(StoredDocument(record, created_at=1.0, updated_at=2.0))

    name = "UNSPECIFIED" if kind is None else kind.name
    assert pb.FailureKind.Name(message.failure_kind) == f"FAILURE_KIND_{name}"
