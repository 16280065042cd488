"""LabelView: label the runs of a results table by hand, one transcript at a time.

It shows one run's transcript (what the user said, the agent's questions, tool calls and
answers), Pass and Fail buttons (or a score, for a 1-N scale) and a note; a label is kept
beside the results (:func:`agentkit.eval.labels.add_label`) and the view moves on to the next
unlabelled run. The rendering is plain functions (:func:`transcript_html`,
:func:`next_unlabelled`), testable without a kernel; the widget holds no state beyond the run
on screen: the labels are read back from their file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path

import ipywidgets as widgets
from agentkit.errors import UsageError
from agentkit.eval import Transcript, load_results, load_transcripts, run_ids
from agentkit.eval.labels import Label, LabelValue, add_label, load_labels
from agentkit.eval.reading import read_run
from agentkit.events import (
    AskUserEvent,
    ErrorEvent,
    ResultEvent,
    ToolCallEvent,
    ToolResultEvent,
)

from lab._html import message_html, notice_html

__all__ = ["LabelView", "next_unlabelled", "transcript_html"]

_ARGS_CHARS = 160
_OUTPUT_CHARS = 240


def _cut(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def transcript_html(transcript: Transcript | None) -> str:
    """One run as chat bubbles: each turn's user message (or decision), the agent's tool
    calls and their results, its questions, errors and answer (all text escaped)."""
    if transcript is None:
        return "<i>this run kept no transcript</i>"
    parts = [f"<div><b>{escape(transcript.run)}</b> · {escape(transcript.scenario)}</div>"]
    for read in read_run(transcript).turns:
        turn = read.turn
        said = turn.said or (f"[{turn.decision}]" if turn.decision else "")
        parts.append(message_html("user", f"{turn.number}. {said}"))
        for moment in read.moments:
            event = moment.event
            if isinstance(event, ToolCallEvent):
                args = _cut(json.dumps(event.arguments, ensure_ascii=False), _ARGS_CHARS)
                parts.append(message_html("tool", f"→ {event.name} {args}"))
            elif isinstance(event, ToolResultEvent):
                status = "ok" if event.ok else "FAILED"
                output = _cut(event.output, _OUTPUT_CHARS)
                parts.append(message_html("tool", f"← {event.name} {status}: {output}"))
            elif isinstance(event, AskUserEvent):
                what = "consent" if event.kind == "confirmation" else "question"
                parts.append(message_html("assistant", f"[{what}] {event.question}"))
            elif isinstance(event, ErrorEvent):
                parts.append(message_html("system", f"error {event.code}: {event.message}"))
            elif isinstance(event, ResultEvent) and event.text:
                parts.append(message_html("assistant", f"[{event.status}] {event.text}"))
    if transcript.final is not None:
        parts.append(f"<div><i>final status: {escape(transcript.final.status)}</i></div>")
    return "".join(parts)


def next_unlabelled(
    runs: Sequence[str], labels: Mapping[str, Label], after: str | None = None
) -> str | None:
    """The first run without a label after *after* (wrapping round; from the start when
    *after* is None), or None when every run is labelled."""
    start = runs.index(after) + 1 if after in runs else 0
    for run in [*runs[start:], *runs[:start]]:
        if run not in labels:
            return run
    return None


class LabelView(widgets.VBox):  # type: ignore[misc]  # ipywidgets is untyped
    """Label the runs of the results table *results* (see the module docstring). *scale*:
    label with a score 1…N instead of Pass/Fail; *who*: the labeller's name."""

    def __init__(
        self, results: Path | str, *, scale: int | None = None, who: str | None = None
    ) -> None:
        self.results = Path(results)
        self.who = who
        self.scale = scale
        self.table = load_results(self.results)
        self.runs = run_ids(self.table)
        self.transcripts = dict(zip(self.runs, load_transcripts(self.table), strict=True))
        self.run: str | None = None
        self.header = widgets.HTML()
        self.body = widgets.HTML()
        self.note = widgets.Text(placeholder="note (why)", description="Note")
        self.status = widgets.HTML()
        self.pass_button = widgets.Button(description="Pass", button_style="success")
        self.fail_button = widgets.Button(description="Fail", button_style="danger")
        self.score = widgets.BoundedIntText(
            value=scale or 1, min=1, max=scale or 1, description="Score"
        )
        self.score_button = widgets.Button(description="Label score")
        self.skip_button = widgets.Button(description="Skip")
        self.pass_button.on_click(lambda _b: self.label("pass"))
        self.fail_button.on_click(lambda _b: self.label("fail"))
        self.score_button.on_click(lambda _b: self.label(float(self.score.value)))
        self.skip_button.on_click(lambda _b: self.skip())
        choices = [self.score, self.score_button] if scale else [self.pass_button, self.fail_button]
        super().__init__(
            [
                self.header,
                self.body,
                self.note,
                widgets.HBox([*choices, self.skip_button]),
                self.status,
            ]
        )
        self.show(next_unlabelled(self.runs, self.labels()))

    def labels(self) -> dict[str, Label]:
        """The labels kept beside the table now."""
        return load_labels(self.results)

    def show(self, run: str | None) -> None:
        """Show the run *run* (None: every run is labelled)."""
        labels = self.labels()
        self.run = run
        done = sum(1 for item in self.runs if item in labels)
        progress = f"{done} of {len(self.runs)} runs labelled"
        if run is None:
            self.header.value = f"<b>{escape(progress)}</b>: nothing left to label"
            self.body.value = ""
            return
        existing = labels.get(run)
        was = f" · labelled {existing.verdict}" if existing else ""
        self.header.value = f"<b>{escape(run)}</b> · {escape(progress)}{escape(was)}"
        self.body.value = transcript_html(self.transcripts.get(run))
        self.note.value = existing.note if existing else ""

    def label(self, value: LabelValue) -> Label | None:
        """Label the run on screen with *value* and the note, then show the next unlabelled
        run (a refused label: the reason, and the run stays)."""
        if self.run is None:
            return None
        try:
            made = add_label(
                self.results, self.run, value, note=self.note.value, who=self.who, table=self.table
            )
        except UsageError as error:
            self.status.value = notice_html(str(error), "error")
            return None
        self.status.value = notice_html(f"labelled {made.run} {made.verdict}", "ok")
        self.note.value = ""
        self.show(next_unlabelled(self.runs, self.labels(), after=made.run))
        return made

    def skip(self) -> None:
        """Show the next unlabelled run without labelling this one."""
        self.show(next_unlabelled(self.runs, self.labels(), after=self.run))
