"""What both sides of bench/vs_lightrag measure with: the test server's call counters, the
resident memory of a process group, and the shape of one system's results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

SERVER_SCRIPT = Path(__file__).resolve().parent / "llm_server.py"
MODES = ("local", "global", "hybrid", "naive", "mix")
CHAT_KINDS = ("extract", "glean", "summary", "keywords", "other")


@dataclass(frozen=True)
class Calls:
    """LLM and embedding calls the test server answered (a difference of two readings)."""

    chat: int = 0
    by_kind: Mapping[str, int] = field(default_factory=dict)
    embedding_requests: int = 0
    embedded_texts: int = 0

    def __sub__(self, earlier: Calls) -> Calls:
        return Calls(
            chat=self.chat - earlier.chat,
            by_kind={k: self.by_kind.get(k, 0) - earlier.by_kind.get(k, 0) for k in CHAT_KINDS},
            embedding_requests=self.embedding_requests - earlier.embedding_requests,
            embedded_texts=self.embedded_texts - earlier.embedded_texts,
        )

    def __add__(self, other: Calls) -> Calls:
        return Calls(
            chat=self.chat + other.chat,
            by_kind={k: self.by_kind.get(k, 0) + other.by_kind.get(k, 0) for k in CHAT_KINDS},
            embedding_requests=self.embedding_requests + other.embedding_requests,
            embedded_texts=self.embedded_texts + other.embedded_texts,
        )

    def describe(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in self.by_kind.items() if n)
        return f"{self.chat} LLM calls ({kinds or 'none'}), {self.embedded_texts} texts embedded"


class LLMServer:
    """bench/vs_lightrag/llm_server.py in a child process (its GIL is not the systems'):
    `llm_url` answers chat calls after `delay` seconds, `embedding_url` embeds at once."""

    def __init__(self, delay: float, embeddings: str) -> None:
        self._process = subprocess.Popen(
            [sys.executable, str(SERVER_SCRIPT), "--delay", str(delay), "--embeddings", embeddings],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        first = self._read_line()
        try:
            urls = json.loads(first)
        except ValueError:
            self.close()
            raise RuntimeError(f"the test server printed {first!r}, not its URLs") from None
        self.llm_url: str = urls["llm"]
        self.embedding_url: str = urls["embeddings"]
        self.delay = delay
        self.embeddings = embeddings

    def _read_line(self) -> str:
        if self._process.stdout is None:
            raise RuntimeError("internal: the test server has no stdout pipe")
        return self._process.stdout.readline()

    def calls(self) -> Calls:
        """The counters now (subtract two readings for what happened in between)."""
        if self._process.stdin is None:
            raise RuntimeError("internal: the test server has no stdin pipe")
        self._process.stdin.write("counts\n")
        self._process.stdin.flush()
        counts = json.loads(self._read_line())
        return Calls(
            chat=counts["chat"],
            by_kind={kind: counts[kind] for kind in CHAT_KINDS},
            embedding_requests=counts["embedding_requests"],
            embedded_texts=counts["embedded_texts"],
        )

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(timeout=30)

    def __enter__(self) -> LLMServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def group_rss_bytes(pgid: int) -> int:
    """Resident bytes of every process in group `pgid` (a system and the servers it started)."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            for line in (stat.parent / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except (OSError, IndexError, ValueError):
            continue  # the process ended while we looked
    return total


class PeakRss:
    """Samples a process group's resident memory every `interval` seconds in a thread;
    `take()` returns the peak since the last `take()` (or the start)."""

    def __init__(self, pgid: int, interval: float = 0.2) -> None:
        self._pgid = pgid
        self._interval = interval
        self._peak = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"rss-{pgid}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.sample()

    def sample(self) -> None:
        rss = group_rss_bytes(self._pgid)
        with self._lock:
            self._peak = max(self._peak, rss)

    def take(self) -> int:
        self.sample()
        with self._lock:
            peak, self._peak = self._peak, 0
        return peak

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@dataclass(frozen=True)
class Operation:
    """One timed edit or delete: seconds, and the calls it cost."""

    doc_id: str
    seconds: float
    calls: Calls


@dataclass(frozen=True)
class ModeRun:
    """Every question asked in one query mode: seconds each, and the documents retrieved."""

    seconds: tuple[float, ...]
    files: Mapping[str, tuple[str, ...]]  # question id -> file of each chunk, in order
    calls: Calls


@dataclass(frozen=True)
class GraphSize:
    documents: int
    chunks: int
    entities: int
    relations: int


@dataclass
class SystemRun:
    """One system's figures at one LLM latency."""

    name: str
    index_seconds: float = 0.0
    index_calls: Calls = field(default_factory=Calls)
    graph: GraphSize = GraphSize(0, 0, 0, 0)
    disk_bytes: int = 0
    peak_rss_index: int = 0
    peak_rss_serving: int = 0
    queries: dict[str, ModeRun] = field(default_factory=dict)
    edits: list[Operation] = field(default_factory=list)
    deletes: list[Operation] = field(default_factory=list)
    residue: dict[str, int] = field(default_factory=dict)
    residue_before: dict[str, int] = field(default_factory=dict)  # the same check, unchanged
    notes: list[str] = field(default_factory=list)


def allocated_bytes(path: Path) -> int:
    """Bytes of the blocks the files under `path` occupy."""
    return sum(
        (Path(folder) / name).lstat().st_blocks * 512
        for folder, _, names in os.walk(path)
        for name in names
    )
