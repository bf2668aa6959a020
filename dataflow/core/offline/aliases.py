"""Short forms of names resolved to their full form, for the offline extractor.

Within one chunk (a whole chat log or passage when it fits in one), a bare
surname or given name ("Turing", "Alan", "Zorbania") of exactly one full
person name or person-shaped name ("Alan Turing", "Zorbania Quillfeather"), a
bare company or programme name ("Acme") next to its full form ("Acme Corp"),
and an event named without its year next to the one dated form resolve to the
full name; an ambiguous one ("Curie" with Marie and Pierre Curie) stays as
written. A recurring bare surname used as a person's ("Hale trained as"), or
in a chat log a bare given name ("Zorbania said"), also proves its full name is
a person's.
"""

from __future__ import annotations

from dataflow.core.naming import entity_key
from dataflow.core.offline.lexicon import SHORTENABLE_TAILS
from dataflow.core.offline.mentions import Mention
from dataflow.core.offline.types import CATEGORY, EVENT, ORGANIZATION, PERSON, is_year


def resolve_aliases(
    mentions: list[Mention], transcript: bool = False
) -> tuple[dict[str, str], set[str]]:
    """Map a bare surname, given name, company name or undated event to the one full
    name it shortens; also return the person-shaped names that a recurring bare
    surname, used as a person's ("Hale trained as"), proves to be people. In a
    `transcript` a bare given name used so ("Zorbania said") is proof too; in prose
    it is not, because "Riverside expanded" is said of cafes as well."""
    best: dict[str, Mention] = {}
    for mention in mentions:
        key = mention.key
        kept = best.get(key)
        if kept is None or mention.confidence > kept.confidence:
            best[key] = mention
    by_given: dict[str, set[str]] = {}
    by_surname: dict[str, set[str]] = {}
    by_company: dict[str, set[str]] = {}
    by_undated: dict[str, set[str]] = {}
    for key, mention in best.items():
        words = mention.words
        if len(words) < 2:
            continue
        if mention.type == PERSON or mention.person_shaped:
            by_surname.setdefault(words[-1].lower(), set()).add(key)
            by_given.setdefault(words[0].lower(), set()).add(key)
        elif mention.type in (ORGANIZATION, CATEGORY) and all(
            w.lower() in SHORTENABLE_TAILS for w in words[1:]
        ):
            by_company.setdefault(words[0].lower(), set()).add(key)
        elif mention.type == EVENT and is_year(words[0]):
            by_undated.setdefault(entity_key(" ".join(words[1:])), set()).add(key)
    cued = {mention.key for mention in mentions if mention.person_cue}
    aliases: dict[str, str] = {}
    promoted: set[str] = set()
    for key, mention in best.items():
        if mention.type == EVENT and len(by_undated.get(key, ())) == 1:
            aliases[key] = next(iter(by_undated[key]))  # "Kesh Valley Flood" -> dated form
            continue
        if (
            len(mention.words) != 1
            or (mention.confidence >= 2 and mention.type != PERSON)
            or mention.words[0][-1] == "."
        ):
            continue  # "Brenner, who ..." is still Nadia Brenner; "Berlin" stays Berlin
        surnamed = by_surname.get(key)
        given = by_given.get(key)
        targets = surnamed or given or by_company.get(key) or set()
        if len(targets) == 1:
            target = next(iter(targets))
            aliases[key] = target
            if (surnamed or (given and transcript)) and key in cued and best[target].type != PERSON:
                promoted.add(target)  # "Imogen Hale ... Hale trained as an engineer"
    return aliases, promoted
