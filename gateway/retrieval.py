"""The retrieval lanes: what each of LightRAG's modes reads from the stores.

Every lane finds things two ways and fuses them by rank (gateway/fusion.py): dense
similarity of embeddings, and lexical (BM25-style) matches of the words, so an exact
name, number or rare word is found even when the embedding misses it.

- `find_entities` (local): entity names the question spells out, looked up by exact key
  and by alias first (gateway/names.py), then entity vectors and lexical matches of the
  low-level keywords; `one_hop` / `OneHop.read` add their one-hop relations ranked by
  (edge degree, weight) descending (LightRAG's ``_get_node_data``), read in slices.
  Entity records (a hub's holds hundreds of chunk ids) are read in slices too, only as
  far as the entity budget reaches (`EntityReads`).
- `find_relations` (global): relation vectors and lexical matches of the high-level
  keywords, then their endpoint entities (LightRAG's ``_get_edge_data``).
- `ChunkSearch`: chunk vectors and lexical matches of the question (naive: vectors only).
- `ChunkSearch.relevant`: the chunks the kept entities and relations cite, ranked by
  their relevance to the question (dense and lexical, LightRAG's "VECTOR" pick), never
  by citation count: a hub entity cites hundreds of chunks, most of them beside the
  point. Work is bounded: at most `CITED_PER_ITEM` cited chunks per item and
  `MAX_CANDIDATES` in all are ranked, by two searches restricted to them.
- `ChunkSearch.bridge`: one hop beyond the best chunks, for questions that need a second
  document: the specific entities those chunks mention (cited by at most `BRIDGE_MAX_CITED`
  chunks, so hubs do not flood it), then the other chunks citing those entities, ranked
  by relevance. "Who directed the film that starred X?" finds X's film first, then the
  film's other passages through it.

A `Scope` (the request's doc_ids / file_path_prefix) filters every chunk search and
drops graph-expanded entities, relations and chunks from other documents. Entity and
relation points carry no document ids or paths (a hub's would make each write of its
point O(hub)), so `GraphScope` restricts their searches to what the in-scope chunks
mention. Each step is one Redis pipeline or one vector-store call, whatever `top_k` is.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import zip_longest

from connectors.stores import Stores
from connectors.vectors.port import JsonValue, VectorFilter, VectorHit, VectorKind
from connectors.writes import MENTIONED_ENTITIES, MENTIONED_RELATIONS
from dataflow.core.chunking import Chunk
from dataflow.core.contributions import EntityRecord, RelationPair, RelationRecord
from dataflow.core.lexical import STOPWORDS, SparseVector
from dataflow.core.naming import relation_id, relation_pair_of
from gateway.fusion import Lane, fuse
from gateway.names import matched_names, name_spans, named_entities
from gateway.types import RetrievedChunk, RetrievedEntity, RetrievedRelation

CITED_PER_ITEM = 50
MAX_CANDIDATES = 1000
BRIDGE_SEEDS = 3  # the best chunks a bridge starts from
BRIDGE_ENTITIES = 15
BRIDGE_MAX_CITED = 20


@dataclass(frozen=True)
class Scope:
    """Which documents a request may see: none given means all of them.

    Matches the vector store's filter semantics (`VectorFilter`): an item is in scope
    when one of its doc ids is among `doc_ids`, and one of its file paths equals the
    prefix or lies under it as a directory (whole path components).
    """

    doc_ids: tuple[str, ...] = ()
    file_path_prefix: str | None = None

    @property
    def is_everything(self) -> bool:
        return not self.doc_ids and self.file_path_prefix is None

    def vector_filter(self) -> VectorFilter | None:
        """The filter of a chunk search (chunk points carry their doc id and path)."""
        if self.is_everything:
            return None
        return VectorFilter(doc_ids=self.doc_ids, file_path_prefix=self.file_path_prefix)

    def admits(self, doc_ids: Iterable[str], file_paths: Iterable[str]) -> bool:
        if self.doc_ids and not set(doc_ids) & set(self.doc_ids):
            return False
        if self.file_path_prefix is not None:
            stem = self.file_path_prefix.rstrip("/")
            return any(path == stem or path.startswith(stem + "/") for path in file_paths)
        return True

    def admits_chunk(self, chunk: Chunk) -> bool:
        return self.admits((chunk.doc_id,), (chunk.file_path,))


CANDIDATE_CHUNKS = 1000  # a path scope over more chunks searches deeper instead (GraphScope)
AMONG_KEYS = 500  # a search among more listed keys reads deeper and keeps them instead
DEEPEN = 4  # how much deeper each round of a deep scoped search reads


@dataclass(frozen=True)
class GraphScope:
    """A `Scope` for the entity and relation searches, whose points name no documents.

    An entity or relation is in scope when an in-scope chunk mentions it (that chunk's
    point lists the keys: connectors/writes.py). Its searches then run among those keys
    (`entities`, `relations`), or, past `among_keys` of them (a search among a point-id
    set costs 3.5 us an id on Qdrant Edge: 5,000 relations, 17 ms a search), run
    unrestricted, `DEEPEN` times deeper each round, keeping the listed keys until they
    have their `top_k` or the collection is exhausted. A path scope wider than
    `candidate_chunks` chunks (`of`) is not listed (both None): its searches read deeper
    the same way and keep what `Scope.admits` keeps on the records. Every way gives the
    hits a search filtered by document would. A doc_ids scope is always listed: a record's
    document ids and paths cannot say whether one and the same document is in both
    parts of a two-part scope.
    """

    scope: Scope = field(default_factory=Scope)
    entities: frozenset[str] | None = None
    relations: frozenset[str] | None = None
    among_keys: int = AMONG_KEYS

    @staticmethod
    def of(
        stores: Stores,
        scope: Scope,
        *,
        candidate_chunks: int = CANDIDATE_CHUNKS,
        among_keys: int = AMONG_KEYS,
    ) -> GraphScope:
        if scope.is_everything:
            return GraphScope(scope, among_keys=among_keys)
        limit = None if scope.doc_ids else candidate_chunks + 1
        chunks = stores.vectors.payloads(VectorKind.CHUNK, scope.vector_filter(), limit=limit)
        if limit is not None and len(chunks) >= limit:
            return GraphScope(scope, among_keys=among_keys)
        entities = {key for p in chunks.values() for key in _strings(p.get(MENTIONED_ENTITIES))}
        relations = {key for p in chunks.values() for key in _strings(p.get(MENTIONED_RELATIONS))}
        return GraphScope(scope, frozenset(entities), frozenset(relations), among_keys)

    def searches(
        self,
        stores: Stores,
        kind: VectorKind,
        vector: Sequence[float],
        text: str,
        top_k: int,
        version: int | None,
    ) -> tuple[list[str], list[str]]:
        """The keys of the best `top_k` in-scope points by dense match of `vector` and by
        lexical match of `text` (IDF counted as of `version`)."""
        vectors = stores.vectors
        query = vectors.lexical_query(kind, text, as_of=version)
        dense = self.keys(
            stores,
            kind,
            lambda limit, keys: vectors.search(kind, vector, limit, None, keys, with_payload=False),
            top_k,
        )
        lexical = self.keys(
            stores,
            kind,
            lambda limit, keys: vectors.search_sparse(
                kind, query, limit, None, keys, with_payload=False
            ),
            top_k,
        )
        return dense, lexical

    def keys(self, stores: Stores, kind: VectorKind, search: Search, top_k: int) -> list[str]:
        """The keys of the best `top_k` in-scope hits of `search` over entity or relation
        points (`kind`)."""
        if kind is VectorKind.ENTITY:
            return self._keys(search, top_k, self.entities, lambda k: self._entities_in(stores, k))
        return self._keys(search, top_k, self.relations, lambda k: self._relations_in(stores, k))

    def _entities_in(self, stores: Stores, keys: list[str]) -> Collection[str]:
        records = stores.graph.get_entities(keys)
        return {k for k, r in records.items() if self.scope.admits(r.doc_ids, r.file_paths)}

    def _relations_in(self, stores: Stores, keys: list[str]) -> Collection[str]:
        records = stores.graph.get_relations(relation_pair_of(key) for key in keys)
        return {
            relation_id(pair)
            for pair, record in records.items()
            if self.scope.admits(record.doc_ids, record.file_paths)
        }

    def _keys(
        self,
        search: Search,
        top_k: int,
        candidates: frozenset[str] | None,
        admitted: Callable[[list[str]], Collection[str]],
    ) -> list[str]:
        if self.scope.is_everything:
            return hit_keys(search(top_k, None))
        if candidates is not None and len(candidates) <= self.among_keys:
            return hit_keys(search(top_k, candidates)) if candidates else []
        if candidates is not None:
            return _deep(search, top_k, lambda _: candidates)
        return _deep(search, top_k, admitted)


def _deep(
    search: Search, top_k: int, admitted: Callable[[list[str]], Collection[str]]
) -> list[str]:
    """The first `top_k` admitted keys of `search`'s whole ranking, read ever deeper."""
    depth = top_k
    while True:
        keys = hit_keys(search(depth, None))
        inside = admitted(keys)
        kept = [key for key in keys if key in inside]
        if len(kept) >= top_k or len(keys) < depth:
            return kept[:top_k]
        depth *= DEEPEN


Search = Callable[[int, Collection[str] | None], list[VectorHit]]
"""A search for `limit` hits, among the given keys (None: all of them)."""


def _strings(value: JsonValue) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


@dataclass(frozen=True)
class GraphLane:
    """What the relation lane (global) found, in rank order: its relations, read in full,
    and their endpoints' keys with the degrees read with them (the endpoints' records are
    read later, as far as the entity budget reaches: `EntityReads`)."""

    relations: tuple[RetrievedRelation, ...] = ()
    ends: tuple[str, ...] = ()
    degrees: dict[str, int] = field(default_factory=dict)


def hit_keys(hits: Iterable[VectorHit]) -> list[str]:
    return [hit.key for hit in hits]


# -- entities and relations -----------------------------------------------------------


@dataclass(frozen=True)
class NamedEntities:
    """The entities a question names (gateway/names.py): exact names first, then the
    entities carrying a named alias, with the records the look-up read."""

    keys: tuple[str, ...] = ()
    records: dict[str, EntityRecord] = field(default_factory=dict)


def named_in(stores: Stores, texts: Sequence[str]) -> NamedEntities:
    """Look the name spans of `texts` up as entity keys and aliases (one round trip, and
    one more for degrees only when an alias names several entities)."""
    graph = stores.graph
    spans = [span for source in texts for span in name_spans(source, STOPWORDS)]
    candidates, aliases = graph.lookup_names(span.key for span in spans)
    matched = matched_names(spans, {*candidates, *aliases})
    shared = [key for alias in matched if len(aliases.get(alias, ())) > 1 for key in aliases[alias]]
    keys = named_entities(matched, candidates, aliases, graph.node_degrees(shared))
    return NamedEntities(tuple(keys), candidates)


def find_entities(
    stores: Stores,
    named: NamedEntities,
    text: str,
    vector: Sequence[float],
    top_k: int,
    in_scope: GraphScope,
    version: int | None = None,
) -> list[tuple[str, float]]:
    """The `named` entities in scope, then by vector and lexical match of `text`, fused by
    rank: the best `top_k` keys with their fused scores. No record is read here: an
    entity's record (often a hub's, with hundreds of chunk ids) is read only if the entity
    budget reaches it (`EntityReads`). `version`: the index version read (lexical counts
    are reused within it)."""
    scope = in_scope.scope
    named_keys = [
        key
        for key in named.keys
        if key not in named.records
        or scope.admits(named.records[key].doc_ids, named.records[key].file_paths)
    ]
    dense, lexical = in_scope.searches(stores, VectorKind.ENTITY, vector, text, top_k, version)
    return fuse([Lane(named_keys), Lane(dense), Lane(lexical)])[:top_k]


@dataclass
class EntityReads:
    """The entities of one call, each read once, when a slice of the ranking first needs
    it: records the name look-up already read and degrees the relation lane read are
    reused. Read in slices (`read`), since the entity budget keeps a few dozen of the
    entities the lanes rank and a hub's record is large."""

    stores: Stores
    scope: Scope
    records: dict[str, EntityRecord] = field(default_factory=dict)
    degrees: dict[str, int] = field(default_factory=dict)

    def read(self, ranked: Sequence[tuple[str, float]]) -> list[RetrievedEntity]:
        """The entities of `ranked` (key, score) in order, with their degrees; those gone
        from the store or out of scope are left out (one round trip, or none)."""
        keys = [key for key, _ in ranked]
        unread = [key for key in keys if key not in self.records]
        uncounted = [key for key in keys if key in self.records and key not in self.degrees]
        if unread or uncounted:
            records, degrees = self.stores.graph.get_entities_and_degrees(unread, uncounted)
            self.records.update(records)
            self.degrees.update(degrees)
        found = []
        for key, score in ranked:
            record = self.records.get(key)
            if record is not None and self.scope.admits(record.doc_ids, record.file_paths):
                found.append(RetrievedEntity(record, score, self.degrees[key]))
        return found


@dataclass(frozen=True)
class OneHop:
    """The one-hop relations of some entities as pairs ranked by edge degree (the sum of
    the endpoints' degrees, LightRAG's ``_get_node_data`` rank), best first, ties in
    entity then pair order; read them in slices (`read`), since the token budget keeps
    a few dozen of a hub's hundreds and ranking needs only the degrees."""

    pairs: tuple[RelationPair, ...] = ()
    degrees: dict[RelationPair, int] = field(default_factory=dict)

    def slice_end(self, start: int, size: int) -> int:
        """Where a slice of about `size` pairs from `start` ends: never inside a group of
        equal degree, so sorting each slice by (degree, weight) sorts the whole."""
        end = min(start + size, len(self.pairs))
        if end <= start:
            return end
        boundary = self.degrees[self.pairs[end - 1]]
        while end < len(self.pairs) and self.degrees[self.pairs[end]] == boundary:
            end += 1
        return end

    def read(self, stores: Stores, start: int, end: int, scope: Scope) -> list[RetrievedRelation]:
        """The relations of `pairs[start:end]` in scope, by (edge degree, weight)."""
        pairs = self.pairs[start:end]
        relations = stores.graph.get_relations(pairs)
        found = [
            RetrievedRelation(record=relations[pair], score=0.0, degree=self.degrees[pair])
            for pair in pairs
            if pair in relations
            and scope.admits(relations[pair].doc_ids, relations[pair].file_paths)
        ]
        found.sort(key=lambda r: (r.degree, r.record.weight), reverse=True)  # stable
        return found


def one_hop(stores: Stores, keys: Sequence[str]) -> OneHop:
    """The one-hop relation pairs of the entities of `keys`, ranked (one round trip for
    the degrees). An entity gone from the store has no neighbours; one out of scope has
    only relations out of scope (a relation's document mentions both its ends), which
    `OneHop.read` leaves out."""
    neighbours = stores.graph.get_neighbours(keys)
    degrees: dict[RelationPair, int] = {}
    for key in keys:
        around = neighbours.get(key, [])
        own = len(around)
        for other, other_degree in around:
            # The sorted pair, as relation_pair makes it: adjacency holds only valid, distinct
            # keys, and a hub has hundreds of neighbours (the checks would cost several
            # percent of a mix call).
            pair = (key, other) if key < other else (other, key)
            degrees.setdefault(pair, own + other_degree)
    pairs = sorted(degrees, key=degrees.__getitem__, reverse=True)  # stable: ties keep order
    return OneHop(tuple(pairs), degrees)


def find_relations(
    stores: Stores,
    text: str,
    vector: Sequence[float],
    top_k: int,
    in_scope: GraphScope,
    version: int | None = None,
    named: Sequence[str] = (),
) -> GraphLane:
    """Relations by vector and lexical match of `text` and, for each `named` entity, its
    own relations closest to `vector`, fused by rank (score = fused score), then their
    endpoints' keys in relation order.

    The named lane makes a relation search cover every thing the question names: one
    lexical ranking of "Who is older, Annie Morton or Terry Richardson?" fills its top
    with one person's relations (without this lane, global mode finds both passages of such
    questions on the dev set far less often than a plain chunk search does)."""
    scope = in_scope.scope
    dense, lexical = in_scope.searches(stores, VectorKind.RELATION, vector, text, top_k, version)
    around = _relations_of_named(stores, named, vector, in_scope)
    lanes = [Lane(dense), Lane(lexical), Lane(around, NAMED_LANE_WEIGHT)]
    fused = [(relation_pair_of(key), score) for key, score in fuse(lanes)][:top_k]
    if not fused:
        return GraphLane()
    # The endpoints' degrees, read with the relations, give the relations' edge degrees.
    records, degrees = stores.graph.get_relations_and_end_degrees(pair for pair, _ in fused)
    found = [
        RetrievedRelation(
            record=records[pair], score=score, degree=degrees[pair[0]] + degrees[pair[1]]
        )
        for pair, score in fused
        if pair in records and scope.admits(records[pair].doc_ids, records[pair].file_paths)
    ]
    ends = tuple(dict.fromkeys(key for relation in found for key in relation.record.pair))
    return GraphLane(relations=tuple(found), ends=ends, degrees=degrees)


NAMED_RELATIONS_EACH = 5  # relations each named entity contributes to the lane
NAMED_LANE_WEIGHT = 2.0


def _relations_of_named(
    stores: Stores, named: Sequence[str], vector: Sequence[float], in_scope: GraphScope
) -> list[str]:
    """The named entities' relations (ids) closest to `vector`, taking turns by entity
    (each one's best, then each one's second best, up to `NAMED_RELATIONS_EACH` each),
    from one search filtered to relations with a named entity at an end."""
    if not named:
        return []
    of_named = VectorFilter(ends=tuple(named))
    found = in_scope.keys(
        stores,
        VectorKind.RELATION,
        lambda limit, keys: stores.vectors.search(
            VectorKind.RELATION, vector, limit, of_named, keys, with_payload=False
        ),
        NAMED_RELATIONS_EACH * len(named) * 4,
    )
    turns: dict[str, list[str]] = {key: [] for key in named}
    for key in found:
        for end in relation_pair_of(key):
            mine = turns.get(end)
            if mine is not None and len(mine) < NAMED_RELATIONS_EACH:
                mine.append(key)
    ranked = [key for turn in zip_longest(*turns.values()) for key in turn if key is not None]
    return list(dict.fromkeys(ranked))


# -- chunks -------------------------------------------------------------------------------


@dataclass
class ChunkSearch:
    """The question as a chunk query, dense and lexical, for every chunk lane of one call.

    The lexical query's IDF weights are counted once and reused by every search.
    """

    stores: Stores
    text: str
    vector: Sequence[float]
    scope: Scope
    version: int | None = None  # the index version read: lexical counts are reused in it
    _lexical: SparseVector | None = field(default=None, init=False, repr=False)

    @property
    def lexical(self) -> SparseVector:
        if self._lexical is None:
            self._lexical = self.stores.vectors.lexical_query(
                VectorKind.CHUNK, self.text, as_of=self.version
            )
        return self._lexical

    def dense_hits(self, limit: int, among: Sequence[str] | None = None) -> list[VectorHit]:
        return self.stores.vectors.search(
            VectorKind.CHUNK,
            self.vector,
            limit,
            self.scope.vector_filter(),
            among,
            with_payload=False,
        )

    def lexical_hits(self, limit: int, among: Sequence[str] | None = None) -> list[VectorHit]:
        return self.stores.vectors.search_sparse(
            VectorKind.CHUNK,
            self.lexical,
            limit,
            self.scope.vector_filter(),
            among,
            with_payload=False,
        )

    def relevant(self, candidates: Sequence[str], limit: int) -> list[str]:
        """`candidates` (chunk ids) ranked by relevance to the question: the fusion of a
        dense and a lexical search restricted to them."""
        return self.relevant_each([candidates], limit)[0]

    def relevant_each(self, groups: Sequence[Sequence[str]], limit: int) -> list[list[str]]:
        """Each group of candidates ranked by relevance, from one dense and one lexical
        search over all of them (a group's ranking is its members' order in the whole)."""
        among = list(dict.fromkeys(c for group in groups for c in group))[:MAX_CANDIDATES]
        if not among:
            return [[] for _ in groups]
        depth = min(len(among), limit * len(groups))
        dense = hit_keys(self.dense_hits(depth, among))
        lexical = hit_keys(self.lexical_hits(depth, among))
        ranked = [key for key, _ in fuse([Lane(dense), Lane(lexical)])]
        members = [set(group) for group in groups]
        return [[key for key in ranked if key in group][:limit] for group in members]

    def bridge(self, seeds: Sequence[str], limit: int) -> list[str]:
        """Chunks one entity away from `seeds` (the best chunks so far), by relevance."""
        if not seeds:
            return []
        vectors = self.stores.vectors
        points = vectors.payloads(VectorKind.CHUNK, keys=seeds[:BRIDGE_SEEDS])
        # In scope: the seeds are, and an entity an in-scope chunk mentions is.
        mentioned = {key for p in points.values() for key in _strings(p.get(MENTIONED_ENTITIES))}
        if not mentioned:
            return []
        hits = vectors.search(
            VectorKind.ENTITY, self.vector, BRIDGE_ENTITIES, None, mentioned, with_payload=False
        )
        cited = self.stores.graph.chunk_ids_of_few(hit_keys(hits), BRIDGE_MAX_CITED)
        candidates = [chunk for hit in hits for chunk in cited.get(hit.key, ())]
        # The seeds stay among the candidates: the lane is a ranking to fuse, and leaving
        # out the best chunks would push them down the fused list.
        return self.relevant(candidates, limit)


def cited_chunks(records: Iterable[EntityRecord | RelationRecord], prefer: set[str]) -> list[str]:
    """The chunk ids the records cite, at most `CITED_PER_ITEM` per record: those in
    `prefer` (chunks the question's own searches found) first, then in stored order."""
    chosen: list[str] = []
    for record in records:
        ids: Sequence[str] = record.source_chunk_ids
        if len(ids) > CITED_PER_ITEM:
            ids = sorted(ids, key=lambda chunk_id: chunk_id not in prefer)[:CITED_PER_ITEM]
        chosen.extend(ids)
    return list(dict.fromkeys(chosen))


def fetch_chunks(
    stores: Stores, ranked: Sequence[tuple[str, float]], scope: Scope
) -> list[RetrievedChunk]:
    """Chunk records for ranked ids, in order, with their scores; out of scope dropped."""
    chunks = stores.graph.get_chunks(chunk_id for chunk_id, _ in ranked)
    return [
        _retrieved(chunks[chunk_id], score)
        for chunk_id, score in ranked
        if chunk_id in chunks and scope.admits_chunk(chunks[chunk_id])
    ]


def _retrieved(chunk: Chunk, score: float) -> RetrievedChunk:
    return RetrievedChunk(
        chunk_id=chunk.chunk_id,
        doc_id=chunk.doc_id,
        file_path=chunk.file_path,
        text=chunk.text,
        score=score,
    )
