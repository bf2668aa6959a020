import json
from pathlib import Path

import pytest

from kgstream.cli import main
from kgstream.settings import Settings, SettingsError, load_settings


def test_defaults_are_lightrag_chunking_and_embedded_stores():
    settings = load_settings({})
    assert settings.chunking_options().chunk_token_size == 1200
    assert settings.chunking_options().chunk_overlap_tokens == 100
    assert settings.redis_url is None and settings.qdrant_url is None
    assert settings.llm_base_url is None


def test_no_summary_waits_for_a_coalescing_window_unless_one_is_set():
    # A held render stalls the dataflow's input until it is released, and the window saved
    # no LLM call in the measured workloads (docs/decisions/0025-no-summary-window-by-default.md).
    assert load_settings({}).summary_coalesce_seconds == 0
    windowed = load_settings({}, None, {"summary_coalesce_seconds": 0.5})
    assert windowed.summary_coalesce_seconds == 0.5


def test_environment_overrides_toml_and_flags_override_environment(tmp_path: Path):
    toml = tmp_path / "kg.toml"
    toml.write_text('chunk_token_size = 500\nworkspace = "from-toml"\nentity_types = ["person"]\n')
    env = {"KGSTREAM_WORKSPACE": "from-env", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    settings = load_settings(env, toml, {"data_dir": Path("/tmp/x"), "chunk_overlap_tokens": None})
    assert settings.chunk_token_size == 500
    assert settings.workspace == "from-env"
    assert settings.entity_types == ("person",)
    assert settings.llm_base_url == "http://127.0.0.1:9/v1"
    assert settings.data_dir == Path("/tmp/x")


def test_bad_values_name_the_setting():
    with pytest.raises(SettingsError, match="KGSTREAM_CHUNK_TOKEN_SIZE"):
        load_settings({"KGSTREAM_CHUNK_TOKEN_SIZE": "many"})
    with pytest.raises(SettingsError, match="chunk_overlap_tokens"):
        load_settings({"KGSTREAM_CHUNK_TOKEN_SIZE": "100", "KGSTREAM_CHUNK_OVERLAP_TOKENS": "100"})


def test_unknown_toml_key_is_an_error_listing_known_keys(tmp_path: Path):
    toml = tmp_path / "kg.toml"
    toml.write_text("chunk_size = 5\n")
    with pytest.raises(SettingsError, match=r"unknown setting 'chunk_size'.*chunk_token_size"):
        load_settings({}, toml)


def test_config_command_masks_secrets(capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-verysecretkey1234")
    assert main(["config"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["llm_api_key"] == "****1234"
    assert Settings().workspace == shown["workspace"]


def test_bad_setting_prints_one_line_and_a_hint(capsys, monkeypatch):
    monkeypatch.setenv("KGSTREAM_LLM_MAX_CONCURRENCY", "lots")
    assert main(["config"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[0].startswith("kgstream: ") and err[1].startswith("hint:")


def test_no_command_prints_help(capsys):
    assert main([]) == 0
    assert "usage: kgstream" in capsys.readouterr().out


def test_long_text_embedding_mode_is_checked():
    assert (
        load_settings({"KGSTREAM_EMBEDDING_LONG_TEXT": "truncate"}).embedding_long_text
        == "truncate"
    )
    with pytest.raises(SettingsError, match="embedding_long_text"):
        load_settings({"KGSTREAM_EMBEDDING_LONG_TEXT": "average"})


def test_embedding_threads_default_to_the_cores_and_reach_the_model():
    from connectors.embeddings import local
    from kgstream.assembly import model_embedder

    assert local.automatic_threads(cores=6) == local.MAX_AUTOMATIC_THREADS
    assert local.automatic_threads(cores=2) == 2
    assert local.automatic_threads(cores=0) == 1
    assert load_settings({}).embedding_threads == 0
    automatic = model_embedder(load_settings({}))
    one = model_embedder(load_settings({"KGSTREAM_EMBEDDING_THREADS": "1"}))
    assert isinstance(automatic, local.LocalMiniLMEmbedder)
    assert isinstance(one, local.LocalMiniLMEmbedder)
    assert (automatic.options.threads, one.options.threads) == (local.automatic_threads(), 1)
    with pytest.raises(SettingsError, match="embedding_threads"):
        load_settings({"KGSTREAM_EMBEDDING_THREADS": "-1"})


def test_the_local_model_is_quantized_unless_set_off():
    from connectors.embeddings import local
    from connectors.embeddings.base import embedding_space_name
    from kgstream.assembly import model_embedder

    default = model_embedder(load_settings({}))
    shipped = model_embedder(load_settings({"KGSTREAM_EMBEDDING_QUANTIZED": "false"}))
    assert isinstance(default, local.LocalMiniLMEmbedder)
    assert isinstance(shipped, local.LocalMiniLMEmbedder)
    assert (default.options.quantized, shipped.options.quantized) == (True, False)
    # Two vector spaces: an index made by one is never searched with the other's vectors.
    assert embedding_space_name(default) == "all-minilm-l6-v2-int8-dynamic-384"
    assert embedding_space_name(shipped) == "all-minilm-l6-v2-384"
    with pytest.raises(SettingsError, match="embedding_quantized"):
        load_settings({"KGSTREAM_EMBEDDING_QUANTIZED": "maybe"})


def test_retrievals_are_bounded_beside_the_indexer_unless_set():
    from kgstream.assembly import engine_options

    unset = load_settings({})
    assert engine_options(unset, beside_indexer=True).max_concurrent_retrievals == 1
    assert engine_options(unset, beside_indexer=False).max_concurrent_retrievals == 0
    four = load_settings({"KGSTREAM_MAX_CONCURRENT_RETRIEVALS": "4"})
    assert engine_options(four, beside_indexer=True).max_concurrent_retrievals == 4
    unbounded = load_settings({"KGSTREAM_MAX_CONCURRENT_RETRIEVALS": "0"})
    assert engine_options(unbounded, beside_indexer=True).max_concurrent_retrievals == 0
    with pytest.raises(SettingsError, match="max_concurrent_retrievals"):
        load_settings({"KGSTREAM_MAX_CONCURRENT_RETRIEVALS": "-1"})


def test_the_dead_letter_topic_is_a_setting_shown_by_config(capsys, monkeypatch):
    assert load_settings({}).dlq_topic is None
    assert load_settings({"KGSTREAM_DLQ_TOPIC": "docs.dead"}).dlq_topic == "docs.dead"
    with pytest.raises(SettingsError, match="dlq_topic must be a topic other than kafka_topic"):
        load_settings({"KGSTREAM_DLQ_TOPIC": "kgstream.documents"})
    monkeypatch.setenv("KGSTREAM_DLQ_TOPIC", "docs.dead")
    assert main(["config"]) == 0
    assert json.loads(capsys.readouterr().out)["dlq_topic"] == "docs.dead"


def test_any_setting_can_come_from_a_file_named_by_its_FILE_variable(tmp_path: Path):
    (tmp_path / "token").write_text("s3cret-token\n")  # one trailing newline is dropped
    (tmp_path / "key").write_text("sk-from-a-file")
    (tmp_path / "size").write_text("800\n")
    settings = load_settings(
        {
            "KGSTREAM_GRPC_AUTH_TOKEN_FILE": str(tmp_path / "token"),
            "OPENAI_API_KEY_FILE": str(tmp_path / "key"),
            "KGSTREAM_CHUNK_TOKEN_SIZE_FILE": str(tmp_path / "size"),
        }
    )
    assert settings.grpc_auth_token == "s3cret-token"
    assert settings.llm_api_key == "sk-from-a-file"
    assert settings.chunk_token_size == 800
    both = {"KGSTREAM_GRPC_AUTH_TOKEN": "a", "KGSTREAM_GRPC_AUTH_TOKEN_FILE": str(tmp_path)}
    with pytest.raises(SettingsError, match="set KGSTREAM_GRPC_AUTH_TOKEN or KGSTREAM_GRPC_A"):
        load_settings(both)
    with pytest.raises(SettingsError, match="KGSTREAM_REDIS_PASSWORD_FILE: cannot read"):
        load_settings({"KGSTREAM_REDIS_PASSWORD_FILE": str(tmp_path / "missing")})


@pytest.mark.services
def test_a_redis_password_joins_the_url_escaped_and_reaches_a_real_server(tmp_path: Path):
    from connectors.redis.graph_store import GraphStore
    from tests.support.redis import RedisTestServer

    password = "p@ss:w/rd %"
    (tmp_path / "redis_password").write_text(password + "\n")
    with RedisTestServer(password=password) as server:
        settings = load_settings(
            {
                "KGSTREAM_REDIS_URL": f"redis://127.0.0.1:{server.port}/0",
                "KGSTREAM_REDIS_PASSWORD_FILE": str(tmp_path / "redis_password"),
            }
        )
        assert settings.masked()["redis_password"] == "****" + password[-4:]
        url = settings.redis_connection_url()
        assert url == f"redis://:p%40ss%3Aw%2Frd%20%25@127.0.0.1:{server.port}/0"
        graph = GraphStore.from_url(url)
        try:
            assert graph.version() == 0  # authenticated: an unauthenticated call is refused
        finally:
            graph.close()
    with pytest.raises(SettingsError, match="redis_url holds a password already"):
        load_settings({"KGSTREAM_REDIS_URL": "redis://:a@h:1/0", "KGSTREAM_REDIS_PASSWORD": "b"})
