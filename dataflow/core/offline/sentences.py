"""Sentence splitting for the offline extractor (step 1 of extractor.py).

Blank lines, markdown headings, bullets, short title-like lines and the lines
of a transcript's speakers ("AdamSmith: ...", see speakers.py) end a segment;
inside a segment ".", "!" and "?" end a sentence unless they follow an
initial, a title or an abbreviation not followed by a typical sentence starter.
Kept apart because relations and descriptions are per sentence, so every later
step depends on these boundaries and nothing else here.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from dataflow.core.offline.lexicon import (
    FUNCTION_WORDS,
    MAYBE_ABBREVIATIONS,
    NO_BREAK_ABBREVIATIONS,
)
from dataflow.core.offline.speakers import speaker_label

_OPENERS = "\"'“‘([{«"
_TERMINAL = re.compile(r"([.!?…]+)[\"'”’)\]»]*\s+")
_BULLET = re.compile(r"(?:[-*+•–—]|\(?\d{1,3}[.)]|\(?[a-z]\))\s+")
_RULE_LINE = re.compile(r"[\W_]+")


def split_sentences(text: str, speakers: Collection[str] = ()) -> tuple[str, ...]:
    """Return the sentences of `text`, whitespace-normalised, in order; a line starting
    with one of the `speakers` labels starts a new sentence (one utterance per line)."""
    sentences: list[str] = []
    for segment in _split_segments(text, speakers):
        _split_segment(segment, sentences)
    return tuple(sentences)


def _split_segments(text: str, speakers: Collection[str]) -> list[str]:
    """Join wrapped lines; break at blank lines, headings, bullets and title-like lines."""
    segments: list[str] = []
    current: list[str] = []
    title_like = False
    for raw in text.splitlines():
        line = " ".join(raw.split())
        if not line or _RULE_LINE.fullmatch(line):
            if current:
                segments.append(" ".join(current))
                current = []
            continue
        bullet = _BULLET.match(line)
        spoken = bool(speakers) and speaker_label(line) in speakers
        if line[0] == "#" or bullet or spoken or (current and title_like and line[0].isupper()):
            if current:
                segments.append(" ".join(current))
                current = []
            line = line.lstrip("#").strip() if line[0] == "#" else line
            line = line[bullet.end() :] if bullet else line
            if not line:
                continue
        current.append(line)
        title_like = line[-1] not in ".!?:;,-" and line.count(" ") < 8
    if current:
        segments.append(" ".join(current))
    return segments


def _split_segment(segment: str, out: list[str]) -> None:
    start = 0
    for match in _TERMINAL.finditer(segment):
        if _is_boundary(segment, match.start(), match.group(1), match.end()):
            piece = segment[start : match.end()].strip()
            if piece:
                out.append(piece)
            start = match.end()
    rest = segment[start:].strip()
    if rest:
        out.append(rest)


def _is_boundary(segment: str, punct_at: int, punct: str, next_at: int) -> bool:
    head = segment[next_at] if next_at < len(segment) else ""
    if not (head.isupper() or head.isdigit() or (head and head in _OPENERS)):
        return False
    if punct != ".":
        return True
    previous = segment[segment.rfind(" ", 0, punct_at) + 1 : punct_at].lstrip(_OPENERS)
    low = previous.lower()
    if (len(previous) == 1 and previous.isupper()) or low in NO_BREAK_ABBREVIATIONS:
        return False
    if low in MAYBE_ABBREVIATIONS or ("." in previous and len(previous) <= 5):
        end = segment.find(" ", next_at)
        following = segment[next_at : end if end >= 0 else len(segment)]
        return following.strip(_OPENERS + ",;:").lower() in FUNCTION_WORDS
    return True
