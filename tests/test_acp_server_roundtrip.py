"""agentkit as a client of itself: the ``acp:`` model backend talking to ``agentkit acp``.

The outer agent's model is ``acp:agentkit --data-dir INNER acp innovator-001 --model
scripted:FILE``; every outer turn is an ACP prompt to the inner agent, whose conversation is
stored in the inner data root. Dropping the outer session resumes the inner one with
``session/load`` (agentkit's backend asks for it when it knows the session id).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest
from agentkit import Agent
from agentkit.events import AgentEvent, ResultEvent, SessionEvent
from agentkit.models.acp import AcpBackend

from tests._acp_peer import AGENTKIT, gone, running


def ends(events: list[AgentEvent]) -> tuple[SessionEvent, ResultEvent]:
    first, last = events[0], events[-1]
    assert isinstance(first, SessionEvent) and isinstance(last, ResultEvent)
    return first, last


@pytest.mark.real_model
def test_the_acp_backend_drives_agentkit_acp(data_dir: Path, tmp_path: Path) -> None:
    inner = tmp_path / "inner"
    shutil.copytree(data_dir, inner)
    replies = tmp_path / "inner.json"
    replies.write_text(json.dumps({"chat": ["Inner hello.", "Inner again."]}))
    # the command as the README gives it: agentkit acp AGENT --data-dir D --model SPEC
    argv = [str(AGENTKIT), "acp", "innovator-001", "--data-dir", str(inner)]
    argv += ["--model", f"scripted:{replies}"]
    # the backend passes a minimal environment; a test run from a checkout keeps its path
    env = {name: os.environ[name] for name in ("PYTHONPATH",) if name in os.environ}
    backend = AcpBackend(argv, env=env, permission="deny")

    async def body() -> None:
        agent = Agent.open("innovator-001", data_dir=data_dir, model=backend)
        try:
            session, result = ends([e async for e in agent.send_message(None, "hi from outside")])
            conversation = result.conversation_id
            assert (session.scenario, result.text) == ("A", "Inner hello.")
            session, result = ends([e async for e in agent.send_message(conversation, "again")])
            assert (session.scenario, result.text) == ("B", "Inner again.")
            entry = await agent.pool.get(agent.id, conversation)
            assert entry is not None
            inner_pid = entry.session.pid
            inner_session = entry.session.session_id
            await agent.pool.drop(agent.id, conversation)  # the inner process is closed
            assert await gone({inner_pid})
            session, result = ends(
                [e async for e in agent.send_message(conversation, "still there?")]
            )
            assert session.scenario == "C"
            assert f"resumed backend session {inner_session}" in session.injected
            assert result.text == "Inner hello."  # a new inner process: its script starts over
            entry = await agent.pool.get(agent.id, conversation)
            assert entry is not None and entry.session.session_id == inner_session
            last_pid = entry.session.pid
        finally:
            await agent.aclose()
        assert not running(last_pid)

        inner_agent = Agent.open("innovator-001", data_dir=inner)
        [meta] = inner_agent.list_conversations()
        assert meta.conversation_id == inner_session
        messages = inner_agent.load_conversation_history(inner_session)
        assert [m.role for m in messages] == ["user", "assistant"] * 3
        assert messages[0].content.endswith("hi from outside")  # after the system prompt
        assert [m.content for m in messages[2:]] == [
            "again",
            "Inner again.",
            "still there?",
            "Inner hello.",
        ]
        logs = "".join(
            path.read_text()
            for path in (inner / "agents/innovator-001/conversations" / inner_session).glob(
                "*/messages.log"
            )
        )
        assert "scenario C" in logs  # the inner process restarted on the stored history

    asyncio.run(body())
