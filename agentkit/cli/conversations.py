"""Conversations and memory: list, read, delete, verify; TaskState and ExecutionState."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer

from agentkit.agent_folder import AgentFolder
from agentkit.cli._app import (
    AgentArg,
    ConversationArg,
    JsonFlag,
    StoreOption,
    app,
    clean_errors,
    data_root,
    open_agent,
    print_json,
)
from agentkit.errors import ConversationNotFoundError
from agentkit.types import format_timestamp

if TYPE_CHECKING:
    from agentkit.memory import MemoryRepository
    from agentkit.types import ConversationMeta

__all__ = [
    "clear_command",
    "conversations_command",
    "delete_command",
    "history_command",
    "state_command",
    "verify_command",
]


def _meta_line(meta: ConversationMeta) -> str:
    return (
        f"{meta.conversation_id:<32} {meta.status:<9} {meta.stats.message_count:>5} msgs  "
        f"{format_timestamp(meta.updated_at)}  {meta.title}"
    )


@app.command("conversations")
def conversations_command(
    ctx: typer.Context, agent_id: AgentArg, as_json: JsonFlag = False
) -> None:
    """List an agent's conversations, most recently updated first."""
    with clean_errors():
        metas = open_agent(ctx, agent_id).list_conversations()
        if as_json:
            print_json([meta.to_json_dict() for meta in metas])
            return
        for meta in metas:
            typer.echo(_meta_line(meta))


@app.command("history")
def history_command(
    ctx: typer.Context,
    agent_id: AgentArg,
    conversation_id: ConversationArg,
    as_json: JsonFlag = False,
) -> None:
    """Print a conversation's messages (with --json: a JSON array)."""
    with clean_errors():
        messages = open_agent(ctx, agent_id).load_conversation_history(conversation_id)
        if as_json:
            print_json([message.to_json_dict() for message in messages])
            return
        for message in messages:
            typer.echo(f"[{format_timestamp(message.timestamp)}] {message.role}: {message.content}")


@app.command("delete")
def delete_command(
    ctx: typer.Context, agent_id: AgentArg, conversation_id: ConversationArg
) -> None:
    """Delete a conversation and its folder."""
    with clean_errors():
        open_agent(ctx, agent_id).delete_conversation(conversation_id)
        typer.echo(f"deleted {agent_id}/{conversation_id}")


@app.command("verify")
def verify_command(
    ctx: typer.Context,
    agent_id: Annotated[str | None, typer.Argument(help="Only this agent.")] = None,
    repair: Annotated[
        bool,
        typer.Option("--repair", help="First rebuild every view file from its journal."),
    ] = False,
    store_spec: StoreOption = None,
) -> None:
    """Check conversations for inconsistencies; exit 1 when any are found.

    Views are read by what they say: one written by an earlier release that agrees with the
    journal is listed as "written by an earlier release (fine)" and is not a problem; the
    next turn, or ``--repair``, writes it in the current format."""
    with clean_errors():
        root = data_root(ctx)
        if agent_id is not None:
            AgentFolder.load(root, agent_id)  # an unknown agent is an error, not "0 checked"
        from agentkit.store.choice import open_stores

        opened = open_stores(store_spec, root)
        try:
            store = opened.conversations
            if repair:
                for key in store.recover(agent_id, full=True):
                    typer.echo(f"recovered {key}")
            report = store.verify(agent_id)
        finally:
            opened.close()
        for note in report.notes:
            typer.echo(str(note))
        for problem in report.problems:
            typer.echo(str(problem))
        summary = f"{report.conversations} conversations checked, {len(report.problems)} problems"
        if report.notes:
            summary += f"; {len(report.notes)} views written by an earlier release (fine)"
        typer.echo(summary)
        if not report.ok:
            raise typer.Exit(1)


@contextmanager
def _memory_of(
    ctx: typer.Context, agent_id: str, conversation_id: str
) -> Iterator[MemoryRepository]:
    """The memory repository, once the agent and the conversation are known to exist (the
    agent's: ``agentkit.db`` under the data root, or the PostgreSQL store it was opened on)."""
    from agentkit.store import ConversationKey

    agent = open_agent(ctx, agent_id)
    try:
        if not agent.store.exists(ConversationKey(agent.id, conversation_id)):
            raise ConversationNotFoundError(agent.id, conversation_id)
        yield agent.memory
    finally:
        agent.close()


@app.command("state")
def state_command(
    ctx: typer.Context,
    agent_id: AgentArg,
    conversation_id: ConversationArg,
    as_json: JsonFlag = False,
) -> None:
    """Show a conversation's TaskState and ExecutionState (the planner's memory)."""
    with clean_errors():
        with _memory_of(ctx, agent_id, conversation_id) as memory:
            task = memory.load_task_state(agent_id, conversation_id)
            execution = memory.load_execution_state(agent_id, conversation_id)
        if as_json:
            # A step waiting for consent keeps its raw arguments; never print a secret.
            from agentkit.calls.secrets import mask_secrets

            print_json(
                mask_secrets(
                    {
                        "task_state": task.value.model_dump(mode="json"),
                        "execution_state": (
                            execution.value.model_dump(mode="json") if execution else None
                        ),
                    }
                )
            )
            return
        typer.echo(task.value.render() or "TaskState: empty")
        if execution is None:
            typer.echo("ExecutionState: none")
            return
        state = execution.value
        typer.echo(f"ExecutionState: {state.status} — {state.goal}")
        for step in state.steps:
            typer.echo(f"  [{step.status:<7}] {step.id} {step.type:<8} {step.title}")


@app.command("clear")
def clear_command(ctx: typer.Context, agent_id: AgentArg, conversation_id: ConversationArg) -> None:
    """Forget a conversation's TaskState and ExecutionState (what /clear does in a chat)."""
    with clean_errors():
        with _memory_of(ctx, agent_id, conversation_id) as memory:
            memory.clear(agent_id, conversation_id)
        typer.echo(f"cleared the memory of {agent_id}/{conversation_id}")


@app.command("approvals")
def approvals_command(
    ctx: typer.Context,
    agent_id: AgentArg,
    conversation_id: ConversationArg,
    as_json: JsonFlag = False,
) -> None:
    """List a conversation's pending approvals (by id) and how earlier ones were decided."""
    with clean_errors():
        agent = open_agent(ctx, agent_id)
        try:
            pending = agent.pending_approvals(conversation_id)
            decided = agent.approval_decisions(conversation_id)
        finally:
            agent.close()
        if as_json:
            print_json(
                {
                    "pending": [approval.model_dump(mode="json") for approval in pending],
                    "decided": [decision.model_dump(mode="json") for decision in decided],
                }
            )
            return
        if not pending and not decided:
            typer.echo("no approvals")
        for approval in pending:
            args = json.dumps(approval.tool_args, ensure_ascii=False, sort_keys=True)
            typer.echo(f"{approval.approval_id}  pending  {approval.tool_name} {args}")
        for decision in decided:
            edited = " (edited arguments)" if decision.args is not None else ""
            typer.echo(
                f"{decision.approval_id}  {decision.decision} via {decision.source}{edited}  "
                f"{decision.tool_name}  {decision.at:%Y-%m-%d %H:%M:%S}"
            )
