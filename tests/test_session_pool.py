"""The session pool: one turn per key, idle reaping, LRU eviction, dead sessions dropped."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest
from agentkit import Agent, ScriptedSessionBackend
from agentkit.errors import ConversationBusyError
from agentkit.models import ScriptedSession
from agentkit.models.acp import AcpBackend, AcpSession
from agentkit.sessions import SessionPool


async def open_sessions(count: int) -> list[ScriptedSession]:
    """*count* live sessions of one scripted backend, for the pool to hold."""
    backend = ScriptedSessionBackend(lambda request: request.text)
    for _ in range(count):
        await backend.open(system_prompt="", workdir=Path.cwd())
    return backend.sessions


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_idle_sessions_are_reaped_and_closed() -> None:
    async def scenario() -> None:
        clock = Clock()
        pool = SessionPool(idle_timeout=60, clock=clock)
        old, fresh = await open_sessions(2)
        await pool.put("a", "c1", old)
        clock.now += 50
        await pool.put("a", "c2", fresh)
        clock.now += 20  # c1 idle 70 s, c2 idle 20 s
        assert await pool.reap() == ["a:c1"]
        assert old.closed and not fresh.closed
        assert pool.keys() == ["a:c2"]
        assert await pool.get("a", "c1") is None

    asyncio.run(scenario())


def test_the_least_recently_used_session_is_evicted_beyond_max_size() -> None:
    async def scenario() -> None:
        clock = Clock()
        pool = SessionPool(max_size=2, clock=clock)
        sessions = await open_sessions(3)
        await pool.put("a", "c0", sessions[0])
        clock.now += 1
        await pool.put("a", "c1", sessions[1])
        clock.now += 1
        async with pool.turn("a", "c0"):  # c0 used last
            clock.now += 1
        await pool.put("a", "c2", sessions[2])
        assert sorted(pool.keys()) == ["a:c0", "a:c2"]
        assert sessions[1].closed and not sessions[0].closed

    asyncio.run(scenario())


def test_a_dead_session_is_dropped_and_its_id_kept_for_resuming() -> None:
    async def scenario() -> None:
        pool = SessionPool()
        (session,) = await open_sessions(1)
        await pool.put("a", "c", session)
        assert (await pool.get("a", "c")) is not None
        session.kill()  # the process died
        assert await pool.get("a", "c") is None
        assert session.closed  # reaped
        assert session.session_id and pool.resume_id("a", "c") == session.session_id
        assert len(pool) == 0

    asyncio.run(scenario())


def test_one_turn_at_a_time_per_key() -> None:
    async def scenario() -> None:
        pool = SessionPool()
        async with pool.turn("a", "c"):
            with pytest.raises(ConversationBusyError):
                async with pool.turn("a", "c"):
                    pass
            async with pool.turn("a", "other"):  # other keys are free
                pass
        async with pool.turn("a", "c"):  # free again
            pass

    asyncio.run(scenario())


def test_busy_sessions_are_not_evicted_or_reaped() -> None:
    async def scenario() -> None:
        clock = Clock()
        pool = SessionPool(max_size=1, idle_timeout=10, clock=clock)
        busy, new = await open_sessions(2)
        await pool.put("a", "c0", busy)
        async with pool.turn("a", "c0"):
            clock.now += 100
            assert await pool.reap() == []
            await pool.put("a", "c1", new)
            assert not busy.closed
        await pool.close_all()
        assert busy.closed and len(pool) == 0

    asyncio.run(scenario())


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.real_model
def test_real_agent_processes_do_not_outlive_reaping_eviction_or_close(
    data_dir: Path,
) -> None:
    """Pool + the acp backend + a real ACP agent subprocess per conversation."""
    agent_script = Path(__file__).parent / "fakes" / "acp_memory_agent.py"

    async def scenario() -> None:
        clock = Clock()
        pool = SessionPool(max_size=2, idle_timeout=60, clock=clock)
        backend = AcpBackend([sys.executable, str(agent_script)])
        agent = Agent.open("innovator-001", data_dir=data_dir, model=backend, pool=pool)
        pids: dict[str, int] = {}
        conversations = []
        for index in range(3):
            clock.now += 1
            cid = agent.create_conversation(f"c{index}").conversation_id
            conversations.append(cid)
            events = [event async for event in agent.send_message(cid, f"hello {index}")]
            assert events[-1].type == "result" and events[-1].status == "completed"
            entry = await pool.get("innovator-001", cid)
            assert entry is not None
            session = entry.session
            assert isinstance(session, AcpSession)
            pids[cid] = session.pid
        # max_size 2: the first conversation's process was evicted (least recently used).
        assert _gone(pids[conversations[0]])
        assert not _gone(pids[conversations[1]]) and not _gone(pids[conversations[2]])
        # The evicted conversation continues in a new process: scenario C.
        clock.now += 1
        events = [e async for e in agent.send_message(conversations[0], "still there?")]
        assert events[0].type == "session" and events[0].scenario == "C"
        entry = await pool.get("innovator-001", conversations[0])
        assert entry is not None and isinstance(entry.session, AcpSession)
        pids["again"] = entry.session.pid
        assert _gone(pids[conversations[1]])  # evicted in turn
        # Idle timeout reaps the rest.
        clock.now += 1000
        reaped = await pool.reap()
        assert len(reaped) == 2
        assert all(_gone(pid) for pid in pids.values())
        await agent.aclose()

    asyncio.run(scenario())


@pytest.mark.real_model
def test_a_killed_agent_process_is_replaced_and_context_restored(data_dir: Path) -> None:
    agent_script = Path(__file__).parent / "fakes" / "acp_memory_agent.py"

    async def scenario() -> None:
        agent = Agent.open(
            "innovator-001",
            data_dir=data_dir,
            model=AcpBackend([sys.executable, str(agent_script)]),
        )
        cid = agent.create_conversation("kill me").conversation_id
        first = [e async for e in agent.send_message(cid, "my name is Ada")]
        second = [e async for e in agent.send_message(cid, "what is my name?")]
        assert (first[0].scenario, second[0].scenario) == ("A", "B")
        entry = await agent.pool.get("innovator-001", cid)
        assert entry is not None and isinstance(entry.session, AcpSession)
        old_pid = entry.session.pid
        os.kill(old_pid, signal.SIGKILL)
        while entry.session.is_alive():  # until the pool can see the death (not instant on a
            await asyncio.sleep(0.05)  # loaded machine: the test timeout bounds the wait)
        third = [e async for e in agent.send_message(cid, "still remember me?")]
        assert third[0].type == "session" and third[0].scenario == "C"
        assert third[-1].type == "result" and third[-1].status == "completed"
        # The new agent process got the summary of the earlier turns with the message.
        assert "my name is Ada" in third[-1].text
        entry = await agent.pool.get("innovator-001", cid)
        assert entry is not None and isinstance(entry.session, AcpSession)
        assert entry.session.pid != old_pid
        await agent.aclose()
        assert _gone(old_pid) and _gone(entry.session.pid)

    asyncio.run(scenario())
