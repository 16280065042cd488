"""Branches: fork a conversation at a turn, replay it from a turn under other settings."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentkit.cli._app import (
    AgentArg,
    ConversationArg,
    ModelOption,
    app,
    clean_errors,
    data_root,
    open_agent,
)
from agentkit.errors import UsageError
from agentkit.ids import check_id

__all__ = ["fork_command", "replay_command"]


@app.command("fork")
def fork_command(
    ctx: typer.Context,
    agent_id: AgentArg,
    conversation_id: ConversationArg,
    at: Annotated[
        str | None,
        typer.Option("--at", help="The turn (message id) to fork at; default: the last one."),
    ] = None,
    title: Annotated[str | None, typer.Option("--title", help="The fork's title.")] = None,
) -> None:
    """Fork a conversation at a turn, with its memory as it stood then; print the new id."""
    with clean_errors():
        if at is not None:  # an empty --at is a mistake, not the default (the last turn)
            check_id(at, "message")
        with open_agent(ctx, agent_id) as agent:
            meta = agent.fork(conversation_id, at=at, title=title)
        typer.echo(meta.conversation_id)


def _prompts(items: list[str]) -> dict[str, str]:
    prompts: dict[str, str] = {}
    for item in items:
        name, sep, file = item.partition("=")
        if not sep or not name.strip() or not file.strip():
            raise UsageError(f"--prompt needs NAME=FILE (e.g. plan=my_plan.md), got {item!r}")
        prompts[name.strip()] = file.strip()
    return prompts


@app.command("replay")
def replay_command(
    ctx: typer.Context,
    agent_id: AgentArg,
    conversation_id: ConversationArg,
    from_message: Annotated[
        str | None,
        typer.Option("--from", help="The first turn (message id) to replay; default: the first."),
    ] = None,
    model: ModelOption = None,
    assignments: Annotated[
        list[str] | None,
        typer.Option("--set", help="KEY=VALUE in config.json, e.g. planner.strategy=next_step."),
    ] = None,
    prompt_files: Annotated[
        list[str] | None,
        typer.Option("--prompt", help="NAME=FILE: use FILE as prompt template NAME (e.g. plan)."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the comparison (.parquet or .csv).")
    ] = None,
) -> None:
    """Replay a conversation from a turn under another model, config or prompt: a branch
    beside it, and a side-by-side table per turn."""
    with clean_errors():
        from agentkit.replays import replay

        if out is not None and out.suffix not in (".csv", ".parquet"):
            raise UsageError(f"--out must end in .csv or .parquet, got {out.name!r}")
        table = replay(
            agent_id,
            conversation_id,
            from_message=from_message,
            model=model,
            sets=assignments or [],
            prompts=_prompts(prompt_files or []),
            data_dir=data_root(ctx),
        )
        shown = ["turn", "user", "original_answer", "branch_answer", "original_tools"]
        shown += ["branch_tools", "original_consent", "branch_consent"]
        shown += ["original_model_calls", "branch_model_calls", "original_tokens"]
        shown += ["branch_tokens", "original_latency_ms", "branch_latency_ms"]
        typer.echo(f"branch {table.attrs['branch']}")
        typer.echo(table[shown].to_string(index=False, max_colwidth=40))
        if out is not None:
            if out.suffix == ".csv":
                table.to_csv(out, index=False)
            else:
                table.to_parquet(out, index=False)
            typer.echo(f"wrote {out} ({len(table)} rows)")
