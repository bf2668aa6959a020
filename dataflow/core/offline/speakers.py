"""Speaker labels of chat logs and transcripts, for the offline extractor.

A line that starts with `AdamSmith:` or `Adam Smith:` names who speaks it: the
person "Adam Smith" (CamelCase split into words). Only a text with at least two
such lines is a transcript, so a lone "Key Findings: ..." line in prose is not
a speaker; a label must also be shaped like a person's name (types.py), and
one label must be CamelCase, recur, or start with a known given name, so a
list of "Key Findings:" and "Next Steps:" lines is not a transcript either.
Labels are found per chunk, like every other name here, so they retract with
the chunk that holds them.
"""

from __future__ import annotations

import re

from dataflow.core.offline.lexicon import FIRST_NAMES, INTERJECTIONS
from dataflow.core.offline.types import is_person_shaped

_LABEL = re.compile(
    r"^[ \t]*(?P<label>(?:Ma?c)?[A-Z][a-z]+(?:(?:Ma?c)?[A-Z][a-z]+){1,2}"
    r"|[A-Z][a-z]+(?: [A-Z][a-z'’-]+){1,2})[ \t]*:(?:[ \t]|$)",
    re.MULTILINE,
)
_CAMEL_PART = re.compile(r"(?:Ma?c)?[A-Z][a-z]+")


def speaker_label(line: str) -> str | None:
    """The label a line starts with ("AdamSmith" in "AdamSmith: hi"), shape only."""
    match = _LABEL.match(line)
    return match.group("label") if match else None


def label_name(label: str) -> str:
    """The person a label names: "AdamSmith" -> "Adam Smith"; "Adam Smith" as is."""
    if " " in label:
        return label
    return " ".join(_CAMEL_PART.findall(label))


def find_speakers(text: str) -> dict[str, str]:
    """Map each speaker label of a transcript to the person it names; {} for prose."""
    labels = [match.group("label") for match in _LABEL.finditer(text)]
    speakers: dict[str, str] = {}
    lines = 0
    for label in labels:
        if label in speakers:
            lines += 1
            continue
        name = label_name(label)
        words = name.split()
        if words[0].lower() not in INTERJECTIONS and is_person_shaped(words):
            speakers[label] = name
            lines += 1
    convincing = lines > len(speakers) or any(
        " " not in label or name.split()[0].lower() in FIRST_NAMES
        for label, name in speakers.items()
    )
    return speakers if lines >= 2 and convincing else {}
