"""``agentkit acp`` with MCP servers from the client (``mcpServers`` in ``session/new`` and
``session/load``): a real subprocess driven by the ``agent-client-protocol`` client, a real
MCP server nobody here wrote (``mcp-server-time``, from the virtualenv's bin).

The session's planner calls the server's tool and the client sees it as a tool call with the
server's result; a server that does not start, a tool name the agent already has and an
unsupported transport are JSON-RPC errors with nothing left running; a load replaces the
session's servers; nothing outlives the client closing stdin.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import acp
import pytest
from acp.schema import (
    EnvVariable,
    McpServerStdio,
    SseMcpServer,
    ToolCallProgress,
    ToolCallStart,
)

from tests._acp_peer import Served, descendants, gone, running, serve

pytest.importorskip("mcp")

TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"

pytestmark = pytest.mark.skipif(
    not TIME_SERVER.is_file(), reason="mcp-server-time is installed by the dev extra"
)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


ALL = {"client_mcp": {"mode": "all"}}


def make_agent(
    data_dir: Path,
    agent_id: str,
    toolsets: list[dict[str, Any]],
    acp: dict[str, Any] | None = ALL,
    engine: str = "planner",
) -> None:
    """An agent whose policy starts every client server (``acp=None``: the default, off)."""
    folder = data_dir / "agents" / agent_id
    (folder / "workspace").mkdir(parents=True)
    body: dict[str, Any] = {"engine": engine, "toolsets": toolsets}
    if acp is not None:
        body["acp"] = acp
    (folder / "config.json").write_text(json.dumps(body), encoding="utf-8")


def time_plan(tmp_path: Path) -> str:
    """A scripted planner that calls ``get_current_time`` once, then answers."""
    call = {"id": "s1", "type": "tool", "title": "Read the clock", "tool_name": "get_current_time",
            "tool_args": {"timezone": "Asia/Shanghai"}}  # fmt: skip
    respond = {"id": "s2", "type": "respond", "title": "Answer"}
    replies = {
        "plan": [{"goal": "tell the time", "steps": [call, respond]}],
        "replan": [{"action": "continue"}],
        "respond": ["It is late in Shanghai."],
    }
    path = tmp_path / "time-plan.json"
    path.write_text(json.dumps(replies), encoding="utf-8")
    return f"scripted:{path}"


def time_server(name: str = "time", command: Path = TIME_SERVER) -> McpServerStdio:
    env = [EnvVariable(name="TZ", value="UTC")]
    return McpServerStdio(name=name, command=str(command), args=[], env=env)


def time_servers(served: Served) -> set[int]:
    """The running ``mcp-server-time`` processes below the agent."""
    found = set()
    for pid in descendants(served.process.pid):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"mcp-server-time" in command and running(pid):
            found.add(pid)
    return found


def test_a_clients_mcp_server_is_the_sessions_tool(data_dir: Path, tmp_path: Path) -> None:
    make_agent(data_dir, "clock", [])

    async def body() -> set[int]:
        async with serve(data_dir, "clock", "--model", time_plan(tmp_path)) as served:
            info = await served.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            assert info.agent_capabilities.mcp_capabilities.http is True
            assert info.agent_capabilities.mcp_capabilities.sse is False
            plain = await served.new_session(tmp_path)
            assert time_servers(served) == set()  # no servers given, none started
            new = await served.conn.new_session(cwd=str(tmp_path), mcp_servers=[time_server()])
            sid = new.session_id
            servers = time_servers(served)
            assert len(servers) == 1

            response = await served.prompt(sid, "What time is it in Shanghai?")
            assert response.stop_reason == "end_turn"
            assert response.field_meta["agentkit"]["turns"][0]["status"] == "completed"
            started = served.client.of(ToolCallStart, sid)
            assert [(u.title, u.raw_input) for u in started] == [
                ("get_current_time", {"timezone": "Asia/Shanghai"})
            ]
            finished = served.client.of(ToolCallProgress, sid)
            assert [u.tool_call_id for u in finished] == [started[0].tool_call_id]
            assert finished[0].status == "completed"
            output = finished[0].raw_output  # the server's own answer
            assert output["timezone"] == "Asia/Shanghai"
            assert output["datetime"].endswith("+08:00")
            assert "It is late in Shanghai." in served.client.text(sid)
            assert served.client.of(ToolCallStart, plain) == []

            # a load brings the servers given then, and only them: the old one stops
            await served.conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
            assert await gone(servers)
            await served.conn.load_session(
                cwd=str(tmp_path), session_id=sid, mcp_servers=[time_server()]
            )
            servers = time_servers(served)
            assert len(servers) == 1
            return servers  # serve() closes stdin, then checks everything below the agent is gone

    servers = run(body())
    assert not any(running(pid) for pid in servers)


def test_a_server_that_cannot_be_used_refuses_the_session_and_leaves_nothing(
    data_dir: Path, tmp_path: Path
) -> None:
    make_agent(data_dir, "clock", [{"mcp": ["mcp-server-time"], "name": "own-time"}])

    async def refused(served: Served, server: Any) -> dict[str, Any]:
        with pytest.raises(acp.RequestError) as error:
            await served.conn.new_session(cwd=str(tmp_path), mcp_servers=[server])
        assert error.value.code == -32602
        data: dict[str, Any] = error.value.data
        return data

    async def body() -> None:
        async with serve(data_dir, "clock", "--model", time_plan(tmp_path)) as served:
            await served.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            own = time_servers(served)
            assert len(own) == 1  # the agent's configured toolset

            missing = await refused(served, time_server("gone", tmp_path / "no-such-server"))
            assert "no-such-server" in missing["message"]
            clash = await refused(served, time_server("clock"))
            assert "'get_current_time'" in clash["message"]
            assert "the agent" in clash["message"]
            sse = SseMcpServer(type="sse", name="events", url="http://127.0.0.1:9/sse", headers=[])
            assert "'sse'" in (await refused(served, sse))["message"]
            assert time_servers(served) == own  # the clashing server was stopped again

            # the process is up and serves the next request
            sid = await served.new_session(tmp_path)
            response = await served.prompt(sid, "What time is it in Shanghai?")
            assert response.stop_reason == "end_turn"
            assert served.client.of(ToolCallProgress, sid)[0].status == "completed"

    run(body())


def test_the_client_mcp_policy_decides_which_servers_and_tools_start(
    data_dir: Path, tmp_path: Path
) -> None:
    """off (the default) starts none; a chat-engine agent none whatever its policy; allow
    only the named servers and tools; read_only tools run without consent."""
    make_agent(data_dir, "default", [], acp=None)
    make_agent(data_dir, "chatty", [], engine="chat")
    allow = {"mode": "allow", "servers": {"time": ["get_current_time"]}, "read_only": ["time:*"]}
    make_agent(data_dir, "picky", [], acp={"client_mcp": allow})

    async def tools_of(served: Served, sid: str) -> set[str]:
        response = await served.prompt(sid, "What time is it in Shanghai?")
        assert response.stop_reason == "end_turn"
        return {update.title for update in served.client.of(ToolCallStart, sid)}

    async def body() -> None:
        for agent_id in ("default", "chatty"):
            async with serve(data_dir, agent_id, "--model", time_plan(tmp_path)) as served:
                await served.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
                await served.conn.new_session(cwd=str(tmp_path), mcp_servers=[time_server()])
                assert time_servers(served) == set(), agent_id
        async with serve(data_dir, "picky", "--model", time_plan(tmp_path)) as served:
            await served.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            servers = [time_server(), time_server("other")]
            new = await served.conn.new_session(cwd=str(tmp_path), mcp_servers=servers)
            assert len(time_servers(served)) == 1  # 'other' is not in the allow-list
            assert await tools_of(served, new.session_id) == {"get_current_time"}
            assert served.client.permission_requests == []  # a read by the policy: no consent
            finished = served.client.of(ToolCallProgress, new.session_id)
            assert [update.status for update in finished] == ["completed"]

    run(body())


def test_an_invalid_client_mcp_policy_is_the_answer_to_initialize(data_dir: Path) -> None:
    make_agent(data_dir, "wrong", [], acp={"client_mcp": {"mode": "allow"}})

    async def body() -> None:
        async with serve(data_dir, "wrong", check_exit=False) as served:
            with pytest.raises(acp.RequestError) as error:
                await served.conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            assert "acp.client_mcp" in str(error.value) and "needs 'servers'" in str(error.value)
            assert await asyncio.wait_for(served.process.wait(), 60) == 2

    run(body())
