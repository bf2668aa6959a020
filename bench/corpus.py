"""A seeded, realistic benchmark corpus: documents about one fictional world.

Why not lorem ipsum or random words: indexing cost depends on what the extractor
finds (entities per chunk, relations per sentence, how many chunks share an
entity), so benchmark text must read like the documents kgstream is for. The
world here has people (with roles, employers and home towns), organisations,
places and events; documents (news items, profiles, meeting notes, reports,
place guides) mention them in ordinary sentences, with a Zipf-like popularity so
a few entities appear in hundreds of documents and most in a handful, as in a
real knowledge base. Names are invented, so nothing depends on a gazetteer, but
they carry the cues real names carry ("Greyholt Institute", "Port Aldmere",
"the 2021 Kesh Valley Flood", "Dr. Ilse Varga").

Everything is a pure function of the seed: the same seed gives the same world
and the same bytes on every machine and Python version (only `random.Random`
with explicit seeds, no hash ordering).

Use from another script (with the repository root on ``sys.path``)::

    from bench.corpus import build_world, generate_corpus, revise_document, write_corpus

    docs = generate_corpus(1000, seed=7)          # {relative path: text}
    write_corpus(folder, 1000, seed=7)            # the same, written as files
    world = build_world(7)                        # names, to ask questions about
    edited = revise_document(docs[path], seed=1)  # a realistic edit of one document
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

DEFAULT_SEED = 7
DEFAULT_DOCUMENTS = 1000
MIN_WORDS = 150
MAX_WORDS = 400


@dataclass(frozen=True)
class WorldSizes:
    """How many entities of each kind the world holds."""

    people: int = 300
    organisations: int = 150
    places: int = 100
    events: int = 60

    def __post_init__(self) -> None:
        for name in ("people", "organisations", "places", "events"):
            value = getattr(self, name)
            if not 2 <= value <= 2000:
                raise ValueError(f"WorldSizes.{name} must be between 2 and 2000; got {value}")


@dataclass(frozen=True)
class Person:
    name: str
    surname: str
    pronoun: str  # "he" or "she"
    occupation: str
    employer: str  # an organisation name
    home: str  # a place name


@dataclass(frozen=True)
class Organisation:
    name: str
    sector: str
    headquarters: str  # a place name


@dataclass(frozen=True)
class Place:
    name: str
    kind: str  # "town", "city", "valley", ... (how a guide would describe it)


@dataclass(frozen=True)
class Event:
    name: str  # without a leading article: "2021 Kesh Valley Flood"
    year: int
    place: str


@dataclass(frozen=True)
class World:
    """The fictional world a corpus is written about; every name is unique."""

    seed: int
    people: tuple[Person, ...]
    organisations: tuple[Organisation, ...]
    places: tuple[Place, ...]
    events: tuple[Event, ...]

    def entity_names(self) -> tuple[str, ...]:
        """Every entity name, people first (a query benchmark picks from these)."""
        return (
            *(p.name for p in self.people),
            *(o.name for o in self.organisations),
            *(p.name for p in self.places),
            *(e.name for e in self.events),
        )


# -- vocabulary ----------------------------------------------------------------


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_GIVEN_FEMALE = _words(
    "Ada Alice Amara Ana Anna Clara Elin Emma Grace Hannah Ines Irena Julia Leila Lena Lucia "
    "Maria Marta Mirela Nadia Noor Odile Priya Rachel Ruth Sara Sofia Thea Vera Yara Zofia"
)
_GIVEN_MALE = _words(
    "Adam Anton Bram Carlos Daniel David Emil Felix Hugo Idris Ivan Jonas Kofi Luca Marek "
    "Mateo Nikolai Oskar Paul Peter Rafael Samuel Soren Teodor Tomasz Victor Walter Yusuf"
)
_SURNAME_HEADS = _words(
    "Var Sor Cad Mel Tor Brey Ost Kal Dun Fen Hal Ith Lor Mar Nov Pel Quin Rav Sel Tam Ul "
    "Vel Wyn Yar Zel Ash Bell Cor Drum Elm"
)
_SURNAME_TAILS = _words("ga vik dick ston ard ley mont sen ova quist ridge wood ez ini holm berg")
_OCCUPATIONS = _words(
    "engineer economist researcher journalist architect lawyer planner analyst historian "
    "chemist consultant surveyor designer teacher diplomat biologist"
)
_ORG_STEMS = _words(
    "Northwind Greyholt Vantor Ashcombe Brightwater Calder Dunmore Eastvale Fairhaven "
    "Glenrock Harrow Ironbridge Juniper Kestrel Larkspur Meridian Norland Oakridge Pinecrest "
    "Redfern Silverline Thornbury Umber Vesper Westmark Yarrow Zenith Alder Beacon Cobalt "
    "Driftwood Ember Foxglove Granite Heron Islay Jasper Kingsley Lumen Marlow"
)
_ORG_FORMS = (
    ("Labs", "research"),
    ("Institute", "research"),
    ("Energy", "energy"),
    ("Foundation", "philanthropy"),
    ("Corp", "manufacturing"),
    ("Ltd", "engineering"),
    ("Group", "construction"),
    ("Bank", "finance"),
    ("Holdings", "finance"),
    ("Software", "software"),
    ("Cooperative", "agriculture"),
    ("Trust", "conservation"),
    ("Media", "publishing"),
    ("Systems", "software"),
    ("Partners", "consulting"),
    ("Society", "heritage"),
)
_PLACE_STEMS = _words(
    "Aldmere Kesh Tarn Corran Ardle Brack Vellin Osk Morrow Hightor Sable Wren Lind Caul "
    "Dray Elsk Fallow Gorse Hollin Ivel Jura Kelda Lorne Mirrin Nesk Orrin Pell Quarrow "
    "Rusk Skerry Tolla Ulm Varra Wick Yelland Zorn Brennock Cairnby Dunhollow Essary"
)
_PLACE_FORMS = (
    ("Port {}", "port town"),
    ("{} Valley", "valley"),
    ("Lake {}", "lake"),
    ("River {}", "river"),
    ("{} Bay", "bay"),
    ("{} City", "city"),
    ("{} Island", "island"),
    ("Mount {}", "mountain"),
    ("{}", "town"),
    ("{}ford", "market town"),
    ("{}holm", "village"),
)
_EVENT_FORMS = (
    "{place} Climate Summit",
    "{year} {place} Flood",
    "{stem} Music Festival",
    "{place} Marathon",
    "{stem} Energy Forum",
    "{year} {place} Drought",
    "{place} Trade Expo",
    "{stem} Rail Strike",
    "{place} Science Symposium",
    "{year} {place} Referendum",
    "{place} Harvest Festival",
    "{year} {place} Blackout",
)
_TOPICS = (
    "water quality",
    "battery storage",
    "rail freight",
    "flood defences",
    "grid upgrades",
    "housing costs",
    "river restoration",
    "school meals",
    "wind power",
    "soil health",
    "public transport",
    "heat pumps",
    "coastal erosion",
    "data sharing",
    "local jobs",
    "air pollution",
)
_MONTHS = _words(
    "January February March April May June July August September October November December"
)

# Sentence templates. Slots: person/person2 (full names), surname (of person),
# pronoun (of person, capitalised at sentence start), a_occupation ("an engineer"), org/org2,
# place/place2, event, topic, year, month, number.
_TEMPLATES = (
    "{person}, {a_occupation} at {org}, said the plan for {topic} would take two years.",
    "{org} is based in {place}, where it employs about {number} people.",
    "{person} joined {org} in {year} after six years at {org2}.",
    "The {event} drew delegates from {place} and {place2}.",
    "At the {event}, {person} presented new findings on {topic}.",
    "{org} and {org2} signed an agreement on {topic} in {place}.",
    "Dr. {person} leads the {topic} team at {org}.",
    "{person} met {person2} in {place} to discuss {topic}.",
    "Residents of {place} raised concerns about {topic} at a public meeting.",
    "{org} opened a new office in {place} in {month} {year}.",
    "The work is funded by {org} and led by {person}.",
    "{surname} said the early results were encouraging.",
    "{pronoun} told reporters that {org} would publish the data in {month}.",
    "{person} and {person2} wrote the report for {org}.",
    "After the {event}, {org} pledged {number} thousand euros for {topic} in {place}.",
    "{person}, who grew up in {place}, now advises {org} on {topic}.",
    "Officials in {place} said the {event} had cost the region dearly.",
    "{org} hired {person} as head of {topic} last {month}.",
    "{person} chaired the panel on {topic} at the {event}.",
    "A study by {org} found that {topic} in {place} improved over the year.",
)
_FILLER = (
    "The committee will review the budget again in the autumn.",
    "Costs rose by {number} percent over the period, mostly because of materials.",
    "Several questions about the timetable remain open.",
    "The figures will be updated once the final survey is complete.",
    "Volunteers collected samples every week during the summer.",
    "Critics argue that the targets are too modest.",
    "A second phase is planned if funding allows.",
    "The full minutes are available on request.",
    "Most of the work happened outside normal office hours.",
    "Nobody expected the response to be so strong.",
    "The old equipment will be recycled rather than sold.",
    "Attendance was higher than in any previous year.",
)
_SLOT = re.compile(r"\{(\w+)\}")
T = TypeVar("T")


# -- the world -----------------------------------------------------------------


def build_world(seed: int = DEFAULT_SEED, sizes: WorldSizes | None = None) -> World:
    """The fictional world for `seed`: unique names, each entity tied to others."""
    sizes = sizes or WorldSizes()
    rng = random.Random(f"kgstream-world-{seed}")
    places = _unique(
        sizes.places,
        lambda: _place(rng),
        key=lambda place: place.name,
    )
    place_names = [p.name for p in places]
    organisations = _unique(
        sizes.organisations,
        lambda: _organisation(rng, place_names),
        key=lambda org: org.name,
    )
    org_names = [o.name for o in organisations]
    people = _unique(
        sizes.people,
        lambda: _person(rng, org_names, place_names),
        key=lambda person: person.name,
    )
    events = _unique(
        sizes.events,
        lambda: _event(rng, places),
        key=lambda event: event.name,
    )
    return World(seed, tuple(people), tuple(organisations), tuple(places), tuple(events))


def _unique(count: int, make: Callable[[], T], key: Callable[[T], str]) -> list[T]:
    """`count` items from `make` with distinct `key`s (the vocabularies allow thousands)."""
    items: dict[str, T] = {}
    attempts = 0
    while len(items) < count:
        attempts += 1
        if attempts > count * 200:
            raise ValueError(
                f"could not make {count} distinct names from the vocabulary; "
                "ask for fewer (WorldSizes) or extend the word lists in bench/corpus.py"
            )
        item = make()
        items.setdefault(key(item), item)
    return list(items.values())


def _place(rng: random.Random) -> Place:
    form, kind = rng.choice(_PLACE_FORMS)
    return Place(form.format(rng.choice(_PLACE_STEMS)), kind)


def _place_stem(name: str) -> str:
    """The distinctive word of a place name: "Aldmere" of "Port Aldmere" or "Aldmere Valley"."""
    words = name.split()
    return words[-1] if words[0] in ("Port", "Lake", "River", "Mount") else words[0]


def _organisation(rng: random.Random, places: list[str]) -> Organisation:
    headquarters = rng.choice(places)
    if rng.random() < 0.08:
        return Organisation(f"University of {_place_stem(headquarters)}", "education", headquarters)
    suffix, sector = rng.choice(_ORG_FORMS)
    return Organisation(f"{rng.choice(_ORG_STEMS)} {suffix}", sector, headquarters)


def _person(rng: random.Random, orgs: list[str], places: list[str]) -> Person:
    female = rng.random() < 0.5
    given = rng.choice(_GIVEN_FEMALE if female else _GIVEN_MALE)
    surname = rng.choice(_SURNAME_HEADS) + rng.choice(_SURNAME_TAILS)
    return Person(
        name=f"{given} {surname}",
        surname=surname,
        pronoun="she" if female else "he",
        occupation=rng.choice(_OCCUPATIONS),
        employer=rng.choice(orgs),
        home=rng.choice(places),
    )


def _event(rng: random.Random, places: Sequence[Place]) -> Event:
    place = rng.choice(places)
    year = rng.randint(2015, 2025)
    name = rng.choice(_EVENT_FORMS).format(
        place=place.name, stem=_place_stem(place.name), year=year
    )
    return Event(name, year, place.name)


# -- documents -----------------------------------------------------------------


def _zipf_weights(count: int, exponent: float = 0.9) -> list[float]:
    return [1.0 / (rank**exponent) for rank in range(1, count + 1)]


@dataclass(frozen=True)
class _Cast:
    """The entities one paragraph may mention."""

    people: list[Person]
    organisations: list[Organisation]
    places: list[Place]
    events: list[Event]


class _Writer:
    """Writes documents about a world; all randomness comes from the rng passed in."""

    def __init__(self, world: World) -> None:
        self.world = world
        self._people_w = _zipf_weights(len(world.people))
        self._org_w = _zipf_weights(len(world.organisations))
        self._place_w = _zipf_weights(len(world.places))
        self._event_w = _zipf_weights(len(world.events))
        self._orgs = {o.name: o for o in world.organisations}
        self._places = {p.name: p for p in world.places}

    def cast(self, rng: random.Random) -> _Cast:
        """A few popular-or-not entities, plus those tied to the first person."""
        world = self.world
        people = _distinct(rng.choices(world.people, self._people_w, k=rng.randint(2, 4)))
        orgs = [self._orgs[people[0].employer]]
        orgs += rng.choices(world.organisations, self._org_w, k=rng.randint(1, 2))
        places = [self._places[people[0].home]]
        places += rng.choices(world.places, self._place_w, k=rng.randint(1, 2))
        events = rng.choices(world.events, self._event_w, k=rng.randint(1, 2))
        return _Cast(people, _distinct(orgs), _distinct(places), _distinct(events))

    def sentence(
        self, rng: random.Random, cast: _Cast, used: set[str], filler_share: float = 0.3
    ) -> str:
        """One sentence whose template `used` does not hold yet (so a document does not
        repeat itself until every template has been used once)."""
        filler = rng.random() < filler_share
        template = _pick_unused(rng, _FILLER if filler else _TEMPLATES, used)
        if filler:
            return _fill(template, {"number": str(rng.randint(3, 40))})
        person, person2 = _two(rng, cast.people)
        org, org2 = _two(rng, cast.organisations)
        place, place2 = _two(rng, cast.places)
        values = {
            "person": person.name,
            "person2": person2.name,
            "surname": person.surname,
            "pronoun": person.pronoun.capitalize(),
            "a_occupation": _with_article(person.occupation),
            "org": org.name,
            "org2": org2.name,
            "place": place.name,
            "place2": place2.name,
            "event": rng.choice(cast.events).name,
            "topic": rng.choice(_TOPICS),
            "year": str(rng.randint(2015, 2025)),
            "month": rng.choice(_MONTHS),
            "number": str(rng.randint(20, 900)),
        }
        return _fill(template, values)

    def paragraph(self, rng: random.Random, cast: _Cast, sentences: int, used: set[str]) -> str:
        return " ".join(self.sentence(rng, cast, used) for _ in range(sentences))

    def document(self, rng: random.Random, index: int) -> tuple[str, str]:
        """One document (relative path, text) of MIN_WORDS..MAX_WORDS words."""
        cast = self.cast(rng)
        kind = rng.choices(("news", "profile", "meeting", "report", "guide"), (35, 20, 20, 15, 10))[
            0
        ]
        target = rng.randint(MIN_WORDS, MAX_WORDS)
        lead = cast.people[0]
        if kind == "news":
            event = cast.events[0]
            title = f"{event.name}: {rng.choice(_TOPICS)} in focus"
            path = f"news/{event.year}/{_slug(event.name)}-{index:04d}.md"
            header = [f"# {title}"]
        elif kind == "profile":
            title = f"{lead.name}"
            path = f"people/{_slug(lead.name)}-{index:04d}.md"
            header = [
                f"# {title}",
                f"{lead.name} is {_with_article(lead.occupation)} at {lead.employer}, "
                f"based in {lead.home}.",
            ]
        elif kind == "meeting":
            month = rng.randint(1, 12)
            day = rng.randint(1, 28)
            year = rng.randint(2019, 2025)
            org = cast.organisations[0]
            path = f"meetings/{year}-{month:02d}-{day:02d}-{_slug(org.name)}-{index:04d}.md"
            attendees = [f"- {p.name} ({p.employer})" for p in cast.people]
            header = [
                f"# {org.name} meeting, {day} {_MONTHS[month - 1]} {year}",
                "## Attendees",
                "\n".join(attendees),
                "## Notes",
            ]
        elif kind == "report":
            org = cast.organisations[0]
            topic = rng.choice(_TOPICS)
            path = f"reports/{_slug(org.name)}-{_slug(topic)}-{index:04d}.md"
            header = [f"# {org.name} report on {topic}", "## Summary"]
        else:
            place = cast.places[0]
            path = f"places/{_slug(place.name)}-{index:04d}.txt"
            header = [f"{place.name} is a {self._places[place.name].kind} visitors know well."]
        blocks = list(header)
        used: set[str] = set()
        words = sum(_word_count(block) for block in blocks)
        while True:
            paragraph = self.paragraph(rng, cast, rng.randint(2, 5), used)
            if words + _word_count(paragraph) > MAX_WORDS:
                if words >= MIN_WORDS:
                    break
                continue  # a shorter paragraph will fit
            blocks.append(paragraph)
            words += _word_count(paragraph)
            if words >= target:
                break
        return path, "\n\n".join(blocks) + "\n"


def _distinct(items: list[T]) -> list[T]:
    seen: list[T] = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen


def _two(rng: random.Random, items: list[T]) -> tuple[T, T]:
    if len(items) == 1:
        return items[0], items[0]
    first, second = rng.sample(items, 2)
    return first, second


def _pick_unused(rng: random.Random, templates: Sequence[str], used: set[str]) -> str:
    fresh = [t for t in templates if t not in used]
    if not fresh:
        used.difference_update(templates)
        fresh = list(templates)
    template = rng.choice(fresh)
    used.add(template)
    return template


def _with_article(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def _fill(template: str, values: dict[str, str]) -> str:
    return _SLOT.sub(lambda match: values[match.group(1)], template)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _word_count(text: str) -> int:
    return len(text.split())


def generate_corpus(n_docs: int = DEFAULT_DOCUMENTS, seed: int = DEFAULT_SEED) -> dict[str, str]:
    """`n_docs` documents about `build_world(seed)`: {relative POSIX path: text}.

    The first k documents of a bigger corpus are the k-document corpus (same
    seed), so a smaller run indexes a prefix of the bigger one.
    """
    if n_docs < 0:
        raise ValueError(f"n_docs must be >= 0; got {n_docs}")
    writer = _Writer(build_world(seed))
    corpus: dict[str, str] = {}
    for index in range(n_docs):
        rng = random.Random(f"kgstream-doc-{seed}-{index}")
        path, text = writer.document(rng, index)
        corpus[path] = text
    return corpus


def write_corpus(
    folder: Path, n_docs: int = DEFAULT_DOCUMENTS, seed: int = DEFAULT_SEED
) -> dict[str, str]:
    """Write `generate_corpus(n_docs, seed)` under `folder` (UTF-8) and return it."""
    corpus = generate_corpus(n_docs, seed)
    for relative, text in corpus.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return corpus


def revise_document(text: str, seed: int, world_seed: int = DEFAULT_SEED) -> str:
    """An edit a person would make: the last paragraph rewritten with new sentences.

    Headings and the other paragraphs stay; the result always differs from
    `text` and stays about as long. `world_seed` must be the seed the corpus
    was generated with, so the new sentences are about the same world.
    """
    writer = _Writer(build_world(world_seed))
    rng = random.Random(f"kgstream-revision-{world_seed}-{seed}")
    blocks = text.rstrip("\n").split("\n\n")
    keep = blocks[:-1] if len(blocks) > 1 else blocks
    old_words = _word_count(blocks[-1]) if len(blocks) > 1 else 0
    for _ in range(100):
        cast = writer.cast(rng)
        sentences = max(2, min(5, round(old_words / 14)))
        revised = "\n\n".join([*keep, writer.paragraph(rng, cast, sentences, set())]) + "\n"
        if revised != text:
            return revised
    raise RuntimeError("revise_document could not produce a different text")  # unreachable


def corpus_words(corpus: dict[str, str]) -> int:
    """Total words (whitespace-separated) in a corpus."""
    return sum(_word_count(text) for text in corpus.values())
