"""Documents at the door of the index: validation, cleaning, identity.

A document either becomes a `PreparedDocument` (clean text plus its hash) or a
`DocumentFailure` that says why, never an exception: one bad document must not
stop a stream. A failure carries its kind (`FailureKind`) as a value, set where the
failure is made, beside the reason written for people; nothing reads the kind back
from the reason.
"""

from __future__ import annotations

import codecs
import enum
import hashlib
import unicodedata
from dataclasses import dataclass

PREVIEW_CHARS = 200


class DocumentStatus(enum.Enum):
    PENDING = "PENDING"
    PROCESSING = "PROCESSING"
    PROCESSED = "PROCESSED"
    FAILED = "FAILED"


@dataclass(frozen=True)
class DocumentUpsert:
    """A document's new content. `content` is raw bytes (as read or received) or text.

    `size` is the whole document's size in bytes when `content` holds only its start: the
    folder source does not read a file past the size limit, yet the failure names its size."""

    doc_id: str
    content: bytes | str
    file_path: str = ""
    size: int | None = None


@dataclass(frozen=True)
class DocumentDelete:
    doc_id: str


DocumentChange = DocumentUpsert | DocumentDelete


@dataclass(frozen=True)
class DocumentLimits:
    max_bytes: int = 10_000_000

    def __post_init__(self) -> None:
        if self.max_bytes <= 0:
            raise ValueError(f"max_bytes must be > 0 (got {self.max_bytes})")


@dataclass(frozen=True)
class PreparedDocument:
    doc_id: str
    file_path: str
    text: str
    content_hash: str
    preview: str
    length: int


MAX_DOC_ID_BYTES = 1024
"""The longest doc id (UTF-8 bytes) kgstream accepts: an id is a Redis key, a Bytewax state key
and a payload value in every record the document contributes to, and a file path is at most
4,096 bytes anyway. Kafka messages and Ingest calls with a longer one are refused; a longer file
path is a FAILED document."""


def doc_id_problem(doc_id: str) -> str | None:
    """Why `doc_id` is not a usable document id, or None when it is."""
    if not doc_id.strip():
        return "doc_id is empty; give every document an id"
    if "\x00" in doc_id:
        return "doc_id contains a NUL character; remove it"
    size = len(doc_id.encode("utf-8", "surrogatepass"))
    if size > MAX_DOC_ID_BYTES:
        return f"doc_id is {size} bytes, over the limit of {MAX_DOC_ID_BYTES} bytes"
    return None


class FailureKind(enum.Enum):
    """Why a document is FAILED, as a value (the values are the `failures_total` metric's
    labels, the status records' `failure_kind` field and the API's names)."""

    BAD_DOC_ID = "bad_doc_id"
    TOO_LARGE = "too_large"
    BINARY = "binary"
    NOT_UTF8 = "not_utf8"  # not UTF-8, nor UTF-16/32 after their byte-order mark
    EMPTY = "empty"
    EXTRACTION = "extraction"  # the LLM failed on some chunks (dataflow/core/commit.py)

    @property
    def retryable(self) -> bool:
        """A retry can fix it (`kgstream retry-failed`): the LLM failed, not the content,
        which has to change for every other kind."""
        return self is FailureKind.EXTRACTION


@dataclass(frozen=True)
class DocumentFailureReason:
    """Why some content is not a document (before it has an id to fail)."""

    kind: FailureKind
    reason: str


@dataclass(frozen=True)
class DocumentFailure:
    doc_id: str
    file_path: str
    kind: FailureKind
    reason: str
    content_hash: str = ""


def content_hash(text: str) -> str:
    """The identity of a document version: sha256 of its cleaned text."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


ZERO_WIDTH_CHARACTERS = "\u200b\u200c\u200d\u2060\ufeff"
"""Dropped from every text: zero-width space, non-joiner and joiner, word joiner, and the
zero-width no-break space (a byte-order mark, wherever it is). They are invisible, and left in
they split names ("Zoe\u200bQuist") and make equal texts hash differently."""

_DROPPED = dict.fromkeys(map(ord, "\x00" + ZERO_WIDTH_CHARACTERS))


def clean_text(text: str) -> str:
    """The text the index sees: NUL and zero-width characters dropped, composed to Unicode
    NFC (macOS writes names decomposed: "Zoe\u0308" is then "Zo\u00eb", one letter), and
    surrounding whitespace stripped (what LightRAG does before chunking)."""
    return unicodedata.normalize("NFC", text.translate(_DROPPED)).strip()


_BYTE_ORDER_MARKS = (  # UTF-32 first: its little-endian mark begins with UTF-16's
    (codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32LE"),
    (codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32BE"),
    (codecs.BOM_UTF8, "utf-8", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16LE"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16BE"),
)


def _encoding_of(raw: bytes) -> tuple[int, str, str]:
    """(byte-order mark length, codec, name) of a document's bytes: UTF-8 without a mark."""
    for mark, codec, name in _BYTE_ORDER_MARKS:
        if raw.startswith(mark):
            return len(mark), codec, name
    return 0, "utf-8", "UTF-8"


def decode_content(raw: bytes) -> str | DocumentFailureReason:
    """A document's bytes as text: UTF-8 (with or without a byte-order mark), or UTF-16 or
    UTF-32 with their byte-order mark; or why they are not text."""
    mark_length, codec, name = _encoding_of(raw)
    if mark_length == 0 and _looks_binary(raw[:4096].decode("latin-1")):
        return DocumentFailureReason(FailureKind.BINARY, "content is binary, not text")
    try:
        return raw[mark_length:].decode(codec)
    except UnicodeDecodeError as error:
        return DocumentFailureReason(
            FailureKind.NOT_UTF8,
            f"content is not valid {name} (byte {mark_length + error.start}: {error.reason}); "
            "convert the file to UTF-8",
        )


def preview_of(text: str, limit: int = PREVIEW_CHARS) -> str:
    """A one-line preview: whitespace collapsed, cut at `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "\u2026"


_TEXT_CONTROLS = frozenset("\t\n\r\f\v")


def _looks_binary(text: str) -> bool:
    """Many control characters (NUL included) mean binary content, not text.

    A few stray NULs are tolerated (and dropped by `clean_text`); a file that
    is over a tenth control characters is not a document.
    """
    sample = text[:4096]
    if not sample:
        return False
    controls = sum(1 for ch in sample if ord(ch) < 32 and ch not in _TEXT_CONTROLS)
    return controls / len(sample) > 0.1


def prepare_document(
    change: DocumentUpsert, limits: DocumentLimits = DocumentLimits()
) -> PreparedDocument | DocumentFailure:
    """Validate and clean one document version."""
    doc_id, file_path = change.doc_id, change.file_path
    problem = doc_id_problem(doc_id)
    if problem is not None:
        return DocumentFailure(doc_id, file_path, FailureKind.BAD_DOC_ID, problem)
    raw = change.content
    size = len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "surrogatepass"))
    if change.size is not None:
        size = max(size, change.size)
    if size > limits.max_bytes:
        return DocumentFailure(
            doc_id,
            file_path,
            FailureKind.TOO_LARGE,
            f"document is {size} bytes, over the limit of {limits.max_bytes} bytes "
            "(raise max_document_bytes to index it)",
        )
    if isinstance(raw, bytes):
        decoded = decode_content(raw)
        if isinstance(decoded, DocumentFailureReason):
            return DocumentFailure(doc_id, file_path, decoded.kind, decoded.reason)
        text = decoded
    else:
        text = raw
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            return DocumentFailure(
                doc_id,
                file_path,
                FailureKind.NOT_UTF8,
                f"text holds an unpaired surrogate at {error.start}",
            )
    if _looks_binary(text):
        return DocumentFailure(doc_id, file_path, FailureKind.BINARY, "content is binary, not text")
    cleaned = clean_text(text)
    if not cleaned:
        return DocumentFailure(
            doc_id, file_path, FailureKind.EMPTY, "document is empty or whitespace only"
        )
    return PreparedDocument(
        doc_id=doc_id,
        file_path=file_path,
        text=cleaned,
        content_hash=content_hash(cleaned),
        preview=preview_of(cleaned),
        length=len(cleaned),
    )


@dataclass(frozen=True)
class DocumentRecord:
    """A document's status as the stores keep it (times are added by the sink)."""

    doc_id: str
    status: DocumentStatus
    file_path: str = ""
    content_hash: str = ""
    chunk_ids: tuple[str, ...] = ()
    preview: str = ""
    length: int = 0
    reason: str = ""
    failure_kind: FailureKind | None = None  # FAILED only: why, as a value
    failed_chunk_ids: tuple[str, ...] = ()  # FAILED by extraction: the chunks that failed
    # PROCESSING only: of the `chunks_changed` chunks this version extracts or retracts,
    # `chunks_settled` are done (a large document streams through in pieces); 0 otherwise
    chunks_settled: int = 0
    chunks_changed: int = 0

    @property
    def retryable(self) -> bool:
        """FAILED for a reason a retry can fix, with the chunks a retry extracts again."""
        kind = self.failure_kind
        return kind is not None and kind.retryable and bool(self.failed_chunk_ids)
