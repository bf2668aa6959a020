"""TLS on the gateway: a self-signed certificate made with `openssl req` at test time, the
server started with it, clients over the real wire through grpc.ssl_channel_credentials."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gateway.engine import QueryEngine
from gateway.server import RunningServer, ServerOptions, serve
from kgstream.cli import main
from kgstream.settings import Settings, SettingsError
from kgstream_protos.v1 import query_pb2 as pb
from kgstream_protos.v1 import query_pb2_grpc
from tests.gateway.corpus import Corpus
from tests.gateway.test_server import QUESTION, new_engine, status_of

TOKEN = "tls-test-token"


def self_signed(folder: Path, name: str) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost, and its key (PEM), made by openssl."""
    cert, key = folder / f"{name}.crt", folder / f"{name}.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    folder = tmp_path_factory.mktemp("tls")
    return {name: self_signed(folder, name) for name in ("gateway", "stranger")}


@pytest.fixture
def tls_gateway(
    corpus: Corpus, certificates: dict[str, tuple[Path, Path]]
) -> Iterator[RunningServer]:
    cert, key = certificates["gateway"]
    options = ServerOptions(
        address="127.0.0.1:0", auth_token=TOKEN, tls_cert_path=cert, tls_key_path=key
    )
    engine: QueryEngine = new_engine(corpus, None)
    running = serve(engine, corpus.stores.graph, corpus.stores.control, options)
    yield running
    running.stop(grace=None)


def tls_channel(address: str, root: Path) -> grpc.Channel:
    credentials = grpc.ssl_channel_credentials(root_certificates=root.read_bytes())
    return grpc.secure_channel(address, credentials)


def test_a_tls_gateway_answers_clients_that_trust_its_certificate(
    tls_gateway: RunningServer, certificates: dict[str, tuple[Path, Path]]
) -> None:
    with tls_channel(tls_gateway.address, certificates["gateway"][0]) as channel:
        stub = query_pb2_grpc.KnowledgeGraphStub(channel)
        good = (("authorization", f"Bearer {TOKEN}"),)
        assert stub.Retrieve(pb.QueryRequest(question=QUESTION), metadata=good, timeout=30).entities
        code, _ = status_of(lambda: stub.Retrieve(pb.QueryRequest(question=QUESTION), timeout=30))
        assert code == grpc.StatusCode.UNAUTHENTICATED  # TLS does not replace the token
        health = health_pb2_grpc.HealthStub(channel)
        assert health.Check(health_pb2.HealthCheckRequest(), timeout=10).status == (
            health_pb2.HealthCheckResponse.SERVING
        )


def test_a_tls_gateway_refuses_plaintext_and_clients_trusting_another_certificate(
    tls_gateway: RunningServer, certificates: dict[str, tuple[Path, Path]]
) -> None:
    health_request = health_pb2.HealthCheckRequest()
    with grpc.insecure_channel(tls_gateway.address) as plaintext:
        health = health_pb2_grpc.HealthStub(plaintext)
        code, _ = status_of(lambda: health.Check(health_request, timeout=5))
        assert code == grpc.StatusCode.UNAVAILABLE
    with tls_channel(tls_gateway.address, certificates["stranger"][0]) as untrusting:
        health = health_pb2_grpc.HealthStub(untrusting)
        code, _ = status_of(lambda: health.Check(health_request, timeout=5))
        assert code == grpc.StatusCode.UNAVAILABLE


def test_kgstream_query_reaches_a_tls_gateway_with_the_certificate_setting(
    tls_gateway: RunningServer,
    certificates: dict[str, tuple[Path, Path]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KGSTREAM_GRPC_TLS_CERT_PATH", str(certificates["gateway"][0]))
    monkeypatch.setenv("KGSTREAM_GRPC_TLS_KEY_PATH", str(certificates["gateway"][1]))
    monkeypatch.setenv("KGSTREAM_GRPC_AUTH_TOKEN", TOKEN)
    question = ["query", QUESTION, "--grpc", tls_gateway.address, "--context-only", "--json"]
    assert main(question) == 0
    assert json.loads(capsys.readouterr().out)["entities"]


def test_tls_needs_both_the_certificate_and_the_key(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="tls_cert_path and tls_key_path go together"):
        ServerOptions(tls_cert_path=tmp_path / "a.crt")
    with pytest.raises(SettingsError, match="grpc_tls_cert_path and grpc_tls_key_path"):
        Settings(grpc_tls_key_path=tmp_path / "a.key")


def test_an_unreadable_certificate_fails_the_start_naming_the_setting(
    corpus: Corpus, tmp_path: Path
) -> None:
    options = ServerOptions(
        address="127.0.0.1:0", tls_cert_path=tmp_path / "none.crt", tls_key_path=tmp_path / "k"
    )
    with pytest.raises(OSError, match="cannot read the gateway's tls_cert_path"):
        serve(new_engine(corpus, None), corpus.stores.graph, corpus.stores.control, options)
