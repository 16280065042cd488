"""``TraceView``: a turn's spans as a waterfall, and the attributes of the one selected.

A thin view over :class:`agentkit.telemetry.SpanRecord` values — what a turn recorded
(``agent.telemetry.recorded(result.trace_id)``, ``turn_records(message_id)``), the
same tree whether or not an OpenTelemetry exporter is configured. Rendering is plain
functions (:func:`span_rows`, :func:`waterfall_html`, :func:`details_html`), testable without a
kernel. In the widget each span is a row that selects it when clicked (a button for the
name, the status, duration and time-line bar beside it) — and a picker does the same from the
keyboard; the view takes the width it is given (at least 640 px) rather than squeezing its
bars. Every name and value is escaped (with content capture on, attributes hold model and user
text).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

import ipywidgets as widgets
from agentkit.telemetry import SpanRecord

__all__ = ["TraceView", "WaterfallRow", "details_html", "span_rows", "waterfall_html"]

_OK = "#2563eb"
_CLIENT = "#7c3aed"
_ERROR = "#b91c1c"
_VALUE_CHARS = 400
_INDENT = "\u2003"  # an em space per level, in the picker's labels


@dataclass(frozen=True)
class WaterfallRow:
    """One span in waterfall order: its depth in the tree and its bar (percent of the
    trace's length from its start)."""

    record: SpanRecord
    depth: int
    offset_pct: float
    width_pct: float


def span_rows(spans: Sequence[SpanRecord]) -> list[WaterfallRow]:
    """*spans* in tree order (children under their parent, siblings by start time); a span
    whose parent is not among them (the trace's root, a caller's span) is a root."""
    if not spans:
        return []
    ids = {span.span_id for span in spans}
    children: dict[str | None, list[SpanRecord]] = {}
    for span in sorted(spans, key=lambda s: (s.start_ns, s.end_ns)):
        parent = span.parent_id if span.parent_id in ids else None
        children.setdefault(parent, []).append(span)
    start = min(span.start_ns for span in spans)
    total = max(max(span.end_ns for span in spans) - start, 1)
    rows: list[WaterfallRow] = []
    seen: set[str] = set()

    def walk(parent: str | None, depth: int) -> None:
        for span in children.get(parent, []):
            if span.span_id in seen:  # a cycle in foreign ids: show each span once
                continue
            seen.add(span.span_id)
            offset = (span.start_ns - start) / total * 100
            width = max((span.end_ns - span.start_ns) / total * 100, 0.4)
            rows.append(WaterfallRow(span, depth, offset, min(width, 100 - offset)))
            walk(span.span_id, depth + 1)

    walk(None, 0)
    return rows


def _duration(record: SpanRecord) -> str:
    ms = record.duration_ms
    return f"{ms:.2f} ms" if ms < 100 else f"{ms:.0f} ms"


def _colour(record: SpanRecord) -> str:
    if record.status == "error":
        return _ERROR
    return _CLIENT if record.kind == "client" else _OK


def waterfall_html(spans: Sequence[SpanRecord], *, selected: str | None = None) -> str:
    """The waterfall: one line per span (indented name, status, duration, a bar placed on the
    trace's time line); the *selected* span id is highlighted."""
    rows = span_rows(spans)
    if not rows:
        return "<i>No spans recorded.</i>"
    total_ms = (max(s.end_ns for s in spans) - min(s.start_ns for s in spans)) / 1e6
    lines = [
        '<table class="agentkit-trace" style="border-collapse: collapse; font-size: 12px; '
        'width: 100%">',
        "<tr><th style='text-align: left'>span</th><th>status</th>"
        "<th style='text-align: right'>duration</th>"
        f"<th style='text-align: left; width: 45%'>0 - {total_ms:.2f} ms</th></tr>",
    ]
    for row in rows:
        record = row.record
        mark = " agentkit-trace-selected" if record.span_id == selected else ""
        background = "background: #fef3c7;" if mark else ""
        status = "error" if record.status == "error" else "ok"
        error = f" ({escape(record.error_type)})" if record.error_type else ""
        lines.append(
            f'<tr class="agentkit-trace-row{mark}" data-span-id="{escape(record.span_id)}" '
            f'style="{background} border-bottom: 1px solid #e5e7eb">'
            f'<td style="padding: 2px 6px 2px {6 + 14 * row.depth}px; white-space: nowrap">'
            f"{escape(record.name)}</td>"
            f'<td style="color: {_colour(record) if status == "error" else "#15803d"}">'
            f"{status}{error}</td>"
            f'<td style="text-align: right; white-space: nowrap">{_duration(record)}</td>'
            '<td><div style="position: relative; height: 10px; background: #f5f5f4">'
            f'<div class="agentkit-trace-bar" style="position: absolute; '
            f"left: {row.offset_pct:.2f}%; width: {row.width_pct:.2f}%; height: 100%; "
            f'background: {_colour(record)}"></div></div></td></tr>'
        )
    lines.append("</table>")
    return "".join(lines)


def _shown(value: object) -> str:
    text = ", ".join(map(str, value)) if isinstance(value, tuple) else str(value)
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 1] + "…"


def details_html(record: SpanRecord | None) -> str:
    """The selected span: its name, kind, ids, timing, status, attributes and events."""
    if record is None:
        return "<i>Select a span to see its attributes.</i>"
    facts = [
        ("kind", record.kind),
        ("status", record.status + (f": {record.status_message}" if record.status_message else "")),
        ("duration", _duration(record)),
        ("trace_id", record.trace_id),
        ("span_id", record.span_id),
        ("parent_id", record.parent_id or "—"),
    ]
    cell = "padding: 2px 8px; vertical-align: top; border-bottom: 1px solid #e5e7eb"
    rows = [
        f'<tr><th style="{cell}; text-align: left">{escape(key)}</th>'
        f'<td style="{cell}; white-space: pre-wrap">{escape(_shown(value))}</td></tr>'
        for key, value in [*facts, *sorted(record.attributes.items())]
    ]
    parts = [
        f'<div class="agentkit-trace-details"><b>{escape(record.name)}</b>',
        f'<table style="border-collapse: collapse; font-size: 12px">{"".join(rows)}</table>',
    ]
    if record.events:
        parts.append("<b>events</b><ul style='margin: 2px 0; font-size: 12px'>")
        for event in record.events:
            offset = (event.time_ns - record.start_ns) / 1e6
            shown = ", ".join(
                f"{escape(key)}={escape(_shown(value))}"
                for key, value in sorted(event.attributes.items())
            )
            parts.append(f"<li>+{offset:.2f} ms <b>{escape(event.name)}</b> {shown}</li>")
        parts.append("</ul>")
    parts.append("</div>")
    return "".join(parts)


_ROW_STYLE = (
    "<style>"
    ".agentkit-trace-row-button { justify-content: flex-start; text-align: left; margin: 0;"
    " font-size: 12px; background: transparent; border: 0; box-shadow: none; }"
    ".agentkit-trace-row-button:hover { background: #eff6ff; }"
    ".agentkit-trace-row-selected .agentkit-trace-row-button { background: #fef3c7; }"
    ".agentkit-trace-row-selected { background: #fef3c7; }"
    ".agentkit-trace-row-widget { border-bottom: 1px solid #e5e7eb; }"
    "</style>"
)


def _bar_html(row: WaterfallRow) -> str:
    record = row.record
    status = "error" if record.status == "error" else "ok"
    error = f" ({escape(record.error_type)})" if record.error_type else ""
    colour = _colour(record) if status == "error" else "#15803d"
    return (
        '<div style="display: flex; align-items: center; gap: 8px; font-size: 12px">'
        f'<span style="width: 7em; color: {colour}">{status}{error}</span>'
        f'<span style="width: 6em; text-align: right; white-space: nowrap">'
        f"{_duration(record)}</span>"
        '<div style="position: relative; height: 10px; background: #f5f5f4; flex: 1">'
        f'<div class="agentkit-trace-bar" style="position: absolute; '
        f"left: {row.offset_pct:.2f}%; width: {row.width_pct:.2f}%; height: 100%; "
        f'background: {_colour(record)}"></div></div></div>'
    )


class TraceView(widgets.VBox):  # type: ignore[misc]  # ipywidgets is untyped
    """A trace's spans as a waterfall; click a span's row (or pick it) to see its attributes
    and events. ``waterfall`` holds the same waterfall as one HTML table (to save or print)."""

    def __init__(self, spans: Sequence[SpanRecord] | None = None, *, title: str = "") -> None:
        self.spans: list[SpanRecord] = []
        self.selected: SpanRecord | None = None
        self.title = widgets.HTML()
        self.waterfall = widgets.HTML()
        self.rows = widgets.VBox(layout=widgets.Layout(width="100%"))
        self.rows.add_class("agentkit-trace-rows")
        self._row_widgets: dict[str, widgets.HBox] = {}
        self.picker = widgets.Dropdown(description="span", layout={"width": "60%"})
        self.picker.add_class("agentkit-trace-picker")
        self.details = widgets.HTML()
        self._title = title
        self.picker.observe(self._picked, names="value")
        super().__init__(
            [widgets.HTML(_ROW_STYLE), self.title, self.rows, self.picker, self.details],
            layout=widgets.Layout(width="100%", min_width="640px", flex="1 1 auto"),
        )
        self.add_class("agentkit-trace-view")
        self.show(spans or [])

    def show(self, spans: Sequence[SpanRecord], *, title: str | None = None) -> None:
        """Show another trace (the root is selected)."""
        if title is not None:
            self._title = title
        rows = span_rows(spans)
        self.spans = [row.record for row in rows]
        label = self._title or (f"trace {self.spans[0].trace_id}" if self.spans else "trace")
        count = len(self.spans)
        self.title.value = (
            f"<b>{escape(label)}</b> <small>({count} span{'s' if count != 1 else ''})</small>"
        )
        self._row_widgets = {row.record.span_id: self._row(row) for row in rows}
        self.rows.children = tuple(self._row_widgets.values()) or (
            widgets.HTML("<i>No spans recorded.</i>"),
        )
        options = [
            (
                f"{_INDENT * row.depth}{row.record.name} · {_duration(row.record)}",
                row.record.span_id,
            )
            for row in rows
        ]
        self.selected = None
        self.picker.options = options
        first = self.spans[0].span_id if self.spans else None
        self.picker.value = first
        self._draw()

    def _row(self, row: WaterfallRow) -> widgets.HBox:
        record = row.record
        button = widgets.Button(
            description=f"{_INDENT * row.depth}{record.name}",
            tooltip=f"select {record.name}",
            layout=widgets.Layout(width="40%"),
        )
        button.add_class("agentkit-trace-row-button")
        button.on_click(lambda _: self.select(record.span_id))
        line = widgets.HBox(
            [button, widgets.HTML(_bar_html(row), layout=widgets.Layout(width="60%"))],
            layout=widgets.Layout(width="100%", align_items="center"),
        )
        line.add_class("agentkit-trace-row-widget")
        return line

    def select(self, span_id: str) -> None:
        """Select the span *span_id* (its attributes are shown, its row highlighted)."""
        if span_id not in {span.span_id for span in self.spans}:
            raise KeyError(f"no span {span_id!r} in this trace")
        self.picker.value = span_id
        self._draw()

    def _picked(self, change: dict[str, object]) -> None:
        self._draw()

    def _draw(self) -> None:
        chosen = self.picker.value
        self.selected = next((s for s in self.spans if s.span_id == chosen), None)
        self.waterfall.value = waterfall_html(self.spans, selected=chosen)
        for span_id, line in self._row_widgets.items():
            if span_id == chosen:
                line.add_class("agentkit-trace-row-selected")
            else:
                line.remove_class("agentkit-trace-row-selected")
        self.details.value = details_html(self.selected)
