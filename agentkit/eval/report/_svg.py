"""The pass-rate interval plot as inline SVG: no script, no font or file fetched."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

__all__ = ["Interval", "interval_svg"]

_ROW = 26
_LABEL = 260
_PLOT = 360
_PAD = 12


@dataclass(frozen=True)
class Interval:
    """One variant's pass rate and its 95% interval (NaN: no runs)."""

    label: str
    passed: int
    runs: int
    low: float
    high: float

    @property
    def rate(self) -> float:
        return self.passed / self.runs if self.runs else math.nan


def _x(value: float) -> float:
    return _LABEL + _PAD + max(0.0, min(1.0, value)) * _PLOT


def interval_svg(rows: Sequence[Interval], *, title: str = "pass rate, 95% Wilson interval") -> str:
    """One line per variant: its label, the interval as a bar, the rate as a dot, ``p/n``."""
    height = _PAD * 2 + 24 + _ROW * max(len(rows), 1) + 18
    width = _LABEL + _PLOT + _PAD * 2 + 70
    parts = [
        f'<svg class="agentkit-intervals" xmlns="http://www.w3.org/2000/svg" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}">',
        f'<text x="{_PAD}" y="{_PAD + 10}" class="svg-title">{escape(title)}</text>',
    ]
    top = _PAD + 24
    bottom = top + _ROW * max(len(rows), 1)
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        x = _x(tick)
        parts.append(
            f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{bottom}" class="svg-grid"/>'
            f'<text x="{x:.1f}" y="{bottom + 14}" text-anchor="middle" class="svg-tick">'
            f"{tick:g}</text>"
        )
    for number, row in enumerate(rows):
        y = top + _ROW * number + _ROW / 2
        label = row.label if len(row.label) <= 40 else row.label[:39] + "…"
        parts.append(
            f'<text x="{_LABEL}" y="{y + 4:.1f}" text-anchor="end" class="svg-label">'
            f"<title>{escape(row.label)}</title>{escape(label)}</text>"
        )
        if not row.runs:
            parts.append(f'<text x="{_x(0):.1f}" y="{y + 4:.1f}" class="svg-tick">no runs</text>')
            continue
        parts.append(
            f'<line x1="{_x(row.low):.1f}" y1="{y:.1f}" x2="{_x(row.high):.1f}" y2="{y:.1f}" '
            f'class="svg-bar"/>'
            f'<circle cx="{_x(row.rate):.1f}" cy="{y:.1f}" r="4.5" class="svg-dot"/>'
            f'<text x="{_LABEL + _PLOT + _PAD * 2 + 4}" y="{y + 4:.1f}" class="svg-count">'
            f"{row.passed}/{row.runs}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)
