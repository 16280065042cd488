"""The wire form of every event is pinned: the same bytes for the same turn.

Events are plain frozen dataclasses serialised once (``to_json``); before, they were pydantic
models dumped with ``model_dump(mode="json", by_alias=True)`` and ``json.dumps(…,
ensure_ascii=False)`` by each consumer. The expected texts below are what that gave, written
out: key names and order, defaults present, nested ``Usage``/``PlannedStep`` shapes. The JSON
schema the HTTP API publishes is pinned against ``tests/fixtures/events_schema.json`` (the
pydantic models' schema, unchanged), and every event parses back through ``EVENT_ADAPTER``.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
from pathlib import Path
from typing import Any, get_args

import pytest
from agentkit.eval.transcript import Transcript, UserTurn
from agentkit.events import (
    EVENT_ADAPTER,
    AgentEvent,
    AgentOutputEvent,
    AskUserEvent,
    CompressionEvent,
    ErrorEvent,
    PermissionEvent,
    PlanEvent,
    PlannedStep,
    PlanningEvent,
    ReplanEvent,
    ResultEvent,
    SessionEvent,
    StepCompleteEvent,
    StepStartEvent,
    ThinkingEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from agentkit.types import Message, Usage

SCHEMA = Path(__file__).parent / "fixtures" / "events_schema.json"

STEP = PlannedStep(id="s1", step_type="tool", title="T", tool_name="f", tool_args={"k": "v"})

#: (event, the text the pydantic models gave for it)
CASES: list[tuple[Any, str]] = [
    (
        SessionEvent(agent_id="a", conversation_id="c", message_id="m", scenario="A", injected="x"),
        '{"type": "session", "agentId": "a", "conversationId": "c", "messageId": "m", '
        '"scenario": "A", "injected": "x", "historyMessages": 0, "model": ""}',
    ),
    (
        SessionEvent(
            agent_id="a",
            conversation_id="c",
            message_id="m",
            scenario="C",
            injected="x",
            history_messages=4,
            model="scripted:é",
        ),
        '{"type": "session", "agentId": "a", "conversationId": "c", "messageId": "m", '
        '"scenario": "C", "injected": "x", "historyMessages": 4, "model": "scripted:é"}',
    ),
    (ThinkingEvent(text="hmm"), '{"type": "thinking", "text": "hmm"}'),
    (
        AgentOutputEvent(text='héllo \u2028 "q" 中文'),
        '{"type": "agent_output", "text": "héllo \u2028 \\"q\\" 中文"}',
    ),
    (
        ToolCallEvent(id="t1", name="f"),
        '{"type": "tool_call", "id": "t1", "name": "f", "arguments": {}}',
    ),
    (
        ToolCallEvent(
            id="t1", name="f", arguments={"a": 1, "b": [1, 2.5, None], "c": {"d": True}, "e": "é"}
        ),
        '{"type": "tool_call", "id": "t1", "name": "f", "arguments": '
        '{"a": 1, "b": [1, 2.5, null], "c": {"d": true}, "e": "é"}}',
    ),
    (
        ToolResultEvent(id="t1", name="f", output="out"),
        '{"type": "tool_result", "id": "t1", "name": "f", "output": "out", "ok": true}',
    ),
    (
        ToolResultEvent(id="t1", name="f", output="out", ok=False),
        '{"type": "tool_result", "id": "t1", "name": "f", "output": "out", "ok": false}',
    ),
    (
        PermissionEvent(tool_call_id="t", title="T", decision="deny"),
        '{"type": "permission", "toolCallId": "t", "title": "T", "options": [], '
        '"decision": "deny"}',
    ),
    (
        PermissionEvent(tool_call_id="t", title="T", options=["o1", "o2"], decision="o1"),
        '{"type": "permission", "toolCallId": "t", "title": "T", "options": ["o1", "o2"], '
        '"decision": "o1"}',
    ),
    (
        ErrorEvent(message="boom"),
        '{"type": "error", "message": "boom", "code": "error", "retryable": false}',
    ),
    (
        ErrorEvent(message="boom", code="cancelled", retryable=True),
        '{"type": "error", "message": "boom", "code": "cancelled", "retryable": true}',
    ),
    (
        CompressionEvent(messages_before=10, messages_after=4, tokens_before=100, tokens_after=40),
        '{"type": "compression", "messagesBefore": 10, "messagesAfter": 4, "tokensBefore": 100, '
        '"tokensAfter": 40, "factsAdded": 0, "factsRemoved": 0, "strategy": "model", '
        '"factsUngrounded": 0, "usage": {"inputTokens": 0, "outputTokens": 0, "calls": 0}}',
    ),
    (
        CompressionEvent(
            messages_before=10,
            messages_after=4,
            tokens_before=100,
            tokens_after=40,
            facts_added=1,
            facts_removed=2,
            strategy="rules",
            facts_ungrounded=3,
            usage=Usage(input_tokens=5, output_tokens=6, calls=2, cached_tokens=3),
        ),
        '{"type": "compression", "messagesBefore": 10, "messagesAfter": 4, "tokensBefore": 100, '
        '"tokensAfter": 40, "factsAdded": 1, "factsRemoved": 2, "strategy": "rules", '
        '"factsUngrounded": 3, "usage": {"inputTokens": 5, "outputTokens": 6, "calls": 2, '
        '"cachedTokens": 3}}',
    ),
    (PlanningEvent(), '{"type": "planning", "liveState": [], "taskStateIncluded": true}'),
    (
        PlanningEvent(live_state=["x", "y"], task_state_included=False),
        '{"type": "planning", "liveState": ["x", "y"], "taskStateIncluded": false}',
    ),
    (PlanEvent(goal="g"), '{"type": "plan", "goal": "g", "steps": [], "repaired": false}'),
    (
        PlanEvent(goal="g", steps=[STEP, PlannedStep(id="s2", step_type="respond")], repaired=True),
        '{"type": "plan", "goal": "g", "steps": [{"id": "s1", "stepType": "tool", "title": "T", '
        '"toolName": "f", "toolArgs": {"k": "v"}}, {"id": "s2", "stepType": "respond", '
        '"title": "", "toolName": "", "toolArgs": {}}], "repaired": true}',
    ),
    (
        StepStartEvent(step_id="s1", step_type="tool"),
        '{"type": "step_start", "stepId": "s1", "stepType": "tool", "title": ""}',
    ),
    (
        StepStartEvent(step_id="s1", step_type="reason", title="Think"),
        '{"type": "step_start", "stepId": "s1", "stepType": "reason", "title": "Think"}',
    ),
    (
        StepCompleteEvent(step_id="s1", status="done"),
        '{"type": "step_complete", "stepId": "s1", "status": "done", "summary": "", "rule": "", '
        '"reason": "", "toolName": ""}',
    ),
    (
        StepCompleteEvent(
            step_id="s1", status="skipped", summary="s", rule="consent", reason="r", tool_name="f"
        ),
        '{"type": "step_complete", "stepId": "s1", "status": "skipped", "summary": "s", '
        '"rule": "consent", "reason": "r", "toolName": "f"}',
    ),
    (
        ReplanEvent(action="continue"),
        '{"type": "replan", "action": "continue", "reason": "", "steps": [], "note": ""}',
    ),
    (
        ReplanEvent(
            action="replace_remaining",
            reason="r",
            steps=[PlannedStep(id="s3", step_type="ask_user", title="Q")],
            note="n",
        ),
        '{"type": "replan", "action": "replace_remaining", "reason": "r", "steps": [{"id": "s3", '
        '"stepType": "ask_user", "title": "Q", "toolName": "", "toolArgs": {}}], "note": "n"}',
    ),
    (
        AskUserEvent(question="q?"),
        '{"type": "ask_user", "question": "q?", "kind": "question", "toolName": "", '
        '"toolArgs": {}, "approvalId": "", "stepId": "", "rule": "", "reason": ""}',
    ),
    (
        AskUserEvent(
            question="q?",
            kind="confirmation",
            tool_name="f",
            tool_args={"x": [1]},
            approval_id="ap-1",
            step_id="s1",
            rule="consent",
            reason="why",
        ),
        '{"type": "ask_user", "question": "q?", "kind": "confirmation", "toolName": "f", '
        '"toolArgs": {"x": [1]}, "approvalId": "ap-1", "stepId": "s1", "rule": "consent", '
        '"reason": "why"}',
    ),
    (
        ResultEvent(conversation_id="c", message_id="m", status="completed"),
        '{"type": "result", "conversationId": "c", "messageId": "m", "status": "completed", '
        '"text": "", "usage": {"inputTokens": 0, "outputTokens": 0, "calls": 0}, '
        '"latencyMs": 0.0, "traceId": ""}',
    ),
    (
        ResultEvent(
            conversation_id="c",
            message_id="m",
            status="failed",
            text="t",
            usage=Usage(input_tokens=1, output_tokens=2, calls=1),
            latency_ms=12.345,
            trace_id="abc",
        ),
        '{"type": "result", "conversationId": "c", "messageId": "m", "status": "failed", '
        '"text": "t", "usage": {"inputTokens": 1, "outputTokens": 2, "calls": 1}, '
        '"latencyMs": 12.345, "traceId": "abc"}',
    ),
    (  # an int for a float field is written as a float, as pydantic wrote it
        ResultEvent(conversation_id="c", message_id="m", status="cancelled", latency_ms=3),
        '{"type": "result", "conversationId": "c", "messageId": "m", "status": "cancelled", '
        '"text": "", "usage": {"inputTokens": 0, "outputTokens": 0, "calls": 0}, '
        '"latencyMs": 3.0, "traceId": ""}',
    ),
]


def test_every_event_type_is_pinned() -> None:
    kinds = set(get_args(get_args(AgentEvent)[0]))
    assert {type(event) for event, _ in CASES} == kinds


@pytest.mark.parametrize(("event", "text"), CASES, ids=[type(e).__name__ for e, _ in CASES])
def test_the_wire_form_is_what_the_pydantic_models_gave(event: Any, text: str) -> None:
    assert event.to_json() == text
    assert event.to_json_dict() == json.loads(text)
    assert list(event.to_json_dict()) == list(json.loads(text))  # key order too
    # pydantic's own dump of the dataclass agrees (a field added later cannot drift)
    assert EVENT_ADAPTER.dump_python(event, mode="json", by_alias=True) == json.loads(text)


@pytest.mark.parametrize(("event", "text"), CASES, ids=[type(e).__name__ for e, _ in CASES])
def test_every_event_parses_back_equal(event: Any, text: str) -> None:
    assert EVENT_ADAPTER.validate_json(text) == event
    back = EVENT_ADAPTER.validate_python(json.loads(text))
    assert back == event and type(back) is type(event)
    assert back.to_json() == text
    snake = EVENT_ADAPTER.dump_python(event, mode="json")  # python names are accepted too
    assert EVENT_ADAPTER.validate_python(snake) == event


def test_reading_back_still_validates_at_the_edge() -> None:
    with pytest.raises(ValueError, match="surprise"):
        EVENT_ADAPTER.validate_python({"type": "thinking", "text": "x", "surprise": 1})
    with pytest.raises(ValueError, match="status"):
        EVENT_ADAPTER.validate_python(
            {"type": "result", "conversationId": "c", "messageId": "m", "status": "odd"}
        )


def test_the_published_schema_is_unchanged() -> None:
    pinned = json.loads(SCHEMA.read_text(encoding="utf-8"))
    ref = "#/components/schemas/{model}"
    serialization = EVENT_ADAPTER.json_schema(ref_template=ref, mode="serialization")
    # key order too: the schema is published as written
    assert json.dumps(serialization) == json.dumps(pinned["serialization"])
    assert json.dumps(EVENT_ADAPTER.json_schema()) == json.dumps(pinned["validation"])


def test_the_json_text_is_made_once_and_events_stay_frozen() -> None:
    event = ToolCallEvent(id="t1", name="f", arguments={"a": 1})
    assert event.to_json() is event.to_json()
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.name = "g"  # type: ignore[misc]
    changed = dataclasses.replace(event, name="g")
    assert (
        changed.to_json() == '{"type": "tool_call", "id": "t1", "name": "g", "arguments": {"a": 1}}'
    )
    assert event.to_json_dict() is not event.to_json_dict()  # a new dict: callers may edit it
    copied = pickle.loads(pickle.dumps(event))
    assert copied == event and copied.to_json() == event.to_json()
    assert event == ToolCallEvent(id="t1", name="f", arguments={"a": 1})  # the cache not compared


def test_transcripts_keep_writing_events_with_python_names() -> None:
    """The eval transcript (a pydantic model holding events) writes them as it did."""
    result = CASES[-2][0]
    plan = CASES[17][0]
    transcript = Transcript(
        run="r", scenario="s", turns=[UserTurn(number=1, events=[plan, result])]
    )
    text = transcript.to_json()
    assert (
        '"events":[{"type":"plan","goal":"g","steps":[{"id":"s1","step_type":"tool","title":"T",'
        '"tool_name":"f","tool_args":{"k":"v"}},{"id":"s2","step_type":"respond","title":"",'
        '"tool_name":"","tool_args":{}}],"repaired":true},{"type":"result","conversation_id":"c",'
        '"message_id":"m","status":"failed","text":"t","usage":{"input_tokens":1,'
        '"output_tokens":2,"calls":1},"latency_ms":12.345,"trace_id":"abc"}]'
    ) in text
    assert Transcript.from_json(text).events() == [plan, result]


@pytest.mark.parametrize(
    "usage", [Usage(), Usage(input_tokens=3, output_tokens=4, calls=1, cached_tokens=2)]
)
def test_usage_written_out_is_its_pydantic_dump(usage: Usage) -> None:
    assert usage.json_dict() == usage.model_dump(mode="json", by_alias=True)
    message = Message.assistant("hi", message_id="msg-1", usage=usage)
    assert message.to_json_dict()["usage"] == usage.model_dump(mode="json", by_alias=True)
