"""Entity and relation extraction with no network, no model and no LLM.

This is the embedded default (`kgstream run` works on a laptop with nothing
else installed) and the extractor the property tests drive, so it is pure,
deterministic and fast (a single regex tokenisation plus one pass over the
tokens; see bench/offline_extractor_speed.py). Its word lists live in
dataflow/core/offline/lexicon.py.

What it finds, in order:

1. Sentences: blank lines, markdown headings, bullets and short title-like
   lines end a segment; inside a segment ".", "!" and "?" end a sentence
   unless they follow an initial ("J."), a title ("Dr.", "St."), "e.g."/"i.e.",
   or a company/abbreviation form ("Inc.", "U.S.") not followed by a typical
   sentence starter. Decimals never split (no whitespace after the dot).
2. Entities: maximal runs of capitalised, ALLCAPS or CamelCase tokens, joined
   by lowercase connectors ("of", "de", "van", "the", "&"; "and"/"for"/"on"
   only when the whole span carries an organisation/place/event cue, so
   "Alice and Bob" stays two people) and plural possessives ("Members'
   Assembly"), plus small numbers ("Apollo 11"), years next to an event word
   ("Expo 2020", "the 2021 Kesh Valley Flood": the year is part of the name)
   and "I" after an event word or given name ("World War I"). Spans over 8
   words (title-case lines, comma-less lists), code identifiers (with "_") and
   ALLCAPS headlines are dropped. A sentence-initial word, and a single word in
   a title-case heading, is kept only with evidence (capitalised mid-sentence
   outside headings, a known word, an acronym, or a short form of a full name
   in the same text). A lone cue, role or generic word ("Members", "Treasurer",
   "Assembly", "Projects") is not a name. Titles ("Dr.", "CEO", "Prime
   Minister", "Councillor", "Head of") are cut off and mark the following name
   as a person; "X of Y" is cut in two after a person's name ("Lena Sorvik of
   Greyholt Institute"), a legal form ("Acme Ltd of Leeds") or a named event.
   Possessive "'s" is stripped; months, weekdays and single letters dropped.
3. Types, strongest cue first: suffix/head words ("Acme Corp", "University of
   X", "River Ardle", "Paris Summit"), a small gazetteer, a title before the
   name, a known given name, an ALLCAPS acronym (organization), context
   ("based in X" -> geo; for a 2-3 word name shaped like a person's with no
   cue word: "X, a <role>", "<role> X", "X is the <role>", "X said/joined",
   "led by X", a he/she after a sentence-initial X, or the bare surname
   recurring alone -> person); otherwise "category". Across mentions the
   strongest cue wins (ties: first seen). A derived type that is not in
   `entity_types` becomes "category" if configured, else the last configured
   type; configured spelling (e.g. "PERSON") is kept.
4. Relations: two entities in one sentence. Keywords are up to
   `max_relation_keywords` content words between them (else from the
   sentence, else "co-occurrence"); strength counts the sentences the pair
   shares; the description is the first such sentence.

Two document shapes get more. A chat log or transcript (speakers.py): a
line-initial `AdamSmith:` or `Adam Smith:` label is the person "Adam Smith", the
implicit subject of every sentence of that utterance; greetings, interjections
and fillers ("Hey", "Nah", "Lol", "Thanks") are never names nor words of names
(lexicon.INTERJECTIONS), and the word after them counts as sentence-initial. An
encyclopaedia passage (titles.py): a short title line over a paragraph is an
entity (its disambiguator, "(1945 film)", dropped from the name and used for
the type), the implicit subject of every sentence of the passage, so it is
related to their entities; where the paragraph spells the title out, the
fragments found there ("Kiss", "Tell") give way to it.

A bare surname or given name ("Turing", "Alan") of exactly one full person
name in the text ("Alan Turing", or a speaker "AdamSmith"), a bare company or
programme name ("Acme") next to its full form ("Acme Corp", "Acme Programme"),
and an event named without its year next to the one dated form, resolve to the
full name; an ambiguous one ("Curie" with Marie and Pierre Curie) stays as
written. The short forms and CamelCase speaker labels that resolved to an entity
are its `aliases` (the surface forms as written), so a question naming only
"Adam" or "AdamSmith" can find Adam Smith. Precision is preferred over recall
throughout; entity descriptions are
the first sentence that mentions the entity. Names are per chunk (the text
this function is given, a whole document when it fits in one chunk): short
forms in other chunks are not merged here, so everything this returns, aliases
included, retracts with its chunk.

Where each part lives (all pure, one idea per module):
sentences.py (1), runs.py (tokens and proper-noun runs), spans.py (cutting
runs into names), types.py (3), mentions.py (2 and 3 per occurrence),
speakers.py (transcript labels), titles.py (passage titles), aliases.py (short
forms), lexicon.py (the word lists); this module keeps the options, the merge
across mentions and the relations (4).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from dataflow.core.extraction import ExtractedEntity, ExtractedRelation, Extraction
from dataflow.core.naming import entity_key
from dataflow.core.offline.aliases import resolve_aliases
from dataflow.core.offline.lexicon import KEYWORD_STOPWORDS
from dataflow.core.offline.mentions import Mention, find_mentions
from dataflow.core.offline.sentences import split_sentences
from dataflow.core.offline.speakers import find_speakers
from dataflow.core.offline.titles import find_title, place_title
from dataflow.core.offline.types import CATEGORY, EVENT, GEO, ORGANIZATION, PERSON

__all__ = [
    "CATEGORY",
    "EVENT",
    "GEO",
    "ORGANIZATION",
    "PERSON",
    "OfflineExtractorOptions",
    "extract_offline",
    "split_sentences",
]


@dataclass(frozen=True)
class OfflineExtractorOptions:
    """How the offline extractor types and connects what it finds.

    entity_types: the types the caller accepts (LightRAG's prompt list);
        derived types outside it map to "category", else to the last entry.
    max_entities_per_sentence: only the first N distinct entities of a
        sentence form relations (N*(N-1)/2 pairs at most), so one long list
        sentence cannot blow up quadratically. All entities are still kept.
    min_name_chars: shorter names are dropped.
    description_max_chars: descriptions are trimmed at a word boundary to
        this many characters (plus an ellipsis).
    max_relation_keywords: keywords kept per relation.
    """

    entity_types: tuple[str, ...] = (ORGANIZATION, PERSON, GEO, EVENT, CATEGORY)
    max_entities_per_sentence: int = 8
    min_name_chars: int = 2
    description_max_chars: int = 300
    max_relation_keywords: int = 3

    def __post_init__(self) -> None:
        if not self.entity_types or any(not t.strip() for t in self.entity_types):
            raise ValueError(
                f"entity_types must be a non-empty tuple of non-blank names; "
                f"got {self.entity_types!r}"
            )
        for field_name, value, low in (
            ("max_entities_per_sentence", self.max_entities_per_sentence, 1),
            ("min_name_chars", self.min_name_chars, 1),
            ("description_max_chars", self.description_max_chars, 20),
            ("max_relation_keywords", self.max_relation_keywords, 1),
        ):
            if value < low:
                raise ValueError(f"{field_name} must be >= {low}; got {value!r}")


def _trim(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit].rstrip(" ,;:") + "…"


def _content_words(tokens: list[str], covered: set[int]) -> tuple[list[int], list[str]]:
    """Positions and words of a sentence's lowercase content words outside entity names."""
    positions: list[int] = []
    words: list[str] = []
    for index, word in enumerate(tokens):
        if (
            word.islower()
            and len(word) > 2
            and word.isalpha()
            and word not in KEYWORD_STOPWORDS
            and index not in covered
        ):
            positions.append(index)
            words.append(word)
    return positions, words


def _pick_keywords(content: tuple[list[int], list[str]], lo: int, hi: int, limit: int) -> list[str]:
    positions, words = content
    found: list[str] = []
    for k in range(bisect_left(positions, lo), len(positions)):
        if positions[k] >= hi:
            break
        if words[k] not in found:
            found.append(words[k])
            if len(found) == limit:
                break
    return found


# source name, target name, keywords, description, sentences shared
_RelationDraft = tuple[str, str, list[str], str, int]


def _relate_sentence(
    sentence: str,
    tokens: list[str],
    found: list[tuple[str, Mention]],
    names: dict[str, str],
    options: OfflineExtractorOptions,
    relations: dict[tuple[str, str], _RelationDraft],
) -> None:
    """Add or strengthen one relation per pair of the sentence's first N distinct entities."""
    firsts: dict[str, Mention] = {}
    for key, mention in found:
        if key not in firsts and len(firsts) < options.max_entities_per_sentence:
            firsts[key] = mention
    if len(firsts) < 2:
        return
    description = _trim(sentence, options.description_max_chars)
    content = _content_words(tokens, {i for _, m in found for i in range(m.start, m.end)})
    limit = options.max_relation_keywords
    whole_sentence: list[str] | None = None
    ordered = list(firsts.items())
    for i, (key_a, a) in enumerate(ordered):
        for key_b, b in ordered[i + 1 :]:
            pair = (key_a, key_b) if key_a < key_b else (key_b, key_a)  # = relation_key
            words = _pick_keywords(content, min(a.end, b.end), max(a.start, b.start), limit)
            kept = relations.get(pair)
            if kept is None:
                if not words:
                    if whole_sentence is None:
                        whole_sentence = _pick_keywords(content, 0, len(tokens), limit)
                    words = list(whole_sentence)
                relations[pair] = (names[key_a], names[key_b], words, description, 1)
                continue
            source, target, kept_words, first_description, count = kept
            for word in words:
                if word not in kept_words and len(kept_words) < limit:
                    kept_words.append(word)
            relations[pair] = (source, target, kept_words, first_description, count + 1)


def extract_offline(text: str, options: OfflineExtractorOptions | None = None) -> Extraction:
    """Extract entities and co-occurrence relations from one chunk of text."""
    options = options or OfflineExtractorOptions()
    speakers = find_speakers(text)
    title = None if speakers else find_title(text)
    sentences = split_sentences(text[title.body_start :] if title else text, speakers)
    mentions, sentence_tokens = find_mentions(sentences, options.min_name_chars, speakers)
    subject: Mention | None = None
    if title is not None and sentences and len(title.name) >= options.min_name_chars:
        mentions, subject = place_title(title, mentions, sentence_tokens)
    aliases, promoted = resolve_aliases(mentions, transcript=bool(speakers))
    confident = {m.key for m in mentions if not m.needs_evidence}

    names: dict[str, str] = {}
    kinds: dict[str, tuple[str, int]] = {}
    first_sentence: dict[str, int] = {}
    per_sentence: dict[int, list[tuple[str, Mention]]] = {}
    surface_forms: dict[str, dict[str, str]] = {}  # key -> {alias key: first surface form}
    for mention in mentions:
        raw_key = mention.key
        if mention.needs_evidence and raw_key not in confident and raw_key not in aliases:
            continue
        key = aliases.get(raw_key, raw_key)
        first_sentence.setdefault(key, mention.sentence)
        if raw_key == key:
            names.setdefault(key, mention.name)
        else:
            surface_forms.setdefault(key, {}).setdefault(raw_key, mention.name)
        kept = kinds.get(key)
        if kept is None or mention.confidence > kept[1]:
            kinds[key] = (mention.type, mention.confidence)
        per_sentence.setdefault(mention.sentence, []).append((key, mention))
    if subject is not None:
        # The title is the implicit subject of every sentence of its passage.
        implicit = (aliases.get(subject.key, subject.key), subject)
        for found in per_sentence.values():
            if all(key != implicit[0] for key, _ in found):
                found.insert(0, implicit)
    for key in promoted:
        if key in kinds and kinds[key][1] < 1:
            kinds[key] = (PERSON, 1)
    for label, speaker in speakers.items():  # "AdamSmith:" is another form of Adam Smith
        label_key, key = entity_key(label), entity_key(speaker)
        key = aliases.get(key, key)
        if label_key != key and key in first_sentence:
            surface_forms.setdefault(key, {}).setdefault(label_key, label)

    configured = {t.casefold(): t for t in options.entity_types}
    fallback = configured.get(CATEGORY, options.entity_types[-1])
    limit = options.description_max_chars
    entities = tuple(
        ExtractedEntity(
            name=names[key],
            type=configured.get(kinds[key][0], fallback),
            description=_trim(sentences[first_sentence[key]], limit),
            aliases=tuple(surface_forms.get(key, {}).values()),
        )
        for key in first_sentence
    )
    relations: dict[tuple[str, str], _RelationDraft] = {}
    for number, found in per_sentence.items():
        _relate_sentence(
            sentences[number], sentence_tokens[number], found, names, options, relations
        )
    return Extraction(
        entities=entities,
        relations=tuple(
            ExtractedRelation(
                source=source,
                target=target,
                keywords=tuple(words) or ("co-occurrence",),
                description=description,
                strength=float(count),
            )
            for source, target, words, description, count in relations.values()
        ),
    )
