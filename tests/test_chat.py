"""send_message on engine chat: the seed's three context scenarios, failures, busy, cancel."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agentkit import (
    Agent,
    ConversationBusyError,
    FunctionModel,
    Message,
    ModelRequest,
    ScriptedSessionBackend,
)
from agentkit.errors import UsageError
from agentkit.events import ErrorEvent
from agentkit.models import SessionRequest
from agentkit.models.scripted import ScriptedModel

SCRIPT = Path(sys.executable).with_name("agentkit")


def numbered(request: SessionRequest) -> str:
    """A session's replies, numbered within that session: "reply 1", "reply 2"…"""
    return f"reply {request.turn + 1}"


def test_the_three_scenarios_with_a_session_backend(data_dir: Path) -> None:
    backend = ScriptedSessionBackend(numbered)
    with Agent.open("innovator-001", data_dir=data_dir, model=backend) as agent:
        first = agent.send("hello")
        assert first.session.scenario == "A"
        assert first.session.injected == "system prompt"
        assert len(backend.sessions) == 1
        assert backend.sessions[0].system_prompt == agent.system_prompt()
        assert backend.sessions[0].received == ["hello"]

        second = agent.send("and again", first.conversation_id)
        assert second.session.scenario == "B"
        assert len(backend.sessions) == 1  # the same live session
        assert backend.sessions[0].received == ["hello", "and again"]  # only the new message

        backend.sessions[0].kill()  # the process died
        third = agent.send("are you there?", first.conversation_id)
        assert third.session.scenario == "C"
        assert third.session.history_messages == 4
        restored = backend.sessions[1].received[0]
        assert restored.startswith("[Earlier in this conversation: the last 4 messages]")
        assert "user: hello" in restored and "assistant: reply 2" in restored
        assert restored.endswith("\n\nare you there?")
        assert third.text == "reply 1"
        fresh = backend.sessions[1].context  # the new session knows only what it was sent
        assert [(m.role, m.content) for m in fresh[:2]] == [
            ("system", agent.system_prompt()),
            ("user", restored),
        ]
        log = agent.turn_log(first.conversation_id, third.result.message_id)
        assert "[SESSION]\nscenario C: system prompt + summary of the last 4 messages" in log


def test_a_chat_model_gets_the_whole_transcript(data_dir: Path) -> None:
    model = ScriptedModel({"chat": ["one", "two"]})
    with Agent.open("innovator-001", data_dir=data_dir, model=model) as agent:
        first = agent.send("hi")
        agent.send("more", first.conversation_id)
    sent = [[(m.role, m.content) for m in r.messages] for r in model.requests]
    system = ("system", agent.system_prompt())
    assert sent[0] == [system, ("user", "hi")]
    assert sent[1] == [system, ("user", "hi"), ("assistant", "one"), ("user", "more")]
    assert all(r.purpose == "chat" for r in model.requests)


def test_scenario_c_in_a_new_process_summarises_the_last_20(data_dir: Path, tmp_path: Path) -> None:
    agent = Agent.open("innovator-001", data_dir=data_dir)
    cid = agent.create_conversation("long").conversation_id
    for index in range(1, 26):
        role = "user" if index % 2 else "assistant"
        agent.append_message(
            cid,
            Message(
                role=role,
                content=f"message number {index:02d}",
                message_id=f"msg-{index}",
                timestamp="2026-01-01T00:00:00Z",
            ),
        )
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"chat": ["restored!"]}))
    log = tmp_path / "requests.jsonl"
    env = {**os.environ, "AGENTKIT_SCRIPTED_LOG": str(log)}
    done = subprocess.run(
        [
            str(SCRIPT),
            "--data-dir",
            str(data_dir),
            "send",
            "innovator-001",
            "-c",
            cid,
            "--model",
            f"scripted:{script}",
            "--json",
            "what did we say?",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[0]["type"] == "session" and events[0]["scenario"] == "C"
    assert events[0]["conversationId"] == cid and events[0]["historyMessages"] == 20
    assert events[-1]["type"] == "result" and events[-1]["text"] == "restored!"
    [request] = [json.loads(line) for line in log.read_text().splitlines()]
    assert request["purpose"] == "chat"
    system, user = request["messages"]
    # a chat model gets the summary in its system message and the new message as the user's
    assert system["role"] == "system"
    assert system["content"].startswith(agent.system_prompt() + "\n\n[Earlier in this")
    for index in range(1, 6):
        assert f"message number {index:02d}" not in system["content"]
    for index in range(6, 26):
        assert f"message number {index:02d}" in system["content"]
    assert "The new message follows" not in system["content"]  # nothing for a model to echo
    assert user == {"role": "user", "content": "what did we say?"}
    assert [m.content for m in agent.load_recent_messages(cid, 2)] == [
        "what did we say?",
        "restored!",
    ]


def test_a_model_failure_is_an_error_event_and_keeps_the_message(data_dir: Path) -> None:
    model = ScriptedModel(["only one reply"])
    with Agent.open("innovator-001", data_dir=data_dir, model=model) as agent:
        first = agent.send("first")
        second = agent.send("second", first.conversation_id)
        kinds = [event.type for event in second.events]
        assert kinds == ["session", "error", "result"]
        error = second.events[1]
        assert isinstance(error, ErrorEvent) and "no reply left" in error.message
        assert second.result.status == "failed"
        conversation = agent.get_conversation(first.conversation_id)
        assert [m.content for m in conversation.messages] == ["first", "only one reply", "second"]
        assert conversation.meta.status == "failed"
        assert "[ERROR]" in agent.turn_log(first.conversation_id, second.result.message_id)


def test_stats_count_messages_and_tokens(data_dir: Path) -> None:
    with Agent.open("innovator-001", data_dir=data_dir, model=ScriptedModel(["a b c"])) as agent:
        result = agent.send("count me")
        meta = agent.get_conversation(result.conversation_id).meta
    assert meta.status == "completed"
    assert meta.stats.message_count == 2
    assert meta.stats.output_tokens == result.result.usage.output_tokens > 0
    assert meta.stats.input_tokens == result.result.usage.input_tokens > 0


def test_bad_messages_are_refused_before_anything_is_written(data_dir: Path) -> None:
    with Agent.open("innovator-001", data_dir=data_dir, model=ScriptedModel(["x"])) as agent:
        for text in ["", "   ", "x" * 32_001]:
            with pytest.raises(UsageError):
                agent.send(text)
        assert agent.list_conversations() == []


def test_a_second_turn_on_a_busy_conversation_is_refused(data_dir: Path) -> None:
    async def scenario() -> None:
        started = asyncio.Event()

        async def slow(request: ModelRequest) -> AsyncIterator[str]:
            yield "partial "
            started.set()
            while True:  # dots until cancelled: only the cancel ends this turn
                await asyncio.sleep(0.05)
                yield "."

        agent = Agent.open("innovator-001", data_dir=data_dir, model=FunctionModel(slow))
        cid = agent.create_conversation("busy").conversation_id

        async def drain() -> list[str]:
            return [event.type async for event in agent.send_message(cid, "slow one")]

        first = asyncio.create_task(drain())
        await started.wait()
        with pytest.raises(ConversationBusyError):
            async for _ in agent.send_message(cid, "second"):
                pass
        assert await agent.cancel(cid)
        kinds = await first
        assert kinds[-1] == "result"
        messages = agent.load_conversation_history(cid)
        assert messages[0].content == "slow one"
        assert messages[-1].content.startswith("partial")  # what streamed is kept
        assert agent.get_conversation(cid).meta.status == "idle"
        await agent.aclose()

    asyncio.run(scenario())


def test_cli_send_json_and_a_piped_chat_keep_one_session(data_dir: Path, tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"chat": ["first answer", "second answer"]}))
    chat = subprocess.run(
        [
            str(SCRIPT),
            "--data-dir",
            str(data_dir),
            "chat",
            "innovator-001",
            "--model",
            f"scripted:{script}",
        ],
        input="hello\nand then?\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert chat.returncode == 0, chat.stderr
    assert chat.stdout.splitlines() == ["first answer", "second answer"]
    cid = chat.stderr.strip().removeprefix("conversation: ")
    agent = Agent.open("innovator-001", data_dir=data_dir)
    messages = agent.load_conversation_history(cid)
    assert [m.content for m in messages] == ["hello", "first answer", "and then?", "second answer"]
    second_turn = agent.turn_log(cid, messages[2].message_id)
    assert "scenario B: nothing (live session)" in second_turn


def crashingmodel() -> FunctionModel:
    """A backend with a bug: streams one piece, then raises something that is not a
    ModelError (``wrap_errors=False``: the function's exception reaches the turn as it is)."""

    async def reply(request: ModelRequest) -> AsyncIterator[str]:
        yield "half a "
        raise RuntimeError("backend bug")

    return FunctionModel(reply, name="crashing", wrap_errors=False)


def test_a_backend_crash_mid_reply_fails_the_turn_and_keeps_the_conversation_usable(
    data_dir: Path,
) -> None:
    with Agent.open("innovator-001", data_dir=data_dir, model=crashingmodel()) as agent:
        turn = agent.send("hello")
        assert turn.result.status == "failed"
        errors = [e for e in turn.events if e.type == "error"]
        assert errors and "(RuntimeError)" in errors[0].message  # type: ignore[attr-defined]
        assert "backend bug" not in errors[0].message  # type: ignore[attr-defined]
        conversation = turn.conversation_id
        assert agent.get_conversation(conversation).meta.status == "failed"  # not stuck "running"
        log = agent.turn_log(conversation, turn.session.message_id)
        assert "RuntimeError: backend bug" in log and "half a" in log
    with Agent.open("innovator-001", data_dir=data_dir, model=ScriptedModel(["fine"])) as agent:
        assert agent.send("again", conversation).text == "fine"
