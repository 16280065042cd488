"""The pass-rate interval plot as inline SVG: no script, no font or file fetched."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

__all__ = ["Interval", "interval_svg"]

_ROW = 26
#: the label column's least width, and the width a label's character takes at most
_LABEL = 260
_CHAR = 7
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


def _x(value: float, label: int = _LABEL) -> float:
    return label + _PAD + max(0.0, min(1.0, value)) * _PLOT


def interval_svg(rows: Sequence[Interval], *, title: str = "pass rate, 95% Wilson interval") -> str:
    """One line per variant: its whole label (the label column is as wide as the longest),
    the interval as a bar, the rate as a dot, ``p/n``."""
    label_width = max([_LABEL, *(_CHAR * len(row.label) + _PAD for row in rows)])

    def x(value: float) -> float:
        return _x(value, label_width)

    height = _PAD * 2 + 24 + _ROW * max(len(rows), 1) + 18
    width = label_width + _PLOT + _PAD * 2 + 70
    parts = [
        f'<svg class="agentkit-intervals" xmlns="http://www.w3.org/2000/svg" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}">',
        f'<text x="{_PAD}" y="{_PAD + 10}" class="svg-title">{escape(title)}</text>',
    ]
    top = _PAD + 24
    bottom = top + _ROW * max(len(rows), 1)
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        at = x(tick)
        parts.append(
            f'<line x1="{at:.1f}" y1="{top - 4}" x2="{at:.1f}" y2="{bottom}" class="svg-grid"/>'
            f'<text x="{at:.1f}" y="{bottom + 14}" text-anchor="middle" class="svg-tick">'
            f"{tick:g}</text>"
        )
    for number, row in enumerate(rows):
        y = top + _ROW * number + _ROW / 2
        parts.append(
            f'<text x="{label_width}" y="{y + 4:.1f}" text-anchor="end" class="svg-label">'
            f"<title>{escape(row.label)}</title>{escape(row.label)}</text>"
        )
        if not row.runs:
            parts.append(f'<text x="{x(0):.1f}" y="{y + 4:.1f}" class="svg-tick">no runs</text>')
            continue
        parts.append(
            f'<line x1="{x(row.low):.1f}" y1="{y:.1f}" x2="{x(row.high):.1f}" y2="{y:.1f}" '
            f'class="svg-bar"/>'
            f'<circle cx="{x(row.rate):.1f}" cy="{y:.1f}" r="4.5" class="svg-dot"/>'
            f'<text x="{label_width + _PLOT + _PAD * 2 + 4}" y="{y + 4:.1f}" class="svg-count">'
            f"{row.passed}/{row.runs}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)
