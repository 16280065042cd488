"""Tools from MCP servers: a real stdio server nobody here wrote (``mcp-server-time`` from
PyPI, run from the virtualenv's bin), and servers written here with the ``mcp`` package over
stdio and streamable HTTP. Tools are listed, called from planner turns, failures are tool
results, a server killed mid-call is restarted on the next turn, and nothing outlives close.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from agentkit import Agent, ConfigError, ScriptedModel
from agentkit.agent_folder import AgentFolder
from agentkit.events import AgentEvent, AskUserEvent, ToolResultEvent
from agentkit.tools import AgentTools, ToolArgumentsError
from agentkit.tools.mcp import McpToolset, _has_exited

pytest.importorskip("mcp")

FAKES = Path(__file__).parent / "fakes"
NOTES_SERVER = FAKES / "mcp_notes_server.py"
TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"

needs_time_server = pytest.mark.skipif(
    not TIME_SERVER.is_file(), reason="mcp-server-time is installed by the dev extra"
)


def make_agent(root: Path, agent_id: str, toolsets: list[dict[str, Any]], **config: Any) -> Path:
    folder = root / "agents" / agent_id
    (folder / "workspace").mkdir(parents=True)
    body = {"engine": "planner", "toolsets": toolsets, **config}
    (folder / "config.json").write_text(json.dumps(body), encoding="utf-8")
    return folder


def of(events: list[AgentEvent], kind: type[Any]) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


def one_tool_plan(name: str, args: dict[str, Any], answer: str = "Done.") -> dict[str, Any]:
    return {
        "plan": [
            {
                "goal": name,
                "steps": [
                    {"id": "s1", "type": "tool", "title": name, "tool_name": name,
                     "tool_args": args},
                    {"id": "s2", "type": "respond", "title": "answer"},
                ],
            }
        ],
        "replan": [{"action": "continue"}],
        "respond": [answer],
    }  # fmt: skip


def children_running(marker: str) -> list[int]:
    """Pids of this process's live children whose command line contains *marker*."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        state, parent = fields[0], int(fields[1])
        if parent == os.getpid() and state != "Z" and marker in command:
            found.append(int(entry.name))
    return found


def gone(pid: int) -> bool:
    """True when neither the process nor anything in its process group is left."""
    for probe in (os.kill, os.killpg):
        try:
            probe(pid, 0)
        except ProcessLookupError:
            continue
        return False
    return True


# -- stdio: mcp-server-time ---------------------------------------------------------------------


@needs_time_server
def test_mcp_server_time_tools_are_listed_and_called_from_a_planner_turn(tmp_path: Path) -> None:
    make_agent(tmp_path, "clock", [{"mcp": ["mcp-server-time"], "name": "time"}])
    script = one_tool_plan("get_current_time", {"timezone": "Asia/Shanghai"}, "It is late.")
    with Agent.open("clock", data_dir=tmp_path, model=ScriptedModel(script)) as agent:
        assert set(agent.tools.names()) == {"get_current_time", "convert_time"}
        # the server marks both read-only (readOnlyHint): no consent needed
        assert agent.tools.get("get_current_time").flags() == ("read",)
        pids = children_running("mcp-server-time")
        assert len(pids) == 1
        turn = agent.send("What time is it in Shanghai?")
        results = of(turn.events, ToolResultEvent)
        assert [r.name for r in results] == ["get_current_time"] and results[0].ok
        assert json.loads(results[0].output)["timezone"] == "Asia/Shanghai"
        assert not of(turn.events, AskUserEvent)
        assert turn.text == "It is late."
    assert all(gone(pid) for pid in pids)
    assert children_running("mcp-server-time") == []


@needs_time_server
def test_mcp_server_time_errors_and_schema_checks_are_tool_failures(tmp_path: Path) -> None:
    make_agent(tmp_path, "clock", [{"mcp": ["mcp-server-time"], "name": "time"}])
    with AgentTools.load(AgentFolder.load(tmp_path, "clock")) as tools:
        failed = tools.registry.run("get_current_time", {"timezone": "Mars/Olympus_Mons"})
        assert not failed.ok and "Mars/Olympus_Mons" in (failed.error or "")  # isError
        with pytest.raises(ToolArgumentsError, match="missing required argument"):
            tools.registry.run("get_current_time", {})
        with pytest.raises(ToolArgumentsError, match="unexpected argument"):
            tools.registry.run("get_current_time", {"timezone": "UTC", "format": "iso"})


@needs_time_server
def test_a_crashed_stdio_server_is_started_again_on_the_next_turn(tmp_path: Path) -> None:
    make_agent(tmp_path, "clock", [{"mcp": ["mcp-server-time"], "name": "time"}])
    script = one_tool_plan("get_current_time", {"timezone": "UTC"})
    with Agent.open("clock", data_dir=tmp_path, model=ScriptedModel(script)) as agent:
        assert agent.send("time?").result.status == "completed"
        (first,) = children_running("mcp-server-time")
        os.kill(first, signal.SIGKILL)
        while not _has_exited(first):  # crashed *between* turns: wait until the kill landed
            time.sleep(0.01)  # (not instant on a loaded machine; the test timeout bounds it)
        turn = agent.send("and now?")
        results = of(turn.events, ToolResultEvent)
        assert results and results[0].ok
        (second,) = children_running("mcp-server-time")
        assert second != first
    assert gone(first) and gone(second)


def test_flags_can_be_overridden_per_tool_in_config(tmp_path: Path) -> None:
    server = [sys.executable, str(NOTES_SERVER), "stdio"]
    flags = {"add_note": {"side_effect": False}, "list_notes": {"live_state": True}}
    make_agent(tmp_path, "n", [{"mcp": server, "name": "notes", "flags": flags}])
    with AgentTools.load(AgentFolder.load(tmp_path, "n")) as tools:
        assert tools.registry.get("add_note").flags() == ("read",)
        assert tools.registry.get("list_notes").flags() == ("read", "live_state")
        assert tools.registry.get("fail").flags() == ("read",)


# -- stdio: a server written here, killed mid-call -----------------------------------------------


def test_a_server_killed_mid_call_is_a_clear_failure_and_the_next_turn_restarts_it(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "started"
    server = [sys.executable, str(NOTES_SERVER), "stdio"]
    make_agent(
        tmp_path, "n", [{"mcp": server, "name": "notes", "env": {"MCP_MARKER": str(marker)}}]
    )
    script = {
        "plan": [
            {"goal": "wait", "steps": [
                {"id": "s1", "type": "tool", "title": "wait", "tool_name": "slow",
                 "tool_args": {"seconds": 60}},
                {"id": "s2", "type": "respond", "title": "answer"}]},
            {"goal": "who", "steps": [
                {"id": "s1", "type": "tool", "title": "who", "tool_name": "whoami",
                 "tool_args": {}},
                {"id": "s2", "type": "respond", "title": "answer"}]},
        ],
        "replan": [{"action": "continue"}],
        "respond": ["ok"],
    }  # fmt: skip
    with Agent.open("n", data_dir=tmp_path, model=ScriptedModel(script)) as agent:
        (pid,) = children_running(str(NOTES_SERVER))

        def kill_when_started() -> None:
            while not marker.exists():
                time.sleep(0.02)
            os.kill(pid, signal.SIGKILL)

        killer = threading.Thread(target=kill_when_started)
        killer.start()
        first = agent.send("wait a minute")
        killer.join()
        failed = of(first.events, ToolResultEvent)
        assert len(failed) == 1 and not failed[0].ok
        assert "exited with code -9 during the call" in failed[0].output
        assert first.result.status == "completed"  # a failed step, not a crashed turn
        second = agent.send("who are you?", first.conversation_id)
        (answer,) = of(second.events, ToolResultEvent)
        assert answer.ok
        restarted = json.loads(answer.output)
        assert restarted["pid"] != pid
        # a minimal environment: nothing of ours but PATH, HOME, LANG and the config's env
        assert set(restarted["env"]) <= {"PATH", "HOME", "LANG", "MCP_MARKER", "LC_CTYPE"}
    assert gone(pid) and gone(restarted["pid"])
    assert children_running(str(NOTES_SERVER)) == []


def test_an_mcp_server_that_does_not_start_is_a_config_error_at_open(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import sys\nsys.stderr.write('no such luck')\nsys.exit(3)\n")
    folder = make_agent(tmp_path, "b", [{"mcp": [sys.executable, str(broken)], "name": "broken"}])
    with pytest.raises(ConfigError) as caught:
        Agent.open("b", data_dir=tmp_path)
    assert caught.value.path == folder / "config.json"
    assert caught.value.field == "toolsets.0"
    assert "no such luck" in str(caught.value)


# -- streamable HTTP ---------------------------------------------------------------------------


@dataclass
class HttpServer:
    """The notes server over streamable HTTP in a process of its own, on a listening socket
    this test holds: killed and started again, it serves the same URL, with no moment at which
    the port is free for another process to take or a connection is refused. :meth:`start`
    returns once the server says it serves (its ready file), however long that takes under
    load: the per-test timeout bounds it, not the toolset's connect timeout."""

    listening: socket.socket
    folder: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def marker(self) -> Path:
        """Written by the notes server's ``slow`` when a call has started."""
        return self.folder / "slow-started"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listening.getsockname()[1]}/mcp"

    def start(self) -> subprocess.Popen[bytes]:
        fd = self.listening.fileno()
        ready = self.folder / f"ready-{len(self.processes)}"
        process = subprocess.Popen(
            [sys.executable, str(NOTES_SERVER), "http", str(fd)],
            pass_fds=(fd,),
            env={**os.environ, "MCP_MARKER": str(self.marker), "MCP_READY": str(ready)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.processes.append(process)
        while not ready.exists():
            if process.poll() is not None:
                raise RuntimeError(f"the HTTP MCP server exited with code {process.returncode}")
            time.sleep(0.02)
        return process


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[HttpServer]:
    with socket.create_server(("127.0.0.1", 0)) as listening:
        server = HttpServer(listening, tmp_path / "http-server")
        server.folder.mkdir()
        try:
            server.start()
            yield server
        finally:
            for process in server.processes:
                process.kill()
                process.wait()


@pytest.fixture
def in_process_server() -> Iterator[str]:
    """The notes server on a loopback port, served by uvicorn in a thread of this process."""
    import uvicorn

    from .fakes.mcp_notes_server import build_server

    app = build_server().streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:  # bounded by the test timeout; a server that failed ends the wait
        assert thread.is_alive(), "the in-process MCP server did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    thread.join()


def test_http_tools_are_listed_called_and_consented_from_planner_turns(
    tmp_path: Path, in_process_server: str
) -> None:
    make_agent(tmp_path, "n", [{"mcp_url": in_process_server, "name": "notes"}])
    script = one_tool_plan("add_note", {"text": "buy milk"}, "Saved.")
    with Agent.open("n", data_dir=tmp_path, model=ScriptedModel(script)) as agent:
        tools = agent.tools
        assert set(tools.names()) == {"list_notes", "add_note", "fail", "slow", "whoami"}
        assert tools.get("add_note").flags() == ("side_effect",)  # no readOnlyHint
        assert tools.get("list_notes").flags() == ("read",)
        asked = agent.send("note: buy milk")
        (consent,) = of(asked.events, AskUserEvent)
        assert consent.kind == "confirmation" and consent.tool_name == "add_note"
        done = agent.send("yes", asked.conversation_id)
        (result,) = of(done.events, ToolResultEvent)
        assert result.ok and json.loads(result.output)["count"] == 1
        assert done.text == "Saved."


def test_http_is_error_results_are_failed_steps(tmp_path: Path, in_process_server: str) -> None:
    make_agent(tmp_path, "n", [{"mcp_url": in_process_server, "name": "notes"}])
    script = one_tool_plan("fail", {"reason": "testing"})
    with Agent.open("n", data_dir=tmp_path, model=ScriptedModel(script)) as agent:
        turn = agent.send("fail please")
    (result,) = of(turn.events, ToolResultEvent)
    assert not result.ok and "Error executing tool fail" in result.output
    assert turn.result.status == "completed"


def test_an_http_server_killed_mid_call_fails_the_call_and_is_reached_again(
    tmp_path: Path, http_server: HttpServer
) -> None:
    make_agent(tmp_path, "n", [{"mcp_url": http_server.url, "name": "notes", "timeout": 30}])
    with AgentTools.load(AgentFolder.load(tmp_path, "n")) as tools:
        (first,) = http_server.processes

        def kill_when_started() -> None:
            while not http_server.marker.exists():  # the call reached the server: kill it now
                time.sleep(0.02)
            os.killpg(first.pid, signal.SIGKILL)

        killer = threading.Thread(target=kill_when_started)
        killer.start()
        failed = tools.registry.run("slow", {"seconds": 60})
        killer.join()
        assert not failed.ok and "MCP" in (failed.error or "")
        assert first.wait() == -signal.SIGKILL  # it was the kill that ended the call
        replacement = http_server.start()  # on the same URL
        again = tools.registry.run("whoami", {})
        assert again.ok and again.output["pid"] == replacement.pid  # type: ignore[index]


def test_closing_leaves_no_server_behind(tmp_path: Path) -> None:
    toolset = McpToolset.stdio("notes", [sys.executable, str(NOTES_SERVER), "stdio"], cwd=tmp_path)
    toolset.start()
    pid = toolset.pid
    assert pid is not None and not gone(pid)
    toolset.close()
    toolset.close()  # idempotent
    assert gone(pid)
    assert children_running(str(NOTES_SERVER)) == []


def test_a_killed_server_is_seen_as_exited_before_it_is_reaped() -> None:
    """A server killed between turns may not be reaped (nor its exit noticed by the loop)
    when the next call comes: its liveness check reads /proc, so the call starts it again."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not _has_exited(child.pid)
        os.kill(child.pid, signal.SIGKILL)
        while not _has_exited(child.pid):  # a zombie once the kill lands (not instant under
            time.sleep(0.01)  # load; the test timeout bounds the wait)
        assert child.poll() == -signal.SIGKILL  # now reaped: gone from /proc entirely
        assert _has_exited(child.pid)
    finally:
        child.kill()
        child.wait()
