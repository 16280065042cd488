"""A small, real ACP agent that keeps each session's context in memory (a test peer).

Run as a subprocess (``python acp_memory_agent.py [--state FILE]``); it speaks ACP on stdio
through the ``agent-client-protocol`` package's agent side. Every prompt is remembered, and the
reply shows the memory: ``turn N; I remember: ["first", "second"]`` (a JSON list). Prompts
that contain a keyword do more:

* ``tool``:  a ``tool_call`` update, then ``session/request_permission``; the reply says
  ``tool allowed`` or ``tool denied``.
* ``think``: an ``agent_thought_chunk`` before the reply.
* ``slow``:  one chunk, then waits (up to 30 s) for ``session/cancel``: stop reason
  ``cancelled``.
* ``env``:   reports whether ``AGENTKIT_TEST_SECRET`` is in its environment, and its cwd.
* ``spawn``: starts a grandchild (``sleep``-like) process and reports its pid.

With ``--state FILE`` (or ``$ACP_MEMORY_AGENT_STATE``) sessions are saved to a JSON file after
every turn and the agent advertises ``loadSession``: ``session/load`` replays the history as
``user_message_chunk`` / ``agent_message_chunk`` updates. With ``--ignore-term`` it ignores
SIGTERM and keeps running after stdin closes (only SIGKILL ends it). Nothing but ACP frames
goes to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    Agent,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    run_agent,
    start_tool_call,
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
    update_user_message_text,
)
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    Implementation,
    PermissionOption,
    TextContentBlock,
    ToolCallUpdate,
)

SECRET_NAME = "AGENTKIT_TEST_SECRET"


class MemoryAgent(Agent):
    _conn: Client

    def __init__(self, state_file: Path | None) -> None:
        self._state_file = state_file
        self._history: dict[str, list[dict[str, str]]] = {}
        self._cancelled: dict[str, asyncio.Event] = {}
        self._children: list[subprocess.Popen[bytes]] = []
        if state_file is not None and state_file.exists():
            self._history = json.loads(state_file.read_text(encoding="utf-8"))

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=self._state_file is not None),
            agent_info=Implementation(name="acp-memory-agent", version="0.1.0"),
        )

    async def new_session(
        self,
        cwd: str,
        additional_directories: Any = None,
        mcp_servers: Any = None,
        **kwargs: Any,
    ) -> NewSessionResponse:
        session_id = f"sess_{uuid.uuid4().hex[:12]}"
        self._history[session_id] = []
        return NewSessionResponse(session_id=session_id)

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Any = None,
        additional_directories: Any = None,
        **kwargs: Any,
    ) -> LoadSessionResponse | None:
        if self._state_file is None or session_id not in self._history:
            raise RequestError.invalid_params({"sessionId": session_id, "reason": "unknown"})
        for entry in self._history[session_id]:
            await self._conn.session_update(session_id, update_user_message_text(entry["user"]))
            await self._conn.session_update(session_id, update_agent_message_text(entry["agent"]))
        return LoadSessionResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self._cancelled.setdefault(session_id, asyncio.Event()).set()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        if session_id not in self._history:
            raise RequestError.invalid_params({"sessionId": session_id, "reason": "unknown"})
        text = "".join(b.text for b in prompt if isinstance(b, TextContentBlock))
        history = self._history[session_id]
        cancelled = self._cancelled[session_id] = asyncio.Event()
        say: list[str] = []

        async def chunk(piece: str) -> None:
            say.append(piece)
            await self._conn.session_update(session_id, update_agent_message_text(piece))

        if "think" in text:
            await self._conn.session_update(session_id, update_agent_thought_text("hmm…"))
        if "slow" in text:
            await chunk("working… ")
            try:
                await asyncio.wait_for(cancelled.wait(), timeout=30)
            except TimeoutError:
                pass
            else:
                return PromptResponse(stop_reason="cancelled")
        if "tool" in text:
            await chunk(await self._tool(session_id, cancelled))
        if "env" in text:
            seen = "present" if SECRET_NAME in os.environ else "absent"
            await chunk(f"secret {seen}; cwd {os.getcwd()}; ")
        if "spawn" in text:
            child = subprocess.Popen(
                [sys.executable, "-c", "import time; time.sleep(120)"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            self._children.append(child)
            await chunk(f"grandchild {child.pid}; ")
        history.append({"user": text, "agent": ""})
        remembered = json.dumps([entry["user"] for entry in history])
        await chunk(f"turn {len(history)}; I remember: {remembered}")
        history[-1]["agent"] = "".join(say)
        self._save()
        return PromptResponse(stop_reason="end_turn")

    async def _tool(self, session_id: str, cancelled: asyncio.Event) -> str:
        call_id = f"call_{uuid.uuid4().hex[:6]}"
        await self._conn.session_update(
            session_id,
            start_tool_call(
                call_id,
                "Run shell",
                kind="execute",
                status="pending",
                raw_input={"command": "ls"},
            ),
        )
        answer = await self._conn.request_permission(
            session_id=session_id,
            tool_call=ToolCallUpdate(tool_call_id=call_id, title="Run shell"),
            options=[
                PermissionOption(option_id="allow", name="Allow once", kind="allow_once"),
                PermissionOption(option_id="deny", name="Reject", kind="reject_once"),
            ],
        )
        outcome = answer.outcome
        allowed = isinstance(outcome, AllowedOutcome) and outcome.option_id == "allow"
        await self._conn.session_update(
            session_id,
            update_tool_call(call_id, status="completed" if allowed else "failed"),
        )
        return "tool allowed; " if allowed else "tool denied; "

    def _save(self) -> None:
        if self._state_file is not None:
            tmp = self._state_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(self._history), encoding="utf-8")
            tmp.replace(self._state_file)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default=os.environ.get("ACP_MEMORY_AGENT_STATE"))
    parser.add_argument(
        "--ignore-term", action="store_true", help="ignore SIGTERM and outlive stdin EOF"
    )
    args = parser.parse_args()
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    asyncio.run(run_agent(MemoryAgent(Path(args.state) if args.state else None)))
    if args.ignore_term:
        time.sleep(120)  # a stubborn agent: only SIGKILL ends it


if __name__ == "__main__":
    main()
