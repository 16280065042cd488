"""Two variants run by run: the paired runs of a comparison (flips first), and two runs'
transcripts aligned by turn with the first step where they part.

:func:`pair_runs` pairs two results tables — or two points of one sweep (:func:`points`) —
with :func:`agentkit.eval.compare.compare` (the same pairing, McNemar's test and bootstrap
interval ``agentkit compare`` prints) and lists the pairs in the order a reader wants them:
the runs that broke (passed on A, failed on B), those fixed, then the rest. :func:`align` puts
two :class:`~agentkit.eval.timeline.Timeline` values turn beside turn and marks the first
entry whose :attr:`~agentkit.eval.timeline.Entry.signature` differs (:class:`Divergence`).
The run browser, the side-by-side view and the HTML report all read these values.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from typing import TYPE_CHECKING, Literal

from agentkit.errors import UsageError
from agentkit.eval.compare import Comparison, compare
from agentkit.eval.results import param_columns, require_pandas
from agentkit.eval.stats import DEFAULT_SEED
from agentkit.eval.timeline import Entry, Timeline, TurnView

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "AlignedTurn",
    "Divergence",
    "Flip",
    "PairedRuns",
    "RunPair",
    "align",
    "first_divergence",
    "pair_runs",
    "point_label",
    "points",
]

Flip = Literal["broke", "fixed", ""]
_ORDER = {"broke": 0, "fixed": 1, "": 2}


@dataclass(frozen=True)
class RunPair:
    """Run ``row_a`` of table A and run ``row_b`` of table B (row positions), paired."""

    #: ``scenario [key=value …]``: what the two runs ran
    label: str
    scenario: str
    flip: Flip
    passed_a: bool
    passed_b: bool
    row_a: int
    row_b: int


@dataclass(frozen=True)
class PairedRuns:
    """A comparison and its pairs, flips first (see the module docstring)."""

    comparison: Comparison
    pairs: tuple[RunPair, ...]
    a: pd.DataFrame
    b: pd.DataFrame

    @property
    def flips(self) -> tuple[RunPair, ...]:
        return tuple(pair for pair in self.pairs if pair.flip)

    def headline(self) -> str:
        """One line: the pairs, the difference B - A with its interval, McNemar's p."""
        d = self.comparison.difference.iloc[0]
        pairs = int(d["pairs"])
        if not pairs:
            return "no runs paired"
        return (
            f"{pairs} pairs · B - A = {_signed(d['difference'])} "
            f"[{_signed(d['ci_low'])}, {_signed(d['ci_high'])}] (bootstrap 95%, seed "
            f"{int(d['seed'])}) · McNemar p = {float(d['p_value']):.3g} · "
            f"{sum(p.flip == 'broke' for p in self.pairs)} broke, "
            f"{sum(p.flip == 'fixed' for p in self.pairs)} fixed"
        )


def _signed(value: object) -> str:
    if not isinstance(value, float | int) or math.isnan(value):
        return "-"
    return f"{value:+.3f}"


def point_label(frame: pd.DataFrame, point: int) -> str:
    """``key=value, …`` of *point*'s parameters in *frame* (``point N`` without any)."""
    rows = frame[frame["point"] == point]
    if rows.empty:
        raise UsageError(f"no point {point} in this results table")
    first = rows.iloc[0]
    names = [c for c in param_columns(frame) if c in frame]
    shown = ", ".join(f"{name}={first[name]}" for name in names)
    return shown or f"point {point}"


def points(frame: pd.DataFrame, first: int, second: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The rows of two points of one sweep, as two tables to pair (parameters kept)."""
    require_pandas()
    if first == second:
        raise UsageError(f"compare two different points, not point {first} with itself")
    tables = []
    for point in (first, second):
        point_label(frame, point)  # an unknown point: a clear error
        table = frame[frame["point"] == point].reset_index(drop=True)
        table.attrs = dict(frame.attrs)
        tables.append(table)
    return tables[0], tables[1]


def pair_runs(
    a: pd.DataFrame,
    b: pd.DataFrame,
    *,
    labels: tuple[str, str] = ("A", "B"),
    on: Sequence[str] | None = None,
    seed: int = DEFAULT_SEED,
    resamples: int = 10_000,
) -> PairedRuns:
    """Pair the runs of *a* and *b* (:func:`~agentkit.eval.compare.compare`), flips first."""
    result = compare(a, b, on=on, labels=labels, seed=seed, resamples=resamples)
    shown = [c for c in result.on if c != "scenario" and _varies(result.pairs, c)]
    pairs = [
        RunPair(
            label=_where(record, shown),
            scenario=str(record["scenario"]),
            flip=_flip(record["flip"]),
            passed_a=bool(record["passed_a"]),
            passed_b=bool(record["passed_b"]),
            row_a=int(record["row_a"]),
            row_b=int(record["row_b"]),
        )
        for record in result.pairs.to_dict("records")
    ]
    pairs.sort(key=lambda pair: (_ORDER[pair.flip], pair.label))
    return PairedRuns(result, tuple(pairs), a.reset_index(drop=True), b.reset_index(drop=True))


def _where(record: dict[Hashable, object], shown: Sequence[str]) -> str:
    rest = [f"{column}={record[column]}" for column in shown if str(record[column]) != ""]
    return f"{record['scenario']}" + (f" [{', '.join(rest)}]" if rest else "")


def _varies(frame: pd.DataFrame, column: str) -> bool:
    return column in frame and frame[column].astype(str).nunique() > 1


def _flip(value: object) -> Flip:
    return "broke" if value == "broke" else "fixed" if value == "fixed" else ""


# -- two transcripts side by side -------------------------------------------------------------


@dataclass(frozen=True)
class Divergence:
    """Where two runs part first: turn *turn* (1-based, in order), entry *index_a* on A and
    *index_b* on B (an index past a side's last entry: that side has nothing there)."""

    turn: int
    index_a: int
    index_b: int
    reason: str


@dataclass(frozen=True)
class AlignedTurn:
    """Turn *number* of both runs (None: that run has no such turn); ``diverges_at`` is
    set on the turn holding the first divergence."""

    number: int
    a: TurnView | None
    b: TurnView | None
    diverges_at: Divergence | None = None


def _describe(entry: Entry | None) -> str:
    if entry is None:
        return "nothing"
    what = f"{entry.kind} {entry.name or entry.text}".strip()
    return f"{what} ({entry.status})" if entry.status else what


def first_divergence(a: Timeline, b: Timeline) -> Divergence | None:
    """The first entry, turn by turn, where *a* and *b* differ (None: they do not)."""
    for number, (turn_a, turn_b) in enumerate(zip_longest(a.turns, b.turns), start=1):
        entries_a = turn_a.entries if turn_a is not None else ()
        entries_b = turn_b.entries if turn_b is not None else ()
        turn = number
        if turn_a is None or turn_b is None:
            side = "A" if turn_a is None else "B"
            return Divergence(turn, 0, 0, f"run {side} has no turn {turn}")
        for index, (x, y) in enumerate(zip_longest(entries_a, entries_b)):
            if x is None or y is None or x.signature != y.signature:
                return Divergence(turn, index, index, f"A: {_describe(x)} · B: {_describe(y)}")
    return None


def align(a: Timeline, b: Timeline) -> list[AlignedTurn]:
    """The turns of *a* and *b* side by side, the first divergence marked."""
    divergence = first_divergence(a, b)
    aligned = []
    for number, (turn_a, turn_b) in enumerate(zip_longest(a.turns, b.turns), start=1):
        mark = divergence if divergence is not None and divergence.turn == number else None
        aligned.append(AlignedTurn(number, turn_a, turn_b, mark))
    return aligned
