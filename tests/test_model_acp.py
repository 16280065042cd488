"""The acp backend against a real ACP agent subprocess (tests/fakes/acp_memory_agent.py)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from agentkit.errors import ModelError
from agentkit.models import acp as acp_backend
from agentkit.models.acp import AcpBackend, AcpSession
from agentkit.models.base import (
    Completion,
    ModelEvent,
    PermissionRequest,
    TextDelta,
    ThinkingDelta,
    ToolCallRequest,
)
from agentkit.models.spec import create_model

#: a real backend (a model process, server or agent CLI) under test
pytestmark = pytest.mark.real_model

AGENT = Path(__file__).parent / "fakes" / "acp_memory_agent.py"
SYSTEM = "You are a careful assistant."


def backend(*extra: str, **options: Any) -> AcpBackend:
    return AcpBackend([sys.executable, str(AGENT), *extra], **options)


async def collect(session: AcpSession, text: str) -> list[ModelEvent]:
    return [event async for event in session.send(text)]


def completion(events: list[ModelEvent]) -> Completion:
    assert isinstance(events[-1], Completion)
    assert sum(isinstance(e, Completion) for e in events) == 1
    return events[-1]


def remembered(reply: str) -> list[str]:
    """The agent's memory as it reported it: ``turn N; I remember: [...]``."""
    return json.loads(reply.split("I remember: ", 1)[1])


def running(pid: int) -> bool:
    """True while *pid* is a live process (a zombie or a missing entry counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # pragma: no cover - no /proc
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_gone(pid: int) -> None:
    """Until *pid* has exited (the signal lands soon, not at once on a loaded machine: the
    test's timeout bounds the wait)."""
    while running(pid):
        time.sleep(0.02)


def run_with(
    make: AcpBackend, workdir: Path, body: Callable[[AcpSession], Awaitable[None]]
) -> None:
    """Open a session, run *body* with it, and always close it."""

    async def main() -> None:
        session = await make.open(system_prompt=SYSTEM, workdir=workdir)
        try:
            await body(session)
        finally:
            await session.close()

    asyncio.run(main())


def test_spec_names_the_command_and_create_model_builds_the_backend() -> None:
    made = create_model("acp:my-agent --stdio")
    assert isinstance(made, AcpBackend)
    assert made.spec == "acp:my-agent --stdio"
    assert made.argv == ["my-agent", "--stdio"]


def test_two_prompts_keep_context_and_only_the_first_carries_the_system_prompt(
    tmp_path: Path,
) -> None:
    async def body(session: AcpSession) -> None:
        assert session.session_id
        assert session.resumed is False
        first = await collect(session, "my name is Ada")
        second = await collect(session, "what is my name?")
        assert [type(e) for e in first] == [TextDelta, Completion]
        assert completion(first).stop_reason == "end_turn"
        reply = completion(second).text
        assert reply.startswith("turn 2;")
        assert remembered(reply) == [f"{SYSTEM}\n\nmy name is Ada", "what is my name?"]
        assert reply == "".join(e.text for e in second if isinstance(e, TextDelta))

    run_with(backend(), tmp_path, body)


def test_a_tool_prompt_yields_the_tool_call_and_a_denied_permission_by_default(
    tmp_path: Path,
) -> None:
    async def body(session: AcpSession) -> None:
        events = await collect(session, "use a tool and think")
        kinds = [type(e) for e in events]
        assert kinds[:3] == [ThinkingDelta, ToolCallRequest, PermissionRequest]
        call, permission = events[1], events[2]
        assert isinstance(call, ToolCallRequest)
        assert isinstance(permission, PermissionRequest)
        assert call.name == "Run shell"
        assert call.arguments == {"command": "ls"}
        assert permission.tool_call_id == call.id
        assert permission.options == ("allow", "deny")
        assert permission.decision == "deny"
        final = completion(events)
        assert final.text.startswith("tool denied;")
        assert final.tool_calls == (call,)

    run_with(backend(), tmp_path, body)


def test_the_allow_policy_selects_the_allow_option(tmp_path: Path) -> None:
    async def body(session: AcpSession) -> None:
        events = await collect(session, "use a tool")
        permission = next(e for e in events if isinstance(e, PermissionRequest))
        assert permission.decision == "allow"
        assert completion(events).text.startswith("tool allowed;")

    run_with(backend(permission="allow"), tmp_path, body)


def test_cancel_ends_a_slow_turn_as_cancelled_and_the_session_still_works(
    tmp_path: Path,
) -> None:
    async def body(session: AcpSession) -> None:
        events: list[ModelEvent] = []
        async for event in session.send("be slow"):
            events.append(event)
            if isinstance(event, TextDelta):
                await session.cancel()
        assert completion(events).stop_reason == "cancelled"
        assert session.is_alive()
        after = completion(await collect(session, "still there?"))
        assert after.stop_reason == "end_turn"
        assert remembered(after.text)[-1] == "still there?"

    run_with(backend(), tmp_path, body)


def test_a_second_send_during_a_turn_is_refused(tmp_path: Path) -> None:
    async def body(session: AcpSession) -> None:
        turn = session.send("be slow")
        first = await anext(turn)
        assert isinstance(first, TextDelta)
        with pytest.raises(ModelError, match="one turn at a time"):
            await collect(session, "interleaved")
        await session.cancel()
        rest = [event async for event in turn]
        assert completion(rest).stop_reason == "cancelled"

    run_with(backend(), tmp_path, body)


def test_leaving_a_turn_early_cancels_it_and_the_session_still_works(tmp_path: Path) -> None:
    async def body(session: AcpSession) -> None:
        turn = session.send("be slow")
        assert isinstance(await anext(turn), TextDelta)
        await turn.aclose()  # the consumer walked away mid-turn
        assert session.is_alive()
        assert completion(await collect(session, "next")).stop_reason == "end_turn"

    run_with(backend(), tmp_path, body)


def test_a_turn_over_its_timeout_is_cancelled_and_raises(tmp_path: Path) -> None:
    async def body(session: AcpSession) -> None:
        with pytest.raises(ModelError, match=r"no reply within 0\.5s") as caught:
            await collect(session, "be slow")
        assert caught.value.retryable
        assert session.is_alive()  # the agent honoured session/cancel
        # the next turn on the same session, with time to answer on a loaded machine (0.5 s
        # bounds the slow turn above, which waits for the cancel; it bounds no real reply)
        session._turn_timeout = 300.0
        assert completion(await collect(session, "next")).stop_reason == "end_turn"

    run_with(backend(turn_timeout=0.5), tmp_path, body)


def test_a_killed_agent_fails_the_next_send_and_a_fresh_open_works(tmp_path: Path) -> None:
    make = backend()

    async def main() -> None:
        session = await make.open(system_prompt=SYSTEM, workdir=tmp_path)
        try:
            await collect(session, "remember me")
            os.kill(session.pid, signal.SIGKILL)
            with pytest.raises(ModelError) as caught:
                await collect(session, "are you there?")
            assert caught.value.backend == "acp"
            assert not session.is_alive()
        finally:
            await session.close()
        fresh = await make.open(system_prompt=SYSTEM, workdir=tmp_path)
        try:
            assert fresh.session_id != session.session_id
            reply = completion(await collect(fresh, "hello again")).text
            assert remembered(reply) == [f"{SYSTEM}\n\nhello again"]
        finally:
            await fresh.close()

    asyncio.run(main())


def test_the_agent_does_not_inherit_secrets_and_runs_in_the_workdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTKIT_TEST_SECRET", "s3cret")

    async def body(session: AcpSession) -> None:
        reply = completion(await collect(session, "env")).text
        assert "secret absent" in reply
        assert f"cwd {tmp_path.resolve()};" in reply

    run_with(backend(), tmp_path, body)
    assert "AGENTKIT_TEST_SECRET" not in backend().child_environment()
    assert set(backend().child_environment()) <= {"PATH", "HOME", "LANG"}


def test_variables_passed_explicitly_reach_the_agent(tmp_path: Path) -> None:
    async def body(session: AcpSession) -> None:
        assert "secret present" in completion(await collect(session, "env")).text

    run_with(backend(env={"AGENTKIT_TEST_SECRET": "given"}), tmp_path, body)


def test_close_leaves_no_process_behind_not_even_a_grandchild(tmp_path: Path) -> None:
    pids: list[int] = []

    async def body(session: AcpSession) -> None:
        reply = completion(await collect(session, "spawn a helper")).text
        pids.extend([session.pid, int(reply.split("grandchild ", 1)[1].split(";")[0])])
        assert all(running(pid) for pid in pids)

    run_with(backend(), tmp_path, body)
    agent, grandchild = pids
    assert not running(agent)
    with pytest.raises(ProcessLookupError):
        os.kill(agent, 0)  # reaped, not a zombie
    wait_gone(grandchild)  # killed with its group


def test_close_is_idempotent_and_a_closed_session_refuses_to_send(tmp_path: Path) -> None:
    async def main() -> None:
        session = await backend().open(system_prompt="", workdir=tmp_path)
        await session.close()
        await session.close()
        assert not session.is_alive()
        with pytest.raises(ModelError, match="closed"):
            await collect(session, "hello")

    asyncio.run(main())


def test_resume_loads_the_session_and_skips_the_system_prompt(tmp_path: Path) -> None:
    make = backend("--state", str(tmp_path / "state.json"))

    async def main() -> None:
        first = await make.open(system_prompt=SYSTEM, workdir=tmp_path)
        try:
            await collect(first, "my name is Ada")
        finally:
            await first.close()
        again = await make.open(system_prompt=SYSTEM, workdir=tmp_path, resume_id=first.session_id)
        try:
            assert again.resumed is True
            assert again.session_id == first.session_id
            events = await collect(again, "what is my name?")
            assert [type(e) for e in events] == [TextDelta, Completion]  # no replayed history
            assert remembered(completion(events).text) == [
                f"{SYSTEM}\n\nmy name is Ada",
                "what is my name?",
            ]
        finally:
            await again.close()

    asyncio.run(main())


def test_resume_of_an_unknown_session_falls_back_to_a_new_one(tmp_path: Path) -> None:
    make = backend("--state", str(tmp_path / "state.json"))

    async def main() -> None:
        session = await make.open(system_prompt=SYSTEM, workdir=tmp_path, resume_id="sess_gone")
        try:
            assert session.resumed is False
            assert session.session_id != "sess_gone"
            reply = completion(await collect(session, "hi")).text
            assert remembered(reply) == [f"{SYSTEM}\n\nhi"]
        finally:
            await session.close()

    asyncio.run(main())


def test_resume_without_the_load_session_capability_starts_a_new_session(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        session = await backend().open(system_prompt=SYSTEM, workdir=tmp_path, resume_id="x")
        try:
            assert session.resumed is False
            assert session.session_id != "x"
        finally:
            await session.close()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["/nonexistent/agent"], "cannot start"),
        ([sys.executable, "-c", "import sys; print('oops'); sys.exit(3)"], "exited with code 3"),
    ],
)
def test_a_command_that_is_no_agent_fails_to_open(
    tmp_path: Path, argv: list[str], message: str
) -> None:
    async def main() -> None:
        with pytest.raises(ModelError, match=message):
            await AcpBackend(argv).open(system_prompt="", workdir=tmp_path)

    asyncio.run(main())


def test_close_kills_an_agent_that_ignores_eof_and_sigterm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(acp_backend, "_STOP_GRACE", 0.3)
    pids: list[int] = []

    async def body(session: AcpSession) -> None:
        await collect(session, "hello")
        pids.append(session.pid)

    run_with(backend("--ignore-term"), tmp_path, body)
    assert not running(pids[0])


def test_an_agent_that_never_answers_times_out_and_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(acp_backend, "_STOP_GRACE", 0.3)
    silent = AcpBackend([sys.executable, "-c", "import time; time.sleep(60)"], startup_timeout=0.5)

    async def main() -> None:
        with pytest.raises(ModelError, match=r"did not start a session within 0\.5s"):
            await silent.open(system_prompt="", workdir=tmp_path)

    asyncio.run(main())
