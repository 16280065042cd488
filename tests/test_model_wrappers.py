"""One entry point: a wrapper overrides ``ChatModel.request`` only and sees every kind of call.

``stream``, ``complete`` (with a JSON schema) and ``complete_with_tools`` are final helpers
that build one :class:`ModelRequest`; the budget (:class:`BudgetedModel`), the cassette
recorder (:class:`RecordingModel`) and the function model all see the three through
``request``, and a wrapper keeps its inner model's capabilities.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from agentkit.errors import ModelError, StructuredOutputError
from agentkit.eval.budget import BudgetedModel, Meter, RunBudget
from agentkit.memory import estimate_tokens, estimator_for
from agentkit.models.base import ChatMessage, ChatModel, ModelRequest, ToolSpec, WrapperModel
from agentkit.models.cassette import CassetteEntry, RecordingModel, ReplayModel
from agentkit.testing import FunctionModel, ScriptedModel, scripted_signals, tool_call

ASKED = [ChatMessage(role="user", content="go")]
SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
TOOLS = [ToolSpec(name="connect", description="Connect an exchange.")]


def _reply(request: ModelRequest) -> object:
    if request.tools:
        return tool_call("connect", exchange="binance")
    if request.json_schema is not None:
        return {"x": 1}
    return (word for word in ("a ", "streamed ", "reply"))


async def _every_kind(model: ChatModel) -> list[object]:
    streamed = [event async for event in model.stream(ASKED, purpose="chat")]
    structured = await model.complete(ASKED, purpose="plan", schema=SCHEMA)
    tools = await model.complete_with_tools(ASKED, tools=TOOLS, purpose="act")
    return [streamed, structured, tools]


def test_the_helpers_are_one_request_each_and_cannot_be_overridden() -> None:
    inner = FunctionModel(_reply)
    streamed, structured, tools = asyncio.run(_every_kind(inner))
    assert [(r.purpose, r.stream, r.json_schema, r.tools) for r in inner.requests] == [
        ("chat", True, None, ()),
        ("plan", False, SCHEMA, ()),
        ("act", False, None, tuple(TOOLS)),
    ]
    assert [getattr(e, "text", None) for e in streamed] == ["a ", "streamed ", "reply"] * 1 + [
        "a streamed reply"
    ]
    assert structured.structured == {"x": 1}  # type: ignore[attr-defined]
    assert [c.name for c in tools.tool_calls] == ["connect"]  # type: ignore[attr-defined]
    for helper in ("stream", "complete", "complete_with_tools"):
        assert getattr(ChatModel, helper).__final__ is True


def test_a_budget_meters_every_kind_of_call_through_the_one_entry_point() -> None:
    inner = FunctionModel(_reply)
    meter = Meter(RunBudget(max_model_calls=3))
    budgeted = BudgetedModel(inner, meter)
    asyncio.run(_every_kind(budgeted))
    assert meter.calls == 3 and len(inner.requests) == 3
    assert meter.tokens == sum(
        estimate_tokens(m.content) for r in inner.requests for m in r.messages
    ) + sum(estimate_tokens(t) for t in ("a streamed reply", '{"x": 1}', ""))

    # over budget, no kind of call reaches the inner model
    for call in (
        budgeted.complete(ASKED, purpose="plan", schema=SCHEMA),
        budgeted.complete_with_tools(ASKED, tools=TOOLS, purpose="act"),
    ):
        with pytest.raises(ModelError, match="over the run's budget"):
            asyncio.run(call)
    assert len(inner.requests) == 3 and "max_model_calls: 3" in meter.reason


def test_a_recording_sees_every_kind_of_call_and_a_replay_answers_each(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    recorded = asyncio.run(_every_kind(RecordingModel(FunctionModel(_reply), cassette)))
    lines = cassette.read_text().splitlines()
    entries = [CassetteEntry.model_validate_json(line) for line in lines]
    assert [(e.request["call"], e.request["purpose"]) for e in entries] == [
        ("stream", "chat"),
        ("complete", "plan"),
        ("tools", "act"),
    ]
    assert entries[1].request["schema"] == SCHEMA
    assert json.loads(entries[1].reply.text) == {"x": 1}
    assert entries[2].reply.tool_calls[0]["name"] == "connect"
    assert asyncio.run(_every_kind(ReplayModel.from_file(cassette))) == recorded


def test_a_replay_answers_a_streamed_record_to_a_whole_request(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl"
    model = RecordingModel(ScriptedModel({"plan": ['{"x": "one"}']}), cassette)
    asyncio.run(_drain(model.stream(ASKED, purpose="plan", schema=SCHEMA)))
    replay = ReplayModel.from_file(cassette)
    with pytest.raises(StructuredOutputError, match="x: 'one' is not of type 'integer'"):
        asyncio.run(replay.complete(ASKED, purpose="plan", schema=SCHEMA))
    assert replay.remaining == 0


async def _drain(events: object) -> None:
    async for _ in events:  # type: ignore[attr-defined]
        pass


def test_a_wrapper_keeps_its_models_capabilities() -> None:
    signals = scripted_signals({}, score=lambda _p, text: [-float(len(text))], embed=lambda t: [1])
    budgeted = BudgetedModel(signals, Meter(RunBudget()))
    assert isinstance(budgeted, WrapperModel)
    assert (budgeted.scores, budgeted.embeds, budgeted.native_tools) == (True, True, True)
    assert asyncio.run(budgeted.score([("Task: a", " xy")])) == [[-3.0]]
    assert asyncio.run(budgeted.embed(["abc"])) == [[1]]
    assert budgeted.spec == signals.spec and budgeted.real_requests is False
    plain = BudgetedModel(FunctionModel(_reply, native_tools=False), Meter(RunBudget()))
    assert (plain.scores, plain.embeds, plain.native_tools) == (False, False, False)
    with pytest.raises(ModelError, match="no native function calling"):
        asyncio.run(plain.complete_with_tools(ASKED, tools=TOOLS))
    with pytest.raises(ModelError, match="scores no likelihoods"):
        asyncio.run(plain.score([("a", "b")]))
    assert estimator_for(plain) is estimate_tokens  # no tokenizer of its own
