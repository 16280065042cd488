"""The ``agentkit`` command line.

Every command takes the data root from ``--data-dir`` (else ``$AGENTKIT_DATA_DIR``, else
``./data``). Bad input (an invalid id, an unknown agent or conversation) prints one line on
stderr and exits with status 2, having written nothing; so does a command whose extra is not
installed (``agentkit serve`` without ``agentkit[serve]``), naming the pip command.

The application and what commands share is :mod:`agentkit.cli._app`; each module here adds a
group of commands: :mod:`~agentkit.cli.agents`, :mod:`~agentkit.cli.conversations`,
:mod:`~agentkit.cli.turns`, :mod:`~agentkit.cli.tools`, :mod:`~agentkit.cli.serving`,
:mod:`~agentkit.cli.scoring`, :mod:`~agentkit.cli.baselines`.
"""

from __future__ import annotations

import sys

import typer

# each module registers its commands on ``app`` (the order is the order of --help)
from agentkit.cli import (  # noqa: F401
    agents,
    baselines,
    branches,
    conversations,
    db,
    labels,
    report,
    scoring,
    serving,
    tools,
    transfer,
    turns,
)
from agentkit.cli._app import app
from agentkit.errors import MissingExtraError

__all__ = ["app", "main"]


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``agentkit`` script: usage errors too are one line on stderr."""
    args = sys.argv[1:] if argv is None else argv
    try:
        code = app(args=args or ["--help"], prog_name="agentkit", standalone_mode=False)
    except typer.Abort:
        typer.echo("agentkit: aborted", err=True)
        code = 130
    except typer.TyperException as error:  # usage errors: unknown option, missing argument, …
        format_message = getattr(error, "format_message", error.__str__)
        typer.echo(f"agentkit: error: {format_message()}", err=True)
        code = getattr(error, "exit_code", 2)
    except MissingExtraError as error:  # raised outside clean_errors(), e.g. by an import
        typer.echo(f"agentkit: error: {error}", err=True)
        code = 2
    sys.exit(code if isinstance(code, int) else 0)
