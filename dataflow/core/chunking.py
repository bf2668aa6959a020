"""Cutting a document into token-sized chunks, and diffing two versions of it.

The cut follows LightRAG's `chunking_by_token_size`, so chunk sizes and
overlaps mean what LightRAG users expect: optionally split on a separator
first, then slide a window of `chunk_token_size` tokens forward by
`chunk_token_size - chunk_overlap_tokens` over anything still too long.

Chunk ids are a hash of the document id and the chunk text, not of the chunk's
position: editing one paragraph leaves the other paragraphs' ids alone, so the
document step re-extracts only the chunks that really changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

_ID_PREFIX = "chunk-"
_ID_SEPARATOR = b"\x00"


class Tokenizer(Protocol):
    """Turns text into token ids and back.

    `encode` must treat all of its input as ordinary text: a document that
    contains the characters "<|endoftext|>" is data, so it must be encoded,
    never rejected. `tiktoken.Encoding` matches this protocol's signatures but
    raises on such text by default; pass `connectors.tokenizer.TiktokenTokenizer`,
    which encodes with tiktoken's `disallowed_special=()` semantics.
    """

    def encode(self, text: str) -> list[int]: ...

    def decode(self, tokens: Sequence[int]) -> str: ...


@dataclass(frozen=True)
class ChunkingOptions:
    """How documents are cut; defaults are LightRAG's.

    `split_by_character_only` is kept for parity with LightRAG's option. LightRAG
    raises when a piece between separators is over `chunk_token_size`; here such a
    piece is windowed like any other (so the flag changes nothing), because one
    long paragraph must not fail a whole document that is otherwise fine, and a
    chunk over the size would break the token budgets that rely on it.
    """

    chunk_token_size: int = 1200
    chunk_overlap_tokens: int = 100
    split_by_character: str | None = None
    split_by_character_only: bool = False

    def __post_init__(self) -> None:
        if self.chunk_token_size <= 0:
            raise ValueError(
                f"chunk_token_size must be > 0; got {self.chunk_token_size}. "
                "Use a positive number of tokens per chunk, e.g. 1200."
            )
        if not 0 <= self.chunk_overlap_tokens < self.chunk_token_size:
            raise ValueError(
                f"chunk_overlap_tokens must be >= 0 and < chunk_token_size "
                f"({self.chunk_token_size}); got {self.chunk_overlap_tokens}. "
                "Lower the overlap or raise chunk_token_size."
            )
        if self.split_by_character == "":
            raise ValueError(
                "split_by_character must be a non-empty string or None; got ''. "
                "Use None to cut by tokens only."
            )

    @property
    def window_step(self) -> int:
        """How far each window starts after the previous one, in tokens."""
        return self.chunk_token_size - self.chunk_overlap_tokens


@dataclass(frozen=True)
class Chunk:
    """One chunk of one document version.

    `tokens` is the number of document tokens the chunk was cut from: exact for
    a piece that fit whole, the window length for a windowed piece (whitespace
    stripped from a window's ends is still counted). Never over the chunk size.
    """

    chunk_id: str
    doc_id: str
    order: int
    text: str
    tokens: int
    file_path: str


@dataclass(frozen=True)
class ChunkDiff:
    """What changed between two versions of a document's chunks.

    `added` in document order; `removed` in the previous version's order;
    `kept` in document order.
    """

    added: tuple[Chunk, ...]
    removed: tuple[str, ...]
    kept: tuple[str, ...]


def chunk_id_for(doc_id: str, text: str) -> str:
    """Return the id of a chunk: "chunk-" + sha256(doc_id, NUL, text) in hex.

    The NUL byte separates the two parts and cannot occur in a doc id (rejected
    here), so no other (doc_id, text) pair hashes the same bytes.
    """
    if not doc_id:
        raise ValueError("doc_id must not be empty; pass the document's key or relative path")
    if "\x00" in doc_id:
        raise ValueError(
            f"doc_id must not contain NUL characters; got {doc_id!r}. "
            "Remove them at the source (Kafka key or file path)."
        )
    digest = hashlib.sha256()
    digest.update(doc_id.encode("utf-8", "surrogatepass"))
    digest.update(_ID_SEPARATOR)
    digest.update(text.encode("utf-8", "surrogatepass"))
    return _ID_PREFIX + digest.hexdigest()


def token_windows(token_count: int, options: ChunkingOptions) -> tuple[tuple[int, int], ...]:
    """Return the [start, end) token ranges that cover `token_count` tokens.

    Windows are `chunk_token_size` long (the last may be shorter) and each
    starts `window_step` after the previous one, so neighbours share exactly
    `chunk_overlap_tokens` tokens. Unlike LightRAG, no window starts after the
    one that reached the end: such a window lies wholly inside its predecessor,
    adds no text, and would cost an extraction call.
    """
    if token_count < 0:
        raise ValueError(f"token_count must be >= 0; got {token_count}")
    windows: list[tuple[int, int]] = []
    start = 0
    while start < token_count:
        end = min(start + options.chunk_token_size, token_count)
        windows.append((start, end))
        if end == token_count:
            break
        start += options.window_step
    return tuple(windows)


def split_text(text: str, tokenizer: Tokenizer, options: ChunkingOptions) -> list[tuple[str, int]]:
    """Cut `text` into (chunk text, token count) pairs, in document order.

    With `split_by_character`, the text is split on it first and each piece
    that fits in `chunk_token_size` is one chunk; longer pieces (or the whole
    text, without a separator) are cut into overlapping token windows. Chunk
    texts are stripped of surrounding whitespace; empty ones are dropped.

    A window boundary can fall inside a multi-byte character; the decoder then
    shows U+FFFD at that chunk's edge (as in LightRAG). The overlap means the
    neighbouring chunk still holds the character whole.
    """
    separator = options.split_by_character
    pieces = text.split(separator) if separator is not None else [text]
    chunks: list[tuple[str, int]] = []
    for raw_piece in pieces:
        piece = raw_piece.strip()
        if not piece:
            continue
        tokens = tokenizer.encode(piece)
        if len(tokens) <= options.chunk_token_size:
            chunks.append((piece, len(tokens)))
            continue
        for start, end in token_windows(len(tokens), options):
            window_text = tokenizer.decode(tokens[start:end]).strip()
            if window_text:
                chunks.append((window_text, end - start))
    return chunks


def chunk_document(
    doc_id: str,
    file_path: str,
    text: str,
    tokenizer: Tokenizer,
    options: ChunkingOptions,
) -> tuple[Chunk, ...]:
    """Return the chunks of one document version, in order, with unique ids.

    Two chunks of one document can have the same text (a repeated paragraph or
    boilerplate). Ids key the per-chunk state and every sink record, so sharing
    one would merge the two chunks' extractions and make removing one copy
    retract the other's. The first occurrence of a text therefore gets the
    plain `chunk_id_for` id and the n-th later one the same id + "#n". Both
    depend only on the text and how often it occurred before, never on
    position, so ids stay stable when unrelated text changes.
    """
    occurrences: dict[str, int] = {}
    chunks: list[Chunk] = []
    for order, (chunk_text, token_count) in enumerate(split_text(text, tokenizer, options)):
        seen = occurrences.get(chunk_text, 0)
        occurrences[chunk_text] = seen + 1
        chunk_id = chunk_id_for(doc_id, chunk_text)
        if seen:
            chunk_id = f"{chunk_id}#{seen}"
        chunks.append(
            Chunk(
                chunk_id=chunk_id,
                doc_id=doc_id,
                order=order,
                text=chunk_text,
                tokens=token_count,
                file_path=file_path,
            )
        )
    return tuple(chunks)


def diff_chunks(previous_ids: Sequence[str], chunks: Sequence[Chunk]) -> ChunkDiff:
    """Compare a document's previous chunk ids with its new chunks.

    Only `added` chunks need extraction and only `removed` ids need retraction;
    `kept` chunks cost nothing. Duplicate ids are reported once.
    """
    previous = set(previous_ids)
    current = {chunk.chunk_id for chunk in chunks}
    added: list[Chunk] = []
    kept: list[str] = []
    reported: set[str] = set()
    for chunk in chunks:
        if chunk.chunk_id in reported:
            continue
        reported.add(chunk.chunk_id)
        if chunk.chunk_id in previous:
            kept.append(chunk.chunk_id)
        else:
            added.append(chunk)
    removed = tuple(dict.fromkeys(cid for cid in previous_ids if cid not in current))
    return ChunkDiff(added=tuple(added), removed=removed, kept=tuple(kept))
