"""Every turn a trace: the span trees of chat and planner turns, through an in-memory exporter.

And the call tracer's invariant: every model call record of a turn has its model span, and
every model span its record — a model call made anywhere else would break it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentkit import Agent, FunctionModel, Message, ModelRequest
from agentkit.events import AskUserEvent, ResultEvent
from agentkit.models.scripted import ScriptedModel
from agentkit.telemetry import SpanRecord
from agentkit.tools import tool
from agentkit_desk import run_desk_tool

from tests._otel import OtelCapture, capture


@pytest.fixture
def otel() -> OtelCapture:
    return capture()


def step(id: str, type: str, **fields: object) -> dict[str, object]:
    return {"id": id, "type": type, "title": fields.pop("title", id), **fields}


def seed(data_dir: Path) -> None:
    workspace = data_dir / "agents" / "desk-001" / "workspace"
    run_desk_tool(workspace, "create_model_config", '{"provider": "openai", "model": "gpt-4o"}')
    run_desk_tool(
        workspace,
        "create_exchange_config",
        '{"exchange": "binance", "account_name": "main", "api_key": "AKEY123456",'
        ' "secret_key": "SKEY987654"}',
    )


def tree(records: list[SpanRecord]) -> list[tuple[str, str | None]]:
    """(name, parent name) of every span, in start order."""
    names = {record.span_id: record.name for record in records}
    return [(r.name, names.get(r.parent_id or "")) for r in records]


def result(events: list[Any]) -> ResultEvent:
    last = events[-1]
    assert isinstance(last, ResultEvent)
    return last


def spans_of(agent: Agent, events: list[Any]) -> list[SpanRecord]:
    trace_id = result(events).trace_id
    assert len(trace_id) == 32
    records = agent.telemetry.recorded(trace_id)
    assert records is not None
    return sorted(records, key=lambda r: r.start_ns)


def test_a_chat_turn_is_an_agent_span_with_its_model_call(
    data_dir: Path, otel: OtelCapture
) -> None:
    model = ScriptedModel({"chat": ["Hello there."]})
    with Agent.open("innovator-001", data_dir=data_dir, model=model) as agent:
        turn = agent.send("hi")
        records = spans_of(agent, turn.events)
    assert tree(records) == [
        ("invoke_agent innovator-001", None),
        ("chat scripted:inline", "invoke_agent innovator-001"),
    ]
    root, call = records
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.id"] == "innovator-001"
    assert root.attributes["gen_ai.conversation.id"] == turn.conversation_id
    assert root.attributes["gen_ai.provider.name"] == "scripted"
    assert root.attributes["agentkit.scenario"] == "A"
    assert root.attributes["agentkit.message_id"] == turn.result.message_id
    assert root.attributes["agentkit.turn.status"] == "completed"
    assert root.attributes["gen_ai.usage.output_tokens"] == turn.result.usage.output_tokens
    assert call.kind == "client" and call.attributes["gen_ai.request.stream"] is True
    exported = {span.name: span for span in otel.spans()}
    assert exported["invoke_agent innovator-001"].context.trace_id == int(root.trace_id, 16)


def plan_replan_script() -> dict[str, list[Any]]:
    return {
        "plan": [
            {
                "goal": "list traders",
                "steps": [
                    step("s1", "tool", tool_name="list_traders", tool_args={}),
                    step("s2", "respond", instruction="Answer."),
                ],
            }
        ],
        "replan": [{"action": "continue"}],
        "respond": ["You have no traders."],
    }


def test_a_plan_replan_turn_with_a_read_tool(data_dir: Path, otel: OtelCapture) -> None:
    with Agent.open(
        "desk-001", data_dir=data_dir, model=ScriptedModel(plan_replan_script())
    ) as agent:
        turn = agent.send("hello, show me my bots please")
        records = spans_of(agent, turn.events)
    names = tree(records)
    root = "invoke_agent desk-001"
    assert names[0] == (root, None)
    assert ("plan desk-001", root) in names
    assert ("chat scripted:inline", "plan desk-001") in names  # the plan call, under its plan
    assert ("execute_tool list_traders", root) in names
    plans = [r for r in records if r.name == "plan desk-001"]
    assert len(plans) == 2  # the plan and the replan decision
    tool = next(r for r in records if r.name == "execute_tool list_traders")
    assert tool.attributes["gen_ai.tool.name"] == "list_traders"
    assert tool.attributes["gen_ai.tool.call.id"] == "s1"
    assert tool.status == "ok"
    purposes = [r.attributes["agentkit.purpose"] for r in records if r.kind == "client"]
    assert purposes == ["plan", "replan", "respond"]


def test_a_consent_pause_and_its_resume_are_two_traces_of_one_conversation(
    data_dir: Path, otel: OtelCapture
) -> None:
    seed(data_dir)
    first = {
        "plan": [
            {
                "goal": "delete",
                "steps": [
                    step("s1", "tool", tool_name="delete_trader", tool_args={"trader_id": "t1"})
                ],
            }
        ]
    }
    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(first)) as agent:
        paused = agent.send("delete trader t1")
        pause_spans = spans_of(agent, paused.events)
    assert [e.kind for e in paused.events if isinstance(e, AskUserEvent)] == ["confirmation"]
    root = pause_spans[0]
    assert [e.name for e in root.events] == ["agentkit.consent_request"]
    assert root.events[0].attributes["gen_ai.tool.name"] == "delete_trader"
    assert not any(r.name.startswith("execute_tool delete_trader") for r in pause_spans)
    second = {"replan": [{"action": "continue"}], "respond": ["Deleted."]}
    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(second)) as agent:
        resumed = agent.send("yes", paused.conversation_id)
        resume_spans = spans_of(agent, resumed.events)
    assert resume_spans[0].trace_id != root.trace_id
    conversation = {r.attributes["gen_ai.conversation.id"] for r in (root, resume_spans[0])}
    assert conversation == {paused.conversation_id}
    assert any(r.name == "execute_tool delete_trader" for r in resume_spans)


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    raise RuntimeError(f"the weather service is down for {city}")


def test_a_failed_tool_step_is_an_error_span(data_dir: Path, otel: OtelCapture) -> None:
    def reply(request: ModelRequest) -> object:
        if request.purpose == "plan":
            return {
                "goal": "weather",
                "steps": [
                    step("s1", "tool", tool_name="weather", tool_args={"city": "Lisbon"}),
                    step("s2", "respond", instruction="Answer."),
                ],
            }
        if request.purpose == "replan":
            return {"action": "continue"}
        return "The weather service is down."

    model = FunctionModel(reply)
    with Agent.open("desk-001", data_dir=data_dir, model=model, tools=[weather]) as agent:
        turn = agent.send("what is the weather in Lisbon?")
        records = spans_of(agent, turn.events)
    (failed,) = [r for r in records if r.name == "execute_tool weather"]
    assert failed.status == "error"
    assert failed.attributes["error.type"] == "tool_error"
    assert failed.attributes["gen_ai.tool.call.id"] == "s1"
    assert turn.result.status == "completed"  # a failed step is observed, the turn goes on


def test_every_model_call_record_has_a_span_and_every_model_span_a_record(
    data_dir: Path, otel: OtelCapture
) -> None:
    """The call tracer is the only way a model call is made: a call made around it would be
    a record without a span, or a span without a record."""
    seed(data_dir)
    with Agent.open(
        "desk-001", data_dir=data_dir, model=ScriptedModel(plan_replan_script())
    ) as agent:
        turns = [agent.send("show me my bots please")]
        turns.append(agent.send("/status", turns[0].conversation_id))
        folder = data_dir / "agents" / "desk-001" / "conversations" / turns[0].conversation_id
        for turn in turns:
            records = spans_of(agent, turn.events)
            calls_file = folder / turn.result.message_id / "calls.jsonl"
            lines = calls_file.read_text().splitlines() if calls_file.exists() else []
            traced = [json.loads(line) for line in lines]
            model_calls = [t for t in traced if t["messages"]]  # a routing note has none
            spans = [r for r in records if r.kind == "client"]
            assert [t["purpose"] for t in model_calls] == [
                s.attributes["agentkit.purpose"] for s in spans
            ]
            for record, span in zip(model_calls, spans, strict=True):
                assert record["input_tokens"] == span.attributes.get("gen_ai.usage.input_tokens")


def test_a_compression_turn_traces_its_summary_through_the_tracer(
    data_dir: Path, otel: OtelCapture
) -> None:
    config_path = data_dir / "agents" / "desk-001" / "config.json"
    config = json.loads(config_path.read_text())
    config["compression"] = {"max_messages": 4, "token_threshold": 10, "keep_recent": 2}
    config_path.write_text(json.dumps(config))
    plan = {"goal": "chat", "steps": [{"id": "s1", "type": "respond", "title": "answer"}]}
    script = {
        "plan": [plan],
        "respond": ["Noted."],
        "summarize": [{"current_goal": "set up trading", "important_facts": ["uses Binance"]}],
    }
    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(script)) as agent:
        cid = agent.create_conversation("long").conversation_id
        for index in range(3):
            question = Message.user(f"old question {index}")
            agent.append_message(cid, question)
            agent.append_message(
                cid, Message.assistant(f"old answer {index}", message_id=question.message_id)
            )
        turn = agent.send("remember that I trade on Binance", cid)
        assert agent.wait_upkeep(cid) is not None  # compression runs after the result
        records = spans_of(agent, turn.events)
        calls_file = (
            data_dir / "agents/desk-001/conversations" / cid / turn.result.message_id
        ) / "calls.jsonl"
        traced = [json.loads(line) for line in calls_file.read_text().splitlines()]
    names = tree(records)
    assert ("update_memory task_state", "invoke_agent desk-001") in names
    assert ("chat scripted:inline", "update_memory task_state") in names
    spans = [r.attributes["agentkit.purpose"] for r in records if r.kind == "client"]
    assert [t["purpose"] for t in traced] == spans == ["plan", "respond", "summarize"]


@pytest.mark.parametrize("capture", [True, False])
def test_no_secret_reaches_a_span_with_content_capture_on_or_off(
    data_dir: Path, otel: OtelCapture, monkeypatch: pytest.MonkeyPatch, capture: bool
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", str(capture).lower())
    seed(data_dir)
    script = {
        "plan": [
            {
                "goal": "show the accounts",
                "steps": [
                    step("s1", "tool", tool_name="get_exchange_configs", tool_args={}),
                    step("s2", "respond", instruction="Answer."),
                ],
            }
        ],
        "replan": [{"action": "continue"}],
        "respond": ["Your key is AKEY123456 and your secret SKEY987654."],  # a leaky model
    }
    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(script)) as agent:
        turn = agent.send("which exchange accounts do I have? my secret_key is SKEY987654")
        records = spans_of(agent, turn.events)
    text = json.dumps(
        [
            [r.attributes, [(e.name, e.attributes) for e in r.events], r.status_message]
            for r in records
        ],
        default=str,
    )
    exported = json.dumps(
        [
            [dict(s.attributes or {}), [dict(e.attributes or {}) for e in s.events]]
            for s in otel.spans()
        ],
        default=str,
    )
    for secret in ("AKEY123456", "SKEY987654"):
        assert secret not in text and secret not in exported
    model_spans = [r for r in records if r.kind == "client"]
    tool_spans = [r for r in records if r.name == "execute_tool get_exchange_configs"]
    assert model_spans and tool_spans
    if capture:
        assert all("gen_ai.input.messages" in r.attributes for r in model_spans)
        assert all("gen_ai.output.messages" in r.attributes for r in model_spans)
        assert "gen_ai.tool.call.result" in tool_spans[-1].attributes
        assert "binance" in str(tool_spans[-1].attributes["gen_ai.tool.call.result"])
    else:
        assert not any("gen_ai.input.messages" in r.attributes for r in records)
        assert not any("gen_ai.tool.call.result" in r.attributes for r in records)
