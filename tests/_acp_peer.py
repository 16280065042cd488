"""The client side for the ``agentkit acp`` tests: a real subprocess driven by the
``agent-client-protocol`` package's own client connection (no in-process shortcut).

:func:`serve` starts ``agentkit --data-dir D acp AGENT …`` in its own session, connects a
:class:`RecordingClient` (records every ``session/update``, answers permission requests by a
policy), records every raw frame the agent sends, and on exit closes stdin, waits for the
process and checks that it and every process it started are gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import acp
from acp.client.connection import ClientSideConnection
from acp.connection import StreamDirection, StreamEvent
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AllowedOutcome,
    DeniedOutcome,
    PermissionOption,
    RequestPermissionResponse,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    UserMessageChunk,
)

AGENTKIT = Path(sys.executable).with_name("agentkit")
FAKE_ACP_AGENT = Path(__file__).parent / "fakes" / "acp_memory_agent.py"
#: only stops a broken test from hanging; nothing is asserted about time
HANG_GUARD = 120.0


@dataclass
class RecordingClient:
    """An ACP client: records updates; answers ``session/request_permission`` with
    ``permission``: an option id (``allow``/``reject``), ``cancelled``, ``unknown`` (an option
    that was not offered) or ``error`` (a JSON-RPC error)."""

    permission: str = "allow"
    updates: list[tuple[str, Any]] = field(default_factory=list)
    permission_requests: list[tuple[ToolCallUpdate, list[PermissionOption]]] = field(
        default_factory=list
    )
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append((session_id, update))
        self.changed.set()

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **_: Any,
    ) -> RequestPermissionResponse:
        self.permission_requests.append((tool_call, options))
        self.changed.set()
        if self.permission == "error":
            raise acp.RequestError.internal_error({"message": "this client cannot ask"})
        if self.permission == "cancelled":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        option = "no-such-option" if self.permission == "unknown" else self.permission
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=option)
        )

    # -- reading what was received ---------------------------------------------------------

    def of(self, kind: type[Any], session_id: str | None = None) -> list[Any]:
        return [
            update
            for sid, update in self.updates
            if isinstance(update, kind) and (session_id is None or sid == session_id)
        ]

    def text(self, session_id: str | None = None, kind: type[Any] = AgentMessageChunk) -> str:
        return "".join(
            u.content.text
            for u in self.of(kind, session_id)
            if isinstance(u.content, TextContentBlock)
        )

    def thoughts(self, session_id: str | None = None) -> str:
        return self.text(session_id, AgentThoughtChunk)

    def user_text(self, session_id: str | None = None) -> str:
        return self.text(session_id, UserMessageChunk)

    def plans(self, session_id: str | None = None) -> list[list[tuple[str, str]]]:
        return [
            [(entry.content, entry.status) for entry in update.entries]
            for update in self.of(AgentPlanUpdate, session_id)
        ]

    def tool_events(self, session_id: str | None = None) -> list[tuple[str, str, str | None]]:
        """(``tool_call`` | ``tool_call_update``, toolCallId, status) in arrival order."""
        return [
            (update.session_update, update.tool_call_id, update.status)
            for sid, update in self.updates
            if isinstance(update, ToolCallStart | ToolCallProgress)
            and (session_id is None or sid == session_id)
        ]

    def clear(self) -> None:
        self.updates.clear()
        self.permission_requests.clear()

    async def wait_for(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + HANG_GUARD
        while not condition():
            self.changed.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"never happened: {what}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), left)


@dataclass
class Served:
    process: asyncio.subprocess.Process
    conn: ClientSideConnection
    client: RecordingClient
    stderr: Path
    frames: list[dict[str, Any]] = field(default_factory=list)
    children: set[int] = field(default_factory=set)

    async def raw(self, line: bytes) -> None:
        """Write bytes straight to the agent's stdin, past the client library."""
        assert self.process.stdin is not None
        self.process.stdin.write(line)
        await self.process.stdin.drain()

    def errors(self, request_id: Any = None) -> list[dict[str, Any]]:
        """Error responses received with this id (null: the ones for unreadable lines)."""
        return [
            frame["error"]
            for frame in self.frames
            if "error" in frame and "method" not in frame and frame.get("id") == request_id
        ]

    def note_children(self) -> None:
        self.children |= descendants(self.process.pid)

    async def new_session(self, cwd: Path) -> str:
        response = await self.conn.new_session(cwd=str(cwd), mcp_servers=[])
        return response.session_id

    async def prompt(self, session_id: str, text: str) -> Any:
        return await asyncio.wait_for(
            self.conn.prompt(session_id=session_id, prompt=[acp.text_block(text)]), HANG_GUARD
        )


def descendants(pid: int) -> set[int]:
    """Every live process below *pid* (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def running(pid: int) -> bool:
    """True while *pid* is a live process (a zombie or a missing entry counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


async def gone(pids: set[int]) -> bool:
    deadline = time.monotonic() + HANG_GUARD
    while any(running(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def command(data_dir: Path, agent_id: str, *args: str) -> list[str]:
    return [str(AGENTKIT), "--data-dir", str(data_dir), "acp", agent_id, *args]


@contextlib.asynccontextmanager
async def serve(
    data_dir: Path,
    agent_id: str,
    *args: str,
    client: RecordingClient | None = None,
    check_exit: bool = True,
) -> AsyncIterator[Served]:
    """``agentkit acp`` as a subprocess with a client connected; on exit: stdin closed, exit
    status 0 (when *check_exit*), the process and everything it started gone."""
    client = client or RecordingClient()
    stderr_path = data_dir / f"acp-stderr-{time.monotonic_ns()}.log"
    with stderr_path.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            *command(data_dir, agent_id, *args),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,
        )
    assert process.stdin is not None and process.stdout is not None
    frames: list[dict[str, Any]] = []

    def observe(frame: StreamEvent) -> None:
        if frame.direction is StreamDirection.INCOMING:
            frames.append(frame.message)

    conn = acp.connect_to_agent(
        cast("acp.Client", client), process.stdin, process.stdout, observers=[observe]
    )
    served = Served(process, conn, client, stderr_path, frames)
    try:
        yield served
        served.note_children()
        process.stdin.close()
        code = await asyncio.wait_for(process.wait(), HANG_GUARD)
        if check_exit:
            assert code == 0, f"agentkit acp exited {code}: {stderr_path.read_text()[-3000:]}"
        assert await gone(served.children), f"orphans: {served.children}"
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, 9)
            await process.wait()
        await conn.close()


def initialize_params() -> dict[str, Any]:
    return {"protocol_version": acp.PROTOCOL_VERSION}
