"""Agents: list them, show one, create a conversation, create a new agent folder."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentkit.agent_folder import PROMPT_FILES, AgentFolder, list_agent_ids
from agentkit.cli._app import (
    AgentArg,
    JsonFlag,
    app,
    clean_errors,
    data_root,
    open_agent,
    print_json,
)
from agentkit.errors import AgentkitError

if TYPE_CHECKING:
    from agentkit.agent import Agent

__all__ = ["agents_command", "info_command", "init_command", "new_command"]


def _agent_info(agent: Agent) -> dict[str, Any]:
    config = agent.config
    return {
        "agentId": agent.id,
        "name": agent.folder.name,
        "description": config.description,
        "engine": config.engine,
        "model": config.model,
        "path": str(agent.folder.path),
        "promptFiles": [p.name for p in agent.folder.prompt_files()],
        "conversationCount": len(agent.list_conversations()),
        "config": config.model_dump(mode="json"),
    }


@app.command("agents")
def agents_command(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """List the agents under the data root."""
    with clean_errors():
        root = data_root(ctx)
        rows: list[dict[str, Any]] = []
        for agent_id in list_agent_ids(root):
            try:
                folder = AgentFolder.load(root, agent_id)
            except AgentkitError as error:
                rows.append({"agentId": agent_id, "error": str(error)})
                continue
            config = folder.config
            rows.append(
                {
                    "agentId": agent_id,
                    "name": folder.name,
                    "engine": config.engine,
                    "model": config.model,
                    "description": config.description,
                }
            )
        if as_json:
            print_json(rows)
            return
        if not rows:
            typer.echo(f"no agents under {root / 'agents'}")
        for row in rows:
            if "error" in row:
                typer.echo(f"{row['agentId']:<24} (invalid: {row['error']})")
            else:
                typer.echo(
                    f"{row['agentId']:<24} {row['engine']:<8} {row['model']:<16} {row['name']}"
                )


@app.command("info")
def info_command(ctx: typer.Context, agent_id: AgentArg, as_json: JsonFlag = False) -> None:
    """Show an agent's configuration, prompt files and conversation count."""
    with clean_errors():
        info = _agent_info(open_agent(ctx, agent_id))
        if as_json:
            print_json(info)
            return
        typer.echo(f"{info['agentId']} — {info['name']}")
        if info["description"]:
            typer.echo(info["description"])
        typer.echo(f"engine:        {info['engine']}")
        typer.echo(f"model:         {info['model']}")
        typer.echo(f"path:          {info['path']}")
        present = set(info["promptFiles"])
        order = ", ".join(name if name in present else f"({name})" for name in PROMPT_FILES)
        typer.echo(f"system prompt: {order}")
        typer.echo(f"conversations: {info['conversationCount']}")


@app.command("new")
def new_command(
    ctx: typer.Context,
    agent_id: AgentArg,
    title: Annotated[str, typer.Option("--title", help="Conversation title.")] = "New conversation",
) -> None:
    """Create a conversation; prints its id alone on stdout."""
    with clean_errors():
        meta = open_agent(ctx, agent_id).create_conversation(title)
        typer.echo(meta.conversation_id)


class _EngineChoice(StrEnum):
    chat = "chat"
    planner = "planner"


@app.command("init")
def init_command(
    ctx: typer.Context,
    agent_id: Annotated[str, typer.Argument(help="The new agent's id, e.g. my-agent.")],
    engine: Annotated[
        _EngineChoice, typer.Option("--engine", help="chat, or planner (with example tools).")
    ] = _EngineChoice.planner,
) -> None:
    """Create a new agent folder: prompt files, config.json and, for a planner, tools.py."""
    from agentkit.scaffold import init_agent

    with clean_errors():
        folder = init_agent(data_root(ctx), agent_id, engine=engine.value)
        typer.echo(f"created {folder}")
        if engine is _EngineChoice.planner:
            typer.echo(f"  tools: agentkit tools {agent_id}")
            typer.echo(
                f'  try:   agentkit send {agent_id} "what reminders do I have?" '
                "--model scripted:script.json"
            )
        else:
            typer.echo(f'  try:   agentkit send {agent_id} "hello"')
