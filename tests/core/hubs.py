"""A hub's fragments as the scale bench's corpus makes them, for the snapshot tests."""

import hashlib

from dataflow.core.contributions import EntityFragment


def hub_fragments(chunks: int) -> dict[str, EntityFragment]:
    """Two fragments of "david melwood" per citing chunk, its own and a mention (`C|other`):
    chunk ids are sha256 hex, and the descriptions are drawn from the phrases the chunks
    share."""
    fragments = {}
    for n in range(chunks):
        chunk_id = "chunk-" + hashlib.sha256(str(n).encode()).hexdigest()
        path = f"news/{2000 + n % 20}/report-{n}.md"
        place = ("Lind", "Elskholm", "Dray")[n % 3]
        said = f"David Melwood spoke for Silverline Labs at the forum in {place}."
        fragments[chunk_id] = EntityFragment("David Melwood", "person", said, chunk_id, path, path)
        met = f"David Melwood met the delegates from {place}."
        mention = EntityFragment("David Melwood", None, met, chunk_id, path, path)
        fragments[f"{chunk_id}|{place.lower()}"] = mention
    return fragments
