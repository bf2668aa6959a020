"""The steps' snapshot forms (dataflow/state/forms.py): a document's state and a chunk's
ledger pack to one compressed blob of their values, read back equal and smaller than the
state pickled as an object (the ledger keeps no fragment, so it is a fraction of the
contributions it names); a commit's snapshot is a copy the commit's later messages do not
change; fragments as rows restore equal fragments of their kind."""

import pickle

from hypothesis import given

from dataflow.core.chunking import Chunk
from dataflow.core.commit import DocumentCommit
from dataflow.core.contributions import (
    ChunkContributions,
    ChunkLedger,
    EntityFragment,
    RelationFragment,
    contributions_for_chunk,
)
from dataflow.core.documents import DocumentRecord, DocumentStatus
from dataflow.core.messages import ChunkSettled, DocumentPending, Ticket
from dataflow.core.steps import DocumentState
from dataflow.state.codec import DICTIONARY_SAMPLES, SnapshotCodec, train_dictionary
from dataflow.state.forms import (
    FragmentRows,
    pack_document,
    pack_ledger,
    snapshot_commit,
    unpack_document,
    unpack_ledger,
)
from tests.dataflow.core.test_chunk_ledger import chunk, extractions, realistic_extraction


def document(n: int) -> DocumentState:
    return DocumentState(f"sha256:{n:064x}", f"notes/{n}.md", (f"chunk-{n:064x}",))


def test_a_documents_state_packs_to_less_than_its_pickled_object_and_reads_back_equal():
    """288 bytes as an object; packed with the index's dictionary, half of it."""
    plain = SnapshotCodec()
    states = [document(n) for n in range(DICTIONARY_SAMPLES)]
    dictionary = train_dictionary([plain.raw(pack_document(plain, state)) for state in states])
    assert dictionary is not None
    codec = SnapshotCodec(dictionary)
    state = document(DICTIONARY_SAMPLES + 1)

    objects = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    packed = pickle.dumps(pack_document(codec, state), protocol=pickle.HIGHEST_PROTOCOL)

    assert unpack_document(codec, pickle.loads(packed)) == state
    assert len(packed) * 2 < len(objects), (len(packed), len(objects))


@given(extractions)
def test_a_ledger_round_trips_through_its_packed_snapshot(extraction):
    codec = SnapshotCodec()
    ledger = ChunkLedger.of(contributions_for_chunk(chunk(), extraction))
    restored = unpack_ledger(codec, pickle.loads(pickle.dumps(pack_ledger(codec, ledger))))
    assert restored == ledger
    assert hash(restored) == hash(ledger)


def packed_contributions(state: ChunkContributions, codec: SnapshotCodec) -> bytes:
    """The whole contributions of a chunk as one packed blob of rows, as a snapshot of them
    would be."""

    def row(c):
        return c.key, c.contribution_id, tuple(vars(c.fragment).values())

    rows = (state.chunk_id, tuple(map(row, state.entities)), tuple(map(row, state.relations)))
    return pickle.dumps(codec.pack(rows), protocol=pickle.HIGHEST_PROTOCOL)


def test_a_ledger_packs_to_a_fraction_of_the_contributions():
    """Pickled as objects, every fragment repeats its class and field names; packed, the
    rows compress (6x on the 16,000-document index's chunks); the ledger keeps no fragment
    (29.2 MB of packed contributions against 6.8 MB of ledgers there)."""
    codec = SnapshotCodec()
    state = contributions_for_chunk(chunk(), realistic_extraction())

    ledger = len(pickle.dumps(pack_ledger(codec, ChunkLedger.of(state))))
    packed = len(packed_contributions(state, codec))
    objects = len(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))

    assert packed * 4 < objects, (packed, objects)
    assert ledger * 2 < packed, (ledger, packed)


OLD = Chunk("chunk-old", "a.md", 0, "old paragraph", 2, "a.md")
KEPT = Chunk("chunk-kept", "a.md", 1, "unchanged paragraph", 3, "a.md")


def test_a_commits_snapshot_does_not_change_when_the_commit_goes_on():
    ticket = Ticket("a.md", "v1")
    ids = (OLD.chunk_id, KEPT.chunk_id)
    record = DocumentRecord("a.md", DocumentStatus.PROCESSED, "a.md", "v1", ids)
    commit = DocumentCommit()
    commit.add(DocumentPending(ticket, record, (OLD, KEPT), (), ids, 1.0))

    snapshot = snapshot_commit(commit)
    commit.add(ChunkSettled(ticket, OLD.chunk_id, 0, (1.0, 0.0), OLD))
    commit.add(ChunkSettled(ticket, KEPT.chunk_id, 0, (1.0, 0.0), KEPT))

    assert commit.versions == {}
    assert snapshot.versions["v1"].settled == {}
    assert not snapshot.current_done and snapshot.chunks == {"chunk-old": OLD, "chunk-kept": KEPT}
    assert pickle.loads(pickle.dumps(snapshot)) == snapshot


@given(extractions)
def test_fragment_rows_pickle_and_restore_equal_fragments_of_their_kind(extraction):
    contributions = contributions_for_chunk(chunk(), extraction)
    for kind, found in (
        (EntityFragment, contributions.entities),
        (RelationFragment, contributions.relations),
    ):
        state = {c.contribution_id + repr(c.key): c.fragment for c in found}
        if not state:
            continue
        restored = pickle.loads(pickle.dumps(FragmentRows.of(state))).restore()
        assert restored == state
        assert all(type(fragment) is kind for fragment in restored.values())
        assert {hash(f) for f in restored.values()} == {hash(f) for f in state.values()}
