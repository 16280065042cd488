"""Agents on the PostgreSQL store: chosen by ``store=URL``, ``--store`` or ``$AGENTKIT_STORE``;
two servers (replicas) sharing conversations and memory; a replica killed mid-turn.

Agent folders stay under the data root; nothing of a conversation is written there.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from agentkit import Agent, FunctionModel, ScriptedModel
from agentkit.api import create_app
from agentkit.store import ConversationKey

from tests._postgres import postgres_server, postgres_url  # noqa: F401
from tests.conftest import REPO, run_cli
from tests.fakes.gated_model import Gate
from tests.fakes.live_api import iter_events, live_server, parse_sse

pytest.importorskip("psycopg")

from agentkit.store.postgres import PostgresConversationStore

pytestmark = pytest.mark.postgres

AGENT = "launcher"
TOOLS = '''
"""One side-effecting tool: every run appends a line to workspace/launches.log."""

from agentkit.tools import ToolContext, tool


@tool(side_effect=True)
def launch(ctx: ToolContext, name: str) -> dict[str, str]:
    """Launch a rocket (it cannot be undone)."""
    ctx.workspace.mkdir(parents=True, exist_ok=True)
    with open(ctx.workspace / "launches.log", "a", encoding="utf-8") as log:
        log.write(f"{name}\\n")
    return {"launched": name}
'''
PLAN = {
    "goal": "launch apollo",
    "steps": [
        {"id": "s1", "type": "tool", "title": "launch", "tool_name": "launch",
         "tool_args": {"name": "apollo"}},
        {"id": "s2", "type": "respond", "title": "report", "instruction": "Say it launched."},
    ],
}  # fmt: skip
SCRIPT: dict[str, list[Any]] = {
    "plan": [PLAN],
    "replan": [{"action": "continue"}],
    "respond": ["Apollo is launched."],
    "chat": ["Hello from the script"],
}


@pytest.fixture
def root(data_dir: Path) -> Path:
    folder = data_dir / "agents" / AGENT
    (folder / "workspace").mkdir(parents=True)
    config = {"engine": "planner", "toolsets": [{"python": "tools.py"}]}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "tools.py").write_text(textwrap.dedent(TOOLS), encoding="utf-8")
    return data_dir


def conversation_files(root: Path) -> list[Path]:
    """What a conversation leaves under the data root (nothing, on PostgreSQL)."""
    return [*root.glob("agents/*/conversations/*"), *root.glob("agentkit.db*")]


def test_a_planner_agent_keeps_conversations_and_memory_in_postgres(
    root: Path,
    postgres_url: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with Agent.open(AGENT, data_dir=root, store=postgres_url, model=ScriptedModel(SCRIPT)) as agent:
        assert isinstance(agent.store, PostgresConversationStore)
        asked = agent.send("launch apollo")
        conversation = asked.conversation_id
        assert "To continue I need to run launch" in asked.text
        assert agent.send("yes", conversation).text == "Apollo is launched."
        fork = agent.fork(conversation)
    assert conversation_files(root) == []
    assert (root / "agents" / AGENT / "workspace" / "launches.log").read_text() == "apollo\n"

    monkeypatch.setenv("AGENTKIT_STORE", postgres_url)  # another process, chosen by env
    with Agent.open(AGENT, data_dir=root, model=ScriptedModel(SCRIPT)) as other:
        assert isinstance(other.store, PostgresConversationStore)
        texts = [m.content for m in other.load_conversation_history(conversation)]
        assert texts[0] == "launch apollo" and texts[-1] == "Apollo is launched."
        assert len(texts) == 4
        execution = other.execution_state(conversation)
        assert execution is not None and execution.value.status == "completed"
        assert other.execution_state(fork.conversation_id) is not None  # the fork's memory
        checkpoints = other.store.checkpoints(ConversationKey(AGENT, conversation))
        assert [c.messages for c in checkpoints] == [2, 4]
    state = run_cli("--data-dir", str(root), "state", AGENT, conversation)
    assert state.exit_code == 0, state.stderr
    assert "ExecutionState: completed" in state.stdout
    verified = run_cli("--data-dir", str(root), "verify", "--store", postgres_url)
    assert verified.exit_code == 0, verified.stdout
    assert "2 conversations checked, 0 problems" in verified.stdout
    assert conversation_files(root) == []


def test_send_takes_the_store_on_the_command_line(
    root: Path,
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    model = f"scripted:{script}"
    sent = run_cli(
        "--data-dir", str(root), "send", "innovator-001", "hi", "--model", model,
        "--store", postgres_url, "--json",
    )  # fmt: skip
    assert sent.exit_code == 0, sent.stderr
    events = [json.loads(line) for line in sent.stdout.splitlines()]
    conversation = events[-1]["conversationId"]
    assert events[-1]["text"] == "Hello from the script"
    assert conversation_files(root) == []
    with PostgresConversationStore(postgres_url) as store:
        key = ConversationKey("innovator-001", conversation)
        assert [m.content for m in store.messages(key)] == ["hi", "Hello from the script"]
    unknown = run_cli("--data-dir", str(root), "send", "innovator-001", "hi", "--store", "redis:")
    assert unknown.exit_code == 2
    assert "unknown store 'redis:'" in unknown.stderr


def test_eval_runs_its_agents_on_the_store(
    data_dir: Path,
    postgres_url: str,  # noqa: F811
) -> None:
    scenarios = [
        str(REPO / "data" / "scenarios" / f"{name}.yaml")
        for name in ("memory_compression_facts_en", "memory_compression_facts_zh",
                     "memory_pinned_facts_en")
    ]  # fmt: skip
    result = run_cli(
        "--data-dir", str(data_dir), "eval", *scenarios, "--model", "scripted",
        "--store", postgres_url, "--no-progress",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "all 3 runs passed" in result.stdout
    with PostgresConversationStore(postgres_url) as store:
        assert store.verify().conversations >= 3
    assert "AGENTKIT_STORE" not in os.environ
    assert conversation_files(data_dir) == []


def chat(client: httpx.Client, text: str, **body: Any) -> list[Any]:
    response = client.post("/api/agent/innovator-001/chat", json={"message": text, **body})
    assert response.status_code == 200, response.text
    return parse_sse(response.text)


def test_two_servers_share_conversations_and_one_writer_holds_across_them(
    root: Path,
    postgres_url: str,  # noqa: F811
) -> None:
    gate = Gate()

    def first(port: int) -> Any:
        return create_app(root, model=gate.model, port=port, store=postgres_url)

    def second(port: int) -> Any:
        return create_app(root, model=ScriptedModel(SCRIPT), port=port, store=postgres_url)

    with (
        live_server(first) as base_a,
        live_server(second) as base_b,
        httpx.Client(base_url=base_a, timeout=60) as a,
        httpx.Client(base_url=base_b, timeout=60) as b,
    ):
        opened = chat(b, "remember 42")
        conversation = opened[0].data["conversationId"]
        assert opened[0].data["scenario"] == "A"
        listed = a.get("/api/agent/innovator-001/conversations").json()
        assert conversation in json.dumps(listed)

        streamed: list[Any] = []
        thread = threading.Thread(
            target=lambda: streamed.extend(chat(a, "held turn", conversationId=conversation))
        )
        thread.start()
        try:
            assert gate.parked.wait(30)
            busy = b.post(
                "/api/agent/innovator-001/chat",
                json={"message": "meanwhile", "conversationId": conversation},
            )
            assert busy.status_code == 409, busy.text
            assert busy.json()["error"]["code"] == "conversation_busy"
        finally:
            gate.open_gate()
            thread.join(60)
        assert streamed[0].data["scenario"] == "C"  # a's first turn on it: no live session
        assert streamed[-1].data["text"] == gate.reply

        after = chat(b, "what was it?", conversationId=conversation)
        assert after[0].data["scenario"] == "C"  # b's live session missed a's turn
        assert after[0].data["historyMessages"] == 4
        again = chat(b, "and now?", conversationId=conversation)
        assert again[0].data["scenario"] == "B"  # nothing happened elsewhere meanwhile
        messages = a.get(f"/api/agent/innovator-001/conversations/{conversation}").json()
        contents = [m["content"] for m in messages["messages"]]
        assert contents == [
            "remember 42",
            "Hello from the script",
            "held turn",
            gate.reply,
            "what was it?",
            "Hello from the script",
            "and now?",
            "Hello from the script",
        ]
    assert conversation_files(root) == []


HANGING_TURN = """
import asyncio, sys
from agentkit import Agent, FunctionModel

async def hang(request):
    yield "thinking "
    await asyncio.sleep(600)

agent = Agent.open(
    "innovator-001", data_dir=sys.argv[1], store=sys.argv[2], model=FunctionModel(hang)
)
agent.send("the turn that dies", sys.argv[3])
"""


def test_a_replica_killed_mid_turn_frees_the_conversation_and_keeps_the_message(
    root: Path,
    postgres_url: str,  # noqa: F811
) -> None:
    with Agent.open(
        "innovator-001", data_dir=root, store=postgres_url, model=ScriptedModel(SCRIPT)
    ) as agent:
        conversation = agent.create_conversation("kill").conversation_id
        key = ConversationKey(agent.id, conversation)
        with subprocess.Popen(
            [sys.executable, "-c", HANGING_TURN, str(root), postgres_url, conversation]
        ) as child:
            try:
                # bounded by the suite's per-test timeout, never by a clock in the test
                while agent.store.meta(key).status != "running":
                    assert child.poll() is None, "the child died before its turn started"
                    time.sleep(0.02)
                child.kill()  # kill -9 mid-turn: its connection drops, the lock goes with it
            finally:
                child.kill()
        while agent.store.is_held(key):  # the server ends the dead client's session at once
            time.sleep(0.01)
        result = agent.send("are you there?", conversation)
        assert result.result.status == "completed"
        texts = [m.content for m in agent.load_conversation_history(conversation)]
        assert texts[0] == "the turn that dies"  # acknowledged, kept
        assert texts[-2:] == ["are you there?", "Hello from the script"]
        assert agent.store.verify().ok


def wait_for(condition: Any, what: str) -> None:
    """Poll until *condition* holds (*what* it waits for); bounded by the suite's per-test
    timeout, never by a clock in the test."""
    while not condition():
        time.sleep(0.01)


def test_a_turn_streams_and_is_cancelled_from_the_other_replica(
    root: Path,
    postgres_url: str,  # noqa: F811
) -> None:
    """Replica A runs the turns; replica B resumes A's stream after Last-Event-ID (woken by
    NOTIFY) and cancels A's next turn."""
    gate = Gate()

    async def reply(request: Any) -> AsyncIterator[str]:
        if "hang" in request.prompt:  # a long reply, piece by piece: until cancelled
            while True:
                yield "."
                await asyncio.sleep(0.02)
        async for piece in gate.stream(request):
            yield piece

    apps: list[Any] = []

    def build(model: Any) -> Any:
        def make(port: int) -> Any:
            apps.append(create_app(root, model=model, port=port, store=postgres_url))
            return apps[-1]

        return make

    with (
        live_server(build(FunctionModel(reply, name="gated"))) as base_a,
        live_server(build(ScriptedModel(SCRIPT))) as base_b,
        httpx.Client(base_url=base_a, timeout=60) as a,
        httpx.Client(base_url=base_b, timeout=60) as b,
    ):
        for app in apps:  # both replicas listen (their lifespans started the listeners)
            wait_for(app.state.served.events.listening.is_set, "the listener")
        conversation = a.post("/api/agent/innovator-001/conversations", json={}).json()
        conversation_id = conversation["conversationId"]
        streamed: list[Any] = []
        thread = threading.Thread(
            target=lambda: streamed.extend(chat(a, "go", conversationId=conversation_id))
        )
        thread.start()
        try:
            assert gate.parked.wait(30)
            detail = b.get(f"/api/agent/innovator-001/conversations/{conversation_id}").json()
            message_id = detail["messages"][-1]["messageId"]
            events_path = (
                f"/api/agent/innovator-001/conversations/{conversation_id}"
                f"/turns/{message_id}/events"
            )
            headers = {"Last-Event-ID": f"{message_id}:1"}
            with b.stream("GET", events_path, headers=headers) as response:
                assert response.status_code == 200
                events = iter_events(response)
                first = next(events)
                assert (first.id, first.event) == (f"{message_id}:2", "agent_output")
                gate.open_gate()  # the turn goes on on A; B is woken for each batch
                followed = [first, *events]
        finally:
            gate.open_gate()
            thread.join(60)
        assert [(e.id, e.event, e.data) for e in followed] == [
            (e.id, e.event, e.data) for e in streamed[1:]
        ]
        assert followed[-1].event == "result"
        replay = parse_sse(b.get(events_path).text)  # the whole turn, again, from B
        assert [e.id for e in replay] == [e.id for e in streamed]
        other = b.get(events_path, headers={"Last-Event-ID": "msg-other:3"})  # ignored
        assert [e.id for e in parse_sse(other.text)] == [e.id for e in streamed]
        gone = b.get(events_path.replace(message_id, "msg-nope"))
        assert gone.status_code == 404

        hanging: list[Any] = []
        thread = threading.Thread(
            target=lambda: hanging.extend(chat(a, "hang", conversationId=conversation_id))
        )
        thread.start()
        try:
            wait_for(
                lambda: (
                    b.get("/api/agent/innovator-001/conversations").json()["conversations"][0][
                        "status"
                    ]
                    == "running"
                ),
                "the hanging turn",
            )
            time.sleep(0.2)  # into the reply
            cancelled = b.post(
                f"/api/agent/innovator-001/conversations/{conversation_id}/cancel"
            ).json()
            assert cancelled["cancelled"] is True
            assert "another replica" in cancelled["message"]
        finally:
            thread.join(60)
        assert not thread.is_alive()
        assert hanging[-1].event == "result"
        assert hanging[-1].data["status"] == "cancelled"
