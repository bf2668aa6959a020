"""A real Apache Kafka broker (KRaft, single node) for tests, run from jars.

The jars come from Maven Central via ``scripts/kafka/install`` into
``.cache/kafka/lib``; each broker gets a fresh storage directory, free ports
picked at run time and its own log file, so tests never depend on a machine's
Kafka install or on Docker. ``kafka_broker`` is a session-scoped pytest fixture;
register it with ``pytest_plugins = ["tests.support.kafka"]`` in a conftest.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import pytest
from kafka import KafkaAdminClient

from tests.support.ports import LOOPBACK, free_ports
from tests.support.wait import wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_LIB_DIR = REPO_ROOT / ".cache" / "kafka" / "lib"
DEFAULT_INSTALL_SCRIPT = REPO_ROOT / "scripts" / "kafka" / "install"

POLL_INTERVAL_S = 0.1
ATTEMPT_TIMEOUT_S = 10.0
INSTALL_TIMEOUT_S = 600.0
FORMAT_TIMEOUT_S = 60.0
ADDRESS_IN_USE = "Address already in use"


class KafkaBrokerError(RuntimeError):
    """The test broker could not be installed, formatted, started or stopped."""


@dataclass(frozen=True)
class KafkaBrokerOptions:
    """How to run the test broker; the defaults favour start-up time and memory.

    ``jvm_flags``: the serial collector suits a 512 MB heap on a small CI box,
    and stopping at the C1 compiler saved about 0.5 s of a ~2.7 s start here
    (tests are short; peak JIT throughput does not pay off).
    ``server_overrides`` replaces or adds ``server.properties`` entries.
    """

    lib_dir: Path = DEFAULT_LIB_DIR
    install_script: Path = DEFAULT_INSTALL_SCRIPT
    java: str = "java"
    max_heap: str = "512m"
    jvm_flags: tuple[str, ...] = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
    server_overrides: Mapping[str, str] = field(default_factory=dict)
    start_timeout_s: float = 90.0
    stop_timeout_s: float = 30.0
    bind_attempts: int = 3
    log_tail_lines: int = 30


def ensure_kafka_installed(options: KafkaBrokerOptions) -> Path:
    """Run the idempotent install script (a few ms when the jars are current).

    Running it every time, not only when the directory is missing, also picks up
    a changed ``scripts/kafka/pom.xml``. Returns the jar directory.
    """
    if shutil.which(options.java) is None:
        raise KafkaBrokerError(
            f"java executable {options.java!r} is not on PATH; the test Kafka broker needs "
            "Java 17+ (apt-get install -y openjdk-17-jre-headless)."
        )
    if not options.install_script.is_file():
        raise KafkaBrokerError(f"Kafka install script {options.install_script} does not exist.")
    result = subprocess.run(
        [shutil.which("bash") or "/bin/bash", str(options.install_script)],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
    )
    if result.returncode != 0:
        output = _last_lines(result.stdout + result.stderr, options.log_tail_lines)
        raise KafkaBrokerError(
            f"{options.install_script} exited with {result.returncode}; it needs Java 17+, "
            f"Maven 3.8+ and access to Maven Central. Its output:\n{output}"
        )
    if not any(options.lib_dir.glob("kafka_2.13-*.jar")):
        raise KafkaBrokerError(
            f"{options.install_script} succeeded but {options.lib_dir} holds no kafka_2.13 jar; "
            f"delete {options.lib_dir.parent} and run the script again."
        )
    return options.lib_dir


def new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding, never starting
    with "-" (the storage tool would read it as an option; Kafka's own `Uuid.randomUuid`
    draws again for the same reason)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")
        if not text.startswith("-"):
            return text


def render_server_properties(
    broker_port: int,
    controller_port: int,
    data_dir: Path,
    overrides: Mapping[str, str],
) -> str:
    """The ``server.properties`` of a one-node broker+controller bound to loopback."""
    properties = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"{LOOPBACK}:{controller_port}",
        "listeners": f"PLAINTEXT://{LOOPBACK}:{broker_port},CONTROLLER://{LOOPBACK}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{LOOPBACK}:{broker_port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir),
        "auto.create.topics.enable": "false",
        "num.partitions": "3",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "offsets.topic.replication.factor": "1",
        # 3 instead of 50: the first consumer-group call creates this topic.
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "3",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "share.coordinator.state.topic.num.partitions": "3",
        "group.initial.rebalance.delay.ms": "0",
        # Small files and few threads: tests write little and run on small boxes.
        "log.segment.bytes": str(16 * 1024 * 1024),
        "log.index.size.max.bytes": str(1024 * 1024),
        "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
        "num.network.threads": "2",
        "num.io.threads": "2",
        "num.recovery.threads.per.data.dir": "1",
        "background.threads": "2",
    }
    properties.update(overrides)
    return "".join(f"{key}={value}\n" for key, value in properties.items())


def render_log4j2_properties(log_path: Path) -> str:
    """Send every Kafka log line to one file; Kafka stops itself, so no log4j hook."""
    return "\n".join(
        [
            "status = warn",
            "shutdownHook = disable",
            "appender.file.type = File",
            "appender.file.name = file",
            f"appender.file.fileName = {log_path}",
            "appender.file.layout.type = PatternLayout",
            "appender.file.layout.pattern = [%d] %p %m (%c)%n",
            "rootLogger.level = INFO",
            "rootLogger.appenderRef.file.ref = file",
            "",
        ]
    )


class KafkaBroker:
    """One Kafka process in ``work_dir``; ``start()`` returns once clients can use it.

    Files in ``work_dir``: ``server.properties``, ``log4j2.properties``,
    ``server.log`` (Kafka's log), ``process.out`` (JVM stdout/stderr) and
    ``data/`` (the KRaft metadata and topic logs).
    """

    def __init__(self, work_dir: Path, options: KafkaBrokerOptions | None = None) -> None:
        self.work_dir = work_dir
        self.options = options if options is not None else KafkaBrokerOptions()
        self.log_path = work_dir / "server.log"
        self.process_output_path = work_dir / "process.out"
        self.data_dir = work_dir / "data"
        self.broker_port: int | None = None
        self.start_duration_s: float | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        if self.broker_port is None or self._process is None:
            raise KafkaBrokerError("the Kafka broker is not running; call start() first.")
        return f"{LOOPBACK}:{self.broker_port}"

    def __enter__(self) -> KafkaBroker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Format fresh storage, launch the JVM and wait until an admin client works.

        Ports are picked just before launch; if another process grabs one in
        between, the broker fails to bind and is retried on new ports.
        """
        if self._process is not None:
            raise KafkaBrokerError(f"the Kafka broker in {self.work_dir} is already running.")
        began = time.monotonic()
        for attempt in range(1, self.options.bind_attempts + 1):
            try:
                self._start_once()
            except KafkaBrokerError:
                lost_port_race = ADDRESS_IN_USE in (_read_text(self.log_path) or "")
                if attempt == self.options.bind_attempts or not lost_port_race:
                    raise
                continue
            self.start_duration_s = time.monotonic() - began
            return

    def stop(self) -> None:
        """SIGTERM (Kafka shuts down cleanly), then SIGKILL after ``stop_timeout_s``."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=self.options.stop_timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=self.options.stop_timeout_s)

    def start_again(self) -> None:
        """Start a stopped broker on its old ports and storage, as a restart does: the
        topics, their messages and the cluster id survive."""
        if self._process is not None:
            raise KafkaBrokerError(f"the Kafka broker in {self.work_dir} is already running.")
        if self.broker_port is None:
            raise KafkaBrokerError("start_again() needs a broker that was started before.")
        self._launch(self.work_dir / "server.properties", self.work_dir / "log4j2.properties")

    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None
    ) -> None:
        """Create a topic and return once every partition has a leader."""
        if not name:
            raise ValueError("topic name must be non-empty.")
        if partitions < 1:
            raise ValueError(f"partitions for topic {name!r} must be >= 1; got {partitions}.")
        spec = {
            "num_partitions": partitions,
            "replication_factor": 1,
            "configs": dict(configs or {}),
        }
        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers)
        try:
            admin.create_topics({name: spec}, wait_for_metadata=True)
        finally:
            admin.close()

    def log_tail(self) -> str:
        """Kafka's first ERROR lines and last lines, and the JVM's own output.

        The first errors come first because a failed start logs its cause and
        then a long shutdown sequence that would push the cause out of a tail.
        """
        sections = []
        server_log = _read_text(self.log_path)
        if server_log is not None:
            errors = _error_lines(server_log, self.options.log_tail_lines // 3)
            if errors:
                sections.append(f"--- first errors in {self.log_path}\n{errors}")
            tail = _last_lines(server_log, self.options.log_tail_lines)
            sections.append(f"--- last lines of {self.log_path}\n{tail}")
        process_output = _read_text(self.process_output_path)
        if process_output is not None:
            tail = _last_lines(process_output, self.options.log_tail_lines)
            sections.append(f"--- JVM output {self.process_output_path}\n{tail}")
        return "\n".join(sections) if sections else f"(no log files in {self.work_dir})"

    def _start_once(self) -> None:
        shutil.rmtree(self.data_dir, ignore_errors=True)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.log_path.unlink(missing_ok=True)
        broker_port, controller_port = free_ports(2)
        config_path = self.work_dir / "server.properties"
        config_path.write_text(
            render_server_properties(
                broker_port, controller_port, self.data_dir, self.options.server_overrides
            ),
            encoding="utf-8",
        )
        log4j_path = self.work_dir / "log4j2.properties"
        log4j_path.write_text(render_log4j2_properties(self.log_path), encoding="utf-8")
        self._format_storage(config_path, log4j_path)
        self.broker_port = broker_port
        self._launch(config_path, log4j_path)

    def _launch(self, config_path: Path, log4j_path: Path) -> None:
        with self.process_output_path.open("ab") as output:
            self._process = subprocess.Popen(
                [*self._java_command(log4j_path), "kafka.Kafka", str(config_path)],
                cwd=self.work_dir,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise

    def _java_command(self, log4j_path: Path) -> list[str]:
        return [
            self.options.java,
            f"-Xmx{self.options.max_heap}",
            *self.options.jvm_flags,
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j_path}",
            "-cp",
            f"{self.options.lib_dir}{os.sep}*",
        ]

    def _format_storage(self, config_path: Path, log4j_path: Path) -> None:
        command = [
            *self._java_command(log4j_path),
            "kafka.tools.StorageTool",
            "format",
            "--standalone",
            "--cluster-id",
            new_cluster_id(),
            "--config",
            str(config_path),
        ]
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=FORMAT_TIMEOUT_S, check=False
        )
        if result.returncode != 0:
            output = _last_lines(result.stdout + result.stderr, self.options.log_tail_lines)
            raise KafkaBrokerError(
                f"kafka.tools.StorageTool format exited with {result.returncode} for "
                f"{config_path}:\n{output}"
            )

    def _wait_until_ready(self) -> None:
        process, port = self._process, self.broker_port
        if process is None or port is None:
            raise KafkaBrokerError("internal: _wait_until_ready called before launch.")

        def ready() -> bool:
            code = process.poll()
            if code is not None:
                raise KafkaBrokerError(
                    f"Kafka exited with {code} while starting; log tail:\n{self.log_tail()}"
                )
            # A plain TCP probe first: admin clients spawn an I/O thread per attempt.
            if not _accepts_connections(port):
                raise _NotReady("the broker port never accepted a connection")
            try:
                _list_topics(f"{LOOPBACK}:{port}", ATTEMPT_TIMEOUT_S)
            except Exception as exc:  # any client error means "not ready yet"
                raise _NotReady(f"{type(exc).__name__}: {exc}") from exc
            return True

        try:
            wait_until(
                ready,
                self.options.start_timeout_s,
                "Kafka to become ready (start_timeout_s)",
                interval=POLL_INTERVAL_S,
                ignoring=(_NotReady,),
            )
        except AssertionError as timeout:
            raise KafkaBrokerError(f"{timeout}; log tail:\n{self.log_tail()}") from None


class _NotReady(Exception):
    """The broker is still starting; the message says what failed last."""


def _accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection((LOOPBACK, port), timeout=POLL_INTERVAL_S):
            return True
    except OSError:
        return False


def _list_topics(bootstrap_servers: str, timeout_s: float) -> list[str]:
    timeout_ms = max(int(timeout_s * 1000), 1)
    admin = KafkaAdminClient(
        bootstrap_servers=bootstrap_servers,
        bootstrap_timeout_ms=timeout_ms,
        request_timeout_ms=timeout_ms,
    )
    try:
        topics: list[str] = admin.list_topics()
        return topics
    finally:
        admin.close()


def _last_lines(text: str, count: int) -> str:
    return "\n".join(text.splitlines()[-count:])


def _read_text(path: Path) -> str | None:
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None


def _error_lines(log_text: str, limit: int) -> str:
    """ERROR/FATAL records with the exception message on the line after each."""
    lines = log_text.splitlines()
    picked: list[str] = []
    for index, line in enumerate(lines):
        if len(picked) >= limit:
            break
        if "] ERROR " in line or "] FATAL " in line:
            picked.append(line)
            following = lines[index + 1] if index + 1 < len(lines) else "["
            if not following.startswith("["):
                picked.append(following)
    return "\n".join(picked)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """One broker for the whole test session; installs the jars first if needed."""
    options = KafkaBrokerOptions()
    ensure_kafka_installed(options)
    with KafkaBroker(tmp_path_factory.mktemp("kafka"), options) as broker:
        yield broker
