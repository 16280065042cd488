"""The ``agentkit`` application object and what every command shares: the data root, the
argument types, and how errors are printed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agentkit.agent_folder import resolve_data_dir
from agentkit.errors import AgentkitError, UsageError

if TYPE_CHECKING:
    from agentkit.agent import Agent

__all__ = [
    "AgentArg",
    "ConversationArg",
    "ConversationOption",
    "JsonFlag",
    "ModelOption",
    "StoreOption",
    "app",
    "clean_errors",
    "data_root",
    "exporting",
    "open_agent",
    "print_json",
]

app = typer.Typer(
    name="agentkit",
    help="Build, run and study conversational planning agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@dataclass(frozen=True)
class _Context:
    data_dir: Path


JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
AgentArg = Annotated[str, typer.Argument(help="Agent id, e.g. innovator-001.")]
ConversationArg = Annotated[str, typer.Argument(help="Conversation id, e.g. conv-….")]
ModelOption = Annotated[
    str | None,
    typer.Option("--model", help="Model spec (wins over $AGENTKIT_MODEL and config.json)."),
]
StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        envvar="AGENTKIT_STORE",
        show_envvar=True,
        help="Where conversations and memory live: a postgresql://… URL "
        "(default: files under the data root).",
    ),
]
ConversationOption = Annotated[
    str | None,
    typer.Option("--conversation", "-c", help="Continue this conversation (default: a new one)."),
]


@app.callback()
def _root(
    ctx: typer.Context,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir",
            help="Data root (default: $AGENTKIT_DATA_DIR, else ./data).",
            file_okay=False,
        ),
    ] = None,
) -> None:
    ctx.obj = _Context(resolve_data_dir(data_dir))


def data_root(ctx: typer.Context) -> Path:
    """The data root of this invocation."""
    context = ctx.obj
    assert isinstance(context, _Context)
    return context.data_dir


@contextmanager
def clean_errors() -> Iterator[None]:
    """Turn agentkit's errors into one line on stderr and exit status 2 (1 for failures)."""
    try:
        yield
    except UsageError as error:
        typer.echo(f"agentkit: error: {error}", err=True)
        raise typer.Exit(2) from None
    except AgentkitError as error:
        typer.echo(f"agentkit: error: {error}", err=True)
        raise typer.Exit(1) from None


@contextmanager
def exporting() -> Iterator[None]:
    """The command's spans exported over OTLP when the ``OTEL_*`` variables ask for it and
    the ``otel`` extra is installed (:mod:`agentkit.telemetry.setup`); flushed at the end."""
    from agentkit.telemetry.setup import exporting as sdk_exporting

    with sdk_exporting():
        yield


def print_json(value: object) -> None:
    typer.echo(json.dumps(value, ensure_ascii=False, indent=2))


def open_agent(ctx: typer.Context, agent_id: str) -> Agent:
    from agentkit.agent import Agent  # imported by the commands that need it: `agents` is fast

    return Agent.open(agent_id, data_dir=data_root(ctx))
