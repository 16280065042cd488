"""Compression of the chat window into TaskState, with the scripted model."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from agentkit.calls.tracer import CallTracer
from agentkit.config import CompressionConfig
from agentkit.errors import ModelError, StructuredOutputError
from agentkit.events import EVENT_ADAPTER, CompressionEvent
from agentkit.memory import (
    MESSAGE_OVERHEAD_TOKENS,
    CompressionOutcome,
    TaskState,
    estimate_messages,
    estimate_tokens,
    maybe_compress,
    summary_schema,
)
from agentkit.memory.compression import Summarize
from agentkit.models.base import ChatModel
from agentkit.models.scripted import ScriptedModel
from agentkit.planning.upkeep import summarizer
from agentkit.types import Message, ToolCallRecord

CONFIG = CompressionConfig()  # N=12, T=900, K=12


def traced(model: ChatModel) -> Summarize:
    """The summarise call made through a call tracer of its own, as a sweep makes it."""
    return summarizer(CallTracer.standalone(model), model)


def _msg(role: str, text: str, *, calls: int = 0) -> Message:
    tool_calls = tuple(ToolCallRecord(id=f"c{i}", name="get_traders") for i in range(calls))
    return Message.model_validate(
        {
            "role": role,
            "content": text,
            "message_id": "msg-1",
            "timestamp": datetime(2026, 1, 1, tzinfo=UTC),
            "tool_calls": tool_calls,
        }
    )


def _window(count: int, size: int = 300) -> list[Message]:
    """*count* alternating user/assistant messages whose texts are unique markers + padding."""
    return [
        _msg("user" if i % 2 == 0 else "assistant", f"MSG{i:02d} " + "x" * size)
        for i in range(count)
    ]


def _summary(**fields: Any) -> str:
    return json.dumps(fields)


def _sent_text(model: ScriptedModel) -> str:
    assert len(model.requests) == 1
    request = model.requests[0]
    assert request.purpose == "summarize"
    return "\n".join(message.content for message in request.messages)


def _compress(
    window: list[Message],
    state: TaskState,
    model: ScriptedModel,
    config: CompressionConfig = CONFIG,
) -> CompressionOutcome | None:
    return asyncio.run(
        maybe_compress(window, state, model, config, estimate_tokens, summarize=traced(model))
    )


def test_below_either_threshold_nothing_is_called() -> None:
    model = ScriptedModel({"summarize": [_summary()]})
    # many messages, few tokens
    assert _compress(_window(30, size=4), TaskState(), model) is None
    # many tokens, not more than N messages
    assert _compress(_window(12, size=2000), TaskState(), model) is None
    assert model.requests == []


def test_over_both_thresholds_summarises_the_older_part_and_keeps_the_last_k() -> None:
    window = _window(20)
    window[2] = _msg("user", "MSG02 the desk uses OKX")
    model = ScriptedModel(
        {"summarize": [_summary(current_goal="create a trader", important_facts=["uses OKX"])]}
    )
    outcome = _compress(window, TaskState(), model)
    assert outcome is not None
    assert outcome.compressed
    assert outcome.error is None
    assert outcome.window == tuple(window[-12:])
    sent = _sent_text(model)
    for index in range(8):
        assert f"MSG{index:02d}" in sent
    for index in range(8, 20):
        assert f"MSG{index:02d}" not in sent
    assert model.requests[0].schema == summary_schema()
    assert outcome.task_state.current_goal == "create a trader"
    assert outcome.task_state.important_facts == ("uses OKX",)
    assert outcome.task_state.updated_at is not None


def test_the_prompt_carries_the_rules_and_the_existing_state() -> None:
    state = TaskState(current_goal="old goal", pinned_facts=("call me Ada",))
    model = ScriptedModel({"summarize": [_summary()]})
    _compress(_window(20), state, model)
    system, user = model.requests[0].messages
    assert system.role == "system"
    assert "non-derivable" in system.content
    assert "Never invent" in system.content
    assert "$" not in system.content + user.content  # every placeholder was filled
    assert '"current_goal": "old goal"' in user.content
    assert "- call me Ada" in user.content


def test_a_tool_call_and_its_results_straddling_the_cut_stay_together() -> None:
    window = _window(20)
    # The cut for K=12 falls at index 8: make 7 the call and 8-9 its results.
    window[7] = _msg("assistant", "MSG07 calling", calls=2)
    window[8] = _msg("tool", "MSG08 " + "r" * 300)
    window[9] = _msg("tool", "MSG09 " + "r" * 300)
    model = ScriptedModel({"summarize": [_summary()]})
    outcome = _compress(window, TaskState(), model)
    assert outcome is not None
    assert outcome.window == tuple(window[7:])
    assert outcome.window[0].tool_calls
    sent = _sent_text(model)
    assert "MSG06" in sent
    assert "MSG07" not in sent
    assert "MSG08" not in sent


def test_a_call_group_at_the_start_moves_the_cut_later_not_to_nothing() -> None:
    window = [_msg("assistant", "MSG00 calling", calls=1)]
    window += [_msg("tool", f"MSG{i:02d} " + "r" * 300) for i in range(1, 4)]
    window += _window(20)[4:]
    config = CompressionConfig(keep_recent=18)  # cut at 2: inside the leading group
    model = ScriptedModel({"summarize": [_summary()]})
    outcome = _compress(window, TaskState(), model, config)
    assert outcome is not None
    assert outcome.window == tuple(window[4:])
    assert outcome.window[0].role != "tool"


def test_pinned_facts_survive_when_the_model_omits_them() -> None:
    state = TaskState(pinned_facts=("always reply in English",), important_facts=("a", "b"))
    model = ScriptedModel({"summarize": [_summary(important_facts=["b", "c", "d"])]})
    outcome = _compress(_window(20), state, model)
    assert outcome is not None
    assert outcome.task_state.pinned_facts == ("always reply in English",)
    assert "always reply in English" in outcome.task_state.render()


def test_the_event_figures() -> None:
    window = _window(20)
    state = TaskState(important_facts=("a", "b"))
    invented = "the user lives in Berlin"
    summary = _summary(important_facts=["B", "MSG03", "MSG05", invented])
    model = ScriptedModel({"summarize": [summary]})
    outcome = _compress(window, state, model)
    assert outcome is not None
    event = outcome.event
    assert event == CompressionEvent(
        messages_before=20,
        messages_after=12,
        tokens_before=estimate_messages(window, estimate_tokens),
        tokens_after=estimate_messages(window[-12:], estimate_tokens),
        facts_added=2,
        facts_removed=1,
        strategy="model",
        facts_ungrounded=1,
    )
    assert outcome.ungrounded == (invented,)
    assert outcome.task_state.important_facts == ("B", "MSG03", "MSG05")
    per_message = (306 + 3) // 4 + MESSAGE_OVERHEAD_TOKENS
    assert event.tokens_before == 20 * per_message
    assert event.tokens_after == 12 * per_message
    data = event.to_json_dict()
    assert data["type"] == "compression"
    assert data["messagesBefore"] == 20
    assert EVENT_ADAPTER.validate_python(data) == event


def test_a_model_tokenizer_drives_the_threshold() -> None:
    window = _window(20, size=4)
    model = ScriptedModel({"summarize": [_summary()]})
    outcome = asyncio.run(
        maybe_compress(
            window, TaskState(), model, CONFIG, lambda _text: 100, summarize=traced(model)
        )
    )
    assert outcome is not None
    assert outcome.compressed


@pytest.mark.parametrize(
    "reply",
    [
        "this is not JSON",
        '{"important_facts": "one fact"}',
        '{"current_goal": 3}',
        '{"last_decision": {"action": 1}}',
        '{"pinned_facts": []}',
        "[]",
    ],
)
def test_a_malformed_summary_changes_nothing_and_reports_the_error(reply: str) -> None:
    window = _window(20)
    state = TaskState(current_goal="keep me", pinned_facts=("p",))
    model = ScriptedModel({"summarize": [reply]})
    outcome = _compress(window, state, model)
    assert outcome is not None
    assert not outcome.compressed
    assert isinstance(outcome.error, StructuredOutputError)
    assert outcome.task_state is state
    assert outcome.window == tuple(window)
    assert outcome.event is None


def test_a_model_failure_changes_nothing_and_is_not_raised() -> None:
    window = _window(20)
    model = ScriptedModel({"chat": ["only chat"]})  # no summarize replies: ModelError
    outcome = _compress(window, TaskState(), model)
    assert outcome is not None
    assert isinstance(outcome.error, ModelError)
    assert outcome.window == tuple(window)


def test_the_summary_is_normalised() -> None:
    reply = _summary(
        open_loops=["wait for API secret", "finish trader setup once external config is ready"],
        important_facts=[" MSG01 ", "msg01", ""],
        last_decision={"action": "use OKX", "reason": "asked"},
    )
    outcome = _compress(_window(20), TaskState(), ScriptedModel({"summarize": [reply]}))
    assert outcome is not None
    state = outcome.task_state
    assert state.open_loops == ("finish trader setup once external config is ready",)
    assert state.important_facts == ("MSG01",)
    assert state.last_decision is not None
    assert state.last_decision.timestamp is not None


def test_summary_schema_is_self_contained_and_editable_fields_only() -> None:
    schema = summary_schema()
    assert "$defs" not in json.dumps(schema)
    assert "$ref" not in json.dumps(schema)
    assert set(schema["properties"]) == {
        "current_goal",
        "active_flow",
        "open_loops",
        "important_facts",
        "last_decision",
    }
    assert schema["additionalProperties"] is False


def test_a_failing_tokenizer_is_reported_not_raised() -> None:
    def broken(_text: str) -> int:
        raise ModelError("llama", "no weights")

    window = _window(20)
    model = ScriptedModel({"summarize": [_summary()]})
    outcome = asyncio.run(
        maybe_compress(window, TaskState(), model, CONFIG, broken, summarize=traced(model))
    )
    assert outcome is not None
    assert isinstance(outcome.error, ModelError)
    assert outcome.window == tuple(window)
    assert model.requests == []
