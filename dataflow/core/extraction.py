"""What an extractor returns for one chunk of text.

Both extractors (the LLM one and the offline one) produce these records; the
parser turns model output into them. Names are as extracted (display form);
identity is decided later by `naming.entity_key`.

An entity's `aliases` are the other surface forms of the same chunk that the
extractor resolved to it ("Adam" and the speaker label "AdamSmith" for "Adam
Smith"). Only the offline extractor resolves short forms; LightRAG's record
format has no alias field, so LLM extractions carry none.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from dataflow.core.naming import entity_key, relation_key

UNKNOWN_TYPE = "unknown"


@dataclass(frozen=True)
class ExtractedEntity:
    name: str
    type: str
    description: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExtractedRelation:
    source: str
    target: str
    keywords: tuple[str, ...]
    description: str
    strength: float = 1.0


@dataclass(frozen=True)
class DropCounts:
    """How many records of model output were dropped, by reason."""

    malformed_entities: int = 0
    malformed_relations: int = 0
    unknown_records: int = 0
    self_loops: int = 0

    @property
    def total(self) -> int:
        return (
            self.malformed_entities
            + self.malformed_relations
            + self.unknown_records
            + self.self_loops
        )

    def __add__(self, other: DropCounts) -> DropCounts:
        return DropCounts(
            self.malformed_entities + other.malformed_entities,
            self.malformed_relations + other.malformed_relations,
            self.unknown_records + other.unknown_records,
            self.self_loops + other.self_loops,
        )


@dataclass(frozen=True)
class Extraction:
    """Entities and relations found in one chunk, plus what was dropped."""

    entities: tuple[ExtractedEntity, ...] = ()
    relations: tuple[ExtractedRelation, ...] = ()
    dropped: DropCounts = field(default_factory=DropCounts)


def merge_extractions(first: Extraction, second: Extraction) -> Extraction:
    """Merge two passes over the same chunk (gleaning).

    Records are identified by entity key / relation key; on a duplicate the one
    with the longer description wins (LightRAG's rule), ties keep the first, and
    the entity keeps the aliases of both. Order is first-seen, so the result is
    deterministic.
    """
    entities: dict[str, ExtractedEntity] = {}
    for entity in (*first.entities, *second.entities):
        key = entity_key(entity.name)
        kept = entities.get(key)
        if kept is None:
            entities[key] = entity
            continue
        winner = entity if len(entity.description) > len(kept.description) else kept
        aliases = tuple(dict.fromkeys((*kept.aliases, *entity.aliases)))
        entities[key] = replace(winner, aliases=aliases)
    relations: dict[tuple[str, str], ExtractedRelation] = {}
    for relation in (*first.relations, *second.relations):
        pair = relation_key(relation.source, relation.target)
        if pair is None:
            continue
        kept_relation = relations.get(pair)
        if kept_relation is None or len(relation.description) > len(kept_relation.description):
            relations[pair] = relation
    return Extraction(
        entities=tuple(entities.values()),
        relations=tuple(relations.values()),
        dropped=first.dropped + second.dropped,
    )
