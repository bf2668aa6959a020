from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DocumentEvent(_message.Message):
    __slots__ = ("doc_id", "op", "content", "file_path", "event_time_ms")
    class Op(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        OP_UNSPECIFIED: _ClassVar[DocumentEvent.Op]
        UPSERT: _ClassVar[DocumentEvent.Op]
        DELETE: _ClassVar[DocumentEvent.Op]
    OP_UNSPECIFIED: DocumentEvent.Op
    UPSERT: DocumentEvent.Op
    DELETE: DocumentEvent.Op
    DOC_ID_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    FILE_PATH_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    doc_id: str
    op: DocumentEvent.Op
    content: bytes
    file_path: str
    event_time_ms: int
    def __init__(self, doc_id: _Optional[str] = ..., op: _Optional[_Union[DocumentEvent.Op, str]] = ..., content: _Optional[bytes] = ..., file_path: _Optional[str] = ..., event_time_ms: _Optional[int] = ...) -> None: ...
