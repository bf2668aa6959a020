"""Running `kgstream` as a user does, in its own process, for the CLI tests."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FREE_HTTP_ADDRESS = "127.0.0.1:0"  # tests run side by side: never the default port
# Snapshots every second rather than every 10 s (the default epoch): a test that kills the
# indexer at a random point then lands between snapshots, so the restart resumes from one.
SNAPSHOT_EVERY_SECOND = {"KGSTREAM_EPOCH_SECONDS": "1"}


def clean_environment(llm_server_url: str) -> dict[str, str]:
    """The caller's environment without kgstream or OpenAI settings, embedding through
    the OpenAI-compatible test server (the local model is covered by its own tests), and
    the HTTP API on a free port (`http_url_of` reads it from the output)."""
    environment = {
        k: v for k, v in os.environ.items() if not k.startswith(("KGSTREAM_", "OPENAI_"))
    }
    environment.update(
        KGSTREAM_EMBEDDING_BASE_URL=llm_server_url,
        KGSTREAM_EMBEDDING_MODEL="test-embedding-model",
        KGSTREAM_HTTP_ADDRESS=FREE_HTTP_ADDRESS,
    )
    return environment


def llm_environment(llm_server_url: str) -> dict[str, str]:
    """`clean_environment` extracting through the test server too (two calls at a time)."""
    environment = clean_environment(llm_server_url)
    environment.update(
        KGSTREAM_LLM_BASE_URL=llm_server_url,
        KGSTREAM_LLM_MODEL="test-chat-model",
        KGSTREAM_LLM_MAX_CONCURRENCY="2",
    )
    return environment


def kgstream(*args: str, env: dict[str, str], own_group: bool = False) -> subprocess.Popen[str]:
    """`kgstream ARGS` as a child; with `own_group`, leading a process group of its own, as
    a shell's foreground job does (a terminal's Ctrl-C signals the whole group)."""
    return subprocess.Popen(
        [sys.executable, "-m", "kgstream.cli", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=own_group,
    )


def finish(process: subprocess.Popen[str], timeout: float = 120) -> str:
    output, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, output
    return output


class Output:
    """Every line a process writes, read on a thread (the pipe must never fill up)."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.append(line)

    def has(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))

    def text(self) -> str:
        """What the process has written so far."""
        return "".join(list(self.lines))

    def join(self) -> str:
        """Everything the process wrote (call once it has exited)."""
        self._thread.join(timeout=60)
        return "".join(self.lines)
