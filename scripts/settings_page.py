"""Writes docs/settings.md, the settings reference, from kgstream/settings.py itself.

Every field of `Settings` is listed in source order with its environment variable, the
command-line flags that set it, its type and default, and what the source says of it: the
comment block right above the field, its end-of-line comment, or a docstring after it. A
field with none of these stops the script, naming it, so the page cannot lose a meaning. The
flags are found by running the CLI's own argument handling (`kgstream.cli.settings_from`) on
each option and seeing which setting it changes, so nothing here repeats the CLI.

    .venv/bin/python scripts/settings_page.py docs/settings.md   # what scripts/gen-docs runs
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import io
import os
import sys
import tokenize
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from kgstream import cli, settings  # noqa: E402

SOURCE = Path(settings.__file__)


@dataclass(frozen=True)
class Field:
    name: str
    block: str  # the comment block right above it
    own: str  # its end-of-line comments and its attribute docstring

    @property
    def meaning(self) -> str:
        return "; ".join(text for text in (self.block, self.own) if text)


def _comments(source: str) -> dict[int, tuple[str, bool]]:
    """Line number -> (comment text, whether the line holds only the comment)."""
    found: dict[int, tuple[str, bool]] = {}
    lines = source.splitlines()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            row, column = token.start
            text = token.string.lstrip("#").strip()
            found[row] = (text, not lines[row - 1][:column].strip())
    return found


def read_fields(source: str) -> list[Field]:
    """The fields of `Settings` in source order, with the comments that describe them; stops
    (SystemExit) when the source's fields are not the dataclass's, or one has no comment."""
    tree = ast.parse(source)
    comments = _comments(source)
    klass = next(
        node
        for node in tree.body
        if isinstance(node, ast.ClassDef) and node.name == settings.Settings.__name__
    )
    found = []
    body = klass.body
    for index, node in enumerate(body):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        block: list[str] = []
        row = node.lineno - 1
        while row in comments and comments[row][1]:
            block.insert(0, comments[row][0])
            row -= 1
        end = node.end_lineno or node.lineno
        own = [comments[r][0] for r in range(node.lineno, end + 1) if r in comments]
        following = body[index + 1] if index + 1 < len(body) else None
        if (
            isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            own.append(" ".join(following.value.value.split()))
        found.append(Field(node.target.id, " ".join(block), " ".join(own)))
    declared = [field.name for field in dataclasses.fields(settings.Settings)]
    if [field.name for field in found] != declared:
        raise SystemExit(
            f"{SOURCE}: the fields read from the source ({[f.name for f in found]}) are not "
            f"the dataclass's ({declared})"
        )
    silent = [field.name for field in found if not field.meaning]
    if silent:
        raise SystemExit(
            f"{SOURCE}: no comment on the setting(s) {', '.join(silent)}: write one line "
            "right above each (or at the end of its line) saying what it does, with its unit "
            "and limits; docs/settings.md takes the setting's meaning from it"
        )
    return found


# -- flags ---------------------------------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> Mapping[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps its subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _sample(action: argparse.Action) -> list[str]:
    """Arguments that exercise `action` with a value every setting of its kind accepts."""
    option = action.option_strings[-1] if action.option_strings else ""
    if action.nargs == 0:
        return [option]
    if action.choices:
        value = str(next(iter(action.choices)))
    else:
        value = "3" if action.type is int else "127.0.0.1:1"
    return [option, value] if option else [value]


def flags_by_setting() -> dict[str, list[str]]:
    """Setting name -> "--flag (command, ...)" for every CLI option that sets it."""
    parser = cli.build_parser()
    saved = {k: v for k, v in os.environ.items() if k.startswith(("KGSTREAM_", "OPENAI_"))}
    for key in saved:
        del os.environ[key]
    try:
        commands_of: dict[tuple[str, str], list[str]] = {}
        for name, sub in _subcommands(parser).items():
            needed = [a for a in sub._actions if not a.option_strings or a.required]
            required = [word for a in needed for word in _sample(a)]
            baseline = cli.settings_from(parser.parse_args([name, *required]))
            for action in sub._actions:
                if action in needed or isinstance(action, argparse._HelpAction):
                    continue
                try:
                    with contextlib.redirect_stderr(io.StringIO()):
                        args = parser.parse_args([name, *required, *_sample(action)])
                    changed = cli.settings_from(args)
                except (SystemExit, settings.SettingsError):
                    continue
                for field in dataclasses.fields(settings.Settings):
                    if getattr(changed, field.name) != getattr(baseline, field.name):
                        flag = " / ".join(sorted(action.option_strings, key=len, reverse=True))
                        commands_of.setdefault((field.name, flag), []).append(name)
    finally:
        os.environ.update(saved)
    every = set(_subcommands(parser))
    flags: dict[str, list[str]] = {}
    for (setting, flag), commands in sorted(commands_of.items()):
        missing = sorted(every - set(commands))
        if not missing:
            where = "every command"
        elif len(missing) <= 2:
            where = "every command but " + " and ".join(missing)
        else:
            where = ", ".join(commands)
        flags.setdefault(setting, []).append(f"`{flag}` ({where})")
    return flags


# -- the page --------------------------------------------------------------------------------


def type_name(annotation: Any) -> str:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if args and type(None) in typing.get_args(annotation):
        annotation = args[0]
    if typing.get_origin(annotation) is tuple:
        return "list (comma-separated)"
    if annotation is Path:
        return "path"
    return getattr(annotation, "__name__", str(annotation))


def shown_default(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, tuple):
        return "`" + ",".join(str(v) for v in value) + "`" if value else "empty"
    if isinstance(value, str) and not value:
        return "empty"
    return f"`{value}`"


def environment_names(name: str) -> str:
    names = [f"`{settings.ENV_PREFIX}{name.upper()}`"]
    names += [f"`{alias}`" for alias, field in settings.ENV_ALIASES.items() if field == name]
    return ", ".join(names)


HEADER = """\
# Settings

Every setting of kgstream, generated from `kgstream/settings.py` by `scripts/gen-docs` (do not
edit this page; a test fails when it differs from what the script writes). Each setting's
meaning is the source's own comment on it.

kgstream builds one settings object when a command starts, from these sources, each overriding
the ones before it:

1. the defaults below;
2. a TOML file, `kgstream --config FILE COMMAND ...`, whose keys are the setting names
   (`chunk_token_size = 800`; lists as TOML arrays);
3. the environment: `{prefix}<NAME>` for each setting (`{prefix}CHUNK_TOKEN_SIZE=800`;
   lists comma-separated; booleans `true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off`), and
   {aliases} as OpenAI's tools name them;
4. the command's flags (the *flags* column).

Any environment variable may instead name a file holding the value, as Docker and Kubernetes
mount secrets: `<VARIABLE>{file_suffix}`
(`{prefix}REDIS_PASSWORD{file_suffix}=/run/secrets/redis`; one trailing newline is dropped;
setting both forms of one variable is an error). `kgstream config` prints the effective
settings with the secrets masked ({secrets}); no log line or error message shows a
secret.
"""


def render(fields: Sequence[Field], flags: Mapping[str, Sequence[str]]) -> str:
    hints = typing.get_type_hints(settings.Settings)
    defaults = settings.Settings()
    aliases = ", ".join(
        f"`{alias}` (`{field}`)" for alias, field in sorted(settings.ENV_ALIASES.items())
    )
    lines = [
        HEADER.format(
            prefix=settings.ENV_PREFIX,
            file_suffix=settings.FILE_SUFFIX,
            aliases=aliases,
            secrets=", ".join(f"`{name}`" for name in sorted(settings.SECRET_FIELDS)),
        )
    ]
    lines.append("| setting | environment | flags | type | default | meaning |")
    lines.append("|---|---|---|---|---|---|")
    for field in fields:
        cells = (
            f"`{field.name}`",
            environment_names(field.name),
            "<br>".join(flags.get(field.name, ())),
            type_name(hints[field.name]),
            shown_default(getattr(defaults, field.name)),
            field.meaning.replace("|", "\\|"),
        )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path)
    args = parser.parse_args(argv)
    page = render(read_fields(SOURCE.read_text(encoding="utf-8")), flags_by_setting())
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(page, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
