"""The contribution algebra: entity and relation state as what live chunks said.

An entity or relation is never stored as a merged summary. Its state is a map
{contribution id -> fragment}, one fragment per chunk that mentioned it, and
the record the stores hold is `render`ed from that map. Removing a chunk
retracts exactly the fragments it contributed, so the result is always the
same as building from the remaining chunks.

Contribution ids:
- an entity's own fragment from chunk C: ``C``
- an entity mentioned as an endpoint of relation (C, other): ``C|other``, so an
  entity lives exactly as long as a relation touching it lives
- a relation's fragment from chunk C: ``C``
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from itertools import chain
from operator import attrgetter
from typing import TypeVar

from dataflow.core.chunking import Chunk
from dataflow.core.extraction import UNKNOWN_TYPE, Extraction, merge_extractions
from dataflow.core.naming import clean_entity_name, entity_key, relation_key

RelationPair = tuple[str, str]
F = TypeVar("F", "EntityFragment", "RelationFragment")


@dataclass(frozen=True)
class EntityFragment:
    """What one chunk said about one entity.

    `type` is None when the chunk only named the entity as a relation endpoint:
    such a fragment keeps the entity alive but takes no part in the type vote.
    `aliases` are the keys of the other names the chunk resolved to this entity
    (sorted, never the entity's own key); an endpoint mention carries none.
    """

    name: str
    type: str | None
    description: str
    chunk_id: str
    file_path: str
    doc_id: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class RelationFragment:
    """What one chunk said about one (undirected) relation."""

    source_name: str
    target_name: str
    keywords: tuple[str, ...]
    description: str
    strength: float
    chunk_id: str
    file_path: str
    doc_id: str


@dataclass(frozen=True)
class EntityContribution:
    key: str
    contribution_id: str
    fragment: EntityFragment


@dataclass(frozen=True)
class RelationContribution:
    key: RelationPair
    contribution_id: str
    fragment: RelationFragment


Contribution = EntityContribution | RelationContribution
EntityState = Mapping[str, EntityFragment]
RelationState = Mapping[str, RelationFragment]


@dataclass(frozen=True)
class ChunkContributions:
    """Everything one chunk contributes: an extraction as keyed contributions. The chunk
    step keeps only its `ChunkLedger`."""

    chunk_id: str
    entities: tuple[EntityContribution, ...] = ()
    relations: tuple[RelationContribution, ...] = ()

    def all(self) -> tuple[Contribution, ...]:
        return (*self.entities, *self.relations)


LedgerEntry = tuple[str, object, str]
"""A contribution's identity: ("entity" or "relation", its key, its contribution id)."""


@dataclass(frozen=True)
class ChunkLedger:
    """What one chunk contributes, as the chunk step keeps it: the identity of each of its
    contributions, all that their retraction needs, and one digest of them all, all that
    the chunk's next extraction needs to tell whether anything changed.

    The fragments themselves are kept once, by the entity and relation steps: kept here as
    well (the whole `ChunkContributions`), every fragment would be in the recovery database
    twice, and the chunk step's share of it about four times what ledgers take
    (docs/decisions/0002-a-chunk-keeps-a-ledger.md). A chunk's contributions follow from the
    keys of the entities it describes and the pairs it relates (the ids of the module's
    docstring: a relation's two ends are mentioned by ``C|other``), so these are all it
    holds.
    """

    chunk_id: str
    entities: tuple[str, ...]  # the entities the chunk describes (id: the chunk's)
    relations: tuple[RelationPair, ...]  # the pairs it relates (id: the chunk's)
    digest: bytes  # of every contribution, fragment included

    @staticmethod
    def of(contributions: ChunkContributions) -> ChunkLedger:
        chunk_id = contributions.chunk_id
        ledger = ChunkLedger(
            chunk_id,
            tuple(c.key for c in contributions.entities if c.contribution_id == chunk_id),
            tuple(c.key for c in contributions.relations),
            contributions_digest(contributions),
        )
        if set(ledger.entries()) != {identity(c) for c in contributions.all()}:
            raise ValueError(f"chunk {chunk_id!r} has contributions its ledger cannot name")
        return ledger

    def entries(self) -> Iterator[LedgerEntry]:
        """The identity of each contribution."""
        chunk_id = self.chunk_id
        for key in self.entities:
            yield "entity", key, chunk_id
        for pair in self.relations:
            yield "relation", pair, chunk_id
            yield "entity", pair[0], f"{chunk_id}|{pair[1]}"
            yield "entity", pair[1], f"{chunk_id}|{pair[0]}"

    def entity_keys(self) -> set[str]:
        """Every entity the chunk contributes to: those it describes, and both ends of each
        pair it relates."""
        return {*self.entities, *(key for pair in self.relations for key in pair)}


def identity(contribution: Contribution) -> LedgerEntry:
    kind = "entity" if isinstance(contribution, EntityContribution) else "relation"
    return kind, contribution.key, contribution.contribution_id


def contributions_digest(contributions: ChunkContributions) -> bytes:
    """16 bytes that change when any contribution of a chunk does: a digest of the repr of
    their keys, ids and fragments' rows (strings, numbers and tuples of them, whose repr is
    stable)."""
    rows = [(identity(c), _values(c.fragment)) for c in contributions.all()]
    return hashlib.blake2b(repr(rows).encode(), digest_size=16).digest()


def _field_names(kind: type[EntityFragment] | type[RelationFragment]) -> tuple[str, ...]:
    return tuple(f.name for f in fields(kind))


FRAGMENT_FIELDS = {kind: _field_names(kind) for kind in (EntityFragment, RelationFragment)}
"""Each kind of fragment's field names, in order."""

FRAGMENT_ROW = {kind: attrgetter(*names) for kind, names in FRAGMENT_FIELDS.items()}
"""A fragment's field values in field order (its row), by kind of fragment: what the
digest of a chunk's contributions covers, and how a snapshot keeps fragments
(dataflow/state/forms.py)."""


def _values(fragment: EntityFragment | RelationFragment) -> tuple[object, ...]:
    """A fragment's row."""
    row: tuple[object, ...] = FRAGMENT_ROW[type(fragment)](fragment)
    return row


def contributions_for_chunk(chunk: Chunk, extraction: Extraction) -> ChunkContributions:
    """Turn one chunk's extraction into keyed contributions (pure, deterministic)."""
    merged = merge_extractions(extraction, Extraction())
    entities: dict[tuple[str, str], EntityContribution] = {}
    for entity in merged.entities:
        key = entity_key(entity.name)
        if not key:
            continue
        fragment = EntityFragment(
            name=clean_entity_name(entity.name),
            type=entity.type.strip().lower() or UNKNOWN_TYPE,
            description=entity.description.strip(),
            chunk_id=chunk.chunk_id,
            file_path=chunk.file_path,
            doc_id=chunk.doc_id,
            aliases=alias_keys(key, entity.aliases),
        )
        entities[(key, chunk.chunk_id)] = EntityContribution(key, chunk.chunk_id, fragment)
    relations: list[RelationContribution] = []
    for relation in merged.relations:
        pair = relation_key(relation.source, relation.target)
        if pair is None:
            continue
        source_name = clean_entity_name(relation.source)
        target_name = clean_entity_name(relation.target)
        if entity_key(source_name) != pair[0]:
            source_name, target_name = target_name, source_name
        fragment_r = RelationFragment(
            source_name=source_name,
            target_name=target_name,
            keywords=tuple(relation.keywords),
            description=relation.description.strip(),
            strength=float(relation.strength),
            chunk_id=chunk.chunk_id,
            file_path=chunk.file_path,
            doc_id=chunk.doc_id,
        )
        relations.append(RelationContribution(pair, chunk.chunk_id, fragment_r))
        for key, name, other in ((pair[0], source_name, pair[1]), (pair[1], target_name, pair[0])):
            mention_id = f"{chunk.chunk_id}|{other}"
            mention = EntityFragment(
                name=name,
                type=None,
                description=fragment_r.description,
                chunk_id=chunk.chunk_id,
                file_path=chunk.file_path,
                doc_id=chunk.doc_id,
            )
            entities[(key, mention_id)] = EntityContribution(key, mention_id, mention)
    ordered_entities = tuple(entities[k] for k in sorted(entities))
    ordered_relations = tuple(sorted(relations, key=lambda c: c.key))
    return ChunkContributions(chunk.chunk_id, ordered_entities, ordered_relations)


def alias_keys(key: str, names: Iterable[str]) -> tuple[str, ...]:
    """The entity keys of an entity's alias names: sorted, distinct, without empty keys
    and without `key` itself (a surface form that normalises to the name is no alias)."""
    return tuple(sorted({alias for name in names if (alias := entity_key(name)) != key} - {""}))


def apply(state: Mapping[str, F], contribution_id: str, fragment: F) -> dict[str, F]:
    """Add (or replace) one contribution. Idempotent: applying twice equals once."""
    return {**state, contribution_id: fragment}


def retract(state: Mapping[str, F], contribution_id: str) -> dict[str, F]:
    """Remove one contribution; retracting an absent id changes nothing."""
    return {cid: fragment for cid, fragment in state.items() if cid != contribution_id}


# -- rendering ---------------------------------------------------------------


@dataclass(frozen=True)
class EntityRecord:
    key: str
    name: str
    type: str
    description: str
    source_chunk_ids: tuple[str, ...]
    file_paths: tuple[str, ...]
    doc_ids: tuple[str, ...]
    aliases: tuple[str, ...] = ()
    """Alias keys: the union of the live fragments' aliases, sorted, never `key`."""
    list_changes: ListChanges | None = field(default=None, compare=False, repr=False)
    """How its citation lists changed since an earlier draft (a hub's: `ListChanges`); not
    part of the record, so never stored nor read back."""

    @property
    def embedding_text(self) -> str:
        return f"{self.name}\n{self.description}"


@dataclass(frozen=True)
class RelationRecord:
    source: str
    target: str
    source_name: str
    target_name: str
    keywords: tuple[str, ...]
    description: str
    weight: float
    source_chunk_ids: tuple[str, ...]
    file_paths: tuple[str, ...]
    doc_ids: tuple[str, ...]
    list_changes: ListChanges | None = field(default=None, compare=False, repr=False)
    """As `EntityRecord.list_changes`."""

    @property
    def pair(self) -> RelationPair:
        return (self.source, self.target)

    @property
    def embedding_text(self) -> str:
        return (
            f"{self.source_name}\t{self.target_name}\n"
            f"{', '.join(self.keywords)}\n{self.description}"
        )


@dataclass(frozen=True)
class SummaryRequest:
    """Descriptions too many or too long to join, most supported first."""

    kind: str  # "entity" or "relation"
    name: str
    descriptions: tuple[str, ...]
    max_tokens: int

    @property
    def fragments_hash(self) -> str:
        """A stable hash of the description set (`fragments_hash`): a summary's cache key.
        Computed when asked: hashing a hub's thousands of descriptions on every render would
        cost a tenth of it."""
        return fragments_hash(self.descriptions)


Summarizer = Callable[[SummaryRequest], str]


@dataclass(frozen=True)
class RenderOptions:
    """When descriptions are summarised (LightRAG: force_llm_summary_on_merge=8)."""

    summarize_over_fragments: int = 8
    summarize_over_tokens: int = 1200
    summary_max_tokens: int = 500

    def __post_init__(self) -> None:
        for name in ("summarize_over_fragments", "summarize_over_tokens", "summary_max_tokens"):
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"RenderOptions.{name} must be >= 1 (got {value})")


def fragments_hash(descriptions: Iterable[str]) -> str:
    """A stable hash of a set of descriptions (the summary cache key)."""
    canonical = json.dumps(sorted(set(descriptions)), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _vote(values: Iterable[str]) -> str | None:
    """Most frequent value; ties go to the lexicographically smallest."""
    counts = Counter(values)
    if not counts:
        return None
    return min(counts, key=lambda value: (-counts[value], value))


def _ordered_descriptions(fragments: Iterable[EntityFragment | RelationFragment]) -> list[str]:
    """Distinct descriptions, most supported first, then by (file path, chunk id, text).

    Nothing here depends on arrival order, so incremental and from-scratch agree.
    """
    support: Counter[str] = Counter()
    first_place: dict[str, tuple[str, str, str]] = {}
    for fragment in fragments:
        text = fragment.description
        if not text:
            continue
        support[text] += 1
        place = (fragment.file_path, fragment.chunk_id, text)
        if text not in first_place or place < first_place[text]:
            first_place[text] = place
    return sorted(support, key=lambda text: (-support[text], first_place[text]))


@dataclass(frozen=True)
class EntityDraft:
    """An entity's record but for its description: what the record is made of. `entity_draft`
    makes it from the live fragments; an `EntityTally` (dataflow/core/tally.py) keeps one up
    to date fragment by fragment, for a hub."""

    key: str
    name: str
    type: str
    descriptions: tuple[str, ...]
    """Distinct descriptions, most supported first (`_ordered_descriptions`)."""
    source_chunk_ids: tuple[str, ...]
    file_paths: tuple[str, ...]
    doc_ids: tuple[str, ...]
    aliases: tuple[str, ...]
    list_changes: ListChanges | None = field(default=None, compare=False, repr=False)
    """How the citation lists changed since the key's last draft, for a hub's (`ListChanges`)."""


@dataclass(frozen=True)
class RelationDraft:
    """A relation's record but for its description (as `EntityDraft`)."""

    pair: RelationPair
    source_name: str
    target_name: str
    keywords: tuple[str, ...]
    descriptions: tuple[str, ...]
    weight: float
    source_chunk_ids: tuple[str, ...]
    file_paths: tuple[str, ...]
    doc_ids: tuple[str, ...]
    list_changes: ListChanges | None = field(default=None, compare=False, repr=False)


Draft = EntityDraft | RelationDraft


CITATION_LISTS = ("source_chunk_ids", "file_paths", "doc_ids")
"""The lists of a record that grow with how often it is cited."""


@dataclass(frozen=True)
class ListChanges:
    """How a key's citation lists (`CITATION_LISTS`) changed from its draft stamped `since`
    to the one stamped `stamp`: the values of each list that came in (True) or went (False).

    A hub's lists hold thousands of entries, and a write that compares them whole costs that
    much on every touch. Its running totals (dataflow/core/tally.py) know what changed, so
    the drafts made from them carry it, and a store that last wrote this key's draft `since`
    writes only the changes (connectors/redis/written_lists.py); any other store writes the
    lists whole. `since` is None for a key's first draft from its totals. Stamps are unique
    within the process, and a store trusts only what it wrote itself."""

    since: int | None
    stamp: int
    changed: Mapping[str, Mapping[str, bool]]

    def then(self, later: ListChanges) -> ListChanges:
        """These changes followed by `later`'s (drafted from this draft on), as one."""
        if later.since != self.stamp:
            raise ValueError(f"changes since {later.since} do not follow draft {self.stamp}")
        names = dict.fromkeys((*self.changed, *later.changed))
        changed = {
            name: {**self.changed.get(name, {}), **later.changed.get(name, {})} for name in names
        }
        return ListChanges(self.since, later.stamp, changed)


def entity_draft(key: str, state: EntityState) -> EntityDraft | None:
    """The entity's draft from its fragments, or None when nothing contributes to it any more."""
    if not state:
        return None
    # map and attrgetter rather than comprehensions: these loops run in C
    fragments = list(state.values())
    typed = [f for f in fragments if f.type is not None]
    return EntityDraft(
        key=key,
        name=_vote(map(_NAME, fragments)) or key,
        type=_vote(map(_TYPE, typed)) or UNKNOWN_TYPE,
        descriptions=tuple(_entity_descriptions(fragments, typed)),
        source_chunk_ids=_sorted_set(map(_CHUNK_ID, fragments)),
        file_paths=_sorted_set(map(_FILE_PATH, fragments), without=""),
        doc_ids=_sorted_set(map(_DOC_ID, fragments)),
        aliases=_sorted_set(chain.from_iterable(map(_ALIASES, fragments)), without=key),
    )


def relation_draft(pair: RelationPair, state: RelationState) -> RelationDraft | None:
    """The relation's draft from its fragments, or None when no chunk supports it any more."""
    if not state:
        return None
    fragments = list(state.values())
    return RelationDraft(
        pair=pair,
        source_name=_vote(map(_SOURCE_NAME, fragments)) or pair[0],
        target_name=_vote(map(_TARGET_NAME, fragments)) or pair[1],
        keywords=_sorted_set(chain.from_iterable(map(_KEYWORDS, fragments))),
        descriptions=tuple(_ordered_descriptions(fragments)),
        weight=math.fsum(map(_STRENGTH, fragments)),
        source_chunk_ids=_sorted_set(map(_CHUNK_ID, fragments)),
        file_paths=_sorted_set(map(_FILE_PATH, fragments), without=""),
        doc_ids=_sorted_set(map(_DOC_ID, fragments)),
    )


@dataclass(frozen=True)
class Renderer:
    """Renders records from states, or from drafts: a draft's descriptions become one
    description (joined, or summarised). `summarize` None means the extractive summary."""

    count_tokens: Callable[[str], int]
    options: RenderOptions = RenderOptions()
    summarize: Summarizer | None = None

    def entity(self, key: str, state: EntityState) -> EntityRecord | None:
        """The entity's record, or None when nothing contributes to it any more."""
        draft = entity_draft(key, state)
        return self.entity_record(draft) if draft is not None else None

    def relation(self, pair: RelationPair, state: RelationState) -> RelationRecord | None:
        """The relation's record, or None when no chunk supports it any more."""
        draft = relation_draft(pair, state)
        return self.relation_record(draft) if draft is not None else None

    def entity_record(self, draft: EntityDraft) -> EntityRecord:
        return EntityRecord(
            key=draft.key,
            name=draft.name,
            type=draft.type,
            description=self._describe("entity", draft.name, draft.descriptions),
            source_chunk_ids=draft.source_chunk_ids,
            file_paths=draft.file_paths,
            doc_ids=draft.doc_ids,
            aliases=draft.aliases,
            list_changes=draft.list_changes,
        )

    def relation_record(self, draft: RelationDraft) -> RelationRecord:
        source, target = draft.pair
        name = f"{draft.source_name} - {draft.target_name}"
        return RelationRecord(
            source=source,
            target=target,
            source_name=draft.source_name,
            target_name=draft.target_name,
            keywords=draft.keywords,
            description=self._describe("relation", name, draft.descriptions),
            weight=draft.weight,
            source_chunk_ids=draft.source_chunk_ids,
            file_paths=draft.file_paths,
            doc_ids=draft.doc_ids,
            list_changes=draft.list_changes,
        )

    def summary_due(self, draft: Draft | None) -> bool:
        """Whether rendering `draft` asks `summarize` (an LLM) for a summary."""
        if self.summarize is None or draft is None:
            return False
        return self._summary_due(draft.descriptions)

    def _summary_due(self, descriptions: Sequence[str]) -> bool:
        return (
            len(descriptions) > self.options.summarize_over_fragments
            or self.count_tokens("\n".join(descriptions)) > self.options.summarize_over_tokens
        )

    def _describe(self, kind: str, name: str, descriptions: tuple[str, ...]) -> str:
        if not self._summary_due(descriptions):
            return "\n".join(descriptions)
        request = SummaryRequest(
            kind=kind,
            name=name,
            descriptions=descriptions,
            max_tokens=self.options.summary_max_tokens,
        )
        if self.summarize is not None:
            return self.summarize(request)
        return extractive_summary(request, self.count_tokens)


def _entity_descriptions(
    fragments: list[EntityFragment], typed: list[EntityFragment] | None = None
) -> list[str]:
    """The descriptions an entity's record is described from: its typed fragments' (`typed`,
    computed when not given) when any of them has one, else all fragments', ordered by
    support."""
    if typed is None:
        typed = [f for f in fragments if f.type is not None]
    return _ordered_descriptions(typed if any(map(_DESCRIPTION, typed)) else fragments)


_NAME, _TYPE, _DESCRIPTION = attrgetter("name"), attrgetter("type"), attrgetter("description")
_CHUNK_ID, _FILE_PATH, _DOC_ID = (
    attrgetter("chunk_id"),
    attrgetter("file_path"),
    attrgetter("doc_id"),
)
_ALIASES, _KEYWORDS, _STRENGTH = (
    attrgetter("aliases"),
    attrgetter("keywords"),
    attrgetter("strength"),
)
_SOURCE_NAME, _TARGET_NAME = attrgetter("source_name"), attrgetter("target_name")


def _sorted_set(values: Iterable[str], without: str | None = None) -> tuple[str, ...]:
    """The distinct `values` sorted, without `without`."""
    distinct = set(values)
    if without is not None:
        distinct.discard(without)
    return tuple(sorted(distinct))


def extractive_summary(request: SummaryRequest, count_tokens: Callable[[str], int]) -> str:
    """The summary without an LLM: the best-supported descriptions under the token cap.

    Descriptions arrive ordered by support; take them in that order while the total stays
    under `max_tokens`, and stop at the first that does not fit, so only the descriptions
    taken (and one more) are counted: a hub has thousands, and counting them all on every
    render would be most of its cost. The first one is always kept, cut by words if it alone
    is over the cap, so a hub entity keeps a bounded description.
    """
    chosen: list[str] = []
    used = 0
    for text in request.descriptions:
        cost = count_tokens(text) + (1 if chosen else 0)
        if used + cost <= request.max_tokens:
            chosen.append(text)
            used += cost
            continue
        if not chosen:
            words = text.split()
            while words and count_tokens(" ".join(words)) > request.max_tokens:
                words = words[: max(1, len(words) * 3 // 4)] if len(words) > 1 else []
            chosen.append(" ".join(words))
        break
    return "\n".join(chosen)
