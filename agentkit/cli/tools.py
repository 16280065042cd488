"""An agent's tools: list them, run one as the user."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from agentkit.agent_folder import AgentFolder
from agentkit.cli._app import AgentArg, JsonFlag, app, clean_errors, data_root, print_json

__all__ = ["tool_command", "tools_command"]


@app.command("tool")
def tool_command(
    ctx: typer.Context,
    agent_id: AgentArg,
    tool: Annotated[str, typer.Argument(help="Tool name (agentkit tools AGENT lists them).")],
    json_args: Annotated[str, typer.Argument(help="Arguments as a JSON object.")] = "{}",
) -> None:
    """Run one of the agent's tools directly, as the user; print its JSON result.

    This is how a user changes state outside the chat. Side-effecting tools run without a
    confirmation (you are the user). Secrets are masked in the output. Exit 1 when the tool
    reports a failure.
    """
    from agentkit.tools import run_tool

    with clean_errors():
        folder = AgentFolder.load(data_root(ctx), agent_id)
        result = run_tool(folder, tool, json_args)
        typer.echo(result.text)
        if not result.ok:
            raise typer.Exit(1)


@app.command("tools")
def tools_command(ctx: typer.Context, agent_id: AgentArg, as_json: JsonFlag = False) -> None:
    """List an agent's tools: toolset, flags, description and argument schema."""
    from agentkit.tools import AgentTools

    with clean_errors():
        with AgentTools.load(AgentFolder.load(data_root(ctx), agent_id)) as tools:
            rows = [
                {
                    "name": tool.name,
                    "toolset": tool.source,
                    "side_effect": tool.side_effect,
                    "live_state": tool.live_state,
                    "description": tool.description,
                    "examples": list(tool.examples),
                    "consent": tool.consent,
                    "schema": tool.json_schema(),
                }
                for tool in map(tools.registry.get, tools.registry.names())
            ]
        if as_json:
            print_json(rows)
            return
        if not rows:
            typer.echo(f"{agent_id} has no tools (its config.json names no toolsets)")
        for row in rows:
            flags = "side_effect" if row["side_effect"] else "read"
            flags += ", live_state" if row["live_state"] else ""
            typer.echo(f"{row['name']:<24} [{flags}] ({row['toolset']}) {row['description']}")
            schema = row["schema"]
            assert isinstance(schema, dict)
            shown = {key: schema[key] for key in ("properties", "required") if schema.get(key)}
            typer.echo(f"  args: {json.dumps(shown, ensure_ascii=False, separators=(',', ':'))}")
