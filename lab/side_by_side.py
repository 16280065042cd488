"""``SideBySide``: two variants' paired runs, flips first, and a pair's transcripts aligned.

A thin view over :func:`agentkit.eval.pairs.pair_runs` (two results tables, or two points of
one sweep: :meth:`SideBySide.from_points`): on top, McNemar's test and the bootstrap interval
of :func:`agentkit.eval.compare.compare`; then the pairs — broke, fixed, then the rest — and,
for the chosen pair, both transcripts turn beside turn with the first divergent step marked
(:func:`agentkit.eval.report.side_by_side_html`, the fragment the HTML report holds).
"""

from __future__ import annotations

from html import escape
from typing import Any

import ipywidgets as widgets
import pandas as pd
from agentkit.eval import load_transcripts
from agentkit.eval.pairs import (
    Divergence,
    PairedRuns,
    RunPair,
    first_divergence,
    pair_runs,
    point_label,
    points,
)
from agentkit.eval.report import side_by_side_html, style
from agentkit.eval.timeline import Timeline, timeline
from agentkit.eval.transcript import TRANSCRIPT_COLUMN, Transcript

from lab._html import frame_html, notice_html

__all__ = ["SideBySide", "pair_label"]

_MARK = {"broke": "✗ broke", "fixed": "✓ fixed", "": "  same"}


def pair_label(pair: RunPair) -> str:
    """The picker's line for *pair*: its flip, then what both runs ran."""
    return f"{_MARK[pair.flip]} · {pair.label}"


def _loaded(frame: pd.DataFrame) -> list[Transcript | None]:
    if TRANSCRIPT_COLUMN not in frame:
        return [None] * len(frame)
    return load_transcripts(frame)


class SideBySide(widgets.VBox):  # type: ignore[misc]  # ipywidgets is untyped
    """Compare results table *a* (A, the baseline) with *b* (B) run by run."""

    def __init__(
        self,
        a: pd.DataFrame,
        b: pd.DataFrame,
        *,
        labels: tuple[str, str] = ("A", "B"),
        flips_only: bool = False,
    ) -> None:
        self.labels = labels
        self.paired: PairedRuns = pair_runs(a, b, labels=labels)
        self._a = _loaded(self.paired.a)
        self._b = _loaded(self.paired.b)
        self.pair: RunPair | None = None
        self.views: tuple[Timeline, Timeline] | None = None
        self.divergence: Divergence | None = None
        result = self.paired.comparison
        self.headline = widgets.HTML(
            f"<style>{style()}</style>"
            f"<b>A</b> = {escape(labels[0])} · <b>B</b> = {escape(labels[1])}"
            f"<br><b>{escape(self.paired.headline())}</b>"
        )
        self.headline.add_class("agentkit-side-headline")
        self.sides = widgets.HTML(frame_html(result.sides, css_class="agentkit-side-sides"))
        self.flips_only = widgets.Checkbox(value=flips_only, description="flips only")
        self.flips_only.observe(lambda _: self.refresh(), names="value")
        self.picker = widgets.Select(description="pair", rows=6)
        self.picker.layout.width = "100%"
        self.picker.add_class("agentkit-side-picker")
        self.picker.observe(self._on_pick, names="value")
        self.notice = widgets.HTML()
        missing = sum(item is None for item in self._a) + sum(item is None for item in self._b)
        if missing:
            self.notice.value = notice_html(
                f"{missing} runs kept no transcript (a table written before transcripts were "
                "kept): their pairs are listed, their turns cannot be shown",
                "warn",
            )
        self.transcripts = widgets.HTML()
        self.transcripts.add_class("agentkit-side-transcripts")
        self.transcripts.layout = widgets.Layout(width="100%", max_height="640px", overflow="auto")
        super().__init__(
            [
                self.headline,
                self.sides,
                self.flips_only,
                self.picker,
                self.notice,
                self.transcripts,
            ],
            layout=widgets.Layout(width="100%"),
        )
        self.add_class("agentkit-side-by-side")
        self.refresh()

    @classmethod
    def from_points(
        cls, results: pd.DataFrame, first: int, second: int, *, flips_only: bool = False
    ) -> SideBySide:
        """Compare two points of one sweep (A: *first*, B: *second*)."""
        a, b = points(results, first, second)
        labels = (point_label(results, first), point_label(results, second))
        return cls(a, b, labels=labels, flips_only=flips_only)

    @property
    def shown(self) -> list[RunPair]:
        """The pairs in the picker, flips first."""
        pairs = self.paired.pairs
        return [pair for pair in pairs if pair.flip] if self.flips_only.value else list(pairs)

    def refresh(self) -> None:
        shown = self.shown
        self.picker.options = [(pair_label(pair), number) for number, pair in enumerate(shown)]
        self.picker.value = 0 if shown else None
        if not shown:
            self.choose(None)

    def choose(self, pair: RunPair | None) -> None:
        """Show *pair*'s two transcripts side by side (None: nothing chosen)."""
        self.pair = pair
        if pair is None:
            self.views, self.divergence = None, None
            self.transcripts.value = "<i>No pair to show.</i>"
            return
        a = timeline(self._a[pair.row_a], run=f"A row {pair.row_a}")
        b = timeline(self._b[pair.row_b], run=f"B row {pair.row_b}")
        self.views = (a, b)
        self.divergence = None if a.missing or b.missing else first_divergence(a, b)
        self.transcripts.value = side_by_side_html(a, b, labels=self.labels)

    def _on_pick(self, change: dict[str, Any]) -> None:
        number = change["new"]
        shown = self.shown
        self.choose(shown[number] if number is not None and number < len(shown) else None)
