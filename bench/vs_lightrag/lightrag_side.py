"""LightRAG's side of bench/vs_lightrag: lightrag_driver.py in LightRAG's own venv.

One driver process does everything, as LightRAG's own server would: it starts, indexes the
corpus with `ainsert` (timed from the process's start until `ainsert` returns, start-up
included, as `kgstream index` is), answers every question in every mode with
``only_need_context``, makes the edits (delete + insert) and the deletes, then reports the
residue. Its stdout carries only the driver's JSON replies; LightRAG's log goes to a file.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from bench.harness import allocated_bytes, progress, stop_process
from bench.vs_lightrag.measure import (
    MODES,
    GraphSize,
    LLMServer,
    ModeRun,
    Operation,
    PeakRss,
    SystemRun,
)
from bench.vs_lightrag.workload import Workload

DRIVER = Path(__file__).resolve().parent / "lightrag_driver.py"


class Driver:
    """The driver process: `request(op, ...)` sends one request and returns its reply."""

    def __init__(
        self, python: Path, workdir: Path, server: LLMServer, client: str, log_path: Path
    ) -> None:
        self.started = time.perf_counter()
        self._log = log_path.open("wb")
        urls = (server.llm_url, server.embedding_url)
        self.process = subprocess.Popen(
            [str(python), str(DRIVER), str(workdir), *urls, "--client", client],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env={key: value for key, value in os.environ.items() if not key.startswith("OPENAI_")},
            start_new_session=True,
        )
        self.log_path = log_path
        self.ready = self._read()

    def _read(self) -> dict[str, Any]:
        if self.process.stdout is None:
            raise RuntimeError("internal: the driver has no stdout pipe")
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait(timeout=30)
            raise RuntimeError(f"the LightRAG driver exited with {code}; see {self.log_path}")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        if self.process.stdin is None:
            raise RuntimeError("internal: the driver has no stdin pipe")
        self.process.stdin.write((json.dumps({"op": op, **fields}) + "\n").encode())
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.process.poll() is None:
            self.request("quit")  # finalises LightRAG's storages, then replies "done"
            self.process.wait(timeout=120)
        stop_process(self.process)
        self._log.close()

    def __enter__(self) -> Driver:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            stop_process(self.process)
        self.close()


def run_lightrag(
    server: LLMServer,
    workload: Workload,
    work: Path,
    python: Path,
    warmup: Sequence[str],
    client: str = "binding",
) -> SystemRun:
    workdir = work / "lightrag-data"
    result = SystemRun("LightRAG" if client == "binding" else "LightRAG (shared client)")
    before = server.calls()
    with Driver(python, workdir, server, client, work / "lightrag.log") as driver:
        rss = PeakRss(driver.process.pid)
        try:
            indexed = driver.request("index", documents=dict(workload.corpus))
            result.index_seconds = time.perf_counter() - driver.started
            result.index_calls = server.calls() - before
            result.peak_rss_index = rss.take()
            result.disk_bytes = allocated_bytes(workdir)
            result.graph = GraphSize(
                documents=indexed["documents"],
                chunks=indexed["chunks"],
                entities=indexed["entities"],
                relations=indexed["relations"],
            )
            if indexed["statuses"].get("failed"):
                result.notes.append(f"LightRAG: {indexed['statuses']['failed']} documents failed")
            progress(
                f"LightRAG: indexed in {result.index_seconds:.1f} s "
                f"(ainsert {indexed['seconds']:.1f} s), {result.index_calls.describe()}"
            )
            chunk_ids = [
                c for d in workload.deletes for c in driver.request("chunks", doc_id=d)["chunk_ids"]
            ]
            result.residue_before = residue(driver, workload, chunk_ids)
            result.queries = ask(server, driver, workload, warmup)
            result.edits = [
                timed(server, driver, doc_id, "edit", text=text) for doc_id, text in workload.edits
            ]
            result.deletes = [
                timed(server, driver, doc_id, "delete") for doc_id in workload.deletes
            ]
            result.residue = residue(driver, workload, chunk_ids)
            result.peak_rss_serving = rss.take()
        finally:
            rss.stop()
    return result


def ask(
    server: LLMServer, driver: Driver, workload: Workload, warmup: Sequence[str]
) -> dict[str, ModeRun]:
    """Every question in every mode; a mode's warm-up questions first (untimed, not scored).
    LightRAG names a chunk's file by its base name: mapped back to the corpus path."""
    path_of = {os.path.basename(doc_id): doc_id for doc_id in workload.corpus}
    runs = {}
    for mode in MODES:
        for text in warmup:
            driver.request("query", question=text, mode=mode)
        before = server.calls()
        seconds, files = [], {}
        for question in workload.questions:
            reply = driver.request("query", question=question.text, mode=mode)
            seconds.append(float(reply["seconds"]))
            files[question.id] = tuple(path_of.get(name, name) for name in reply["files"])
        runs[mode] = ModeRun(tuple(seconds), files, server.calls() - before)
        progress(f"LightRAG: {mode}: {len(seconds)} questions")
    return runs


def timed(server: LLMServer, driver: Driver, doc_id: str, op: str, **fields: str) -> Operation:
    """One edit or delete, timed inside the driver (the call itself, without the pipe)."""
    before = server.calls()
    reply = driver.request(op, doc_id=doc_id, **fields)
    if reply.get("status") != "success" or reply.get("document", "processed") != "processed":
        raise RuntimeError(f"LightRAG {op} of {doc_id} answered {reply}; see {driver.log_path}")
    return Operation(doc_id, float(reply["seconds"]), server.calls() - before)


def residue(driver: Driver, workload: Workload, chunk_ids: Sequence[str]) -> dict[str, int]:
    reply: Mapping[str, int] = driver.request(
        "residue",
        doc_ids=list(workload.deletes),
        chunk_ids=list(chunk_ids),
        file_paths=[os.path.basename(doc_id) for doc_id in workload.deletes],
        sentences=list(workload.gone_sentences()),
    )
    return dict(reply)
