"""The README stays a front door and the docs stay true to the repository: small, no commit
hashes, no links to files that do not exist, nothing cited from outside the repository, the
generated pages as their generators write them, and every headline figure in its result file."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
README_LIMIT_BYTES = 20 * 1024
# Every hand-written and generated page of prose the repository ships.
PAGES = sorted(
    [README, ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").rglob("*.md")]
)
GENERATED = ("docs/settings.md", "docs/benchmarks.md")
SETTINGS_PAGE = ROOT / "scripts" / "settings_page.py"

_FENCE = re.compile(r"^(```|~~~)")
# A commit hash as people paste it: 7 to 40 hex digits standing alone, with at least one digit
# and one letter (so neither a number nor an English word made of a-f letters counts).
_HEX_WORD = re.compile(r"(?<![0-9A-Za-z_-])[0-9a-fA-F]{7,40}(?![0-9A-Za-z_-])")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
# A repository path as the docs write one: segments of word characters, dots and dashes.
_PATH = re.compile(r"[\w.-]+(?:/[\w.-]+)*/?")
_PLACEHOLDER = re.compile(r"[A-Z][A-Z_]*(?:\.\w+)?")  # NAME.json, DIR, DATA: not a real name
_OUTSIDE = (
    (re.compile(r"ARCHITECTURE\.md"), "the shared ARCHITECTURE.md"),
    (re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE), "an issue number"),
    (re.compile(r"\.\./shared\b"), "the shared folder outside the repository"),
)


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of `text` outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def commit_hashes(text: str) -> list[str]:
    """The words of `text`'s prose that read as commit hashes."""
    found = []
    for _, line in prose_lines(text):
        for match in _HEX_WORD.finditer(line):
            word = match.group()
            if re.search(r"[0-9]", word) and re.search(r"[a-fA-F]", word):
                found.append(word)
    return found


def github_anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown page."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose_lines(text):
        heading = re.match(r"#{1,6}\s+(.*)", line)
        if not heading:
            continue
        title = re.sub(r"`|\*\*|\*|\[|\]\([^)]*\)", "", heading.group(1)).strip().lower()
        slug = "".join(ch for ch in title if ch.isalnum() or ch in " -_").replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """The relative links of `page` to a file (or a heading) that does not exist, each named
    by the page's path under `root` and its line."""
    broken = []
    for number, line in prose_lines(page.read_text(encoding="utf-8")):
        for match in _LINK.finditer(line):
            target = match.group(1)
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path_part, _, anchor = target.partition("#")
            linked = (page.parent / path_part).resolve() if path_part else page
            where = f"{page.relative_to(root)}:{number}: {target}"
            if not linked.exists():
                broken.append(where)
            elif (
                anchor
                and linked.suffix == ".md"
                and anchor not in github_anchors(linked.read_text(encoding="utf-8"))
            ):
                broken.append(f"{where} (no such heading)")
    return broken


def ignored_paths(root: Path) -> list[str]:
    """The paths `root`'s .gitignore names with a slash (generated folders a page may name,
    such as the Go client's stubs), without their leading and trailing slashes."""
    ignore = root / ".gitignore"
    lines = ignore.read_text(encoding="utf-8").splitlines() if ignore.exists() else []
    return [
        line.strip().strip("/")
        for line in lines
        if "/" in line.strip().rstrip("/") and not line.startswith("#") and "*" not in line
    ]


def repository_path(word: str, folders: set[str]) -> str | None:
    """`word` of a code span as a repository path (without a trailing slash), or None when it
    is not one: a path has a slash and starts with one of the repository's top-level
    `folders`, and none of its segments is a placeholder (`NAME.json`, `DIR`)."""
    word = word.strip("()[],;:'\"").rstrip("/")
    if "/" not in word or not _PATH.fullmatch(word):
        return None
    segments = word.split("/")
    if segments[0] not in folders or any(_PLACEHOLDER.fullmatch(part) for part in segments):
        return None
    return word


def missing_paths(page: Path, root: Path = ROOT) -> list[str]:
    """The repository paths `page` names in code spans (`dataflow/state/codec.py`, a word of
    `bench/gateway_bench.py --runs 3`) that do not exist, each named by the page's path
    under `root` and its line. Proto import paths (`kgstream/v1/query.proto`) are looked up
    under `protos/`, their root, too; a path under a folder .gitignore names is generated,
    so it need not exist."""
    folders = {path.name for path in root.iterdir() if path.is_dir() and path.name[0] != "."}
    ignored = ignored_paths(root)
    missing = []
    for number, line in prose_lines(page.read_text(encoding="utf-8")):
        for span in _CODE_SPAN.finditer(line):
            for word in span.group(1).split():
                path = repository_path(word, folders)
                if (
                    path is None
                    or (root / path).exists()
                    or (root / "protos" / path).exists()
                    or any(path == i or path.startswith(i + "/") for i in ignored)
                ):
                    continue
                missing.append(f"{page.relative_to(root)}:{number}: {path}")
    return missing


# -- the checks themselves ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "measured at 605fd9b on a quiet machine",
        "the code before (b4a9b8f), run twice",
        "see commit 2E68F19",
        "full hash 3fcba61f0a1b2c3d4e5f60718293a4b5c6d7e8f9",
    ],
)
def test_a_commit_hash_in_prose_is_found(text: str) -> None:
    assert commit_hashes(text)


@pytest.mark.parametrize(
    "text",
    [
        "1,000 documents in 1234567 ms",  # digits only
        "a decade of facade and cafe",  # letters a-f only
        "sha256 of the text, abc123 (six), 0x1f",  # too short
        "```sh\ngit checkout 605fd9b\n```",  # a command in a code block
        "the key kg:ws:list, the id chunk-3f2a9c8d1e",  # part of a longer word
    ],
)
def test_numbers_words_and_code_blocks_are_not_commit_hashes(text: str) -> None:
    assert commit_hashes(text) == []


def test_a_link_to_a_missing_file_or_heading_is_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("# A heading, with `code`\n", encoding="utf-8")
    page.write_text(
        "[ok](there.md) [ok](there.md#a-heading-with-code) [web](https://example.org/x)\n"
        "[gone](missing.md) [no heading](there.md#nowhere) [self](#nowhere)\n"
        "```\n[in code](missing-too.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page, tmp_path) == [
        "page.md:2: missing.md",
        "page.md:2: there.md#nowhere (no such heading)",
        "page.md:2: #nowhere (no such heading)",
    ]


def test_a_code_span_naming_a_missing_repository_path_is_found(tmp_path: Path) -> None:
    for folder in ("dataflow/state", "protos/kgstream/v1", "tests/gen"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "dataflow/state/codec.py").write_text("", encoding="utf-8")
    (tmp_path / "protos/kgstream/v1/query.proto").write_text("", encoding="utf-8")
    (tmp_path / ".gitignore").write_text("/tests/gen/out/\n*.pyc\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "`dataflow/state/codec.py` and `dataflow/state/` (`kgstream/v1/query.proto`)\n"
        "`dataflow/state/snapshots.py`, `python dataflow/gone.py --fast`\n"
        "`dataflow/logic/`, `codec.py`, `DATA/recovery`, `bench/results/NAME.json`\n"
        "`tests/gen/out/client`, `https://example.org/dataflow/x`, `a/b`, `dataflow.state`\n"
        "```\n`dataflow/in/code.py`\n```\n",
        encoding="utf-8",
    )
    assert missing_paths(page, tmp_path) == [
        "page.md:2: dataflow/state/snapshots.py",
        "page.md:2: dataflow/gone.py",
        "page.md:3: dataflow/logic",
    ]


# -- the repository's pages --------------------------------------------------------------


def test_the_readme_is_a_front_door_not_a_notebook() -> None:
    size = len(README.read_bytes())
    assert size <= README_LIMIT_BYTES, (
        f"README.md is {size:,} bytes, over {README_LIMIT_BYTES:,}: move detail to docs/ "
        "(figures to docs/benchmarks.md, history to CHANGELOG.md)"
    )


def test_the_readme_carries_no_commit_hash() -> None:
    found = commit_hashes(README.read_text(encoding="utf-8"))
    assert found == [], (
        f"README.md names commits {found}: history lives in git and CHANGELOG.md, figures "
        "with their commit in docs/benchmarks.md"
    )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_that_exists(page: Path) -> None:
    assert broken_links(page) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_a_page_names_exists(page: Path) -> None:
    assert missing_paths(page) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_cites_what_lies_outside_the_repository(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    cited = [
        f"{page.relative_to(ROOT)}:{number}: {what}"
        for number, line in enumerate(text.splitlines(), 1)
        for pattern, what in _OUTSIDE
        if pattern.search(line)
    ]
    assert cited == []


def settings_page() -> ModuleType:
    """scripts/settings_page.py, the generator of docs/settings.md, as a module (registered,
    as its dataclasses need)."""
    if "settings_page" in sys.modules:
        return sys.modules["settings_page"]
    spec = importlib.util.spec_from_file_location("settings_page", SETTINGS_PAGE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_setting_says_what_it_means() -> None:
    page = settings_page()
    fields = page.read_fields(page.SOURCE.read_text(encoding="utf-8"))
    assert [field.name for field in fields if not field.meaning] == []


def test_a_setting_without_a_comment_stops_the_settings_page() -> None:
    page = settings_page()
    lines = page.SOURCE.read_text(encoding="utf-8").splitlines(keepends=True)
    field = next(i for i, line in enumerate(lines) if line.startswith("    workspace: "))
    above = field
    while lines[above - 1].lstrip().startswith("#"):
        above -= 1
    assert above < field, "the test expects a comment above `workspace`"
    del lines[above:field]
    with pytest.raises(SystemExit, match=r"no comment on the setting\(s\) workspace: "):
        page.read_fields("".join(lines))


@pytest.mark.services  # runs git or scripts/gen-docs
def test_the_generated_pages_are_what_scripts_gen_docs_writes(tmp_path: Path) -> None:
    subprocess.run([str(ROOT / "scripts" / "gen-docs"), str(tmp_path)], check=True, cwd=ROOT)
    for relative in GENERATED:
        written = (tmp_path / relative).read_text(encoding="utf-8")
        committed = (ROOT / relative).read_text(encoding="utf-8")
        assert committed == written, f"{relative} is stale: run scripts/gen-docs"


def test_every_headline_figure_of_the_readme_is_in_its_result_file() -> None:
    """Each row of the README's figures table names a result file; each number it quotes
    must be a figure of that file's tables."""
    section = README.read_text(encoding="utf-8").split("\n## Figures\n", 1)[1].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) > 1, "the README's figures table has no rows"
    for row in rows[1:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        sources = re.findall(r"\(bench/results/([\w.-]+\.json)\)", row)
        assert len(sources) == 1, f"the row names no one result file: {row}"
        result = json.loads((ROOT / "bench" / "results" / sources[0]).read_text("utf-8"))
        figures = {cell for table in result["tables"] for r in table["rows"] for cell in r}
        for number in re.findall(r"\d[\d,.]*\d|\d", cells[1]):
            assert any(number in figure for figure in figures), (
                f"README figure {number} ({cells[0]}) is not in bench/results/{sources[0]}"
            )


def test_every_test_the_docs_name_exists() -> None:
    """The invariants name the tests that check them; a renamed test must not leave its name
    behind in the docs."""
    defined = {
        match.group(1)
        for path in (ROOT / "tests").rglob("test_*.py")
        for match in re.finditer(r"def (test_\w+)", path.read_text(encoding="utf-8"))
    }
    named = {
        f"{page.relative_to(ROOT)}: {name}"
        for page in PAGES
        for name in re.findall(r"(?<![/\w])(test_\w+)(?![\w.])", page.read_text(encoding="utf-8"))
        if name not in defined
    }
    assert named == set()
