"""Named baselines for the regression gate: ``agentkit baseline pin | list | rm``.

A pinned table lives under the data root (:mod:`agentkit.eval.baselines`);
``agentkit eval … --baseline NAME`` gates a new sweep against it and ``agentkit compare A B
--gate`` gates two tables, both exiting 1 on a regression (:mod:`agentkit.eval.gate`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentkit._extras import require
from agentkit.cli._app import JsonFlag, app, clean_errors, data_root, print_json

__all__ = ["baseline_app", "list_command", "pin_command", "rm_command"]

baseline_app = typer.Typer(
    name="baseline",
    help="Results tables kept by name, for 'eval --baseline NAME' to gate against.",
    no_args_is_help=True,
)
app.add_typer(baseline_app)


@baseline_app.command("pin")
def pin_command(
    ctx: typer.Context,
    results: Annotated[Path, typer.Argument(help="A results table (.parquet or .csv).")],
    name: Annotated[str, typer.Argument(help="The baseline's name (replaced if it exists).")],
) -> None:
    """Keep RESULTS as the baseline NAME under the data root."""
    with clean_errors():
        require("eval", "agentkit baseline", "pandas", "pyarrow")
        from agentkit.eval.baselines import pin_baseline

        pinned = pin_baseline(results, name, data_root(ctx))
        typer.echo(f"pinned {pinned.name}: {pinned.runs} runs from {results} ({pinned.path})")


@baseline_app.command("list")
def list_command(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """The pinned baselines: name, runs, when and from where."""
    with clean_errors():
        from agentkit.eval.baselines import list_baselines

        items = list_baselines(data_root(ctx))
        if as_json:
            print_json(
                [
                    {"name": b.name, "runs": b.runs, "pinned_at": b.pinned_at, "source": b.source}
                    for b in items
                ]
            )
            return
        if not items:
            typer.echo("no baselines pinned")
        for item in items:
            typer.echo(f"{item.name}\t{item.runs} runs\t{item.pinned_at}\t{item.source}")


@baseline_app.command("rm")
def rm_command(
    ctx: typer.Context, name: Annotated[str, typer.Argument(help="The baseline to forget.")]
) -> None:
    """Forget the baseline NAME."""
    with clean_errors():
        from agentkit.eval.baselines import remove_baseline

        remove_baseline(name, data_root(ctx))
        typer.echo(f"removed {name}")
