"""Mentions: every typed name occurrence in a chunk, for the offline extractor.

Ties steps 2 and 3 together: tokenises each sentence, finds its runs, cuts them
into spans, drops what is not a name (too long, generic, a month, too short)
and types each span from its cues. A mention keeps where it was found and how
sure its type is, so that extract_offline can let the strongest cue win and
aliases.py can resolve short forms across the chunk. A transcript's speaker
label ("AdamSmith:") is a person mention of its own; the words after it, and
after leading greetings or fillers ("Hey", "Yeah,"), count as sentence-initial,
because an utterance's first capital proves nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dataflow.core.naming import clean_entity_name, entity_key
from dataflow.core.offline.lexicon import (
    EVENT_SUFFIXES_WITH_YEAR,
    INTERJECTIONS,
    LEGAL_FORMS,
    MONTHS_AND_DAYS,
    PRONOUN_FORMS,
)
from dataflow.core.offline.runs import TOKEN, Run, find_runs, is_title_case
from dataflow.core.offline.spans import is_generic_phrase, split_run, trim_span
from dataflow.core.offline.speakers import speaker_label
from dataflow.core.offline.types import (
    CATEGORY,
    EVENT,
    PERSON,
    has_evidence,
    is_person_shaped,
    is_year,
    single_word_person_cue,
    structural_type,
    type_span,
)

_MAX_NAME_WORDS = 8


@dataclass(frozen=True)
class Mention:
    """One typed occurrence of a name: where it is (sentence number, token span),
    its cleaned name and key, and what extract_offline and resolve_aliases weigh."""

    sentence: int
    start: int
    end: int
    name: str
    key: str
    words: tuple[str, ...]
    type: str
    confidence: int
    needs_evidence: bool
    person_shaped: bool  # 2-3 words that could be a person's name, typed "category"
    person_cue: bool  # one word in a person's context ("Hale trained as ...")


def _last_pronoun(tokens: list[str]) -> int:
    """Index of the last he/she/his/her... in a sentence, or -1."""
    for index in range(len(tokens) - 1, -1, -1):
        if tokens[index] in PRONOUN_FORMS:
            return index
    return -1


def _speaker_mention(number: int, end: int, name: str) -> Mention:
    words = tuple(name.split())
    return Mention(number, 0, end, name, entity_key(name), words, PERSON, 3, False, False, False)


def find_mentions(
    sentences: tuple[str, ...], min_chars: int, speakers: Mapping[str, str] | None = None
) -> tuple[list[Mention], list[list[str]]]:
    """Return every name mention in `sentences`, in order, and each sentence's tokens.

    Two passes, because a sentence-initial word needs evidence from the whole
    chunk (the same word capitalised mid-sentence anywhere) and a pronoun in the
    next sentence can make a name a person's. `speakers` maps a transcript's
    labels to the people they name (speakers.py); a label's tokens are masked
    out of the sentence, and its words are evidence of a name wherever they appear.
    """
    kinds: dict[str, int] = {}
    mid_caps: set[str] = set()
    given: frozenset[str] = frozenset()
    if speakers:
        mid_caps.update(word for name in speakers.values() for word in name.split())
        given = frozenset(name.split()[0].lower() for name in speakers.values())
    names: dict[str, tuple[str, str]] = {}
    tokenised: list[tuple[list[str], list[Run], bool]] = []
    spoken: dict[int, Mention] = {}
    speaking: str | None = None
    for number, sentence in enumerate(sentences):
        tokens = TOKEN.findall(sentence)
        if speakers:
            label = speaker_label(sentence)
            if label is not None and label in speakers:
                speaking = speakers[label]
                end = len(TOKEN.findall(label))
                spoken[number] = _speaker_mention(number, end, speaking)
                tokens[: end + 1] = [":"] * (end + 1)  # the label and its colon
            elif speaking is not None:  # the same utterance goes on: its implicit subject
                spoken[number] = _speaker_mention(number, 0, speaking)
        heading = is_title_case(tokens)
        # Capitals in a title-case heading are no evidence of a name.
        runs = find_runs(tokens, kinds, set() if heading else mid_caps)
        if sum(len(run) for run in runs) >= 4:
            shouting = sum(1 for t in tokens if len(t) > 1 and t.isupper())
            if shouting >= 4 and shouting * 5 > len(tokens) * 3:
                runs = []  # an ALLCAPS headline: every word would look like a name
        tokenised.append((tokens, runs, heading))
    pronouns = [_last_pronoun(tokens) for tokens, _, _ in tokenised]
    mentions: list[Mention] = []
    for number, (tokens, runs, heading) in enumerate(tokenised):
        if number in spoken:
            mentions.append(spoken[number])
        first_word = next(
            (i for i, t in enumerate(tokens) if t[0].isalnum() and t.lower() not in INTERJECTIONS),
            -1,
        )
        next_has_pronoun = number + 1 < len(pronouns) and pronouns[number + 1] >= 0
        for run in runs:
            initial = run[0][1] == first_word
            for piece, titled in split_run(run, initial, mid_caps):
                span = trim_span(piece)
                if not span:
                    continue
                if len(span) > _MAX_NAME_WORDS:
                    continue  # a title-case line or a list without commas, not a name
                words = [w for w, _, _ in span]
                if len(words[-1]) == 2 and words[-1][1] == ".":
                    words[-1] = words[-1][0]  # "Plan B." at a sentence end is "Plan B"
                start, end = span[0][1], span[-1][2]
                if start > 0 and is_year(tokens[start - 1]):
                    lows = [w.lower() for w in words]
                    if lows[-1] in EVENT_SUFFIXES_WITH_YEAR or structural_type(lows) == EVENT:
                        words.insert(0, tokens[start - 1])  # "the 2021 Kesh Valley Flood"
                        start -= 1
                if is_generic_phrase(words):
                    continue
                joined = " ".join(words)
                named = names.get(joined)
                if named is None:
                    cleaned = clean_entity_name(joined)
                    named = names[joined] = (cleaned, entity_key(cleaned))
                name, key = named
                if len(name) < min_chars or not key or not any(c.isalpha() for c in name):
                    continue
                if len(words) == 1 and (
                    words[0].lower() in MONTHS_AND_DAYS or words[0].lower() in LEGAL_FORMS
                ):
                    continue
                pronoun_ahead = start == first_word and (
                    pronouns[number] >= end or next_has_pronoun
                )
                kind, confidence = type_span(
                    words, tokens, start, end, titled, pronoun_ahead, given
                )
                needs_evidence = (
                    (start == first_word or heading)
                    and len(words) == 1
                    and not titled
                    and confidence < 2
                    and not has_evidence(words[0], mid_caps)
                )
                mentions.append(
                    Mention(
                        number,
                        start,
                        end,
                        name,
                        key,
                        tuple(words),
                        kind,
                        confidence,
                        needs_evidence,
                        kind == CATEGORY and is_person_shaped(words),
                        kind == CATEGORY
                        and len(words) == 1
                        and single_word_person_cue(tokens, start, end, pronoun_ahead),
                    )
                )
    return mentions, [tokens for tokens, _, _ in tokenised]
