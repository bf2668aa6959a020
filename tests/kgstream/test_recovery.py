"""What a user is told about the recovery partitions under `--data` (kgstream/recovery.py):
a data directory made by another kgstream version is refused, untouched, with the commands
that rebuild; and the cluster flags a user can get wrong. The partitions themselves:
tests/dataflow/state/test_partitions.py."""

import pytest

from dataflow.state.partitions import RECOVERY_FORMAT
from kgstream.cli import main
from tests.dataflow.state.test_partitions import files_of, restamped, unstamped


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (unstamped, "without a format version"),
        (lambda directory: restamped(directory, RECOVERY_FORMAT + 1), "in format 2"),
    ],
    ids=["unstamped", "another-format"],
)
def test_kgstream_index_refuses_a_data_directory_of_another_format_and_changes_nothing(
    make, says, tmp_path, llm_server, monkeypatch, capsys
):
    monkeypatch.setenv("KGSTREAM_EMBEDDING_BASE_URL", llm_server.base_url)
    monkeypatch.setenv("KGSTREAM_EMBEDDING_MODEL", "test-embedding-model")
    for name in ("OPENAI_BASE_URL", "KGSTREAM_LLM_BASE_URL", "KGSTREAM_REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    folder, data = tmp_path / "docs", tmp_path / "data"
    folder.mkdir()
    (folder / "a.md").write_text("Alice Moreau founded Northwind Labs in Lisbon.")
    recovery = make(data / "recovery")
    before = files_of(recovery)

    assert main(["index", str(folder), "--data", str(data)]) == 2

    err = capsys.readouterr().err
    assert "made by another kgstream version" in err and says in err
    assert (
        "hint: rebuild the index into a new data directory: `kgstream index DIR --data NEW` "
        "for a folder, or `kgstream replay --kafka HOST:PORT --topic T --data NEW` for a "
        "Kafka topic"
    ) in err
    assert files_of(recovery) == before


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["-i", "0", "-a", "h1:1;h2:2"], "needs one Redis server"),
        (["-a", "h1:1;h2:2"], "--addresses needs --process-id"),
    ],
)
def test_cluster_flags_a_cluster_cannot_run_with_are_refused_before_anything_starts(
    flags, says, tmp_path, capsys, monkeypatch
):
    monkeypatch.delenv("KGSTREAM_REDIS_URL", raising=False)
    args = ["run", "--kafka", "127.0.0.1:1", "--data", str(tmp_path / "data"), "--no-serve"]
    assert main([*args, *flags]) == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


def test_a_process_id_outside_the_addresses_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KGSTREAM_REDIS_URL", "redis://127.0.0.1:1/0")
    args = ["run", "--kafka", "127.0.0.1:1", "--data", str(tmp_path / "data"), "--no-serve"]
    assert main([*args, "-i", "2", "-a", "h1:1;h2:2"]) == 2
    assert "process_id must be an index into the 2 addresses (0 to 1; got 2)" in (
        capsys.readouterr().err
    )
