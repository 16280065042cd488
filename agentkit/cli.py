"""The ``agentkit`` command line.

Every command takes the data root from ``--data-dir`` (else ``$AGENTKIT_DATA_DIR``, else
``./data``). Bad input (an invalid id, an unknown agent or conversation) prints one line on
stderr and exits with status 2, having written nothing.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from agentkit.agent import Agent
from agentkit.errors import AgentkitError, ConversationNotFoundError, UsageError
from agentkit.events import AgentOutputEvent, ErrorEvent, ResultEvent
from agentkit.memory import MemoryRepository
from agentkit.store import ConversationKey, FileConversationStore, SqliteConfigStore
from agentkit.tools.secrets import mask_secrets
from agentkit.types import ConversationMeta, format_timestamp
from agentkit.workspace import PROMPT_FILES, AgentFolder, list_agent_ids, resolve_data_dir

__all__ = ["app", "main"]

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


def _data_dir(ctx: typer.Context) -> Path:
    context = ctx.obj
    assert isinstance(context, _Context)
    return context.data_dir


@contextmanager
def _clean_errors() -> Iterator[None]:
    """Turn agentkit's errors into one line on stderr and exit status 2 (1 for failures)."""
    try:
        yield
    except UsageError as error:
        typer.echo(f"agentkit: error: {error}", err=True)
        raise typer.Exit(2) from None
    except AgentkitError as error:
        typer.echo(f"agentkit: error: {error}", err=True)
        raise typer.Exit(1) from None


def _print_json(value: object) -> None:
    typer.echo(json.dumps(value, ensure_ascii=False, indent=2))


def _open(ctx: typer.Context, agent_id: str) -> Agent:
    return Agent.open(agent_id, data_dir=_data_dir(ctx))


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
    with _clean_errors():
        root = _data_dir(ctx)
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
            _print_json(rows)
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
    with _clean_errors():
        info = _agent_info(_open(ctx, agent_id))
        if as_json:
            _print_json(info)
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
    with _clean_errors():
        meta = _open(ctx, agent_id).create_conversation(title)
        typer.echo(meta.conversation_id)


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
    with _clean_errors():
        metas = _open(ctx, agent_id).list_conversations()
        if as_json:
            _print_json([meta.to_json_dict() for meta in metas])
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
    with _clean_errors():
        messages = _open(ctx, agent_id).load_conversation_history(conversation_id)
        if as_json:
            _print_json([message.to_json_dict() for message in messages])
            return
        for message in messages:
            typer.echo(f"[{format_timestamp(message.timestamp)}] {message.role}: {message.content}")


@app.command("delete")
def delete_command(
    ctx: typer.Context, agent_id: AgentArg, conversation_id: ConversationArg
) -> None:
    """Delete a conversation and its folder."""
    with _clean_errors():
        _open(ctx, agent_id).delete_conversation(conversation_id)
        typer.echo(f"deleted {agent_id}/{conversation_id}")


@app.command("verify")
def verify_command(
    ctx: typer.Context,
    agent_id: Annotated[str | None, typer.Argument(help="Only this agent.")] = None,
    repair: Annotated[
        bool,
        typer.Option("--repair", help="First rebuild every view file from its journal."),
    ] = False,
) -> None:
    """Check conversations for inconsistencies; exit 1 when any are found."""
    with _clean_errors():
        root = _data_dir(ctx)
        if agent_id is not None:
            AgentFolder.load(root, agent_id)  # an unknown agent is an error, not "0 checked"
        store = FileConversationStore(root)
        if repair:
            for key in store.recover(agent_id, full=True):
                typer.echo(f"recovered {key}")
        report = store.verify(agent_id)
        for problem in report.problems:
            typer.echo(str(problem))
        typer.echo(f"{report.conversations} conversations checked, {len(report.problems)} problems")
        if not report.ok:
            raise typer.Exit(1)


ModelOption = Annotated[
    str | None,
    typer.Option("--model", help="Model spec (wins over $AGENTKIT_MODEL and config.json)."),
]
ConversationOption = Annotated[
    str | None,
    typer.Option("--conversation", "-c", help="Continue this conversation (default: a new one)."),
]


async def _turn(agent: Agent, conversation_id: str | None, text: str, as_json: bool) -> ResultEvent:
    """Run one turn, printing as it streams; return its result event."""
    result: ResultEvent | None = None
    async for event in agent.send_message(conversation_id, text):
        if as_json:
            typer.echo(json.dumps(event.to_json_dict(), ensure_ascii=False))
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
) -> None:
    """Send one message and print the reply as it streams."""

    async def run() -> None:
        agent = Agent.open(agent_id, data_dir=_data_dir(ctx), model=model)
        try:
            result = await _turn(agent, conversation_id, text, as_json)
        finally:
            await agent.aclose()
        if result.status == "failed":
            raise typer.Exit(1)

    with _clean_errors():
        asyncio.run(run())


@app.command("chat")
def chat_command(
    ctx: typer.Context,
    agent_id: AgentArg,
    conversation_id: ConversationOption = None,
    model: ModelOption = None,
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
        agent = Agent.open(agent_id, data_dir=_data_dir(ctx), model=model)
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

    with _clean_errors():
        asyncio.run(run())


@contextmanager
def _memory_of(
    ctx: typer.Context, agent_id: str, conversation_id: str
) -> Iterator[MemoryRepository]:
    """The memory repository, once the agent and the conversation are known to exist."""
    agent = _open(ctx, agent_id)
    if not agent.store.exists(ConversationKey(agent.id, conversation_id)):
        raise ConversationNotFoundError(agent.id, conversation_id)
    store = SqliteConfigStore(_data_dir(ctx) / "agentkit.db")
    try:
        yield MemoryRepository(store)
    finally:
        store.close()


@app.command("state")
def state_command(
    ctx: typer.Context,
    agent_id: AgentArg,
    conversation_id: ConversationArg,
    as_json: JsonFlag = False,
) -> None:
    """Show a conversation's TaskState and ExecutionState (the planner's memory)."""
    with _clean_errors():
        with _memory_of(ctx, agent_id, conversation_id) as memory:
            task = memory.load_task_state(agent_id, conversation_id)
            execution = memory.load_execution_state(agent_id, conversation_id)
        if as_json:
            # A step waiting for consent keeps its raw arguments; never print a secret.
            _print_json(
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
    with _clean_errors():
        with _memory_of(ctx, agent_id, conversation_id) as memory:
            memory.clear(agent_id, conversation_id)
        typer.echo(f"cleared the memory of {agent_id}/{conversation_id}")


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

    with _clean_errors():
        folder = AgentFolder.load(_data_dir(ctx), agent_id)
        result = run_tool(folder, tool, json_args)
        typer.echo(result.text)
        if not result.ok:
            raise typer.Exit(1)


@app.command("tools")
def tools_command(ctx: typer.Context, agent_id: AgentArg, as_json: JsonFlag = False) -> None:
    """List an agent's tools: toolset, flags, description and argument schema."""
    from agentkit.tools import AgentTools

    with _clean_errors():
        with AgentTools.load(AgentFolder.load(_data_dir(ctx), agent_id)) as tools:
            rows = [
                {
                    "name": tool.name,
                    "toolset": tool.source,
                    "side_effect": tool.side_effect,
                    "live_state": tool.live_state,
                    "description": tool.description,
                    "examples": list(tool.examples),
                    "schema": tool.json_schema(),
                }
                for tool in map(tools.registry.get, tools.registry.names())
            ]
        if as_json:
            _print_json(rows)
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


class _EngineChoice(str, Enum):
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

    with _clean_errors():
        folder = init_agent(_data_dir(ctx), agent_id, engine=engine.value)
        typer.echo(f"created {folder}")
        if engine is _EngineChoice.planner:
            typer.echo(f"  tools: agentkit tools {agent_id}")
            typer.echo(
                f'  try:   agentkit send {agent_id} "what reminders do I have?" '
                "--model scripted:script.json"
            )
        else:
            typer.echo(f'  try:   agentkit send {agent_id} "hello"')


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
    from agentkit.api import serve  # FastAPI and uvicorn load only for this command

    with _clean_errors():
        serve(
            _data_dir(ctx),
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
    from agentkit.acp_server import serve_stdio  # the ACP edge loads only for this command

    with _clean_errors():
        root = resolve_data_dir(data_dir) if data_dir is not None else _data_dir(ctx)
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
    with _clean_errors():
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
            data_dir=_data_dir(ctx),
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
    sys.exit(code if isinstance(code, int) else 0)
