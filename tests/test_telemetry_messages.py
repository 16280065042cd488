"""Model-call contents in the GenAI conventions' shape, checked against the JSON schemas the
semantic-conventions project publishes (vendored in ``tests/genai_schemas/``, v1.41.0): chat,
plan, replan, respond, summarize and simulated-user calls made through the real turn path
with content capture on; tool-call and tool-response parts; the agent span's request and
answer; plan spans' goal, size and decision; OpenInference kinds and status OK; and no secret
in any of it — masked by value, also inside the JSON strings a message holds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from agentkit import Agent
from agentkit.models.scripted import ScriptedModel
from agentkit.telemetry import CAPTURE_ENV, SpanRecord, Telemetry, ToolCallPart, semconv
from agentkit.telemetry import _spans as spans_module
from agentkit.tools import SecretMask

SCHEMAS = Path(__file__).with_name("genai_schemas")
API_KEY, SECRET_KEY = "BNKEY-0123456789-abcd", "BNSECRET-9876543210-wxyz"
REQUEST = f"Add my binance account 'main': api key {API_KEY}, secret {SECRET_KEY}"
PLAN = {
    "goal": "list the traders",
    "steps": [
        {"id": "s1", "type": "tool", "title": "List them", "tool_name": "list_traders"},
        {"id": "s2", "type": "respond", "title": "Answer", "instruction": "Summarise."},
    ],
}
SECRET_PLAN = {
    "goal": "add the binance account",
    "steps": [
        {
            "id": "e1",
            "type": "tool",
            "title": "Connect the account",
            "tool_name": "create_exchange_config",
            "tool_args": {
                "exchange": "binance",
                "account_name": "main",
                "api_key": API_KEY,
                "secret_key": SECRET_KEY,
            },
        },
        {"id": "r1", "type": "respond", "title": "Confirm", "instruction": "Confirm."},
    ],
}


def validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMAS / f"gen-ai-{name}.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


INPUT, OUTPUT, SYSTEM = (
    validator("input-messages"),
    validator("output-messages"),
    validator("system-instructions"),
)


def check_messages(record: SpanRecord) -> dict[str, Any]:
    """A model call's content attributes, validated against the conventions' schemas (and
    stricter: only text, tool_call and tool_call_response parts): their parsed values."""
    attributes = record.attributes
    found: dict[str, Any] = {}
    for key, schema in (
        (semconv.INPUT_MESSAGES, INPUT),
        (semconv.OUTPUT_MESSAGES, OUTPUT),
        (semconv.SYSTEM_INSTRUCTIONS, SYSTEM),
    ):
        text = attributes.get(key)
        if text is None:
            continue
        assert isinstance(text, str)
        value = json.loads(text)
        schema.validate(value)
        parts = value if key == semconv.SYSTEM_INSTRUCTIONS else [
            part for message in value for part in message["parts"]
        ]  # fmt: skip
        assert parts and {part["type"] for part in parts} <= {
            "text", "tool_call", "tool_call_response"
        }  # fmt: skip
        found[key] = value
    return found


@pytest.fixture
def capture(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CAPTURE_ENV, "true")
    monkeypatch.setattr(spans_module, "bridge", lambda: None)  # agentkit's own records


def calls_of(records: list[SpanRecord]) -> dict[str, list[SpanRecord]]:
    found: dict[str, list[SpanRecord]] = {}
    for record in records:
        if record.attributes.get(semconv.OPERATION_NAME) == "chat":
            found.setdefault(str(record.attributes[semconv.PURPOSE]), []).append(record)
    return found


def test_every_kind_of_model_call_validates_against_the_conventions_schemas(
    capture: None, data_dir: Path
) -> None:
    from tests.test_planner_compression import NO_COMPRESSION, _desk_with

    records: list[SpanRecord] = []
    # a chat turn (the chat engine), then a planner turn: plan, a tool, replan, respond
    with Agent.open(
        "innovator-001", data_dir=data_dir, model=ScriptedModel(["Hello there."])
    ) as agent:
        chat = agent.send("hi")
        records += agent.telemetry.recorded(chat.result.trace_id) or []
    # ... whose memory upkeep (the incremental update) summarises after the answer
    _desk_with(data_dir, {**NO_COMPRESSION, "incremental_messages": 6})
    script = {
        "plan": [PLAN],
        "replan": [{"action": "continue"}],
        "respond": ["No traders."],
        "summarize": [{"current_goal": "list the traders"}],
    }
    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(script)) as agent:
        planned = agent.send("list my traders")
        agent.wait_upkeep(planned.conversation_id)
        turn = agent.telemetry.recorded(planned.result.trace_id) or []
        records += turn
    calls = calls_of(records)
    assert {"chat", "plan", "replan", "respond", "summarize"} <= set(calls)

    for purpose, made in calls.items():
        for record in made:
            found = check_messages(record)
            assert semconv.INPUT_MESSAGES in found and semconv.OUTPUT_MESSAGES in found, purpose
            assert record.status == "ok"
            assert record.attributes[semconv.OPENINFERENCE_SPAN_KIND] == "LLM"

    # the chat turn: the system prompt apart, the user's text, the reply
    chat_call = calls["chat"][0]
    found = check_messages(chat_call)
    assert found[semconv.SYSTEM_INSTRUCTIONS][0]["content"].startswith("# Identity")
    assert found[semconv.INPUT_MESSAGES][-1] == {
        "role": "user", "parts": [{"type": "text", "content": "hi"}]
    }  # fmt: skip
    assert found[semconv.OUTPUT_MESSAGES] == [{
        "role": "assistant",
        "parts": [{"type": "text", "content": "Hello there."}],
        "finish_reason": "stop",
    }]  # fmt: skip
    # the plan call's reply is the plan's JSON, as text
    plan_out = check_messages(calls["plan"][0])[semconv.OUTPUT_MESSAGES][0]["parts"][0]
    assert json.loads(plan_out["content"])["goal"] == "list the traders"

    # the planner turn reads at a glance
    by_name = {record.name: record for record in turn}
    root = turn[0]
    assert root.name == "invoke_agent desk-001" and root.parent_id is None
    assert root.attributes[semconv.INPUT_VALUE] == "list my traders"
    assert root.attributes[semconv.OUTPUT_VALUE] == "No traders."
    assert root.attributes[semconv.OPENINFERENCE_SPAN_KIND] == "AGENT"
    INPUT.validate(json.loads(str(root.attributes[semconv.INPUT_MESSAGES])))
    OUTPUT.validate(json.loads(str(root.attributes[semconv.OUTPUT_MESSAGES])))
    assert "update_memory task_state" in by_name
    plan, replan = [record for record in turn if record.name == "plan desk-001"]
    assert plan.attributes[semconv.PLAN_GOAL] == "list the traders"
    assert plan.attributes[semconv.PLAN_STEPS] == 2
    assert plan.attributes[semconv.OPENINFERENCE_SPAN_KIND] == "CHAIN"
    assert replan.attributes[semconv.PLAN_DECISION] == "continue"
    assert by_name["execute_tool list_traders"].attributes[semconv.OPENINFERENCE_SPAN_KIND] == (
        "TOOL"
    )
    assert {record.status for record in turn} == {"ok"}


def test_without_capture_no_content_but_the_plans_size(
    monkeypatch: pytest.MonkeyPatch, data_dir: Path
) -> None:
    monkeypatch.delenv(CAPTURE_ENV, raising=False)
    monkeypatch.setattr(spans_module, "bridge", lambda: None)
    script = {"plan": [PLAN], "replan": [{"action": "continue"}], "respond": ["No traders."]}
    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(script)) as agent:
        result = agent.send("list my traders").result
        turn = agent.telemetry.recorded(result.trace_id) or []
    content = semconv.CONTENT_KEYS | {semconv.INPUT_VALUE, semconv.OUTPUT_VALUE, semconv.PLAN_GOAL}
    assert not [key for record in turn for key in record.attributes if key in content]
    plan = next(record for record in turn if record.name == "plan desk-001")
    assert plan.attributes[semconv.PLAN_STEPS] == 2


def test_a_planned_call_with_keys_exports_none_of_them(capture: None, data_dir: Path) -> None:
    """The keys typed in the request and planned as secret-named arguments: masked in every
    span of the turn — the plan call's input (the request), its output (the plan's JSON, a
    string inside a message), the consent event, the agent span's input and output."""
    script = {"plan": [SECRET_PLAN], "respond": ["Done."]}
    with Agent.open("desk-001", data_dir=data_dir, model=ScriptedModel(script)) as agent:
        result = agent.send(REQUEST).result
        turn = agent.telemetry.recorded(result.trace_id) or []
    text = json.dumps([[r.attributes, [e.attributes for e in r.events], r.status_message]
                       for r in turn], default=str)  # fmt: skip
    assert API_KEY not in text and SECRET_KEY not in text
    assert "****abcd" in text and "****wxyz" in text  # masked, not dropped
    plan_call = calls_of(turn)["plan"][0]
    found = check_messages(plan_call)
    assert "****abcd" in found[semconv.INPUT_MESSAGES][-1]["parts"][0]["content"]
    args = json.loads(found[semconv.OUTPUT_MESSAGES][0]["parts"][0]["content"])["steps"][0]
    assert args["tool_args"]["api_key"] == "****abcd"
    assert turn[0].attributes[semconv.INPUT_VALUE] == REQUEST.replace(API_KEY, "****abcd").replace(
        SECRET_KEY, "****wxyz"
    )


def test_tool_calls_and_tool_results_are_parts(capture: None) -> None:
    """A native tool call in the reply is a ``tool_call`` part (its secret-named argument
    masked), a tool message sent back a ``tool_call_response`` part; both validate."""
    mask = SecretMask(known=lambda: ["sk-live-0123456789abcd"])
    trace = Telemetry(agent_id="a").turn(conversation_id="c", message_id="m", secrets=mask)
    call = trace.model_call(None, model="m", purpose="act")
    assert call.sent([
        {"role": "system", "content": "Use the tools."},
        {"role": "user", "content": "connect with sk-live-0123456789abcd"},
        {"role": "assistant", "content": '{"tool_calls": []}'},
        {"role": "tool", "content": '{"ok": true, "token": "t-1234567"}'},
    ])  # fmt: skip
    assert call.replied(
        "", tool_calls=[ToolCallPart("connect", {"api_key": "AK-1234567", "name": "main"}, "c1")],
        finish_reason="tool_calls",
    )  # fmt: skip
    call.end()
    trace.end()
    found = check_messages(trace.spans[1])
    inputs = found[semconv.INPUT_MESSAGES]
    assert inputs[0]["parts"][0]["content"] == "connect with ****abcd"
    assert inputs[2] == {"role": "tool", "parts": [
        {"type": "tool_call_response", "response": '{"ok": true, "token": "****"}'}
    ]}  # fmt: skip
    assert found[semconv.OUTPUT_MESSAGES] == [{
        "role": "assistant",
        "parts": [{"type": "tool_call", "id": "c1", "name": "connect",
                   "arguments": {"api_key": "****", "name": "main"}}],
        "finish_reason": "tool_call",
    }]  # fmt: skip


def test_a_value_learned_after_it_was_set_is_masked_when_the_span_ends(capture: None) -> None:
    """The masker is asked when each span ends: a secret the turn learns after a string was
    set (a tool stored a key) is masked in it too; and the status message is masked."""
    known: list[str] = []
    mask = SecretMask(known=lambda: known)
    trace = Telemetry(agent_id="a").turn(
        conversation_id="c", message_id="m", secrets=mask, request="use KEY-ABCDEFGH-1234"
    )
    span = trace.span("work")
    span.set("agentkit.note", "with KEY-ABCDEFGH-1234")
    span.event("agentkit.said", {"text": "KEY-ABCDEFGH-1234 again"})
    span.fail("Refused", "the exchange refused KEY-ABCDEFGH-1234")
    known.append("KEY-ABCDEFGH-1234")  # learned after all of it was set
    span.end()
    trace.end(answer="done with KEY-ABCDEFGH-1234")
    text = json.dumps([[r.attributes, [e.attributes for e in r.events], r.status_message]
                       for r in trace.spans])  # fmt: skip
    assert "KEY-ABCDEFGH-1234" not in text and text.count("****1234") == 7
    assert trace.spans[1].status == "error"


def test_an_eval_outcome_is_attributes_of_its_span() -> None:
    trace = Telemetry().trace("eval_run s1")
    trace.evaluation(passed=False, outcome="failed", checks=5, checks_failed=2,
                     verdicts={"tool_sequence": True, "bfcl": False})  # fmt: skip
    trace.end()
    root = trace.spans[0]
    assert {k: v for k, v in root.attributes.items() if k.startswith("agentkit.eval.")} == {
        "agentkit.eval.passed": False,
        "agentkit.eval.outcome": "failed",
        "agentkit.eval.checks": 5,
        "agentkit.eval.checks_failed": 2,
        "agentkit.eval.verdict.tool_sequence": True,
        "agentkit.eval.verdict.bfcl": False,
    }
    assert root.attributes[semconv.OPENINFERENCE_SPAN_KIND] == "CHAIN" and root.status == "ok"


def test_an_eval_with_a_simulated_user_validates_and_its_run_says_its_outcome(
    monkeypatch: pytest.MonkeyPatch, data_dir: Path
) -> None:
    """Through the real eval (a simulated user's moves are calls outside any turn, made by
    ``CallTracer.standalone``): every model call's messages validate, and the run's span
    carries ``agentkit.eval.passed``, the checks and the verdicts as attributes."""
    from agentkit import FunctionModel
    from agentkit.eval import run_eval
    from agentkit.eval.world import ScenarioReplies

    from tests._otel import capture as otel_capture
    from tests.test_eval_runs import scenario
    from tests.test_eval_simulated import TRADER, OnlyWhatIsAsked

    monkeypatch.setenv(CAPTURE_ENV, "true")
    otel = otel_capture()
    base = scenario(TRADER)
    user = FunctionModel(OnlyWhatIsAsked({"trader_name": "Alpha"}), name="simulated_user")
    frame = run_eval([base], model=ScenarioReplies(base).model(), user_model=user,
                     data_dir=data_dir, progress=False)  # fmt: skip
    assert frame["passed"].all(), frame["failures"].tolist()
    assert len(otel.by_name(f"chat {user.spec}")) == 2  # the simulated user's moves
    llm = [span for span in otel.spans() if (span.attributes or {}).get(semconv.PURPOSE)]
    assert {str((span.attributes or {})[semconv.PURPOSE]) for span in llm} >= {
        "chat", "plan", "replan", "respond"
    }  # fmt: skip
    for span in llm:
        attributes = dict(span.attributes or {})
        for key, schema in ((semconv.INPUT_MESSAGES, INPUT), (semconv.OUTPUT_MESSAGES, OUTPUT),
                            (semconv.SYSTEM_INSTRUCTIONS, SYSTEM)):  # fmt: skip
            schema.validate(json.loads(str(attributes[key])))
    (run,) = otel.by_name(f"eval_run {TRADER}")
    attributes = dict(run.attributes or {})
    assert attributes["agentkit.eval.passed"] is True
    assert attributes["agentkit.eval.outcome"] == "passed"
    assert attributes["agentkit.eval.checks"] == frame["checks"].iloc[0] > 0
    assert attributes["agentkit.eval.checks_failed"] == 0
    assert attributes["agentkit.eval.verdict.tool_sequence"] is True
    assert attributes[semconv.OPENINFERENCE_SPAN_KIND] == "CHAIN"
    assert {span.status.status_code.name for span in otel.spans()} == {"OK"}
