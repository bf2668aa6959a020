"""Result files: what a bench script measured, written so that docs/benchmarks.md is generated.

Every bench script takes `--results bench/results/NAME.json`. The file holds the figures (as
the tables the script prints), the command line, the date, the commit and the machine (CPU
model, cores, load average at the start and at the end), so a figure on the page always says
what produced it. `scripts/gen-docs` renders every file of bench/results/ into
docs/benchmarks.md, and a test fails when the committed page differs from what it renders;
nobody edits a figure by hand.

A file may also say it was transcribed (`source`), for a run too expensive to repeat for the
page: then its command, commit and machine are those the run was reported with.

    .venv/bin/python bench/results.py page docs/benchmarks.md   # what scripts/gen-docs runs
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "bench" / "results"
FORMAT = 1
MEASURED = "measured"
# The folders whose changes make a commit "+modified" for a bench (the code it measures).
SOURCE_FOLDERS = ("dataflow", "connectors", "kgstream", "gateway", "kgstream_protos", "protos")
# The page's order: these benches first, in this order, then any other by file name.
PAGE_ORDER = (
    "indexer_bench",
    "scale_bench",
    "large_document_bench",
    "cluster_bench",
    "gateway_bench",
    "gateway_load",
    "retrieval_eval",
    "vs_lightrag",
)


# -- the run's facts ---------------------------------------------------------------------


def _git(*arguments: str) -> str:
    return subprocess.run(
        ["git", *arguments], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def code_version() -> str:
    """HEAD's short hash, "+modified" when tracked source files differ from it (read-only git).

    Recorded per section by the longer benches: on a shared tree the code can change while a
    bench runs, and a subprocess started later runs the newer code.
    """
    try:
        head = _git("rev-parse", "--short", "HEAD")
        changed = _git("status", "--porcelain", "--untracked-files=no", "--", *SOURCE_FOLDERS)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head}+modified" if changed else head


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def machine_facts() -> list[str]:
    """The lines every bench report ends with: the machine, its load now, the code."""
    return [
        f"machine: {os.cpu_count()} CPUs (nproc), {cpu_model()}; load average now {load_average()}",
        f"python {platform.python_version()} on {platform.system()} {platform.release()}; "
        f"commit {code_version()}",
    ]


# -- tables --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Table:
    """One table of figures, each cell as the report prints it."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    # per column: True when its figures are right-aligned (numbers)
    numeric: tuple[bool, ...] = ()

    def __post_init__(self) -> None:
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(
                    f"table {self.title!r}: a row has {len(row)} cells for "
                    f"{len(self.columns)} columns: {row!r}"
                )
        if self.numeric and len(self.numeric) != len(self.columns):
            raise ValueError(f"table {self.title!r}: numeric must give one flag per column")

    def markdown(self) -> list[str]:
        align = self.numeric or tuple(index > 0 for index in range(len(self.columns)))
        lines = [
            "| " + " | ".join(self.columns) + " |",
            "|" + "|".join("---:" if right else "---" for right in align) + "|",
        ]
        lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in self.rows]
        return lines

    def as_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "columns": list(self.columns),
            "numeric": list(self.numeric),
            "rows": [list(row) for row in self.rows],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Table:
        return cls(
            title=str(data["title"]),
            columns=tuple(str(c) for c in data["columns"]),
            rows=tuple(tuple(str(cell) for cell in row) for row in data["rows"]),
            numeric=tuple(bool(flag) for flag in data.get("numeric", ())),
        )


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[object]], text_columns: int = 1
) -> Table:
    """A `Table` whose first `text_columns` columns are text and the rest figures."""
    return Table(
        title,
        tuple(columns),
        tuple(tuple(str(cell) for cell in row) for row in rows),
        tuple(index >= text_columns for index in range(len(columns))),
    )


def print_tables(tables: Sequence[Table]) -> None:
    for shown in tables:
        print(f"\n### {shown.title}\n")
        print("\n".join(shown.markdown()))
    print(flush=True)


# -- one run of a bench ------------------------------------------------------------------


@dataclass
class BenchRun:
    """A bench script's run: started when the script starts, written when it has figures."""

    bench: str
    argv: tuple[str, ...]
    started: datetime.datetime = field(default_factory=lambda: datetime.datetime.now(datetime.UTC))
    load_at_start: tuple[float, ...] = field(default_factory=os.getloadavg)
    commit_at_start: str = field(default_factory=code_version)

    @classmethod
    def start(cls, script: str, argv: Sequence[str] | None = None) -> BenchRun:
        """`script`: the bench's path (its `__file__`); `argv`: its arguments."""
        path = Path(script).resolve()
        relative = path.relative_to(REPO_ROOT)
        bench = path.parent.name if path.name == "run.py" else path.stem
        arguments = list(sys.argv[1:] if argv is None else argv)
        return cls(bench, (".venv/bin/python", str(relative), *arguments))

    def write(
        self,
        path: Path | None,
        title: str,
        tables: Sequence[Table],
        notes: Sequence[str] = (),
    ) -> None:
        """Write the result file at `path` (nothing when None: `--results` not given)."""
        if path is None:
            return
        commit = code_version()
        notes = list(notes)
        if commit != self.commit_at_start:
            notes.append(f"the code changed during the run: {self.commit_at_start} at the start")
        record = {
            "format": FORMAT,
            "bench": self.bench,
            "title": title,
            "source": MEASURED,
            "command": shlex.join(self.argv),
            "date": self.started.strftime("%Y-%m-%d %H:%M UTC"),
            "commit": commit,
            "machine": {
                "cpu": cpu_model(),
                "cores": os.cpu_count(),
                "load_average_start": [round(v, 2) for v in self.load_at_start],
                "load_average_end": [round(v, 2) for v in os.getloadavg()],
                "python": platform.python_version(),
                "system": f"{platform.system()} {platform.release()}",
            },
            "tables": [t.as_json() for t in tables],
            "notes": notes,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"results written to {path}", file=sys.stderr, flush=True)


def add_results_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--results",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write the figures, command, commit and machine to FILE "
        "(bench/results/NAME.json: docs/benchmarks.md is generated from them)",
    )


# -- the page ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResultFile:
    name: str
    bench: str
    title: str
    source: str
    command: str
    date: str
    commit: str
    machine: Mapping[str, Any]
    tables: tuple[Table, ...]
    notes: tuple[str, ...]

    @classmethod
    def read(cls, path: Path) -> ResultFile:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT:
            raise ValueError(f"{path}: result format {data.get('format')!r}, expected {FORMAT}")
        return cls(
            name=path.name,
            bench=str(data["bench"]),
            title=str(data["title"]),
            source=str(data["source"]),
            command=str(data["command"]),
            date=str(data["date"]),
            commit=str(data["commit"]),
            machine=dict(data["machine"]),
            tables=tuple(Table.from_json(t) for t in data["tables"]),
            notes=tuple(str(n) for n in data.get("notes", ())),
        )

    def anchor(self) -> str:
        return self.name.removesuffix(".json")


def read_results(folder: Path = RESULTS_DIR) -> list[ResultFile]:
    files = [ResultFile.read(path) for path in sorted(folder.glob("*.json"))]

    def order(result: ResultFile) -> tuple[int, str]:
        rank = PAGE_ORDER.index(result.bench) if result.bench in PAGE_ORDER else len(PAGE_ORDER)
        return rank, result.name

    return sorted(files, key=order)


def shown_command(command: str) -> str:
    """The command as the page shows it: a path outside the repository (a scratch directory,
    a data set kept elsewhere) is replaced by a name in capitals, its option's name (`--data
    DATA`, `--set SET`), since it means nothing on another machine."""
    words = shlex.split(command)
    shown = []
    for index, word in enumerate(words):
        if _outside_repository(word):
            option = words[index - 1] if index else ""
            name = option.lstrip("-").replace("-", "_").upper() if option.startswith("-") else ""
            shown.append(name or "PATH")
        else:
            shown.append(word)
    return shlex.join(shown)


def _outside_repository(word: str) -> bool:
    if not (word.startswith(("/", "../", "~")) or word == ".."):
        return False
    resolved = (REPO_ROOT / Path(word).expanduser()).resolve()
    return not resolved.is_relative_to(REPO_ROOT)


def _machine_line(result: ResultFile) -> str:
    machine = result.machine
    start = " ".join(f"{v:.2f}" for v in machine.get("load_average_start", ()))
    end = " ".join(f"{v:.2f}" for v in machine.get("load_average_end", ()))
    loads = f"load average (1, 5, 15 min) {start} at the start" if start else ""
    if end:
        loads += f", {end} at the end" if loads else f"load average {end} at the end"
    parts = [f"{machine.get('cores', '?')} cores, {machine.get('cpu', 'unknown CPU')}"]
    if loads:
        parts.append(loads)
    return "; ".join(parts)


def render_section(result: ResultFile) -> list[str]:
    lines = [f"## {result.title}", "", "```sh", shown_command(result.command), "```", ""]
    when = f"{result.date}, commit `{result.commit}`, {_machine_line(result)}."
    if result.source == MEASURED:
        lines.append(f"Measured {when}")
    else:
        lines.append(f"Measured {when} This file was {result.source}: not measured again here.")
    for shown in result.tables:
        lines += ["", f"**{shown.title}**", "", *shown.markdown()]
    if result.notes:
        lines.append("")
        lines += [f"- {note}" for note in result.notes]
    lines.append(f"\n<sub>Source: `bench/results/{result.name}`</sub>")
    return [*lines, ""]


PAGE_HEADER = """\
# Benchmarks

The current figures of kgstream's bench scripts, one section per result file in
`bench/results/`. This page is generated (`scripts/gen-docs`); do not edit it. To refresh a
section, run its command with `--results bench/results/NAME.json` (one benchmark at a time on
a shared machine), then `scripts/gen-docs`. History is in git.

Benchmarks are scripts that print figures, never tests: they run on whatever machine runs them,
and each section names the machine, its load and the commit. On a small shared machine the
figures move between runs of the same code (latencies by a third, loads by a fifth), so compare
two versions in turn on one machine, as `bench/gateway_ab.py` does for the gateway. Paths
outside the repository are shown as the option's name in capitals (`--data DATA`).
"""


def render_page(results: Sequence[ResultFile]) -> str:
    titles = [result.title for result in results]
    repeated = sorted({title for title in titles if titles.count(title) > 1})
    if repeated:
        raise ValueError(f"result files share a title (one section each): {repeated}")
    lines = [PAGE_HEADER]
    lines += [f"- [{r.title}](#{_slug(r.title)})" for r in results]
    lines.append("")
    for result in results:
        lines += render_section(result)
    return "\n".join(lines).rstrip("\n") + "\n"


def _slug(title: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces as dashes."""
    kept = "".join(ch for ch in title.lower() if ch.isalnum() or ch in " -_")
    return kept.replace(" ", "-")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Render docs/benchmarks.md from result files.")
    commands = parser.add_subparsers(dest="command", required=True)
    page = commands.add_parser("page", help="write the benchmarks page")
    page.add_argument("output", type=Path)
    page.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(render_page(read_results(args.results_dir)), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
