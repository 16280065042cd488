"""Planner prompts fit the model's window however many tools (issue 28, item 3).

With more tools than the window holds, a turn offers the most relevant ones (the router's
ranking), always the tools of a flow in progress, and records what it left out; a request
that cannot fit even then fails before any model call with ``context_overflow``. Then the
embedded model (``n_ctx`` 4096) with 40 extra tools completes a turn.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agentkit import testing
from agentkit.agent import Agent
from agentkit.calls.records import CallRecord
from agentkit.events import AgentEvent, ErrorEvent, ResultEvent, ToolResultEvent
from agentkit.models.function import FunctionModel
from agentkit.models.request import ModelRequest
from agentkit.runtime import AgentRuntime

from tests._many_tools import many_tools

WINDOW = 3000


def desk(tmp_path: Path, scale: float | None = None) -> Agent:
    root = testing.data_root(tmp_path / "data", ["desk-001"])
    if scale is not None:  # the embedded model on two shared cores: give its stages time
        path = root / "agents" / "desk-001" / "config.json"
        config = json.loads(path.read_text(encoding="utf-8"))
        config["planner"]["stage_timeout_scale"] = scale
        path.write_text(json.dumps(config), encoding="utf-8")
    return Agent.open("desk-001", data_dir=root)


def with_tools(base: Agent, model: Any, count: int) -> Agent:
    return Agent(AgentRuntime(base.folder, base.store, model=model, tools=many_tools(count)))


def turn(agent: Agent, conversation: str | None, text: str) -> list[AgentEvent]:
    async def run() -> list[AgentEvent]:
        return [event async for event in agent.send_message(conversation, text)]

    return asyncio.run(run())


def budget_record(agent: Agent, events: list[AgentEvent]) -> dict[str, Any]:
    first = events[0]
    records: list[CallRecord] = agent.call_records(first.conversation_id, first.message_id)  # type: ignore[attr-defined]
    found = [r.route for r in records if r.purpose == "route" and isinstance(r.route, dict)]
    budget = [route for route in found if route.get("stage") == "tool_budget"]
    assert len(budget) == 1, found
    return budget[0]


def answer_plan(request: ModelRequest) -> Any:
    if request.purpose == "plan":
        respond = {"id": "s1", "type": "respond", "title": "Answer", "instruction": "answer"}
        return {"goal": "answer", "steps": [respond]}
    return "Done."


def test_a_listing_too_large_for_the_window_offers_the_most_relevant_tools(
    tmp_path: Path,
) -> None:
    model = FunctionModel(answer_plan, settings={"context_window": WINDOW})
    agent = with_tools(desk(tmp_path), model, 40)
    events = turn(agent, None, "read the notebook analysis.ipynb and show its cells")
    result = events[-1]
    assert isinstance(result, ResultEvent) and result.status == "completed", events
    budget = budget_record(agent, events)
    assert budget["window"] == WINDOW and budget["listing_tokens"] > budget["budget"]
    assert "read_notebook" in budget["offered"]  # the router's best match for the request
    assert budget["left_out"] and not set(budget["left_out"]) & set(budget["offered"])
    assert len(budget["offered"]) + len(budget["left_out"]) == 50  # the desk's 10 and 40
    plan = next(r for r in model.requests if r.purpose == "plan")
    sent = "\n".join(m.content for m in plan.messages)
    assert "- read_notebook [read]" in sent
    assert all(f"- {name} [" not in sent for name in budget["left_out"])
    assert model.count_prompt_tokens([sent])[0] <= WINDOW - model.output_reserve
    log = "".join(p.read_text() for p in agent.folder.path.rglob("messages.log"))
    assert "[TOOLS]" in log and "tools left out" in log


def test_everything_offered_when_it_fits(tmp_path: Path) -> None:
    model = FunctionModel(answer_plan)  # the default window: 40 tools fit
    agent = with_tools(desk(tmp_path), model, 40)
    events = turn(agent, None, "read the notebook analysis.ipynb")
    first = events[0]
    records = agent.call_records(first.conversation_id, first.message_id)  # type: ignore[attr-defined]
    assert not [r for r in records if r.purpose == "route" and r.route], "nothing left out"
    plan = next(r for r in model.requests if r.purpose == "plan")
    assert "- lookup_orchard_22 [read]" in plan.messages[-1].content


def test_a_flow_in_progress_keeps_its_tools(tmp_path: Path) -> None:
    """The paused plan names a tool the next message does not match: it is still offered."""
    kept = "lookup_weather_1"

    def reply(request: ModelRequest) -> Any:
        if request.purpose == "plan":
            ask = {"id": "s1", "type": "ask_user", "title": "Ask", "instruction": "Which id?"}
            look = {"id": "s2", "type": "tool", "title": "Look", "tool_name": kept,
                    "tool_args": {"record_id": "r-1"}}  # fmt: skip
            respond = {"id": "s3", "type": "respond", "title": "Answer", "instruction": "say"}
            return {"goal": "look it up", "steps": [ask, look, respond]}
        if request.purpose == "replan":
            return {"action": "continue"}
        return "Found it."

    model = FunctionModel(reply, settings={"context_window": WINDOW})
    agent = with_tools(desk(tmp_path), model, 40)
    first = turn(agent, None, "look up the weather record for me")
    assert isinstance(first[-1], ResultEvent) and first[-1].status == "completed"
    second = turn(agent, first[0].conversation_id, "notebook cells please, r-1")  # type: ignore[attr-defined]
    budget = budget_record(agent, second)
    assert kept in budget["kept"] and kept in budget["offered"]
    ran = [e for e in second if isinstance(e, ToolResultEvent)]
    assert [e.name for e in ran] == [kept]
    assert isinstance(second[-1], ResultEvent) and second[-1].status == "completed"


def test_a_request_that_cannot_fit_fails_before_any_model_call(tmp_path: Path) -> None:
    model = FunctionModel(answer_plan, settings={"context_window": 1024})
    agent = with_tools(desk(tmp_path), model, 40)
    events = turn(agent, None, "please read this: " + "lorem ipsum dolor sit amet " * 200)
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert [e.code for e in errors] == ["context_overflow"]
    assert "does not fit the model's context window" in errors[0].message
    assert "1024-token window" in errors[0].message
    assert model.requests == []  # no model call was made
    result = events[-1]
    assert isinstance(result, ResultEvent) and result.status == "failed"
    assert budget_record(agent, events)["overflow"]


@pytest.mark.real_model
@pytest.mark.timeout(900)  # two shared cores under load: a 3k-token plan prompt is slow
def test_the_embedded_model_completes_a_turn_with_40_more_tools(tmp_path: Path) -> None:
    base = desk(tmp_path, scale=6.0)
    agent = with_tools(base, base.model, 40)
    events = turn(agent, None, "show my traders")
    errors = [e.message for e in events if isinstance(e, ErrorEvent)]
    assert not any("context window" in message for message in errors), errors
    result = events[-1]
    assert isinstance(result, ResultEvent) and result.status == "completed", errors
    budget = budget_record(agent, events)
    assert budget["window"] == 4096 and budget["left_out"]
    assert "list_traders" in budget["offered"]  # live state, and the request's own tool
