import pytest

from dataflow.core.documents import (
    MAX_DOC_ID_BYTES,
    DocumentFailure,
    DocumentLimits,
    DocumentUpsert,
    FailureKind,
    PreparedDocument,
    content_hash,
    prepare_document,
)
from dataflow.core.offline.extractor import extract_offline


def prepared(content: bytes | str, **kwargs: object) -> PreparedDocument:
    result = prepare_document(DocumentUpsert("doc-1", content, "notes/a.md"), **kwargs)  # type: ignore[arg-type]
    assert isinstance(result, PreparedDocument), result
    return result


def failure(content: bytes | str, limits: DocumentLimits = DocumentLimits()) -> DocumentFailure:
    result = prepare_document(DocumentUpsert("doc-1", content, "notes/a.md"), limits)
    assert isinstance(result, DocumentFailure), result
    return result


def test_text_is_stripped_and_nul_bytes_dropped():
    doc = prepared("  \n Hello\x00 world \n\n")
    assert doc.text == "Hello world"
    assert doc.length == len("Hello world")
    assert doc.content_hash == content_hash("Hello world")


def test_utf8_bytes_are_decoded():
    assert prepared("Zürich café".encode()).text == "Zürich café"


def test_decomposed_text_is_composed_so_a_name_stays_one_entity():
    doc = prepared("Zoe\u0308 Quist met Bob Tanaka in Geneva.".encode())  # NFD, as macOS writes
    assert doc.text == "Zo\u00eb Quist met Bob Tanaka in Geneva."
    names = {entity.name for entity in extract_offline(doc.text).entities}
    assert "Zo\u00eb Quist" in names and "Zoe" not in names and "Quist" not in names
    assert prepared("Zoe\u0308").content_hash == prepared("Zo\u00eb").content_hash  # text too


def test_zero_width_characters_and_byte_order_marks_are_dropped():
    doc = prepared("\ufeffZoe\u200b Quist\u2060 met\u200c Bob\u200d Tanaka.\ufeff")
    assert doc.text == "Zoe Quist met Bob Tanaka."
    assert prepared(b"\xef\xbb\xbfHello").content_hash == prepared(b"Hello").content_hash


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-8-sig"])
def test_utf16_and_utf32_with_a_byte_order_mark_decode_like_utf8(codec):
    text = "Zürich café: Zoë Quist met Bob Tanaka."
    raw = text.encode(codec)
    if codec in ("utf-16-le", "utf-16-be"):  # these codecs write no mark: add it
        raw = ("\ufeff" + text).encode(codec)
    doc = prepared(raw)
    assert doc.text == text and doc.content_hash == prepared(text.encode()).content_hash


def test_utf16_without_a_byte_order_mark_is_binary():
    assert "binary" in failure("Hello world, plain text".encode("utf-16-le")).reason


def test_broken_utf16_after_its_mark_fails_naming_the_encoding_and_the_byte():
    failed = failure(b"\xff\xfeH\x00i\x00\x00\xd8!\x00")  # a lone high surrogate
    assert failed.reason.startswith("content is not valid UTF-16LE (byte 6:"), failed.reason
    assert failed.kind is FailureKind.NOT_UTF8


def test_content_hash_ignores_surrounding_whitespace_but_not_content():
    assert prepared("abc\n").content_hash == prepared("  abc").content_hash
    assert prepared("abc").content_hash != prepared("abd").content_hash


def test_preview_is_one_line_and_bounded():
    doc = prepared("word " * 500)
    assert "\n" not in doc.preview
    assert len(doc.preview) <= 200
    assert doc.preview.endswith("\u2026")


@pytest.mark.parametrize("content", ["", "   \n\t  ", b"\n\n"])
def test_empty_or_whitespace_document_fails_with_reason(content):
    assert "empty" in failure(content).reason


def test_invalid_utf8_fails_naming_the_byte():
    reason = failure(b"ok so far \xff\xfe then junk").reason
    assert "UTF-8" in reason and "byte 10" in reason


def test_binary_content_fails():
    assert "binary" in failure(bytes(range(256)) * 20).reason
    assert "binary" in failure("\x01\x02\x03\x04\x05\x06\x07\x08" * 100).reason


def test_document_over_the_size_limit_fails_naming_the_limit():
    reason = failure("x" * 101, DocumentLimits(max_bytes=100)).reason
    assert "101 bytes" in reason and "100 bytes" in reason


@pytest.mark.parametrize(
    ("doc_id", "content", "kind"),
    [
        ("a.md", "x" * 11, FailureKind.TOO_LARGE),
        ("a.md", b"caf\xe9", FailureKind.NOT_UTF8),
        ("a.md", "Zo\udce9", FailureKind.NOT_UTF8),  # an unpaired surrogate
        ("a.md", b"\x00\x01\x02\x03ab", FailureKind.BINARY),
        ("a.md", "\x01\x02\x03\x04ab", FailureKind.BINARY),
        ("a.md", "  \n ", FailureKind.EMPTY),
        (" ", "text", FailureKind.BAD_DOC_ID),
    ],
)
def test_each_failure_carries_its_kind_as_a_value(doc_id, content, kind):
    failed = prepare_document(DocumentUpsert(doc_id, content, "a.md"), DocumentLimits(max_bytes=10))
    assert isinstance(failed, DocumentFailure)
    assert failed.kind is kind and failed.reason


def test_only_an_extraction_failure_is_retryable():
    assert [kind for kind in FailureKind if kind.retryable] == [FailureKind.EXTRACTION]


def test_size_limit_must_be_positive():
    with pytest.raises(ValueError, match="max_bytes"):
        DocumentLimits(max_bytes=0)


@pytest.mark.parametrize("doc_id", ["", "  ", "a\x00b", "p/" * 600])
def test_unusable_doc_id_fails_alone(doc_id):
    result = prepare_document(DocumentUpsert(doc_id, "fine text", "a.md"))
    assert isinstance(result, DocumentFailure) and "doc_id" in result.reason


def test_a_doc_id_at_the_byte_limit_is_a_document():
    at_limit = "ü" * (MAX_DOC_ID_BYTES // 2)  # two bytes each
    assert isinstance(prepare_document(DocumentUpsert(at_limit, "text", "a.md")), PreparedDocument)
    failed = prepare_document(DocumentUpsert(at_limit + "x", "text", "a.md"))
    assert isinstance(failed, DocumentFailure)
    assert failed.reason == "doc_id is 1025 bytes, over the limit of 1024 bytes"
