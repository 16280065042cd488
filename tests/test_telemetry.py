"""The telemetry layer itself (agentkit.telemetry): span trees and attributes, as agentkit's
own records and through an OpenTelemetry SDK with an in-memory exporter; the records are the
same with and without a provider; no secret in any attribute, event or status, with content
capture on and off; metrics; W3C trace context; and nothing of opentelemetry imported by
``import agentkit`` (or by a turn when nobody set OpenTelemetry up)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from agentkit.telemetry import (
    CAPTURE_ENV,
    SpanRecord,
    Telemetry,
    TurnTrace,
    capture_content,
    format_traceparent,
    parse_traceparent,
    semconv,
)
from agentkit.telemetry import _spans as spans_module

from tests._otel import OtelCapture, capture, hex_id

SECRET = "sk-live-0123456789abcd"
PASSPHRASE = "correct horse battery"


@pytest.fixture
def otel() -> OtelCapture:
    return capture()


@pytest.fixture
def no_otel(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if OpenTelemetry were not set up at all (the process-wide SDK may already be)."""
    monkeypatch.setattr(spans_module, "bridge", lambda: None)


def desk_turn(tel: Telemetry, *, model: str = "llama", fail_tool: bool = True) -> TurnTrace:
    """A turn shaped like a plan_replan desk turn: plan (with its model call), a tool, a
    failed tool, a replan, the answer."""
    trace = tel.turn(
        conversation_id="conv-1",
        message_id="msg-1",
        scenario="A",
        provider="scripted",
        model="scripted:inline",
        secrets=lambda: [SECRET],
    )
    with trace.plan() as plan:
        call = trace.model_call(plan, model=model, purpose="plan")
        call.usage(120, 30)
        call.finish_reasons(["stop"])
        call.end()
    with trace.tool_call(None, name="get_time", call_id="s1") as tool:
        tool.set("agentkit.step_id", "s1")
    tool = trace.tool_call(None, name="place_order", call_id="s2")
    if fail_tool:
        tool.fail("ToolFailedError", f"the exchange refused key {SECRET}")
    tool.end()
    with trace.plan() as replan:
        trace.model_call(replan, model=model, purpose="replan").end()
    respond = trace.model_call(None, model=model, purpose="respond", stream=True)
    respond.usage(200, 12)
    respond.end()
    trace.event(semconv.QUESTION_EVENT, {"agentkit.question": "Which pair?"})
    trace.end(status="completed", input_tokens=320, output_tokens=42)
    return trace


def shape(records: list[SpanRecord]) -> list[tuple[Any, ...]]:
    """The records without their ids and times: names, parents by index, kinds, statuses,
    attributes, events."""
    index = {record.span_id: i for i, record in enumerate(records)}
    return [
        (
            record.name,
            index.get(record.parent_id or ""),
            record.kind,
            record.status,
            record.status_message,
            dict(record.attributes),
            [(event.name, dict(event.attributes)) for event in record.events],
        )
        for record in records
    ]


# -- the span tree -------------------------------------------------------------------------------


def test_a_turn_is_one_span_tree_with_the_genai_attributes(otel: OtelCapture) -> None:
    tel = Telemetry(agent_id="desk-001", agent_name="Desk")
    trace = desk_turn(tel)
    records = trace.spans

    assert [r.name for r in records] == [
        "invoke_agent desk-001",
        "plan desk-001",
        "chat llama",
        "execute_tool get_time",
        "execute_tool place_order",
        "plan desk-001",
        "chat llama",
        "chat llama",
    ]
    root, plan, call, tool, failed, replan, replan_call, respond = records
    assert len(trace.trace_id) == 32 and all(r.trace_id == trace.trace_id for r in records)
    assert root.parent_id is None
    assert [r.parent_id for r in (plan, tool, failed, replan, respond)] == [root.span_id] * 5
    assert call.parent_id == plan.span_id and replan_call.parent_id == replan.span_id
    assert root.kind == "internal" and call.kind == "client" and tool.kind == "internal"

    assert dict(root.attributes) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "scripted",
        "gen_ai.agent.id": "desk-001",
        "gen_ai.agent.name": "Desk",
        "gen_ai.conversation.id": "conv-1",
        "gen_ai.request.model": "scripted:inline",
        "agentkit.scenario": "A",
        "agentkit.message_id": "msg-1",
        "agentkit.turn.status": "completed",
        "gen_ai.usage.input_tokens": 320,
        "gen_ai.usage.output_tokens": 42,
        "openinference.span.kind": "AGENT",
    }
    assert root.events[0].name == "agentkit.question"
    assert plan.attributes["gen_ai.operation.name"] == "plan"
    assert dict(call.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "llama",
        "agentkit.purpose": "plan",
        "gen_ai.request.stream": False,
        "gen_ai.conversation.id": "conv-1",
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 30,
        "gen_ai.response.finish_reasons": ("stop",),
        "openinference.span.kind": "LLM",
    }
    assert respond.attributes["gen_ai.request.stream"] is True
    assert dict(tool.attributes) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_time",
        "gen_ai.tool.call.id": "s1",
        "gen_ai.tool.type": "function",
        "agentkit.step_id": "s1",
        "openinference.span.kind": "TOOL",
    }
    assert failed.status == "error" and failed.error_type == "ToolFailedError"
    assert failed.status_message == "the exchange refused key ****abcd"
    assert all(r.end_ns >= r.start_ns for r in records)
    assert tel.recorded(trace.trace_id) == records
    assert tel.turn_records("msg-1") == records


def test_the_exported_spans_are_the_records(otel: OtelCapture) -> None:
    """Through the SDK: the same tree (ids are OpenTelemetry's), kinds, attributes, events,
    status and times as agentkit's own records."""
    from opentelemetry.trace import SpanKind, StatusCode

    trace = desk_turn(Telemetry(agent_id="desk-001", agent_name="Desk"))
    exported = {hex_id(span.context.span_id, 16): span for span in otel.spans()}
    assert len(exported) == len(trace.spans)
    for record in trace.spans:
        span = exported[record.span_id]
        assert hex_id(span.context.trace_id, 32) == record.trace_id
        parent = hex_id(span.parent.span_id, 16) if span.parent else None
        assert parent == record.parent_id
        assert span.name == record.name
        assert span.kind == {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}[record.kind]
        assert dict(span.attributes or {}) == dict(record.attributes)
        assert (span.start_time, span.end_time) == (record.start_ns, record.end_ns)
        assert [(e.name, dict(e.attributes or {})) for e in span.events] == [
            (e.name, dict(e.attributes)) for e in record.events
        ]
        error = span.status.status_code is StatusCode.ERROR
        assert error == (record.status == "error")
        if error:
            assert span.status.description == record.status_message


def test_records_are_the_same_with_and_without_a_provider(
    otel: OtelCapture, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_sdk = desk_turn(Telemetry(agent_id="desk-001", agent_name="Desk")).spans
    assert otel.spans()
    otel.exporter.clear()
    monkeypatch.setattr(spans_module, "bridge", lambda: None)
    without = desk_turn(Telemetry(agent_id="desk-001", agent_name="Desk")).spans
    assert otel.spans() == []  # nothing reached OpenTelemetry
    assert shape(without) == shape(with_sdk)
    assert len({r.trace_id for r in without}) == 1 and len(without[0].trace_id) == 32


def test_without_a_provider_ids_are_random_and_valid(no_otel: None) -> None:
    tel = Telemetry(agent_id="a")
    first, second = (tel.turn(conversation_id="c", message_id=f"m{i}") for i in range(2))
    first.end()
    second.end()
    assert first.trace_id != second.trace_id
    assert parse_traceparent(first.root.traceparent) == (
        first.trace_id,
        first.root.span_id,
        True,
    )


def test_a_span_ended_by_an_exception_has_its_error_type(no_otel: None) -> None:
    trace = Telemetry(agent_id="a").turn(conversation_id="c", message_id="m")
    with pytest.raises(TimeoutError), trace.span("step s1"):
        raise TimeoutError("took too long")
    trace.end(status="failed", error_type="TimeoutError")
    root, step = trace.spans
    assert step.status == "error" and step.error_type == "TimeoutError"
    assert step.status_message == "took too long"
    assert root.status == "error" and root.attributes["agentkit.turn.status"] == "failed"


def test_ending_the_trace_ends_what_is_still_open(no_otel: None) -> None:
    trace = Telemetry(agent_id="a").turn(conversation_id="c", message_id="m")
    step = trace.span("step s1")
    trace.model_call(step, model="m", purpose="step")
    trace.end(status="cancelled")
    assert [r.name for r in trace.spans] == ["invoke_agent a", "step s1", "chat m"]
    root = trace.spans[0]
    assert all(r.end_ns <= root.end_ns for r in trace.spans)
    step.set("late", 1)  # after the end: ignored
    assert "late" not in trace.spans[1].attributes


def test_a_span_started_after_the_end_is_still_kept(no_otel: None) -> None:
    tel = Telemetry(agent_id="a")
    trace = tel.turn(conversation_id="c", message_id="m")
    trace.end()
    trace.span("upkeep").end()
    assert [r.name for r in tel.recorded(trace.trace_id) or []] == ["invoke_agent a", "upkeep"]


def test_only_the_last_traces_are_kept(no_otel: None) -> None:
    tel = Telemetry(agent_id="a", keep=2)
    ids = []
    for i in range(3):
        trace = tel.turn(conversation_id="c", message_id=f"m{i}")
        trace.end()
        ids.append(trace.trace_id)
    assert tel.recorded(ids[0]) is None and tel.turn_records("m0") is None
    assert tel.trace_ids() == ids[1:]
    assert tel.trace_id_of("m2") == ids[2]


# -- secrets and contents ------------------------------------------------------------------------


def secret_free(records: list[SpanRecord], exported: list[Any]) -> None:
    everything = json.dumps(
        [
            (dict(r.attributes), [(e.name, dict(e.attributes)) for e in r.events], r.status_message)
            for r in records
        ]
    ) + json.dumps(
        [
            (
                dict(s.attributes or {}),
                [dict(e.attributes or {}) for e in s.events],
                s.status.description,
            )
            for s in exported
        ]
    )
    assert SECRET not in everything
    assert PASSPHRASE not in everything


@pytest.mark.parametrize("capture_on", [True, False])
def test_no_secret_in_any_attribute_event_or_status(
    otel: OtelCapture, monkeypatch: pytest.MonkeyPatch, capture_on: bool
) -> None:
    if capture_on:
        monkeypatch.setenv(CAPTURE_ENV, "true")
    else:
        monkeypatch.delenv(CAPTURE_ENV, raising=False)
    assert capture_content() is capture_on
    trace = Telemetry(agent_id="desk-001").turn(
        conversation_id="c", message_id="m", secrets=[SECRET]
    )
    messages = [
        {"role": "user", "parts": [{"type": "text", "content": f"my key is {SECRET}"}]},
    ]
    call = trace.model_call(None, model="llama", purpose="plan")
    assert trace.content(call, semconv.INPUT_MESSAGES, messages) is capture_on
    call.end()
    tool = trace.tool_call(None, name="set_key", call_id="s1")
    args = {"exchange": "okx", "api_key": SECRET, "passphrase": PASSPHRASE}
    trace.content(tool, semconv.TOOL_CALL_ARGUMENTS, args)
    tool.set("agentkit.note", f"using {SECRET}")
    tool.set("agentkit.args", args)  # a nested value: JSON, masked
    tool.set("agentkit.api_key", "short-but-secret")
    tool.fail("ToolFailedError", f"rejected {SECRET}")
    tool.end()
    # structured values are masked by their keys (a pre-serialised JSON string is only
    # scrubbed of the known values: callers hand over dicts)
    trace.event(semconv.CONSENT_EVENT, {"agentkit.tool.arguments": args, "why": SECRET})
    trace.end(status="waiting_confirmation")

    secret_free(trace.spans, otel.spans())
    tool_record = trace.spans[2]
    assert tool_record.attributes["agentkit.api_key"] == "****cret"
    assert tool_record.attributes["agentkit.note"] == "using ****abcd"
    if capture_on:
        recorded = json.loads(str(trace.spans[1].attributes[semconv.INPUT_MESSAGES]))
        assert recorded[0]["parts"][0]["content"] == "my key is ****abcd"
        arguments = json.loads(str(tool_record.attributes[semconv.TOOL_CALL_ARGUMENTS]))
        assert arguments == {"exchange": "okx", "api_key": "****abcd", "passphrase": "****tery"}
    else:
        assert semconv.INPUT_MESSAGES not in trace.spans[1].attributes
        assert semconv.TOOL_CALL_ARGUMENTS not in tool_record.attributes


# -- metrics -------------------------------------------------------------------------------------


def test_model_calls_record_the_client_metrics(otel: OtelCapture) -> None:
    model = "metrics-test-model"
    desk_turn(Telemetry(agent_id="desk-001"), model=model)
    inputs = otel.points("gen_ai.client.token.usage", **{
        "gen_ai.request.model": model, "gen_ai.token.type": "input",
    })  # fmt: skip
    outputs = otel.points("gen_ai.client.token.usage", **{
        "gen_ai.request.model": model, "gen_ai.token.type": "output",
    })  # fmt: skip
    assert [p.sum for p in inputs] == [320] and [p.count for p in inputs] == [2]
    assert [p.sum for p in outputs] == [42]
    durations = otel.points("gen_ai.client.operation.duration", **{"gen_ai.request.model": model})
    assert sum(p.count for p in durations) == 3  # plan, replan, respond
    point = durations[0]
    assert point.attributes["gen_ai.operation.name"] == "chat"
    assert point.attributes["gen_ai.provider.name"] == "scripted"


# -- context: parents, activation, W3C -------------------------------------------------------------


def test_traceparent_round_trip() -> None:
    value = format_traceparent("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
    assert value == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert parse_traceparent(value) == (
        "4bf92f3577b34da6a3ce929d0e0e4736",
        "00f067aa0ba902b7",
        True,
    )
    assert parse_traceparent(value[:-2] + "00")[2] is False  # type: ignore[index]
    for bad in ("", "00-" + "0" * 32 + "-00f067aa0ba902b7-01", "ff" + value[2:], value + "-x"):
        assert parse_traceparent(bad) is None


@pytest.mark.parametrize("with_sdk", [True, False])
def test_a_trace_continues_a_traceparent(with_sdk: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    otel = capture()
    if not with_sdk:
        monkeypatch.setattr(spans_module, "bridge", lambda: None)
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    trace = Telemetry().trace("eval run r1", traceparent=parent)
    trace.end()
    (root,) = trace.spans
    assert (root.trace_id, root.parent_id) == (
        "4bf92f3577b34da6a3ce929d0e0e4736",
        "00f067aa0ba902b7",
    )
    if with_sdk:
        (span,) = otel.spans()
        assert span.parent is not None and span.parent.is_remote
        assert hex_id(span.parent.span_id, 16) == "00f067aa0ba902b7"
        assert hex_id(span.context.trace_id, 32) == root.trace_id


@pytest.mark.parametrize("with_sdk", [True, False])
def test_a_turn_under_an_activated_span_is_its_child(
    with_sdk: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An eval run activates its span; the turns it runs are children in the run's trace."""
    otel = capture()
    if not with_sdk:
        monkeypatch.setattr(spans_module, "bridge", lambda: None)
    sweep = Telemetry()
    run = sweep.trace("eval run r1")
    agent = Telemetry(agent_id="a")
    assert Telemetry.current() is None
    with run.root.activate() as active:
        assert Telemetry.current() is active is run.root
        turn = agent.turn(conversation_id="c", message_id="m")
        turn.end()
    assert Telemetry.current() is None
    run.end()
    assert turn.trace_id == run.trace_id
    assert turn.spans[0].parent_id == run.root.span_id
    if with_sdk:
        from opentelemetry import trace as otel_trace

        exported = {s.name: s for s in otel.spans()}
        assert exported["invoke_agent a"].parent.span_id == int(run.root.span_id, 16)
        assert not otel_trace.get_current_span().get_span_context().is_valid


def test_activate_makes_the_span_current_for_opentelemetry_too(otel: OtelCapture) -> None:
    from opentelemetry import trace as otel_trace

    trace = Telemetry(agent_id="a").turn(conversation_id="c", message_id="m")
    tool = trace.tool_call(None, name="t")
    with tool.activate():
        current = otel_trace.get_current_span().get_span_context()
        assert hex_id(current.span_id, 16) == tool.span_id
        carrier = Telemetry.current().trace_context()  # type: ignore[union-attr]
    assert parse_traceparent(carrier["traceparent"]) == parse_traceparent(tool.traceparent)
    child = Telemetry.current()
    assert child is None
    tool.end()
    trace.end()


def test_a_turn_inside_the_callers_own_span_is_its_child(otel: OtelCapture) -> None:
    from opentelemetry import trace as otel_trace

    tracer = otel_trace.get_tracer("the-app")
    with tracer.start_as_current_span("handle request") as outer:
        trace = Telemetry(agent_id="a").turn(conversation_id="c", message_id="m")
        trace.end()
    root = trace.spans[0]
    assert root.trace_id == hex_id(outer.get_span_context().trace_id, 32)
    assert root.parent_id == hex_id(outer.get_span_context().span_id, 16)
    exported = otel.by_name("invoke_agent a")[0]
    assert exported.parent is not None
    assert exported.parent.span_id == outer.get_span_context().span_id


# -- imports -------------------------------------------------------------------------------------


def run_python(code: str, **env: str) -> str:
    import os

    environment = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    environment.update(env)
    done = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_import_agentkit_loads_no_opentelemetry() -> None:
    code = (
        "import sys, agentkit, agentkit.telemetry\n"
        "from agentkit.telemetry import Telemetry\n"
        "t = Telemetry(agent_id='a').turn(conversation_id='c', message_id='m')\n"
        "t.tool_call(None, name='x').end(); t.end()\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    assert run_python(code) == "[]"


def test_everything_works_when_opentelemetry_is_not_installed() -> None:
    """opentelemetry unimportable, and the environment names a provider (so agentkit tries)."""
    code = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None  # import opentelemetry raises ImportError\n"
        "from agentkit.telemetry import Telemetry\n"
        "tel = Telemetry(agent_id='a')\n"
        "t = tel.turn(conversation_id='c', message_id='m')\n"
        "with t.tool_call(None, name='x') as s, s.activate():\n"
        "    ctx = s.trace_context()\n"
        "t.end()\n"
        "print(len(tel.recorded(t.trace_id)), ctx['traceparent'][:3])"
    )
    assert run_python(code, OTEL_PYTHON_TRACER_PROVIDER="sdk_tracer_provider") == "2 00-"


# -- MCP: the client call as a span, the trace context in params._meta ----------------------------

FAKES = __import__("pathlib").Path(__file__).parent / "fakes"
NOTES_SERVER = FAKES / "mcp_notes_server.py"
TIME_SERVER = __import__("pathlib").Path(sys.executable).parent / "mcp-server-time"


def call_tools(
    toolset: Any, trace: TurnTrace, calls: list[tuple[str, dict[str, Any]]]
) -> list[Any]:
    """Run each tool call under an activated ``execute_tool`` span, as the planner does."""
    import asyncio

    from agentkit.tools import ToolRegistry

    registry = ToolRegistry(toolset.tools())
    results = []
    for number, (name, args) in enumerate(calls, 1):
        with trace.tool_call(None, name=name, call_id=f"s{number}") as span:
            with span.activate():
                result = asyncio.run(registry.arun(name, args))
            if not result.ok:
                span.fail("ToolFailedError", result.text)
        results.append(result)
    return results


@pytest.mark.skipif(not TIME_SERVER.is_file(), reason="mcp-server-time comes with the dev extra")
def test_an_mcp_tool_call_is_a_client_span_under_its_tool_span(
    otel: OtelCapture, tmp_path: Any
) -> None:
    pytest.importorskip("mcp")
    from agentkit.tools.mcp import McpToolset

    toolset = McpToolset.stdio("time", [str(TIME_SERVER)], cwd=tmp_path)
    toolset.start()
    try:
        trace = Telemetry(agent_id="desk-001").turn(conversation_id="c", message_id="m")
        ok, bad = call_tools(
            toolset,
            trace,
            [("get_current_time", {"timezone": "UTC"}), ("get_current_time", {"timezone": "X/Y"})],
        )
        trace.end()
    finally:
        toolset.close()
    assert ok.ok and not bad.ok
    names = [r.name for r in trace.spans]
    assert names == [
        "invoke_agent desk-001",
        "execute_tool get_current_time",
        "tools/call get_current_time",
        "execute_tool get_current_time",
        "tools/call get_current_time",
    ]
    _root, tool, call, failed_tool, failed_call = trace.spans
    assert call.parent_id == tool.span_id and failed_call.parent_id == failed_tool.span_id
    assert call.kind == "client"
    assert call.attributes["mcp.method.name"] == "tools/call"
    assert call.attributes["gen_ai.tool.name"] == "get_current_time"
    assert call.attributes["network.transport"] == "pipe"
    assert call.attributes["mcp.protocol.version"]
    assert call.status == "ok"
    assert failed_call.status == "error" and failed_call.error_type == "tool_error"
    # with an SDK, the mcp package's own client span nests under agentkit's
    exported = {hex_id(s.context.span_id, 16): s for s in otel.spans()}
    library = [s for s in exported.values() if s.name.startswith("MCP send tools/call")]
    assert library
    assert {hex_id(s.parent.span_id, 16) for s in library if s.parent} <= {
        call.span_id,
        failed_call.span_id,
    }


def test_the_trace_context_reaches_the_mcp_server(otel: OtelCapture, tmp_path: Any) -> None:
    pytest.importorskip("mcp")
    from agentkit.tools.mcp import McpToolset

    server = [sys.executable, str(NOTES_SERVER), "stdio", "--trace"]
    toolset = McpToolset.stdio("notes", server, cwd=tmp_path)
    toolset.start()
    try:
        trace = Telemetry(agent_id="a").turn(conversation_id="c", message_id="m")
        (result,) = call_tools(toolset, trace, [("trace_context", {})])
        trace.end()
    finally:
        toolset.close()
    assert result.ok, result.text
    received = result.output
    assert isinstance(received, dict)
    parsed = parse_traceparent(received["traceparent"])
    assert parsed is not None
    call = next(r for r in trace.spans if r.name == "tools/call trace_context")
    assert parsed[0] == call.trace_id
    # the server's parent: agentkit's span, or the mcp package's span under it (with an SDK)
    library = {hex_id(s.context.span_id, 16): s for s in otel.spans()}
    if parsed[1] != call.span_id:
        parent = library[parsed[1]].parent
        assert parent is not None and hex_id(parent.span_id, 16) == call.span_id


NO_SDK_MCP = """
import asyncio, json, sys
from agentkit.telemetry import Telemetry, parse_traceparent
from agentkit.tools import ToolRegistry
from agentkit.tools.mcp import McpToolset

toolset = McpToolset.stdio("notes", [sys.executable, sys.argv[1], "stdio", "--trace"])
toolset.start()
trace = Telemetry(agent_id="a").turn(conversation_id="c", message_id="m")
with trace.tool_call(None, name="trace_context") as span, span.activate():
    result = asyncio.run(ToolRegistry(toolset.tools()).arun("trace_context", {}))
toolset.close()
trace.end()
call = trace.spans[-1]
print(json.dumps([result.output, call.name, call.trace_id, call.span_id]))
"""


def test_without_opentelemetry_the_server_gets_agentkits_own_span(tmp_path: Any) -> None:
    pytest.importorskip("mcp")
    output, name, trace_id, span_id = json.loads(
        run_python(NO_SDK_MCP.replace("sys.argv[1]", repr(str(NOTES_SERVER))))
    )
    assert name == "tools/call trace_context"
    assert parse_traceparent(output["traceparent"]) == (trace_id, span_id, True)


def test_an_mcp_call_outside_any_span_makes_none(tmp_path: Any) -> None:
    pytest.importorskip("mcp")
    import asyncio

    from agentkit.tools import ToolRegistry
    from agentkit.tools.mcp import McpToolset

    toolset = McpToolset.stdio("notes", [sys.executable, str(NOTES_SERVER), "stdio"], cwd=tmp_path)
    toolset.start()
    try:
        result = asyncio.run(ToolRegistry(toolset.tools()).arun("list_notes", {}))
    finally:
        toolset.close()
    assert result.ok


# -- memory: compression and the incremental update as update_memory spans ------------------------


def _window(count: int) -> list[Any]:
    from datetime import UTC, datetime

    from agentkit.types import Message

    return [
        Message.model_validate({
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"MSG{i:02d} " + "x" * 300,
            "message_id": "msg-1",
            "timestamp": datetime(2026, 1, 1, tzinfo=UTC),
        })
        for i in range(count)
    ]  # fmt: skip


@pytest.mark.parametrize("reply", ['{"current_goal": "ship it"}', "not json"])
def test_compression_is_an_update_memory_span(no_otel: None, reply: str) -> None:
    import asyncio

    from agentkit.calls.tracer import CallTracer
    from agentkit.config import CompressionConfig
    from agentkit.memory import TaskState, estimate_tokens, maybe_compress
    from agentkit.models.scripted import ScriptedModel
    from agentkit.planning.upkeep import summarizer

    trace = Telemetry(agent_id="a").turn(
        conversation_id="c", message_id="m", provider="scripted", model="scripted:inline"
    )
    model = ScriptedModel({"summarize": [reply]})
    outcome = asyncio.run(
        maybe_compress(
            _window(20),
            TaskState(),
            model,
            CompressionConfig(),
            estimate_tokens,
            parent=trace.root,
            summarize=summarizer(CallTracer.standalone(model, trace=trace), model),
        )
    )
    trace.end()
    assert outcome is not None
    _root, memory, call = trace.spans
    assert memory.name == "update_memory task_state" and memory.parent_id == trace.root.span_id
    assert memory.attributes["gen_ai.operation.name"] == "update_memory"
    assert memory.attributes["gen_ai.memory.update.strategy"] == "archive"
    assert memory.attributes["gen_ai.provider.name"] == "scripted"
    assert call.name == "chat scripted:inline" and call.parent_id == memory.span_id
    assert call.attributes["agentkit.purpose"] == "summarize"
    if outcome.compressed:
        assert memory.status == "ok"
        assert memory.attributes["agentkit.compression.messages_before"] == 20
        assert memory.attributes["agentkit.compression.messages_after"] == 12
    else:
        assert memory.status == call.status == "error"
        assert memory.error_type == "StructuredOutputError"


def test_the_incremental_update_is_an_update_memory_span(no_otel: None) -> None:
    import asyncio

    from agentkit.calls.tracer import CallTracer
    from agentkit.memory import TaskState
    from agentkit.memory.compression import update_task_state
    from agentkit.models.scripted import ScriptedModel
    from agentkit.planning.upkeep import summarizer

    trace = Telemetry(agent_id="a").turn(conversation_id="c", message_id="m")
    model = ScriptedModel({"summarize": ['{"current_goal": "g"}']})
    summarize = summarizer(CallTracer.standalone(model, trace=trace), model)
    state = asyncio.run(
        update_task_state(_window(4), TaskState(), model, 4, parent=trace.root, summarize=summarize)
    )
    trace.end()
    assert isinstance(state, TaskState)
    assert [r.name for r in trace.spans][1:] == ["update_memory task_state", "chat scripted:inline"]
    assert trace.spans[1].attributes["gen_ai.memory.update.strategy"] == "update"


def test_untraced_compression_makes_no_span(no_otel: None) -> None:
    import asyncio

    from agentkit.calls.tracer import CallTracer
    from agentkit.config import CompressionConfig
    from agentkit.memory import TaskState, estimate_tokens, maybe_compress
    from agentkit.models.scripted import ScriptedModel
    from agentkit.planning.upkeep import summarizer

    model = ScriptedModel({"summarize": ['{"current_goal": "g"}']})
    outcome = asyncio.run(
        maybe_compress(
            _window(20),
            TaskState(),
            model,
            CompressionConfig(),
            estimate_tokens,
            summarize=summarizer(CallTracer.standalone(model), model),
        )
    )
    assert outcome is not None and outcome.compressed


# -- eval: the sweep as one trace -----------------------------------------------------------------

EVAL_SCENARIOS = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "scenarios"


def test_an_eval_sweep_is_a_workflow_span_whose_runs_are_children(
    otel: OtelCapture, data_dir: Any
) -> None:
    pytest.importorskip("pandas")
    from agentkit.eval import run_eval

    files = [
        EVAL_SCENARIOS / "chat_sessions_en.yaml",
        EVAL_SCENARIOS / "desk_status_command_en.yaml",
    ]
    frame = run_eval(files, model="scripted", data_dir=data_dir, progress=False)
    assert len(frame) == 2 and frame["passed"].all()

    (sweep,) = otel.by_name("invoke_workflow agentkit.eval")
    assert sweep.parent is None
    assert sweep.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert sweep.attributes["gen_ai.workflow.name"] == "agentkit.eval"
    assert sweep.attributes["agentkit.eval.runs"] == 2
    assert sweep.attributes["agentkit.eval.passed"] == 2
    trace_id = hex_id(sweep.context.trace_id, 32)
    runs = [s for s in otel.spans() if s.name.startswith("eval_run ")]
    assert sorted(s.name for s in runs) == [
        "eval_run chat_sessions_en",
        "eval_run desk_status_command_en",
    ]
    for run in runs:
        assert run.parent is not None and run.parent.span_id == sweep.context.span_id
        results = [e for e in run.events if e.name == "gen_ai.evaluation.result"]
        by_name = {e.attributes["gen_ai.evaluation.name"]: e.attributes for e in results}
        assert by_name["passed"]["gen_ai.evaluation.score.value"] == 1.0
        assert by_name["passed"]["gen_ai.evaluation.score.label"] == "pass"
    # each row names its run: the sweep's trace, the run's span
    assert set(frame["trace_id"]) == {trace_id}
    assert set(frame["span_id"]) == {hex_id(run.context.span_id, 16) for run in runs}
    # the turns (once the agent traces them) are children of their run, in the same trace
    run_ids = {run.context.span_id for run in runs}
    for turn in otel.spans():
        if turn.name.startswith("invoke_agent "):
            assert turn.parent is not None and turn.parent.span_id in run_ids
            assert turn.context.trace_id == sweep.context.trace_id


def test_a_failed_run_is_a_failed_evaluation(otel: OtelCapture, data_dir: Any) -> None:
    pytest.importorskip("pandas")
    from agentkit.eval import run_eval

    frame = run_eval(
        EVAL_SCENARIOS,
        model="scripted",
        tags=["compression"],
        sets={"compression.token_threshold": 2000},  # too high: nothing is compressed
        data_dir=data_dir,
        progress=False,
    )
    assert not frame["passed"].any()
    for record in frame.to_dict("records"):
        (run,) = [s for s in otel.spans() if hex_id(s.context.span_id, 16) == record["span_id"]]
        assert run.attributes["agentkit.eval.param.compression.token_threshold"] == 2000
        events = {
            e.attributes["gen_ai.evaluation.name"]: e.attributes
            for e in run.events
            if e.name == "gen_ai.evaluation.result"
        }
        assert events["passed"]["gen_ai.evaluation.score.label"] == "fail"
        assert "compressed FAILED" in events["passed"]["gen_ai.evaluation.explanation"]
        assert events["compressed"]["gen_ai.evaluation.score.value"] == 0.0
    (sweep,) = otel.by_name("invoke_workflow agentkit.eval")
    assert sweep.attributes["agentkit.eval.passed"] == 0
