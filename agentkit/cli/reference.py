"""The CLI reference page (``docs/reference/cli.md``), generated from the command itself.

The click objects are read through small protocols rather than click's classes: typer 0.29
builds them from its own vendored copy of click, earlier releases from click itself.

The page is never written by hand: :func:`render` walks the click command tree typer builds
from :data:`agentkit.cli.app` (every command, argument and option, with its help text and
default), and a test compares the page with it, so a renamed flag or a new command that the
page does not show fails the suite. ``python -m agentkit.cli.reference --write`` regenerates
the page; ``--check`` (exit 1 on a difference) is what the test runs.
"""

from __future__ import annotations

import argparse
import difflib
import enum
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, TypeGuard, get_args, get_origin

import typer
from typer.core import TyperArgument, TyperOption

Param = TyperOption | TyperArgument


class Command(Protocol):
    """What the page reads of a click command (typer's vendored click or click itself)."""

    @property
    def help(self) -> str | None: ...
    @property
    def hidden(self) -> bool: ...
    @property
    def context_class(self) -> Callable[..., object]: ...
    def get_params(self, ctx: object, /) -> Sequence[object]: ...


class Group(Command, Protocol):
    def list_commands(self, ctx: object, /) -> Sequence[str]: ...
    def get_command(self, ctx: object, name: str, /) -> Command | None: ...


__all__ = ["PAGE", "check", "main", "render", "root_command"]

#: the page, relative to the repository root
PAGE = Path("docs") / "reference" / "cli.md"

_HEADER = """\
# CLI reference

Every `agentkit` command, argument and option, generated from the command itself
(`agentkit/cli/reference.py`); a test fails when this page and the CLI disagree. After
changing a command, regenerate it with `python -m agentkit.cli.reference --write`.

Every command takes the data root from `--data-dir` (before the command), else
`$AGENTKIT_DATA_DIR`, else `./data`. Bad input is one line on stderr and exit status 2.
"""


def root_command() -> Group:
    """The click command behind ``agentkit`` (every command module registered); a new tree
    on every call."""
    from agentkit.cli import app

    group: Group = typer.main.get_command(app)  # type: ignore[assignment]
    return group


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _type_name(param: Param) -> str:
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if annotation is None:  # click's own parameter type
        return str(getattr(getattr(param, "type", None), "name", "text")).lower()
    if get_origin(annotation) in {list, tuple} and get_args(annotation):
        annotation = get_args(annotation)[0]
    args = [a for a in get_args(annotation) if a is not type(None)]
    if args:  # X | None
        annotation = args[0]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of " + ", ".join(f"`{member.value}`" for member in annotation)
    name = str(getattr(annotation, "__name__", annotation)).lower()
    return {"str": "text", "int": "integer", "float": "number", "bool": "boolean"}.get(name, name)


def _argument_name(param: Param) -> str:
    return str(param.metavar or param.name or "").upper()


def _is_group(command: Command) -> TypeGuard[Group]:
    return hasattr(command, "list_commands")


def _default(param: Param) -> str:
    if isinstance(param, TyperOption) and param.is_flag:
        return ""
    value = param.default
    if value is None or callable(value) or value in ((), []):
        return ""
    return f"`{value}`"


def _param_row(param: Param) -> str:
    if isinstance(param, TyperOption):
        names = ", ".join(f"`{name}`" for name in [*param.opts, *param.secondary_opts])
        kind = "flag" if param.is_flag else _type_name(param)
        help_text = param.help or ""
    else:
        names = f"`{_argument_name(param)}`"
        kind = _type_name(param)
        help_text = getattr(param, "help", None) or ""
        if not param.required:
            help_text = f"(optional) {help_text}"
    if param.multiple or (param.nargs == -1):
        kind = f"{kind}, repeatable"
    return f"| {names} | {kind} | {_default(param)} | {_cell(help_text)} |"


def _section(path: list[str], command: Command, ctx: object) -> list[str]:
    name = " ".join(path)
    lines = [f"## `{name}`", ""]
    help_text = (command.help or "").strip()
    if help_text:
        lines += [help_text.split("\f")[0].strip(), ""]
    params: list[Param] = [
        p
        for p in command.get_params(ctx)
        if isinstance(p, TyperOption | TyperArgument)
        and not getattr(p, "hidden", False)
        and p.name != "help"
    ]
    usage = [name]
    if any(isinstance(p, TyperOption) for p in params):
        usage.append("[OPTIONS]")
    if _is_group(command):
        usage.append("COMMAND [ARGS]...")
    for param in params:
        if isinstance(param, TyperArgument):
            piece = _argument_name(param) + ("..." if param.nargs == -1 else "")
            usage.append(piece if param.required else f"[{piece}]")
    lines += ["```text", " ".join(usage), "```", ""]
    if params:
        lines += ["| argument / option | type | default | what it does |", "|---|---|---|---|"]
        lines += [_param_row(p) for p in params]
        lines.append("")
    return lines


def render(command: Command | None = None) -> str:
    """The whole page for *command* (default: ``agentkit`` itself), subcommands in the order
    ``agentkit --help`` lists them."""
    root = command if command is not None else root_command()
    lines = [_HEADER]

    def walk(path: list[str], cmd: Command, parent: object) -> None:
        ctx = cmd.context_class(cmd, info_name=path[-1], parent=parent)
        lines.extend(_section(path, cmd, ctx))
        if _is_group(cmd):
            for sub_name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, sub_name)
                if sub is not None and not sub.hidden:
                    walk([*path, sub_name], sub, ctx)

    walk(["agentkit"], root, None)
    return "\n".join(lines).rstrip() + "\n"


def check(page: str, command: Command | None = None) -> list[str]:
    """The differences between *page* and the page *command* renders (a unified diff; empty
    when they agree)."""
    expected = render(command)
    return list(
        difflib.unified_diff(
            page.splitlines(),
            expected.splitlines(),
            fromfile=str(PAGE),
            tofile="generated from the CLI",
            lineterm="",
        )
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m agentkit.cli.reference [--write | --check] [--root DIR]``."""
    parser = argparse.ArgumentParser(prog="python -m agentkit.cli.reference")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help="write the page")
    action.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    parser.add_argument("--root", type=Path, default=Path(), help="the repository root")
    args = parser.parse_args(argv)
    path = args.root / PAGE
    if args.write:
        path.write_text(render(), encoding="utf-8")
        return 0
    if args.check:
        diff = check(path.read_text(encoding="utf-8") if path.is_file() else "")
        for line in diff:
            sys.stdout.write(line + "\n")
        if diff:
            sys.stderr.write(f"{path} is stale: run python -m agentkit.cli.reference --write\n")
        return 1 if diff else 0
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
