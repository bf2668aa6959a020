"""Real Qdrant servers for tests: one server, and a cluster of peers.

Register with ``pytest_plugins = ["tests.support.qdrant"]`` in tests/conftest.py.

No registry ships a Qdrant server, so the binary is found in one place, `qdrant_binary`:
``KGSTREAM_QDRANT_BINARY``, else ``shared/bin/qdrant`` in a directory above the repository
(where the project's shared folder keeps one built from Qdrant's source), else ``qdrant``
on PATH. Without one the tests that need it fail, saying where it was looked for: a
missing server is a broken set-up, not a reason to test less.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType

import httpx
import pytest
from qdrant_client import QdrantClient

from connectors.vectors.base import workspace_collection_prefix
from tests.support.ports import free_ports
from tests.support.wait import wait_until

BINARY_VARIABLE = "KGSTREAM_QDRANT_BINARY"
REPOSITORY = Path(__file__).resolve().parents[2]


class QdrantBinaryNotFound(RuntimeError):
    """No Qdrant server binary where `qdrant_binary` looks."""


def qdrant_binary(environ: Mapping[str, str] | None = None, repository: Path = REPOSITORY) -> str:
    """The Qdrant server to run: $KGSTREAM_QDRANT_BINARY, else shared/bin/qdrant in the
    nearest directory above `repository` that has one, else `qdrant` on PATH."""
    environ = os.environ if environ is None else environ
    named = environ.get(BINARY_VARIABLE)
    if named:
        if not (os.path.isfile(named) and os.access(named, os.X_OK)):
            raise QdrantBinaryNotFound(
                f"{BINARY_VARIABLE}={named!r} is not an executable file: point it at a Qdrant "
                "server binary (qdrant, version 1.18 or later)"
            )
        return named
    looked = []
    for directory in repository.parents:
        candidate = directory / "shared" / "bin" / "qdrant"
        looked.append(str(candidate))
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    on_path = shutil.which("qdrant", path=environ.get("PATH"))
    if on_path:
        return on_path
    raise QdrantBinaryNotFound(
        "no Qdrant server binary found: the tests run a real Qdrant server. Looked for "
        f"${BINARY_VARIABLE} (unset), then {', '.join(looked)}, then `qdrant` on PATH. "
        f"Set {BINARY_VARIABLE} to the path of a Qdrant server binary (version 1.18 or later)"
    )


class QdrantTestServer:
    """A Qdrant server on free 127.0.0.1 ports with its own storage under `directory`.

    `stop(kill=True)` ends it with SIGKILL, as a crash; `start()` again restarts it on the
    same ports and storage, which it recovers from its write-ahead log. With `bootstrap`
    (another peer's p2p URL) or `cluster=True` it runs as a peer of a distributed
    deployment.
    """

    def __init__(
        self,
        directory: Path,
        *,
        cluster: bool = False,
        bootstrap: str | None = None,
        start_timeout_seconds: float = 60.0,
    ):
        self.executable = qdrant_binary()
        self.directory = directory
        self.cluster = cluster or bootstrap is not None
        self.bootstrap = bootstrap
        self.start_timeout_seconds = start_timeout_seconds
        self.http_port, self.grpc_port, self.p2p_port = free_ports(3)
        self._process: subprocess.Popen[bytes] | None = None
        self._log: Path = directory / "qdrant.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def p2p_url(self) -> str:
        return f"http://127.0.0.1:{self.p2p_port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> QdrantTestServer:
        self.directory.mkdir(parents=True, exist_ok=True)
        environment = {
            **os.environ,
            "QDRANT__STORAGE__STORAGE_PATH": str(self.directory / "storage"),
            "QDRANT__STORAGE__SNAPSHOTS_PATH": str(self.directory / "snapshots"),
            "QDRANT__SERVICE__HOST": "127.0.0.1",
            "QDRANT__SERVICE__HTTP_PORT": str(self.http_port),
            "QDRANT__SERVICE__GRPC_PORT": str(self.grpc_port),
            "QDRANT__TELEMETRY_DISABLED": "true",
            "QDRANT__LOG_LEVEL": "WARN",
        }
        arguments = [self.executable]
        if self.cluster:
            environment["QDRANT__CLUSTER__ENABLED"] = "true"
            environment["QDRANT__CLUSTER__P2P__PORT"] = str(self.p2p_port)
            if self.bootstrap is not None:
                arguments += ["--bootstrap", self.bootstrap]
            arguments += ["--uri", self.p2p_url]
        with self._log.open("ab") as log:
            self._process = subprocess.Popen(
                arguments,
                cwd=self.directory,  # it writes a few files of its own beside its storage
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            self.wait_until_ready()
        except BaseException:
            self.stop(kill=True)
            raise
        return self

    def wait_until_ready(self) -> None:
        process = self._process
        assert process is not None

        def ready() -> bool:
            code = process.poll()
            if code is not None:
                log = self._log.read_text(errors="replace")[-2000:]
                raise RuntimeError(
                    f"{self.executable} exited with code {code} (HTTP port {self.http_port}):\n"
                    f"{log}"
                )
            return httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200

        wait_until(
            ready,
            self.start_timeout_seconds,
            f"Qdrant on port {self.http_port} to answer GET /readyz with 200",
            interval=0.05,
            ignoring=(httpx.TransportError,),
        )

    def stop(self, kill: bool = False) -> None:
        """SIGTERM (SIGKILL with `kill`), and wait for the process to end. The storage stays,
        for a restart with `start()`."""
        process = self._process
        self._process = None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> QdrantTestServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


class QdrantTestCluster:
    """`size` Qdrant peers joined in one cluster (the first bootstraps, the others join
    it), ready once the first peer's /cluster lists all of them."""

    def __init__(self, directory: Path, size: int = 3, start_timeout_seconds: float = 90.0):
        self.directory = directory
        self.size = size
        self.start_timeout_seconds = start_timeout_seconds
        self.peers: list[QdrantTestServer] = []

    @property
    def url(self) -> str:
        return self.peers[0].url

    def start(self) -> QdrantTestCluster:
        try:
            first = QdrantTestServer(self.directory / "peer0", cluster=True).start()
            self.peers.append(first)
            for index in range(1, self.size):
                peer = QdrantTestServer(self.directory / f"peer{index}", bootstrap=first.p2p_url)
                self.peers.append(peer.start())
            for peer in self.peers:
                wait_until(
                    lambda peer=peer: len(self.peer_ids(peer)) == self.size,
                    self.start_timeout_seconds,
                    f"Qdrant peer on port {peer.http_port} to list {self.size} peers in /cluster",
                    interval=0.1,
                    ignoring=(httpx.TransportError,),
                )
        except BaseException:
            self.stop()
            raise
        return self

    @staticmethod
    def peer_ids(peer: QdrantTestServer) -> list[str]:
        answer = httpx.get(f"{peer.url}/cluster", timeout=5).raise_for_status().json()
        return list(answer["result"]["peers"])

    def stop(self) -> None:
        for peer in reversed(self.peers):
            peer.stop()
        self.peers = []


def drop_workspace(url: str, workspace: str) -> None:
    """Drop every collection of `workspace` on the server at `url`: a test's own workspace
    on a server the session shares."""
    client = QdrantClient(url=url, check_compatibility=False)
    try:
        prefix = workspace_collection_prefix(workspace)
        for description in client.get_collections().collections:
            if description.name.startswith(prefix):
                client.delete_collection(description.name)
    finally:
        client.close()


def chunk_points(url: str, workspace: str) -> int:
    """How many chunk points `workspace` holds on the server at `url`, in all its
    collections of chunks."""
    client = QdrantClient(url=url, check_compatibility=False)
    try:
        prefix = f"{workspace_collection_prefix(workspace)}chunks_"
        return sum(
            client.count(description.name, exact=True).count
            for description in client.get_collections().collections
            if description.name.startswith(prefix)
        )
    finally:
        client.close()


@pytest.fixture(scope="session")
def qdrant_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QdrantTestServer]:
    """A Qdrant server for the whole session (tests isolate by workspace)."""
    with QdrantTestServer(tmp_path_factory.mktemp("qdrant")) as server:
        yield server


@pytest.fixture(scope="session")
def qdrant_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QdrantTestCluster]:
    """A three-peer Qdrant cluster for the whole session (tests isolate by workspace)."""
    cluster = QdrantTestCluster(tmp_path_factory.mktemp("qdrant-cluster")).start()
    try:
        yield cluster
    finally:
        cluster.stop()
