"""Cancelling a planner turn: an in-flight model call is interrupted, no step starts after it,
finished steps stay done, a running tool is never cut in half, and the turn ends cancelled."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agentkit import Agent, FunctionModel, ModelRequest
from agentkit.config import PlannerConfig
from agentkit.events import AgentEvent, AgentOutputEvent, ErrorEvent, ResultEvent, ToolCallEvent
from agentkit.models.base import Purpose
from agentkit.models.scripted import ScriptedModel
from agentkit.planning import TurnContext, drive
from agentkit.planning.state import UserMessage

from .test_planner import CONTINUE, Env, env, of, step

__all__ = ["env"]


class Parking:
    """Replies from a script, word by word; the call of purpose *gate_on* parks after *pieces*
    words until :attr:`release` is set. :attr:`model` is the function model to give a turn."""

    def __init__(
        self, script: Any, gate_on: Purpose, pieces: int = 0, *, native_tools: bool = True
    ) -> None:
        self.script = ScriptedModel(script)  # where the replies come from, in its order
        self.gate_on, self.pieces = gate_on, pieces
        self.parked = asyncio.Event()
        self.release = asyncio.Event()
        self.model = FunctionModel(self.reply, name="parking", native_tools=native_tools)

    async def reply(self, request: ModelRequest) -> AsyncIterator[str]:
        answer = await self.script.complete(request.messages, purpose=request.purpose)
        for sent, word in enumerate(re.findall(r"\S+\s*", answer.text)):
            if request.purpose == self.gate_on and sent == self.pieces:
                self.parked.set()
                await self.release.wait()
            yield word


async def run_and_cancel(turn: TurnContext, parking: Parking) -> list[AgentEvent]:
    events: list[AgentEvent] = []

    async def consume() -> None:
        async for event in drive(turn):
            events.append(event)

    task = asyncio.create_task(consume())
    await asyncio.wait_for(parking.parked.wait(), 30)
    turn.cancel()
    await asyncio.wait_for(task, 30)  # the gate is never released: cancel must end the call
    return events


def test_cancel_during_the_plan_call_ends_the_turn_cancelled(env: Env) -> None:
    parking = Parking({"plan": [{"goal": "g", "steps": [step("s", "respond")]}]}, "plan")
    turn = TurnContext(
        key=env.turn("x", {}).key, input=UserMessage("list my traders"), store=env.store,
        memory=env.memory, model=parking.model, tools=env.tools,
    )  # fmt: skip
    events = asyncio.run(run_and_cancel(turn, parking))
    result = events[-1]
    assert isinstance(result, ResultEvent) and result.status == "cancelled"
    assert of(events, ErrorEvent)[-1].code == "cancelled"
    assert not of(events, ToolCallEvent) or all(
        e.id.startswith("live-") for e in of(events, ToolCallEvent)
    )
    state = env.state()
    assert state is not None and state.status == "failed" and state.last_error == "cancelled"
    meta = env.store.meta(turn.key)
    assert meta.status == "idle"
    messages = env.store.messages(turn.key)
    assert [m.role for m in messages] == ["user", "assistant"]


def test_cancel_between_steps_keeps_finished_steps_and_skips_the_rest(env: Env) -> None:
    script = {
        "plan": [
            {
                "goal": "g",
                "steps": [
                    step("s1", "tool", tool_name="list_traders"),
                    step("s2", "tool", tool_name="get_model_configs"),
                    step("s3", "respond"),
                ],
            }
        ],
        "replan": [CONTINUE],
    }
    parking = Parking(script, "replan")  # parks the decision after s1
    turn = TurnContext(
        key=env.turn("x", {}).key, input=UserMessage("overview"), store=env.store,
        memory=env.memory, model=parking.model, tools=env.tools,
    )  # fmt: skip
    events = asyncio.run(run_and_cancel(turn, parking))
    assert [e.name for e in of(events, ToolCallEvent)] == ["list_traders"]  # s2 never started
    state = env.state()
    assert state is not None
    assert [(s.id, s.status) for s in state.steps] == [
        ("s1", "done"),
        ("s2", "skipped"),
        ("s3", "skipped"),
    ]
    assert events[-1].status == "cancelled"  # type: ignore[attr-defined]


def test_cancel_during_the_answer_keeps_what_was_said(env: Env) -> None:
    script = {
        "plan": [{"goal": "g", "steps": [step("r", "respond")]}],
        "respond": ["one two three four"],
    }
    parking = Parking(script, "respond", pieces=2)
    turn = TurnContext(
        key=env.turn("x", {}).key, input=UserMessage("count"), store=env.store,
        memory=env.memory, model=parking.model, tools=env.tools,
    )  # fmt: skip

    async def go() -> list[AgentEvent]:
        events: list[AgentEvent] = []

        async def consume() -> None:
            async for event in drive(turn):
                events.append(event)

        task = asyncio.create_task(consume())
        await asyncio.wait_for(parking.parked.wait(), 30)
        turn.cancel()
        parking.release.set()  # a streaming reply is stopped at the next piece
        await asyncio.wait_for(task, 30)
        return events

    events = asyncio.run(go())
    said = "".join(e.text for e in of(events, AgentOutputEvent))
    assert said == "one two "
    assert events[-1].status == "cancelled" and events[-1].text == "one two"  # type: ignore[attr-defined]
    assert env.store.messages(turn.key)[-1].content == "one two"


def test_tool_loop_cancel_stops_before_the_next_action(env: Env) -> None:
    script_json = {
        "act": [
            {"action": "tool", "tool_name": "list_traders", "tool_args": {}},
            {"action": "answer", "text": "done"},
        ]
    }
    parking = Parking(script_json, "act", native_tools=False)  # JSON actions, not native calls
    turn = TurnContext(
        key=env.turn("x", {}).key, input=UserMessage("traders?"), store=env.store,
        memory=env.memory, model=parking.model, tools=env.tools,
        config=PlannerConfig(strategy="tool_loop"),
    )  # fmt: skip
    events = asyncio.run(run_and_cancel(turn, parking))
    assert not [e for e in of(events, ToolCallEvent) if not e.id.startswith("live-")]
    assert events[-1].status == "cancelled"  # type: ignore[attr-defined]


def test_agent_cancel_reaches_a_running_planner_turn(data_dir: Path) -> None:
    parking = Parking({"plan": [{"goal": "g", "steps": [step("s", "respond")]}]}, "plan")

    async def go() -> tuple[bool, bool, list[AgentEvent]]:
        agent = Agent.open("desk-001", data_dir=data_dir, model=parking.model)
        conversation = agent.create_conversation().conversation_id
        events: list[AgentEvent] = []

        async def consume() -> None:
            async for event in agent.send_message(conversation, "hello"):
                events.append(event)

        task = asyncio.create_task(consume())
        await asyncio.wait_for(parking.parked.wait(), 30)
        cancelled = await agent.cancel(conversation)
        await asyncio.wait_for(task, 30)
        after = await agent.cancel(conversation)  # nothing runs any more
        await agent.aclose()
        return cancelled, after, events

    cancelled, after, events = asyncio.run(go())
    assert cancelled is True and after is False
    assert events[-1].status == "cancelled"  # type: ignore[attr-defined]
