from kgstream_protos.v1 import events_pb2 as _events_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class UpsertDocumentRequest(_message.Message):
    __slots__ = ("doc_id", "content", "file_path")
    DOC_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    doc_id: str
    content: bytes
    file_path: str
    def __init__(self, doc_id: _Optional[str] = ..., content: _Optional[bytes] = ..., file_path: _Optional[str] = ...) -> None: ...

class DeleteDocumentRequest(_message.Message):
    __slots__ = ("doc_id",)
    DOC_ID_FIELD_NUMBER: _ClassVar[int]
    doc_id: str
    def __init__(self, doc_id: _Optional[str] = ...) -> None: ...

class IngestResponse(_message.Message):
    __slots__ = ("doc_id", "op", "topic", "partition", "offset", "content_hash", "index_version", "min_index_version")
    DOC_ID_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONTENT_HASH_FIELD_NUMBER: _ClassVar[int]
    INDEX_VERSION_FIELD_NUMBER: _ClassVar[int]
    MIN_INDEX_VERSION_FIELD_NUMBER: _ClassVar[int]
    doc_id: str
    op: _events_pb2.DocumentEvent.Op
    topic: str
    partition: int
    offset: int
    content_hash: str
    index_version: int
    min_index_version: int
    def __init__(self, doc_id: _Optional[str] = ..., op: _Optional[_Union[_events_pb2.DocumentEvent.Op, str]] = ..., topic: _Optional[str] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ..., content_hash: _Optional[str] = ..., index_version: _Optional[int] = ..., min_index_version: _Optional[int] = ...) -> None: ...
