"""The claude-cli session backend, driven through the real Claude Code CLI.

The CLI is the binary bundled in the ``claude-agent-sdk`` wheel (a test-only dependency). It
talks to :class:`tests.fakes.anthropic_api.FakeAnthropicAPI` on loopback, so nothing leaves the
machine: no key, no network, a temporary HOME per test. The fake answers
``echo #<n>: <last user text>`` where n counts the user/assistant messages it received, which
shows what the CLI keeps in its context. A few protocol edge cases (non-JSON lines, a CLI that
dies mid-turn) use a small scripted stand-in instead, because the real CLI never does that.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from agentkit.errors import ModelError, UsageError
from agentkit.models import claude_cli
from agentkit.models.base import (
    Completion,
    ModelEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallRequest,
)
from agentkit.models.claude_cli import (
    ClaudeCliBackend,
    ClaudeCliSession,
    cli_environment,
    find_claude_cli,
)
from agentkit.types import Usage

from tests.fakes.anthropic_api import FakeAnthropicAPI

#: a real backend (a model process, server or agent CLI) under test
pytestmark = pytest.mark.real_model

SECRET = "AGENTKIT_TEST_SECRET_TOKEN"


def _bundled() -> str | None:
    try:
        return find_claude_cli()
    except ModelError:
        return None


needs_cli = pytest.mark.skipif(
    _bundled() is None,
    reason="no Claude Code CLI: pip install claude-agent-sdk==0.2.189 (its wheel bundles it)",
)


# --- fixtures and helpers --------------------------------------------------------------------


@pytest.fixture
def fake_api() -> Iterator[FakeAnthropicAPI]:
    with FakeAnthropicAPI() as api:
        yield api


@pytest.fixture
def cli_env(fake_api: FakeAnthropicAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the CLI at the fake API with a throwaway HOME; returns the workdir."""
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "CLAUDE")) or name == claude_cli.EXECUTABLE_ENV:
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_api.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "fake")
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
    monkeypatch.setenv(SECRET, "do-not-leak")
    workdir = tmp_path / "work"
    workdir.mkdir()
    return workdir


def backend(*, read_timeout: float = 60.0, close_timeout: float = 5.0) -> ClaudeCliBackend:
    """The real CLI (found the way production finds it: here, the wheel's bundled binary)."""
    return ClaudeCliBackend([], read_timeout=read_timeout, close_timeout=close_timeout)


async def collect(stream: AsyncIterator[ModelEvent]) -> tuple[list[ModelEvent], Completion]:
    events = [event async for event in stream]
    completions = [e for e in events if isinstance(e, Completion)]
    assert len(completions) == 1
    assert events[-1] is completions[0]
    return events[:-1], completions[0]


def text_of(events: list[ModelEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def live_processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, process group) of every live, non-zombie process."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, ppid, pgrp = stat[stat.rindex(")") + 2 :].split()[:3]
        if state not in ("Z", "X"):
            table[int(entry.name)] = (int(ppid), int(pgrp))
    return table


def family(pid: int) -> set[int]:
    """*pid*, its live descendants and the live members of its process group."""
    table = live_processes()
    found = {p for p, (_, pgrp) in table.items() if pgrp == pid}
    if pid in table:
        found.add(pid)
    grew = True
    while grew:
        more = {p for p, (ppid, _) in table.items() if ppid in found} - found
        found |= more
        grew = bool(more)
    return found


def alive(pid: int) -> bool:
    return pid in live_processes()


def gone(pid: int) -> bool:
    return not family(pid)


async def wait_for_descendant(pid: int, needle: str) -> int | None:
    """The pid of a descendant of *pid* whose command line contains *needle* (None: *pid* and
    its descendants are gone first). Bounded by the test's timeout: starting a tool is not
    quick on a loaded machine."""
    while members := family(pid):
        for member in members - {pid}:
            try:
                cmdline = Path(f"/proc/{member}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if needle.encode() in cmdline:
                return member
        await asyncio.sleep(0.1)
    return None


# --- the real CLI ----------------------------------------------------------------------------


@needs_cli
def test_two_turns_on_one_process_the_cli_holds_the_context(
    cli_env: Path, fake_api: FakeAnthropicAPI
) -> None:
    async def main() -> None:
        session = await backend().open(system_prompt="SYSTEM-MARK-42", workdir=cli_env)
        try:
            assert isinstance(session, ClaudeCliSession)
            assert session.is_alive() and not session.resumed
            assert session.session_id is not None
            pid = session.pid

            events, first = await collect(session.send("My name is Ada."))
            assert first.text == "echo #1: My name is Ada."
            assert text_of(events) == first.text  # streamed, not repeated
            assert first.stop_reason == "end_turn"

            events, second = await collect(session.send("What is my name?"))
            assert second.text == "echo #3: What is my name?"
            assert session.pid == pid and session.is_alive()
        finally:
            await session.close()

        calls = fake_api.message_requests
        assert [len(c.conversation) for c in calls] == [1, 3]
        assert calls[-1].texts == [
            "My name is Ada.",
            "echo #1: My name is Ada.",
            "What is my name?",
        ]
        assert "SYSTEM-MARK-42" in json.dumps(calls[0].body["system"])
        assert calls[0].headers.get("X-Claude-Code-Session-Id") == session.session_id

    asyncio.run(main())


@needs_cli
def test_usage_numbers_come_through(cli_env: Path) -> None:
    async def main() -> None:
        session = await backend().open(system_prompt="", workdir=cli_env)
        try:
            _, first = await collect(session.send("count me"))
            _, second = await collect(session.send("and me too"))
        finally:
            await session.close()
        # the fake bills 100 * messages + 7 in, one token per word out
        assert first.usage == Usage(input_tokens=107, output_tokens=4)
        assert second.usage == Usage(input_tokens=307, output_tokens=5)

    asyncio.run(main())


@needs_cli
def test_thinking_and_tool_calls_are_streamed(cli_env: Path) -> None:
    async def main() -> None:
        session = await backend().open(system_prompt="", workdir=cli_env)
        try:
            events, done = await collect(session.send("think: about it"))
            assert [e.text for e in events if isinstance(e, ThinkingDelta)] == [
                "pondering about it"
            ]
            assert done.text == "echo #1: about it"

            events, done = await collect(session.send('tool: NoSuchTool {"a": 1}'))
            calls = [e for e in events if isinstance(e, ToolCallRequest)]
            assert [(c.name, c.arguments) for c in calls] == [("NoSuchTool", {"a": 1})]
            assert calls[0].id.startswith("toolu_")
            # the CLI ran (refused) the tool itself and asked the model again
            assert done.text.startswith("tool done:") and "NoSuchTool" in done.text
            assert done.tool_calls == ()
        finally:
            await session.close()

    asyncio.run(main())


@needs_cli
def test_killed_process_fails_the_turn_then_resume_restores_the_history(
    cli_env: Path, fake_api: FakeAnthropicAPI
) -> None:
    async def main() -> None:
        claude = backend()
        session = await claude.open(system_prompt="", workdir=cli_env)
        try:
            _, first = await collect(session.send("My name is Ada."))
            assert first.text == "echo #1: My name is Ada."
            old_id = session.session_id
            os.kill(session.pid, signal.SIGKILL)
            with pytest.raises(ModelError, match="exited") as caught:
                await collect(session.send("still there?"))
            assert caught.value.retryable
            assert not session.is_alive()
            assert gone(session.pid)
        finally:
            await session.close()

        assert old_id is not None
        again = await claude.open(system_prompt="", workdir=cli_env, resume_id=old_id)
        try:
            assert again.resumed and again.session_id == old_id
            _, reply = await collect(again.send("after restart"))
            assert reply.text == "echo #3: after restart"
        finally:
            await again.close()
        assert fake_api.message_requests[-1].texts == [
            "My name is Ada.",
            "echo #1: My name is Ada.",
            "after restart",
        ]

    asyncio.run(main())


@needs_cli
def test_resume_of_an_unknown_session_falls_back_to_a_fresh_process(cli_env: Path) -> None:
    async def main() -> None:
        unknown = str(uuid.uuid4())
        session = await backend().open(system_prompt="", workdir=cli_env, resume_id=unknown)
        try:
            assert not session.resumed
            assert session.session_id != unknown
            _, reply = await collect(session.send("hello"))
            assert reply.text == "echo #1: hello"
        finally:
            await session.close()

    asyncio.run(main())


@needs_cli
def test_api_error_raises_model_error_and_ends_the_session(
    cli_env: Path, fake_api: FakeAnthropicAPI
) -> None:
    async def main() -> None:
        session = await backend().open(system_prompt="", workdir=cli_env)
        try:
            fake_api.fail_with(400, "fake bad request")
            with pytest.raises(ModelError, match="fake bad request") as caught:
                await collect(session.send("this fails"))
            assert caught.value.status_code == 400
            assert not caught.value.retryable
            assert not session.is_alive()
            assert gone(session.pid)
        finally:
            await session.close()

    asyncio.run(main())


@needs_cli
def test_the_child_gets_a_minimal_environment(cli_env: Path, fake_api: FakeAnthropicAPI) -> None:
    async def main() -> None:
        assert os.environ[SECRET] == "do-not-leak"
        session = await backend().open(system_prompt="", workdir=cli_env)
        try:
            raw = Path(f"/proc/{session.pid}/environ").read_bytes()
            env = dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)
            cwd = Path(os.readlink(f"/proc/{session.pid}/cwd"))
        finally:
            await session.close()
        assert SECRET not in env
        assert env["ANTHROPIC_BASE_URL"] == fake_api.base_url
        assert env["HOME"] == os.environ["HOME"]
        assert cwd == cli_env
        assert os.getpgid(os.getpid()) != session.pid  # its own group, not ours

    asyncio.run(main())


@needs_cli
def test_close_leaves_no_process_even_with_a_tool_running(cli_env: Path) -> None:
    async def main() -> None:
        session = await backend(close_timeout=1.0).open(system_prompt="", workdir=cli_env)
        pid = session.pid
        # (the CLI refuses a bare "sleep N"; it runs Bash tools in a session of their own)
        stream = session.send('tool: Bash {"command": "echo start && sleep 77 && echo end"}')
        try:
            async for event in stream:
                if isinstance(event, ToolCallRequest):
                    break
            sleeper = await wait_for_descendant(pid, "sleep 77")
            assert sleeper is not None, "the CLI did not start its Bash tool"
            assert os.getpgid(sleeper) != pid
        finally:
            await stream.aclose()
            await session.close()
            await session.close()  # idempotent
        assert not session.is_alive()
        assert gone(pid)
        assert not alive(sleeper)

    asyncio.run(main())


@needs_cli
def test_cancel_interrupts_the_turn_and_the_session_stays_usable(cli_env: Path) -> None:
    async def main() -> None:
        session = await backend().open(system_prompt="", workdir=cli_env)
        try:
            events: list[ModelEvent] = []
            command = 'tool: Bash {"command": "echo start && sleep 30 && echo end"}'
            async for event in session.send(command):
                events.append(event)
                if isinstance(event, ToolCallRequest):
                    assert await wait_for_descendant(session.pid, "sleep 30") is not None
                    await session.cancel()
            assert isinstance(events[-1], Completion)
            assert events[-1].stop_reason == "cancelled"
            assert session.is_alive()

            _, reply = await collect(session.send("are you there?"))
            assert reply.text.startswith("echo #") and reply.text.endswith(": are you there?")
        finally:
            await session.close()

    asyncio.run(main())


@needs_cli
def test_an_abandoned_turn_does_not_leak_into_the_next(cli_env: Path) -> None:
    async def main() -> None:
        session = await backend().open(system_prompt="", workdir=cli_env)
        try:
            stream = session.send("think: slowly")
            async for event in stream:
                if isinstance(event, ThinkingDelta):
                    break
            await stream.aclose()
            _, reply = await collect(session.send("next question"))
            assert reply.text.endswith(": next question")
        finally:
            await session.close()

    asyncio.run(main())


@needs_cli
def test_read_timeout_kills_the_process(cli_env: Path, fake_api: FakeAnthropicAPI) -> None:
    async def main() -> None:
        session = await backend(read_timeout=2.0, close_timeout=1.0).open(
            system_prompt="", workdir=cli_env
        )
        try:
            fake_api.stall()
            with pytest.raises(ModelError, match="no output from claude") as caught:
                await collect(session.send("hang"))
            assert caught.value.retryable
            assert not session.is_alive()
            assert gone(session.pid)
        finally:
            await session.close()

    asyncio.run(main())


# --- a scripted stand-in for protocol edge cases ---------------------------------------------

_STAND_IN = """\
import json, sys, time
for line in sys.stdin:
    message = json.loads(line)
    if message["type"] == "control_request":
        reply = {"subtype": "success", "request_id": message["request_id"], "response": {}}
        print(json.dumps({"type": "control_response", "response": reply}), flush=True)
    elif message["type"] == "user":
        text = message["message"]["content"]
        if text == "spawn":  # a grandchild in a session of its own, and deaf to SIGTERM
            import signal, subprocess
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            subprocess.Popen(["sleep", "300"], start_new_session=True)
        print("[SandboxDebug] not json", flush=True)
        print("[1, 2, 3]", flush=True)
        print('{"broken": ', flush=True)
        if text == "die":
            print("fatal: the stand-in gave up", file=sys.stderr, flush=True)
            sys.exit(3)
        block = {"type": "text", "text": "hi " + text}
        print(json.dumps({"type": "assistant", "message": {"id": "m1", "content": [block]},
                          "parent_tool_use_id": None, "session_id": "s-1"}), flush=True)
        print(json.dumps({"type": "result", "subtype": "success", "is_error": False,
                          "result": "hi " + text, "session_id": "s-1",
                          "usage": {"input_tokens": 3, "cache_read_input_tokens": 4,
                                    "output_tokens": 2}}), flush=True)
time.sleep(300 if text == "spawn" else 0)  # stdin closed: hang if told to
"""


@pytest.fixture
def stand_in(tmp_path: Path) -> Path:
    script = tmp_path / "claude"
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(_STAND_IN))
    script.chmod(0o755)
    return script


def test_lines_that_are_not_json_objects_are_skipped(stand_in: Path, tmp_path: Path) -> None:
    async def main() -> None:
        claude = ClaudeCliBackend([], executable=str(stand_in))
        session = await claude.open(system_prompt="", workdir=tmp_path)
        try:
            events, done = await collect(session.send("there"))
            assert text_of(events) == "hi there" == done.text
            assert done.usage == Usage(input_tokens=7, output_tokens=2)  # cached tokens count
            assert session.session_id == "s-1"
        finally:
            await session.close()

    asyncio.run(main())


def test_a_process_that_dies_mid_turn_raises_with_its_stderr(
    stand_in: Path, tmp_path: Path
) -> None:
    async def main() -> None:
        claude = ClaudeCliBackend([], executable=str(stand_in))
        session = await claude.open(system_prompt="", workdir=tmp_path)
        try:
            with pytest.raises(ModelError, match=r"exit code 3.*the stand-in gave up"):
                await collect(session.send("die"))
            assert not session.is_alive()
            with pytest.raises(ModelError, match="not running"):
                await collect(session.send("again"))
        finally:
            await session.close()
        assert gone(session.pid)

    asyncio.run(main())


def test_close_escalates_to_sigkill_and_kills_escaped_grandchildren(
    stand_in: Path, tmp_path: Path
) -> None:
    async def main() -> None:
        claude = ClaudeCliBackend([], executable=str(stand_in), close_timeout=0.5)
        session = await claude.open(system_prompt="", workdir=tmp_path)
        try:
            await collect(session.send("spawn"))
            sleeper = await wait_for_descendant(session.pid, "sleep 300")
            assert sleeper is not None and os.getpgid(sleeper) != session.pid
        finally:
            await session.close()
        assert session._process.returncode == -signal.SIGKILL
        assert gone(session.pid)
        assert not alive(sleeper)

    asyncio.run(main())


def test_one_turn_at_a_time(stand_in: Path, tmp_path: Path) -> None:
    async def main() -> None:
        claude = ClaudeCliBackend([], executable=str(stand_in))
        session = await claude.open(system_prompt="", workdir=tmp_path)
        try:
            first = session.send("one")
            await anext(first)
            with pytest.raises(UsageError):
                session.send("two")
            async for event in first:
                if isinstance(event, Completion):
                    break  # the turn is over at its Completion, even with the stream open
            _, done = await collect(session.send("two"))
            assert done.text == "hi two"
            await first.aclose()
        finally:
            await session.close()

    asyncio.run(main())


def test_a_cli_that_never_starts_is_a_model_error(tmp_path: Path) -> None:
    broken = tmp_path / "claude"
    broken.write_text("#!/bin/sh\necho 'cannot start' >&2\nexit 2\n")
    broken.chmod(0o755)

    async def main() -> None:
        claude = ClaudeCliBackend([], executable=str(broken))
        with pytest.raises(ModelError, match=r"did not start \(exit code 2\): cannot start"):
            await claude.open(system_prompt="", workdir=tmp_path)

    asyncio.run(main())


# --- finding the executable, building the command and environment ----------------------------


def test_the_executable_comes_from_the_argument_the_env_path_or_the_wheel(
    stand_in: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(claude_cli.EXECUTABLE_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert find_claude_cli(str(stand_in)) == str(stand_in)
    monkeypatch.setenv(claude_cli.EXECUTABLE_ENV, str(stand_in))
    assert find_claude_cli() == str(stand_in)
    monkeypatch.delenv(claude_cli.EXECUTABLE_ENV)
    monkeypatch.setenv("PATH", str(stand_in.parent))
    assert find_claude_cli() == str(stand_in)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    bundled = claude_cli._bundled_cli()
    if bundled is not None:
        assert find_claude_cli() == bundled
        assert bundled.endswith("claude_agent_sdk/_bundled/claude")


@needs_cli
def test_finding_the_bundled_cli_does_not_import_the_sdk() -> None:
    import subprocess

    code = (
        "import sys; from agentkit.models.claude_cli import _bundled_cli; "
        "assert _bundled_cli(); assert 'claude_agent_sdk' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_missing_executable_is_a_clear_model_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv(claude_cli.EXECUTABLE_ENV, raising=False)
    monkeypatch.setattr(claude_cli, "_bundled_cli", lambda: None)
    with pytest.raises(ModelError, match=r"AGENTKIT_CLAUDE_CLI.*claude-agent-sdk"):
        ClaudeCliBackend([])
    with pytest.raises(ModelError, match="not found"):
        find_claude_cli(str(tmp_path / "nope"))
    monkeypatch.setenv(claude_cli.EXECUTABLE_ENV, "no-such-claude")
    with pytest.raises(ModelError, match="no-such-claude"):
        find_claude_cli()


def test_the_command_line(stand_in: Path) -> None:
    claude = ClaudeCliBackend(["--model", "sonnet"], executable=str(stand_in))
    assert claude.spec == "claude-cli:--model sonnet"
    fresh = claude.command("be brief")
    assert fresh[:8] == [
        str(stand_in),
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
    ]
    assert fresh[8:10] == ["--append-system-prompt", "be brief"]
    assert fresh[10] == "--session-id"
    uuid.UUID(fresh[11])
    assert fresh[12:] == ["--model", "sonnet"]
    assert claude.command("", resume_id="abc")[8:] == ["--resume", "abc", "--model", "sonnet"]
    own = ClaudeCliBackend(["--session-id=x"], executable=str(stand_in))
    assert "--session-id" not in own.command("")


def test_the_environment_is_an_allow_list() -> None:
    parent = {
        "PATH": "/bin",
        "HOME": "/h",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "ANTHROPIC_BASE_URL": "http://x",
        "CLAUDE_CODE_USE_BEDROCK": "0",
        "CLAUDECODE": "1",
        "OPENAI_API_KEY": "sk-secret",
        "AWS_SECRET_ACCESS_KEY": "secret",
        SECRET: "secret",
    }
    env = cli_environment({"EXTRA": "1"}, environ=parent)
    assert env == {
        "PATH": "/bin",
        "HOME": "/h",
        "LANG": "C.UTF-8",
        "LC_ALL": "C",
        "ANTHROPIC_BASE_URL": "http://x",
        "CLAUDE_CODE_USE_BEDROCK": "0",
        "EXTRA": "1",
    }


def test_the_spec_string_builds_this_backend(
    stand_in: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentkit.models.spec import create_model

    monkeypatch.setenv(claude_cli.EXECUTABLE_ENV, str(stand_in))
    model = create_model("claude-cli:--model haiku")
    assert isinstance(model, ClaudeCliBackend)
    assert model.argv == ["--model", "haiku"]
    assert model.executable == str(stand_in)
