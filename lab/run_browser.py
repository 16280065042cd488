"""``RunBrowser``: a sweep's results table, filtered, and the selected run's transcript.

A thin view over a results table (``run_eval``'s or ``load_results``'s): the filters
(scenario, point, outcome, tag, scanner finding, label) narrow the table, the picker selects
a run, and its transcript is drawn by :func:`agentkit.eval.report.transcript_html` from its
:func:`~agentkit.eval.timeline.timeline` — the same fragment the HTML report holds: user turns,
answers, plan steps with their status, tool calls with arguments and results (secrets masked),
consent requests and their decisions, compressions, errors, and the notes given for the run
(judge verdicts, findings beside their event, the human label). When the sweep's spans are
given (:class:`~agentkit.telemetry.SpanRecord` values), "Show spans" opens the run's
subtree in a :class:`~lab.trace_view.TraceView`. The filtering is plain functions
(:func:`filter_rows`, :func:`run_spans`), testable without a kernel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

import ipywidgets as widgets
import pandas as pd
from agentkit.eval import load_transcripts
from agentkit.eval.notes import Note
from agentkit.eval.report import style, transcript_html
from agentkit.eval.results import param_columns
from agentkit.eval.timeline import Timeline, timeline
from agentkit.eval.transcript import TRANSCRIPT_COLUMN, Transcript
from agentkit.telemetry import SpanRecord

from lab._html import frame_html, notice_html
from lab.trace_view import TraceView

__all__ = ["ANY", "RunBrowser", "RunFilters", "filter_rows", "run_frame", "run_spans", "tags_of"]

#: the filters' "no filter" choice
ANY = "(any)"
_UNLABELLED = "(unlabelled)"
_NO_FINDING = "(none)"


@dataclass(frozen=True)
class RunFilters:
    """What the table is narrowed to (:data:`ANY`: not narrowed)."""

    scenario: str = ANY
    point: str = ANY
    outcome: str = ANY
    tag: str = ANY
    finding: str = ANY
    label: str = ANY


def tags_of(record: Mapping[str, object]) -> list[str]:
    return [tag.strip() for tag in str(record.get("tags") or "").split(",") if tag.strip()]


def _outcome(record: Mapping[str, object]) -> str:
    outcome = record.get("outcome")
    if isinstance(outcome, str) and outcome:
        return outcome
    return "passed" if record.get("passed") else "failed"


def filter_rows(
    results: pd.DataFrame,
    filters: RunFilters,
    notes: Mapping[int, Sequence[Note]] | None = None,
) -> list[int]:
    """The row positions of *results* that pass *filters*; a finding filter keeps the runs
    with a finding of that kind (``(none)``: without any), a label filter those labelled
    so (``(unlabelled)``: not labelled)."""
    chosen = []
    for position, raw in enumerate(results.to_dict("records")):
        record = {str(key): value for key, value in raw.items()}
        said = (notes or {}).get(position, ())
        findings = {note.title for note in said if note.kind == "finding"}
        labels = {note.verdict for note in said if note.kind == "label"}
        checks = [
            filters.scenario in (ANY, record.get("scenario")),
            filters.point in (ANY, str(record.get("point"))),
            filters.outcome in (ANY, _outcome(record)),
            filters.tag == ANY or filters.tag in tags_of(record),
            filters.finding == ANY
            or (filters.finding == _NO_FINDING and not findings)
            or filters.finding in findings,
            filters.label == ANY
            or (filters.label == _UNLABELLED and not labels)
            or filters.label in labels,
        ]
        if all(checks):
            chosen.append(position)
    return chosen


def run_frame(results: pd.DataFrame, rows: Sequence[int]) -> pd.DataFrame:
    """The table the browser shows for *rows*: which run, its outcome and why."""
    params = [c for c in param_columns(results) if c in results]
    columns = ["scenario", *(["point"] if "point" in results else []), *params]
    columns += [c for c in ("outcome", "checks_failed", "model_calls") if c in results]
    frame = results.iloc[list(rows)][columns].copy()
    why = []
    for raw in results.iloc[list(rows)].to_dict("records"):
        text = ""
        for column in ("error", "budget_reason", "failures"):
            value = raw.get(column)
            if isinstance(value, str) and value:
                text = value
                break
        why.append(text)
    frame["why"] = why
    frame.insert(0, "#", list(rows))
    return frame


def run_spans(spans: Sequence[SpanRecord], trace_id: str, span_id: str) -> list[SpanRecord]:
    """The spans of one run: its ``eval_run`` span *span_id* in trace *trace_id* and every
    span under it (none: the run's spans were not kept)."""
    mine = [span for span in spans if span.trace_id == trace_id]
    children: dict[str | None, list[SpanRecord]] = {}
    for span in mine:
        children.setdefault(span.parent_id, []).append(span)
    found = [span for span in mine if span.span_id == span_id]
    queue = list(found)
    while queue:
        span = queue.pop()
        below = children.get(span.span_id, [])
        found += below
        queue += below
    return sorted(found, key=lambda span: span.start_ns)


def _label(record: Mapping[str, Any], position: int) -> str:
    point = f" · p{record.get('point')}" if "point" in record else ""
    return f"#{position} {record.get('scenario')}{point} · {_outcome(record)}"


class RunBrowser(widgets.VBox):  # type: ignore[misc]  # ipywidgets is untyped
    """Browse a results table run by run (see the module docstring).

    *notes*: judge verdicts, scanner findings and human labels by row position;
    *spans*: the sweep's spans, when they were kept."""

    def __init__(
        self,
        results: pd.DataFrame,
        *,
        notes: Mapping[int, Sequence[Note]] | None = None,
        spans: Sequence[SpanRecord] = (),
    ) -> None:
        self.results = results.reset_index(drop=True)
        self.notes = {int(key): list(value) for key, value in (notes or {}).items()}
        self.spans = list(spans)
        self.transcripts: list[Transcript | None] = (
            load_transcripts(self.results)
            if TRANSCRIPT_COLUMN in self.results
            else [None] * len(self.results)
        )
        self.rows: list[int] = []
        self.selected: int | None = None
        self.view: Timeline | None = None
        self._syncing = False
        records = [{str(k): v for k, v in r.items()} for r in self.results.to_dict("records")]
        wide = {"description_width": "initial"}

        def choice(description: str, values: Sequence[str]) -> widgets.Dropdown:
            box = widgets.Dropdown(
                options=[ANY, *values], value=ANY, description=description, style=wide
            )
            box.layout.width = "auto"
            box.observe(self._on_filter, names="value")
            return box

        findings = sorted(
            {n.title for ns in self.notes.values() for n in ns if n.kind == "finding"}
        )
        labels = sorted({n.verdict for ns in self.notes.values() for n in ns if n.kind == "label"})
        self.scenario_choice = choice("scenario", sorted({str(r["scenario"]) for r in records}))
        self.point_choice = choice(
            "point", [str(p) for p in sorted({r.get("point", 0) for r in records})]
        )
        self.outcome_choice = choice("outcome", sorted({_outcome(r) for r in records}))
        self.tag_choice = choice("tag", sorted({t for r in records for t in tags_of(r)}))
        self.finding_choice = choice("finding", [_NO_FINDING, *findings])
        self.label_choice = choice("label", [_UNLABELLED, *labels])
        self.table = widgets.HTML()
        self.table.add_class("agentkit-run-table")
        self.table.layout = widgets.Layout(max_height="240px", overflow="auto", width="100%")
        self.picker = widgets.Select(description="run", rows=6, style=wide)
        self.picker.layout.width = "100%"
        self.picker.add_class("agentkit-run-picker")
        self.picker.observe(self._on_pick, names="value")
        self.transcript = widgets.HTML()
        self.transcript.add_class("agentkit-run-transcript")
        self.transcript.layout = widgets.Layout(width="100%", max_height="560px", overflow="auto")
        self.spans_note = widgets.HTML()
        self.spans_button = widgets.Button(description="Show spans", icon="stream")
        self.spans_button.on_click(lambda _: self.show_spans())
        self.trace = widgets.VBox()
        self.notice = widgets.HTML()
        missing = sum(1 for item in self.transcripts if item is None)
        if missing:
            why = (
                "this table has no transcript column (written before transcripts were kept)"
                if TRANSCRIPT_COLUMN not in self.results
                else "runs that did not start, or rows written before transcripts were kept"
            )
            self.notice.value = notice_html(
                f"{missing} of {len(self.results)} runs kept no transcript ({why}): their "
                "turns cannot be shown; the table still can",
                "warn",
            )
        filters = widgets.HBox(
            [
                self.scenario_choice,
                self.point_choice,
                self.outcome_choice,
                self.tag_choice,
                self.finding_choice,
                self.label_choice,
            ],
            layout=widgets.Layout(flex_flow="row wrap"),
        )
        super().__init__(
            [
                widgets.HTML(f"<style>{style()}</style><b>Runs</b> ({len(self.results)})"),
                filters,
                self.table,
                self.picker,
                self.notice,
                self.transcript,
                widgets.HBox([self.spans_button, self.spans_note]),
                self.trace,
            ],
            layout=widgets.Layout(width="100%"),
        )
        self.add_class("agentkit-run-browser")
        self.refresh()

    # -- state -------------------------------------------------------------------------------

    @property
    def filters(self) -> RunFilters:
        return RunFilters(
            scenario=self.scenario_choice.value,
            point=self.point_choice.value,
            outcome=self.outcome_choice.value,
            tag=self.tag_choice.value,
            finding=self.finding_choice.value,
            label=self.label_choice.value,
        )

    def refresh(self) -> None:
        """Apply the filters: the table and the picker show the runs that pass them."""
        self.rows = filter_rows(self.results, self.filters, self.notes)
        self.table.value = frame_html(
            run_frame(self.results, self.rows),
            empty="No run matches these filters.",
            css_class="agentkit-run-rows",
        )
        records = [{str(k): v for k, v in r.items()} for r in self.results.to_dict("records")]
        options = [(_label(records[row], row), row) for row in self.rows]
        current = self.selected
        self._syncing = True
        try:
            self.picker.options = options
            self.picker.value = (
                current if current in self.rows else (self.rows[0] if self.rows else None)
            )
        finally:
            self._syncing = False
        self.select(self.picker.value)

    def select(self, row: int | None) -> None:
        """Show run *row* (its position in the table); None: no run."""
        self.selected = row
        self.trace.children = ()
        if row is None:
            self.view = None
            self.transcript.value = "<i>No run selected.</i>"
            self.spans_note.value = ""
            self.spans_button.disabled = True
            return
        if self.picker.value != row and row in self.rows:
            self._syncing = True
            try:
                self.picker.value = row
            finally:
                self._syncing = False
        record = self.results.iloc[row]
        self.view = timeline(self.transcripts[row], run=f"{record['scenario']} (row {row})")
        self.transcript.value = transcript_html(self.view, notes=self.notes.get(row, ()))
        found = self._run_spans(row)
        self.spans_button.disabled = not found
        if found:
            self.spans_note.value = f"<small>{len(found)} spans kept for this run</small>"
        else:
            trace = str(record.get("trace_id") or "") if "trace_id" in record else ""
            self.spans_note.value = (
                "<small>"
                + escape(
                    f"spans not kept for this run (trace {trace or '-'}): pass the sweep's spans "
                    "as spans=… to open them here"
                )
                + "</small>"
            )

    def _run_spans(self, row: int) -> list[SpanRecord]:
        record = self.results.iloc[row]
        trace, span = str(record.get("trace_id") or ""), str(record.get("span_id") or "")
        if not self.spans or not trace or not span:
            return []
        return run_spans(self.spans, trace, span)

    def show_spans(self) -> TraceView | None:
        """Open the selected run's spans in a TraceView below (None: none kept)."""
        if self.selected is None:
            return None
        found = self._run_spans(self.selected)
        if not found:
            return None
        view = TraceView(found, title=f"run {self.results.iloc[self.selected]['scenario']}")
        self.trace.children = (view,)
        return view

    def _on_filter(self, _: dict[str, Any]) -> None:
        self.refresh()

    def _on_pick(self, change: dict[str, Any]) -> None:
        if not self._syncing:
            self.select(change["new"])
