"""One entry for a turn's input: a message or a decision, typed, through ``run_turn``.

A decision on a pending approval reaches the planner as the typed value it is — from Python
(``Agent.adecide``), HTTP (the approvals route), ACP (the client's permission answer) and the
widgets (Approve / Reject) — and is never turned into words the planner reads back: the
planner's engine is handed a :class:`~agentkit.Decision`, the turn has no text, and the
planner's text rule for typed "yes"/"no" replies (``approvals.from_text``) is never asked. The
history still shows a line for it ("yes" / "no — note"), made from the decision for display.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from agentkit import Agent, Decision, ScriptedModel, UsageError, UserMessage, tool
from agentkit.events import AgentEvent, AskUserEvent, PlanningEvent, ToolCallEvent
from agentkit.memory import ExecutionState
from agentkit.planning import PlannerEngine, approvals
from agentkit.planning.state import TurnContext, TurnInput
from agentkit.runtime import ENGINES
from agentkit.store import ConversationKey
from agentkit_desk import open_desk, run_desk_tool

from tests.fakes.live_api import live_server, parse_sse

CREATE = {"name": "Alpha", "exchange_id": "ex-1", "model_id": "model-1"}
REQUEST = "create a trader called Alpha on binance"


def script() -> dict[str, list[Any]]:
    plan = {
        "goal": "create a trader",
        "steps": [
            {"id": "s1", "type": "tool", "title": "s1", "tool_name": "create_trader",
             "tool_args": CREATE},
            {"id": "s2", "type": "respond", "title": "s2", "instruction": "Confirm."},
        ],
    }  # fmt: skip
    return {"plan": [plan], "replan": [{"action": "continue"}], "respond": ["Done."]}


@dataclass
class Seen:
    """What the planner was handed, turn by turn, and what it read as a typed decision."""

    inputs: list[TurnInput] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # each turn's ctx.text
    read_as_decision: list[str] = field(default_factory=list)  # from_text's arguments

    @property
    def decision(self) -> Decision:
        *_, last = self.inputs
        assert isinstance(last, Decision), f"the planner was handed {last!r}"
        return last


class SpyEngine:
    """The planner engine, noting each turn's input first."""

    def __init__(self, seen: Seen) -> None:
        self.seen = seen

    def run_turn(self, ctx: TurnContext) -> AsyncIterator[AgentEvent]:
        self.seen.inputs.append(ctx.input)
        self.seen.texts.append(ctx.text)
        return PlannerEngine().run_turn(ctx)


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> Seen:
    seen = Seen()
    monkeypatch.setitem(ENGINES, "planner", SpyEngine(seen))  # type: ignore[arg-type]
    real = approvals.from_text

    def from_text(state: ExecutionState, text: str) -> Decision | None:
        seen.read_as_decision.append(text)
        return real(state, text)

    monkeypatch.setattr(approvals, "from_text", from_text)
    return seen


@pytest.fixture
def desk(data_dir: Path) -> Path:
    workspace = data_dir / "agents" / "desk-001" / "workspace"
    run_desk_tool(workspace, "create_model_config", '{"provider": "openai", "model": "gpt-4o"}')
    run_desk_tool(
        workspace,
        "create_exchange_config",
        '{"exchange": "binance", "account_name": "main", "api_key": "AK1", "secret_key": "SK1"}',
    )
    return workspace


def traders(workspace: Path) -> list[str]:
    with open_desk(workspace) as db:
        return [trader.name for trader in db.traders()]


def paused(agent: Agent) -> tuple[str, str]:
    turn = agent.send(REQUEST)
    (ask,) = [e for e in turn.events if isinstance(e, AskUserEvent)]
    assert ask.kind == "confirmation"
    return turn.conversation_id, ask.approval_id


def user_lines(agent: Agent, conversation: str) -> list[str]:
    return [m.content for m in agent.load_conversation_history(conversation) if m.role == "user"]


def typed_all_the_way(seen: Seen, expected: Decision) -> None:
    """The planner was handed *expected* as a value: no text, and nothing read as words."""
    assert seen.decision == expected
    assert seen.texts[-1] == ""  # a decision has no words
    assert seen.read_as_decision == []  # the planner never parsed a reply into a decision
    assert not any(isinstance(i, UserMessage) and i.text in ("yes", "no") for i in seen.inputs)


# -- Python -----------------------------------------------------------------------------------


def test_a_decision_from_python_reaches_the_planner_typed(
    data_dir: Path, desk: Path, seen: Seen
) -> None:
    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(script())) as agent:
        conversation, approval_id = paused(agent)
        done = agent.decide(conversation, approval_id, "approve", note="looks right")
        assert done.text == "Done."
        typed_all_the_way(seen, Decision(approval_id, "approve", "python", None, "looks right"))
        # the history shows what was decided, made from the decision, for display only
        assert user_lines(agent, conversation) == [REQUEST, "yes — looks right"]
    assert traders(desk) == ["Alpha"]


def test_a_typed_yes_is_still_the_users_reply(data_dir: Path, desk: Path, seen: Seen) -> None:
    """The one text path left: the user's own typed reply to the consent question."""
    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(script())) as agent:
        conversation, _ = paused(agent)
        agent.send("yes", conversation)
        assert seen.inputs[-1] == UserMessage("yes") and seen.read_as_decision == ["yes"]
        assert agent.approval_decisions(conversation)[0].source == "text"
    assert traders(desk) == ["Alpha"]


def test_one_entry_takes_either_input(data_dir: Path, desk: Path, seen: Seen) -> None:
    async def body(agent: Agent) -> list[AgentEvent]:
        events = [e async for e in agent.run_turn(None, UserMessage(f"  {REQUEST}  "))]
        conversation = events[0].conversation_id  # type: ignore[attr-defined]
        (ask,) = [e for e in events if isinstance(e, AskUserEvent)]
        chosen = Decision(ask.approval_id, "reject", "python")
        return [e async for e in agent.run_turn(conversation, chosen)]

    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(script())) as agent:
        events = agent.loop.run(body(agent))
        assert seen.inputs[0] == UserMessage(REQUEST)  # checked once, at the entry: stripped
        assert "cancelled" in events[-1].text  # type: ignore[attr-defined]
        typed_all_the_way(seen, Decision(seen.decision.approval_id, "reject", "python"))
        with pytest.raises(UsageError, match="names the conversation"):
            agent.loop.run(anext(aiter(agent.run_turn(None, seen.decision))))
        with pytest.raises(UsageError, match="some text"):
            agent.loop.run(anext(aiter(agent.run_turn(None, UserMessage("  ")))))
    assert traders(desk) == []


def test_a_decision_after_the_tools_changed_is_not_planned_as_a_request(
    data_dir: Path, desk: Path, seen: Seen
) -> None:
    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(script())) as agent:
        conversation, approval_id = paused(agent)
    with Agent.open(
        "desk-001", data_dir=data_dir, model=ScriptedModel({}), tools=[weather]
    ) as changed:
        done = changed.decide(conversation, approval_id, "approve")
        assert "tools changed" in done.text and "nothing was run" in done.text
        assert not any(isinstance(e, PlanningEvent) for e in done.events)  # no new request
        assert changed.pending_approvals(conversation) == []
    assert seen.decision.approval_id == approval_id and seen.read_as_decision == []
    assert traders(desk) == []


# -- HTTP -------------------------------------------------------------------------------------


def test_a_decision_over_http_reaches_the_planner_typed(
    data_dir: Path, desk: Path, seen: Seen
) -> None:
    from agentkit.api import create_app

    with (
        live_server(
            lambda port: create_app(data_dir, model=ScriptedModel(script()), port=port)
        ) as base,
        httpx.Client(base_url=base, timeout=60) as client,
    ):
        first = client.post("/api/agent/desk-001/chat", json={"message": REQUEST})
        events = parse_sse(first.text)
        conversation = next(e.data["conversationId"] for e in events if e.event == "session")
        listed = client.get(f"/api/agent/desk-001/conversations/{conversation}/approvals")
        (pending,) = listed.json()["approvals"]
        approval_id = pending["approvalId"]
        done = client.post(
            f"/api/agent/desk-001/conversations/{conversation}/approvals/{approval_id}",
            json={"decision": "approve", "note": "ok"},
        )
        assert done.status_code == 200
        assert [e.event for e in parse_sse(done.text)][-1] == "result"
    assert seen.inputs[0] == UserMessage(REQUEST)  # the chat route: the message, as typed
    typed_all_the_way(seen, Decision(approval_id, "approve", "http", None, "ok"))
    assert traders(desk) == ["Alpha"]


# -- ACP --------------------------------------------------------------------------------------


@pytest.mark.parametrize("permission", ["allow", "reject"])
def test_a_permission_answer_over_acp_reaches_the_planner_typed(
    data_dir: Path, desk: Path, seen: Seen, tmp_path: Path, permission: str
) -> None:
    from acp.schema import TextContentBlock
    from agentkit.acp_server.sessions import AcpAgentServer

    from tests._acp_peer import RecordingClient

    client = RecordingClient(permission=permission)

    async def body(agent: Agent) -> str:
        server = AcpAgentServer(agent)
        server.on_connect(client)  # type: ignore[arg-type]
        sid = (await server.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
        prompt = [TextContentBlock(type="text", text=REQUEST)]
        response = await server.prompt(sid, prompt)
        assert response.stop_reason == "end_turn"
        await agent.aclose()
        return sid

    agent = Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(script()))
    try:
        sid = asyncio.run(body(agent))
        (pending,) = [i for i in seen.inputs if isinstance(i, Decision)]
        decision = "approve" if permission == "allow" else "reject"
        typed_all_the_way(seen, Decision(pending.approval_id, decision, "acp"))
        shown = "yes" if permission == "allow" else "no"
        assert user_lines(agent, sid) == [REQUEST, shown]
    finally:
        agent.close()
    assert traders(desk) == (["Alpha"] if permission == "allow" else [])


# -- the widgets ------------------------------------------------------------------------------


def test_the_plan_views_approve_reaches_the_planner_typed(
    data_dir: Path, desk: Path, seen: Seen
) -> None:
    from lab import PlanView

    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(script())) as agent:
        conversation, approval_id = paused(agent)
        view = PlanView(agent, conversation)
        view.approve_button.click()
        assert view.turn is not None
        events = view.turn.result(timeout=60)
        assert sum(isinstance(e, ToolCallEvent) for e in events) == 1
        typed_all_the_way(seen, Decision(approval_id, "approve", "widget"))
        assert user_lines(agent, conversation)[-1] == "yes"
    assert traders(desk) == ["Alpha"]


def test_the_chat_panels_reject_reaches_the_planner_typed(
    data_dir: Path, desk: Path, seen: Seen
) -> None:
    from lab import ChatPanel

    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(script())) as agent:
        conversation, approval_id = paused(agent)
        panel = ChatPanel(agent, conversation)
        assert panel.plan_view is not None
        panel.plan_view.reject_button.click()  # the panel decides, so it shows in its chat
        assert panel.turn is not None
        panel.turn.result(timeout=60)
        typed_all_the_way(seen, Decision(approval_id, "reject", "widget"))
        assert panel.turn_view is not None and panel.turn_view.user_text == "no"
        store = agent.store
        assert store.meta(ConversationKey(agent.id, conversation)).status == "completed"
    assert traders(desk) == []
