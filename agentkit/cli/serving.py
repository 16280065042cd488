"""Serving and studying agents: the HTTP API, the ACP agent on stdio, evaluation sweeps."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentkit._extras import require
from agentkit.cli._app import AgentArg, ModelOption, app, clean_errors, data_root, exporting
from agentkit.errors import UsageError
from agentkit.workspace import resolve_data_dir

__all__ = ["acp_command", "eval_command", "serve_command"]


@app.command("serve")
def serve_command(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option("--host", help="Address to bind; anything but loopback needs a token.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to bind.", min=1, max=65535)] = 8765,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="AGENTKIT_TOKEN",
            show_envvar=True,
            help="Require 'Authorization: Bearer TOKEN' on every route but /api/health.",
        ),
    ] = None,
    model: ModelOption = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host", help="Another name clients may use in the Host header (repeatable)."
        ),
    ] = None,
) -> None:
    """Serve the agents over HTTP: the /api/agent/… routes, chat as server-sent events."""
    with clean_errors(), exporting():
        from agentkit.api import serve  # FastAPI and uvicorn load only for this command

        serve(
            data_root(ctx),
            host=host,
            port=port,
            token=token or None,
            model=model,
            allowed_hosts=allow_host,
            announce=lambda line: typer.echo(line, err=True),
        )


@app.command("acp")
def acp_command(
    ctx: typer.Context,
    agent_id: AgentArg,
    model: ModelOption = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir", help="Data root (overrides the global --data-dir).", file_okay=False
        ),
    ] = None,
) -> None:
    """Serve the agent over the Agent Client Protocol on stdio (Zed, JetBrains, marimo, jupyter-ai).

    Only protocol messages go to stdout; logs go to stderr. Runs until the client closes stdin.
    """
    with clean_errors(), exporting():
        from agentkit.acp_server import serve_stdio  # the ACP edge loads only for this command

        root = resolve_data_dir(data_dir) if data_dir is not None else data_root(ctx)
        serve_stdio(agent_id, data_dir=root, model=model)


@app.command("eval")
def eval_command(
    ctx: typer.Context,
    scenarios: Annotated[
        list[Path], typer.Argument(help="Scenario files, or folders of them (not recursive).")
    ],
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="'scripted' (each scenario's own replies) or a model spec such as llama "
            "(default: each agent's config.json).",
        ),
    ] = None,
    assignments: Annotated[
        list[str] | None,
        typer.Option(
            "--set", help="KEY=VALUE in config.json for every run, e.g. compression.keep_recent=4."
        ),
    ] = None,
    axes: Annotated[
        list[str] | None,
        typer.Option("--grid", help="KEY=V1,V2,… to sweep (repeatable: the runs are the product)."),
    ] = None,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Local worker processes.")] = 1,
    executor: Annotated[
        str, typer.Option("--executor", help="local, or dask://HOST:PORT (a Dask scheduler).")
    ] = "local",
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the results table (.parquet or .csv).")
    ] = None,
    tags: Annotated[
        list[str] | None, typer.Option("--tag", help="Only scenarios with this tag (repeatable).")
    ] = None,
    keep: Annotated[
        Path | None,
        typer.Option("--keep", help="Keep each run's data root under this folder, to browse."),
    ] = None,
    turn_timeout: Annotated[
        float | None, typer.Option("--turn-timeout", help="Seconds one turn may take.")
    ] = None,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Show a progress bar on stderr.")
    ] = True,
    retries: Annotated[
        int, typer.Option("--retries", min=0, help="Run a run that ended in an error again.")
    ] = 0,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume", help="Keep the finished runs of an existing --out table; run the rest."
        ),
    ] = False,
) -> None:
    """Run scenarios at every point of a parameter grid; print a summary, write a table."""
    with clean_errors(), exporting():
        require("eval", "agentkit eval", "pandas", "yaml", "tqdm")
        from agentkit.eval import (
            check_output_path,
            load_results,
            parse_grid,
            parse_sets,
            report,
            run_eval,
            save_results,
        )

        target = check_output_path(out) if out is not None else None
        if _first_tool_tables(scenarios):
            _eval_first_tool(ctx, scenarios, model, assignments or [], tags or [], target)
            return
        if resume and target is None:
            raise UsageError("--resume needs --out: the table to resume")
        previous = load_results(target) if resume and target and target.exists() else None
        frame = run_eval(
            scenarios,
            model=model,
            sets=parse_sets(assignments or []),
            grid=parse_grid(axes or []),
            workers=workers,
            executor=executor,
            data_dir=data_root(ctx),
            tags=tags or [],
            keep_dir=keep,
            turn_timeout=turn_timeout,
            progress=progress,
            retries=retries,
            previous=previous,
        )
        typer.echo(report(frame))
        if target is not None:
            save_results(frame, target)
            typer.echo(f"wrote {target} ({len(frame)} rows, {len(frame.columns)} columns)")


def _first_tool_tables(paths: list[Path]) -> bool:
    from agentkit.eval.first_tool import is_first_tool_table

    return bool(paths) and all(is_first_tool_table(path) for path in paths)


def _eval_first_tool(
    ctx: typer.Context,
    paths: list[Path],
    model: str | None,
    assignments: list[str],
    splits: list[str],
    target: Path | None,
) -> None:
    """First-tool tables (``kind: first_tool``): each request's first action, then per table
    and split the accuracy, "no tool" precision, side-effect false positives and latency;
    ``--tag dev`` / ``--tag heldout`` runs one split."""
    import pandas as pd

    from agentkit.eval import parse_sets, save_results
    from agentkit.eval.first_tool import (
        first_tool_report,
        first_tool_summary,
        load_first_tool_tables,
        run_first_tool,
    )

    tables = load_first_tool_tables(paths)
    rows = run_first_tool(
        tables,
        data_dir=data_root(ctx),
        model=model,
        params=parse_sets(assignments),
        splits=tuple(splits) or ("dev", "heldout"),
    )
    typer.echo(first_tool_report(first_tool_summary(rows)))
    if target is not None:
        save_results(pd.DataFrame(rows), target)
        typer.echo(f"wrote {target} ({len(rows)} rows)")
