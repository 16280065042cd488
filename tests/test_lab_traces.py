"""TraceView: a turn's spans as a waterfall (tree order, bars on the time line, status) and
the selected span's attributes, from agentkit's own span records; all text escaped."""

from __future__ import annotations

from dataclasses import replace

import pytest
from agentkit.telemetry import SpanEvent, SpanRecord, Telemetry
from agentkit.telemetry import _spans as spans_module
from lab import TraceView
from lab.trace_view import details_html, span_rows, waterfall_html


def record(
    name: str,
    span_id: str,
    parent: str | None,
    start_ms: float,
    end_ms: float,
    *,
    status: str = "ok",
    kind: str = "internal",
    **attributes: object,
) -> SpanRecord:
    return SpanRecord(
        name=name,
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
        span_id=span_id,
        parent_id=parent,
        kind=kind,  # type: ignore[arg-type]
        start_ns=int(start_ms * 1e6),
        end_ns=int(end_ms * 1e6),
        status=status,  # type: ignore[arg-type]
        attributes=dict(attributes),  # type: ignore[arg-type]
    )


def turn() -> list[SpanRecord]:
    """Out of order on purpose: rows come in tree order whatever order records are in."""
    return [
        record("execute_tool get_time", "c" * 16, "a" * 16, 6, 8, status="error",
               **{"error.type": "ToolFailedError", "gen_ai.tool.name": "get_time"}),
        record("invoke_agent desk-001", "a" * 16, None, 0, 10,
               **{"gen_ai.agent.id": "desk-001"}),
        record("chat llama", "d" * 16, "b" * 16, 1, 4, kind="client",
               **{"gen_ai.usage.input_tokens": 120}),
        record("plan desk-001", "b" * 16, "a" * 16, 0.5, 5),
    ]  # fmt: skip


def test_rows_are_in_tree_order_with_bars_on_the_time_line() -> None:
    rows = span_rows(turn())
    assert [(r.record.name, r.depth) for r in rows] == [
        ("invoke_agent desk-001", 0),
        ("plan desk-001", 1),
        ("chat llama", 2),
        ("execute_tool get_time", 1),
    ]
    root, _plan, call, tool = rows
    assert (root.offset_pct, root.width_pct) == (0, 100)
    assert (call.offset_pct, call.width_pct) == pytest.approx((10, 30))
    assert tool.offset_pct == pytest.approx(60)
    assert span_rows([]) == []


def test_a_span_whose_parent_is_elsewhere_is_a_root() -> None:
    rows = span_rows([record("eval_run s1", "e" * 16, "f" * 16, 0, 1)])
    assert rows[0].depth == 0


def test_the_waterfall_shows_names_statuses_durations_and_the_selection() -> None:
    html = waterfall_html(turn(), selected="d" * 16)
    assert html.index("invoke_agent desk-001") < html.index("plan desk-001")
    assert html.index("chat llama") < html.index("execute_tool get_time")
    assert "error (ToolFailedError)" in html
    assert "3.00 ms" in html  # the chat call
    assert html.count("agentkit-trace-selected") == 1
    assert 'data-span-id="dddddddddddddddd"' in html
    assert waterfall_html([]) == "<i>No spans recorded.</i>"


def test_the_details_show_attributes_and_events() -> None:
    tool = turn()[0]
    html = details_html(tool)
    assert "execute_tool get_time" in html and "gen_ai.tool.name" in html
    assert "ToolFailedError" in html and tool.trace_id in html
    event = SpanEvent("agentkit.question", 500_000, {"agentkit.question": "Which?"})
    asked = replace(record("invoke_agent a", "a" * 16, None, 0, 1), events=(event,))
    assert "agentkit.question" in details_html(asked)
    assert details_html(None).startswith("<i>")


def test_text_is_escaped() -> None:
    evil = record("<script>alert(1)</script>", "a" * 16, None, 0, 1,
                  **{"gen_ai.input.messages": "<img src=x onerror=alert(1)>"})  # fmt: skip
    assert "<script>" not in waterfall_html([evil])
    assert "<img" not in details_html(evil)


def test_the_widget_selects_a_span(monkeypatch: pytest.MonkeyPatch) -> None:
    view = TraceView(turn(), title="desk turn")
    assert "desk turn" in view.title.value and "4 spans" in view.title.value
    assert view.selected is not None and view.selected.name == "invoke_agent desk-001"
    assert [label.strip("\u2003").split(" · ")[0] for label, _ in view.picker.options] == [
        "invoke_agent desk-001",
        "plan desk-001",
        "chat llama",
        "execute_tool get_time",
    ]
    view.select("c" * 16)
    assert view.selected is not None and view.selected.name == "execute_tool get_time"
    assert "gen_ai.tool.name" in view.details.value
    view.picker.value = "d" * 16  # as a click in the notebook does
    assert "gen_ai.usage.input_tokens" in view.details.value
    with pytest.raises(KeyError):
        view.select("0" * 16)
    view.show([])
    assert view.selected is None and "No spans" in view.waterfall.value


def test_the_widget_shows_what_a_turn_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spans_module, "bridge", lambda: None)
    tel = Telemetry(agent_id="desk-001")
    trace = tel.turn(conversation_id="c", message_id="m")
    with trace.plan() as plan:
        trace.model_call(plan, model="llama", purpose="plan").end()
    trace.tool_call(None, name="get_time").end()
    trace.end()
    view = TraceView(tel.turn_records("m"))
    assert [s.name for s in view.spans] == [
        "invoke_agent desk-001",
        "plan desk-001",
        "chat llama",
        "execute_tool get_time",
    ]


def test_a_click_on_a_row_selects_its_span_and_the_view_takes_the_width() -> None:
    view = TraceView(turn(), title="desk turn")
    names = [line.children[0].description.strip("\u2003") for line in view.rows.children]
    assert names == [
        "invoke_agent desk-001",
        "plan desk-001",
        "chat llama",
        "execute_tool get_time",
    ]
    tool_row = view.rows.children[3]
    tool_row.children[0].click()  # a click on the row's name
    assert view.selected is not None and view.selected.name == "execute_tool get_time"
    assert view.picker.value == view.selected.span_id  # the picker follows
    assert "agentkit-trace-row-selected" in tool_row._dom_classes
    assert "agentkit-trace-row-selected" not in view.rows.children[0]._dom_classes
    assert "gen_ai.tool.name" in view.details.value
    assert view.layout.width == "100%" and view.layout.min_width == "640px"
    view.show([])
    assert "No spans" in view.rows.children[0].value
