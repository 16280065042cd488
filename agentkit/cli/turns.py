"""Turns from the terminal: one message (``send``) or a chat (``chat``)."""

from __future__ import annotations

import json
import signal
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from agentkit.cli._app import (
    AgentArg,
    ConversationOption,
    ModelOption,
    StoreOption,
    app,
    clean_errors,
    data_root,
    exporting,
)

if TYPE_CHECKING:  # the commands import them when they run: `agentkit agents` stays fast
    import asyncio
    from collections.abc import Coroutine

    from agentkit.agent import Agent
    from agentkit.events import ResultEvent, ToolResultEvent

__all__ = ["chat_command", "send_command"]


async def _turn(
    agent: Agent, conversation_id: str | None, text: str, as_json: bool, *, quiet: bool = False
) -> ResultEvent:
    """Run one turn, printing as it streams (each tool the turn ran as one line on stderr,
    unless *quiet*); return its result event."""
    from agentkit.events import (
        AgentOutputEvent,
        ErrorEvent,
        ResultEvent,
        ToolCallEvent,
        ToolResultEvent,
    )

    result: ResultEvent | None = None
    calls: dict[str, str] = {}
    async for event in agent.send_message(conversation_id, text):
        if as_json:
            typer.echo(event.to_json())
        elif isinstance(event, ToolCallEvent):
            calls[event.id] = json.dumps(event.arguments, ensure_ascii=False, sort_keys=True)
        elif isinstance(event, ToolResultEvent) and not quiet:
            typer.echo(_tool_line(event, calls.get(event.id, "")), err=True)
        elif isinstance(event, AgentOutputEvent):
            sys.stdout.write(event.text)
            sys.stdout.flush()
        elif isinstance(event, ErrorEvent):
            typer.echo(f"agentkit: error: {event.message}", err=True)
        if isinstance(event, ResultEvent):
            result = event
    if not as_json:
        typer.echo("")
    assert result is not None
    return result


def _tool_line(event: ToolResultEvent, arguments: str) -> str:
    """One line saying a tool ran, with what it was given and what it returned (cut)."""
    output = " ".join(event.output.split())
    output = output if len(output) <= 80 else output[:77] + "..."
    status = "ok" if event.ok else "failed"
    refresh = " (live-state refresh)" if event.id.startswith("live-") else ""
    return f"[tool] {event.name} {arguments} -> {status}: {output}{refresh}"


def _continue_hint(agent_id: str, conversation_id: str) -> str:
    return (
        f"conversation: {conversation_id} "
        f"(continue it: agentkit send {agent_id} -c {conversation_id} MESSAGE)"
    )


@app.command("send")
def send_command(
    ctx: typer.Context,
    agent_id: AgentArg,
    text: Annotated[str, typer.Argument(help="The message.")],
    conversation_id: ConversationOption = None,
    model: ModelOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per event per line.")
    ] = False,
    store: StoreOption = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="Do not show the tools the turn ran.")
    ] = False,
) -> None:
    """Send one message and print the reply as it streams.

    The reply goes to stdout; each tool the turn ran is one line on stderr (``[tool] NAME
    ARGS -> ok: RESULT``; ``--quiet`` leaves them out), and so is the conversation id, which
    the next message needs to continue the conversation (``-c``): stdout stays the reply.
    """

    async def run() -> None:
        from agentkit.agent import Agent

        agent = Agent.open(agent_id, data_dir=data_root(ctx), model=model, store=store)
        try:
            result = await _turn(agent, conversation_id, text, as_json, quiet=quiet)
        finally:
            await agent.aclose()
        if result.conversation_id:
            typer.echo(_continue_hint(agent_id, result.conversation_id), err=True)
        if result.status == "failed":
            raise typer.Exit(1)

    with clean_errors(), exporting():
        _run(run())


@app.command("chat")
def chat_command(
    ctx: typer.Context,
    agent_id: AgentArg,
    conversation_id: ConversationOption = None,
    model: ModelOption = None,
    store: StoreOption = None,
) -> None:
    """Chat in the terminal: one live session; Ctrl-C stops a reply, Ctrl-D leaves.

    With piped stdin, each line is one message (so a chat can be scripted).
    """
    interactive = sys.stdin.isatty()

    def read_line() -> str | None:
        try:
            return input("you> ") if interactive else sys.stdin.readline() or None
        except EOFError:
            return None

    async def run() -> None:
        import asyncio

        from agentkit.agent import Agent

        agent = Agent.open(agent_id, data_dir=data_root(ctx), model=model, store=store)
        loop = asyncio.get_running_loop()
        current: asyncio.Task[ResultEvent] | None = None

        def interrupt() -> None:
            if current is not None and not current.done():
                current.cancel()

        loop.add_signal_handler(signal.SIGINT, interrupt)
        conversation = conversation_id
        try:
            while (line := await asyncio.to_thread(read_line)) is not None:
                if not line.strip():
                    continue
                if interactive:
                    sys.stdout.write(f"{agent.folder.name}> ")
                current = asyncio.create_task(_turn(agent, conversation, line, as_json=False))
                try:
                    # a failed turn printed its error; the chat goes on in the same conversation
                    conversation = (await current).conversation_id
                except asyncio.CancelledError:
                    typer.echo("\n[stopped]")
            if conversation is not None:
                typer.echo(f"conversation: {conversation}", err=True)
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            await agent.aclose()

    with clean_errors(), exporting():
        _run(run())


def _run(main: Coroutine[object, object, None]) -> None:
    import asyncio  # here, not at the top: asyncio alone is ~20 ms of `agentkit agents`

    asyncio.run(main)
