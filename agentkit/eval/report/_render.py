"""What the report shows, assembled from a results table (and its comparison), then rendered
by the package's Jinja templates into one HTML file."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentkit._extras import require
from agentkit.errors import UsageError
from agentkit.eval.gate import verdict
from agentkit.eval.notes import Note
from agentkit.eval.pairs import (
    AlignedTurn,
    PairedRuns,
    align,
    pair_runs,
    point_label,
    points,
)
from agentkit.eval.report._svg import Interval, interval_svg
from agentkit.eval.results import param_columns, reliability, require_pandas, summarize
from agentkit.eval.stats import wilson_interval
from agentkit.eval.timeline import MISSING_TRANSCRIPT, Timeline, timeline
from agentkit.eval.transcript import TRANSCRIPT_COLUMN, load_transcripts

if TYPE_CHECKING:
    import jinja2
    import pandas as pd

__all__ = [
    "DEFAULT_LIMIT",
    "Table",
    "render_report",
    "side_by_side_html",
    "style",
    "transcript_html",
    "write_report",
]

#: how many runs' transcripts a report holds unless told otherwise
DEFAULT_LIMIT = 300
#: a tool result or detail longer than this is cut (the cut is said)
_DETAIL_CHARS = 4000
_RUN_COLUMNS = ("outcome", "checks_failed", "model_calls")


@cache
def _environment() -> jinja2.Environment:
    require("eval", "agentkit report", "jinja2")
    import jinja2

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("agentkit.eval.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["cut"] = _cut
    return environment


def _cut(text: str, limit: int = _DETAIL_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


def _asset(name: str) -> str:
    return (Path(__file__).with_name("templates") / name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Table:
    """A small table, its cells already text."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    @classmethod
    def of(cls, frame: pd.DataFrame) -> Table:
        return cls(
            tuple(str(c) for c in frame.columns),
            tuple(tuple(_text(v) for v in record) for record in frame.itertuples(index=False)),
        )


def _text(value: object) -> str:
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, str):
        value = item()
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if type(value).__name__ in ("NAType", "NaTType"):
        return ""
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


# -- the transcript fragments (the widgets show the same) ---------------------------------------


def style() -> str:
    """The report's stylesheet (the widgets put it before their fragments)."""
    return _asset("report.css")


def transcript_html(
    view: Timeline,
    *,
    notes: Sequence[Note] = (),
    spans_note: str = "",
) -> str:
    """One run's transcript as an HTML fragment (escaped; styled by :func:`style`)."""
    module: Any = _environment().get_template("fragments.html.j2").make_module({})
    return str(module.transcript(view, _notes_by_event(notes), _run_notes(notes), spans_note))


def side_by_side_html(a: Timeline, b: Timeline, *, labels: tuple[str, str] = ("A", "B")) -> str:
    """Two runs' transcripts aligned by turn, the first divergence marked."""
    module: Any = _environment().get_template("fragments.html.j2").make_module({})
    return str(module.side_by_side(align(a, b), labels, a, b))


def _notes_by_event(notes: Sequence[Note]) -> dict[int, list[Note]]:
    found: dict[int, list[Note]] = {}
    for note in notes:
        if note.event is not None:
            found.setdefault(note.event, []).append(note)
    return found


def _run_notes(notes: Sequence[Note]) -> list[Note]:
    return [note for note in notes if note.event is None]


# -- the report -------------------------------------------------------------------------------


@dataclass
class _Run:
    number: int
    side: str
    #: the row's position in its side's table
    position: int
    cells: tuple[str, ...]
    outcome: str
    flipped: bool
    why: str
    view: Timeline | None
    notes: list[Note] = field(default_factory=list)
    #: why there is no transcript to show ("" when there is)
    missing: str = ""


@dataclass(frozen=True)
class _Side:
    """The runs of one side: its name ("", A or B), its table, each row's position in the
    table it came from (*source*: the results or the compared table)."""

    name: str
    table: pd.DataFrame
    rows: list[int]
    source: Literal["results", "compare"]


@dataclass(frozen=True)
class _Pair:
    label: str
    flip: str
    outcome_a: str
    outcome_b: str
    aligned: list[AlignedTurn] | None
    a: Timeline | None
    b: Timeline | None


def _intervals(frame: pd.DataFrame, label: str = "") -> list[Interval]:
    ran = frame[frame["outcome"].astype(str) != "not_started"] if "outcome" in frame else frame
    names = [c for c in param_columns(frame) if c in frame]
    groups: list[tuple[str, pd.DataFrame]] = [(label or "all runs", ran)]
    if "point" in ran and names:
        prefix = f"{label}: " if label else ""
        groups = [
            (prefix + point_label(frame, int(point)), ran[ran["point"] == point])
            for point in sorted(ran["point"].unique())
        ]
    rows = []
    for name, chosen in groups:
        passed, runs = int(chosen["passed"].astype(bool).sum()), len(chosen)
        low, high = wilson_interval(passed, runs)
        rows.append(Interval(name, passed, runs, low, high))
    return rows


def _categories(frame: pd.DataFrame) -> Table:
    """Per tag (a run counts under each of its tags), one column per point: ``passed/runs``,
    the pass rate and its Wilson 95% interval."""
    ran = frame[frame["outcome"].astype(str) != "not_started"] if "outcome" in frame else frame
    labels = (
        {int(p): point_label(frame, int(p)) for p in sorted(ran["point"].unique())}
        if "point" in ran and ran["point"].nunique() > 1
        else {}
    )
    counts: dict[str, dict[int, list[int]]] = {}
    for record in ran.to_dict("records"):
        tags = [t.strip() for t in str(record.get("tags") or "").split(",") if t.strip()]
        point = int(record.get("point") or 0) if labels else 0
        for tag in tags or ["(no tag)"]:
            cell = counts.setdefault(tag, {}).setdefault(point, [0, 0])
            cell[0] += bool(record["passed"])
            cell[1] += 1
    points_ = list(labels) or [0]
    rows = []
    for tag in sorted(counts):
        cells = [tag]
        for point in points_:
            passed, runs = counts[tag].get(point, [0, 0])
            low, high = wilson_interval(passed, runs)
            cells.append(
                f"{passed}/{runs} · {passed / runs:.2f} [{low:.2f}, {high:.2f}]" if runs else "-"
            )
        rows.append(tuple(cells))
    columns = ("tag", *(labels[p] for p in points_)) if labels else ("tag", "passed · rate [95%]")
    return Table(tuple(columns), tuple(rows))


def _run_cells(frame: pd.DataFrame) -> tuple[list[str], list[tuple[str, ...]]]:
    params = [c for c in param_columns(frame) if c in frame]
    columns = ["scenario", *(["point"] if "point" in frame else []), *params]
    columns += [c for c in _RUN_COLUMNS if c in frame]
    rows = [tuple(_text(record.get(c)) for c in columns) for record in frame.to_dict("records")]
    return columns, rows


def _why(record: Mapping[str, object]) -> str:
    for column in ("error", "budget_reason", "failures"):
        value = record.get(column)
        if isinstance(value, str) and value:
            return value
    return ""


def _timelines(frame: pd.DataFrame) -> list[Timeline | None]:
    if TRANSCRIPT_COLUMN not in frame:
        return [None] * len(frame)
    return [
        timeline(item, run=str(record.get("scenario", ""))) if item is not None else None
        for item, record in zip(load_transcripts(frame), frame.to_dict("records"), strict=True)
    ]


def _variants(
    frame: pd.DataFrame,
    compare: pd.DataFrame | None,
    compare_points: tuple[int, int] | None,
    labels: tuple[str, str],
) -> tuple[PairedRuns | None, list[_Side], tuple[str, str]]:
    """The comparison asked for (if any), the tables whose runs are listed, and the sides'
    labels."""
    if compare is not None and compare_points is not None:
        raise UsageError("compare with another table or two points of this one, not both")
    every = list(range(len(frame)))
    if compare is not None:
        paired = pair_runs(frame, compare, labels=labels)
        sides = [
            _Side("A", paired.a, every, "results"),
            _Side("B", paired.b, list(range(len(paired.b))), "compare"),
        ]
        return paired, sides, labels
    if compare_points is not None:
        a, b = points(frame, *compare_points)
        labels = (point_label(frame, compare_points[0]), point_label(frame, compare_points[1]))
        paired = pair_runs(a, b, labels=labels)
        rows = [[int(i) for i in frame.index[frame["point"] == point]] for point in compare_points]
        sides = [
            _Side("A", paired.a, rows[0], "results"),
            _Side("B", paired.b, rows[1], "results"),
        ]
        return paired, sides, labels
    return None, [_Side("", frame, every, "results")], labels


def _runs(
    sides: Sequence[_Side],
    flipped: set[tuple[str, int]],
    notes: Mapping[str, Mapping[int, Sequence[Note]]],
) -> tuple[list[_Run], list[str]]:
    runs: list[_Run] = []
    columns: list[str] = []
    for chosen in sides:
        side, table = chosen.name, chosen.table
        said = notes.get(chosen.source, {})
        columns, cells = _run_cells(table)
        views = _timelines(table)
        for position, record in enumerate(table.to_dict("records")):
            passed = "passed" if record["passed"] else "failed"
            runs.append(
                _Run(
                    number=len(runs) + 1,
                    side=side,
                    position=position,
                    cells=cells[position],
                    outcome=str(record.get("outcome") or passed),
                    flipped=(side, position) in flipped,
                    why=_why({str(k): v for k, v in record.items()}),
                    view=views[position],
                    notes=list(said.get(chosen.rows[position], ())),
                    missing="" if views[position] is not None else MISSING_TRANSCRIPT,
                )
            )
    return runs, columns


def _hold(runs: Sequence[_Run], limit: int) -> int:
    """Keep the transcripts of *limit* runs — flipped ones first, then those that did not
    pass, then the rest in table order — and say so in the others; returns how many were
    left out."""
    order = sorted(runs, key=lambda run: (not run.flipped, run.outcome == "passed", run.number))
    left_out = 0
    for run in order[limit:]:
        if run.view is not None:
            run.view = None
            run.missing = f"transcript left out: this report holds at most {limit} transcripts"
            left_out += 1
    return left_out


def _pairs(paired: PairedRuns, runs: Sequence[_Run]) -> list[_Pair]:
    held = {(run.side, run.position): run.view for run in runs}
    outcomes = {(run.side, run.position): run.outcome for run in runs}
    pairs = []
    for pair in paired.pairs:
        a, b = held.get(("A", pair.row_a)), held.get(("B", pair.row_b))
        pairs.append(
            _Pair(
                label=pair.label,
                flip=pair.flip,
                outcome_a=outcomes.get(("A", pair.row_a), ""),
                outcome_b=outcomes.get(("B", pair.row_b), ""),
                aligned=align(a, b) if a is not None and b is not None else None,
                a=a,
                b=b,
            )
        )
    return pairs


def _comparison(paired: PairedRuns, labels: tuple[str, str]) -> dict[str, object]:
    result = paired.comparison
    return {
        "labels": labels,
        "headline": paired.headline(),
        "sides": Table.of(result.sides),
        "deltas": Table.of(result.deltas),
        "on": ", ".join(result.on),
        "varies": ", ".join(result.varies),
        "unpaired": Table.of(result.unpaired),
        "flips": len(paired.flips),
        "reliability": Table.of(
            result.reliability
            if not result.reliability.empty and int(result.reliability["k"].max()) > 1
            else result.reliability.iloc[0:0]
        ),
        "gate": verdict(result).report(),
    }


def _reliability(frame: pd.DataFrame) -> pd.DataFrame:
    """pass^k and pass@k per point for k = 1 … the most repeats (empty without repeats)."""
    import pandas as pd

    ran = frame[frame["outcome"].astype(str) != "not_started"] if "outcome" in frame else frame
    if "repeat" not in ran or ran.empty or ran["repeat"].nunique() < 2:
        return pd.DataFrame()
    params = [column for column in param_columns(ran) if column in ran]
    if "model" in ran and ran["model"].nunique() > 1:
        params.append("model")
    tables = []
    for values, rows in ran.groupby(params, dropna=False, sort=False) if params else [((), ran)]:
        point = values if isinstance(values, tuple) else (values,)
        table = reliability(rows, ["scenario"])
        for position, (name, value) in enumerate(zip(params, point, strict=True)):
            table.insert(position, name, [value] * len(table))
        tables.append(table)
    return pd.concat(tables, ignore_index=True)


def render_report(
    results: pd.DataFrame,
    *,
    compare: pd.DataFrame | None = None,
    compare_points: tuple[int, int] | None = None,
    labels: tuple[str, str] = ("A", "B"),
    limit: int = DEFAULT_LIMIT,
    title: str = "agentkit evaluation report",
    notes: Mapping[int, Sequence[Note]] | None = None,
    compare_notes: Mapping[int, Sequence[Note]] | None = None,
) -> str:
    """The report as one self-contained HTML page (see :mod:`agentkit.eval.report`).

    *compare*: another results table (B; *results* is A), or *compare_points*: two point
    numbers of *results*. *notes* / *compare_notes*: judge verdicts, findings and labels of
    *results*' / *compare*'s rows, by row position (:func:`agentkit.eval.notes.run_notes`)."""
    require_pandas()
    if limit < 0:
        raise UsageError(f"the limit is a number of runs, not {limit}")
    frame = results.reset_index(drop=True)
    paired, sides, labels = _variants(frame, compare, compare_points, labels)
    flipped: set[tuple[str, int]] = set()
    for pair in paired.flips if paired is not None else ():
        flipped |= {("A", pair.row_a), ("B", pair.row_b)}
    runs, columns = _runs(sides, flipped, {"results": notes or {}, "compare": compare_notes or {}})
    left_out = _hold(runs, limit)
    pairs = _pairs(paired, runs) if paired is not None else []
    if compare is not None:
        intervals = [
            interval
            for side, label in zip(sides, labels, strict=True)
            for interval in _intervals(side.table, label)
        ]
        categories = [(label, _categories(s.table)) for s, label in zip(sides, labels, strict=True)]
    else:
        intervals, categories = _intervals(frame), [("", _categories(frame))]
    template = _environment().get_template("report.html.j2")
    return template.render(
        title=title,
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        style=style(),
        script=_asset("report.js"),
        runs=runs,
        run_columns=columns,
        compared=paired is not None,
        summary=Table.of(summarize(frame)),
        reliability=Table.of(_reliability(frame)),
        categories=categories,
        plot=interval_svg(intervals),
        comparison=_comparison(paired, labels) if paired is not None else None,
        pairs=pairs,
        limit=limit,
        left_out=left_out,
        no_transcript=sum(1 for run in runs if run.view is None) - left_out,
        notes_by_event=_notes_by_event,
        run_notes=_run_notes,
        outcomes=sorted({run.outcome for run in runs}),
    )


def write_report(
    results: pd.DataFrame,
    out: Path | str,
    *,
    compare: pd.DataFrame | None = None,
    compare_points: tuple[int, int] | None = None,
    labels: tuple[str, str] = ("A", "B"),
    limit: int = DEFAULT_LIMIT,
    title: str = "agentkit evaluation report",
    notes: Mapping[int, Sequence[Note]] | None = None,
    compare_notes: Mapping[int, Sequence[Note]] | None = None,
) -> Path:
    """Write :func:`render_report`'s page to *out* (an ``.html`` file); returns the path."""
    target = Path(out)
    if target.suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"the report is an .html file, not {target.name!r}")
    if target.is_dir():
        raise UsageError(f"{target} is a folder: give an .html file name")
    page = render_report(
        results,
        compare=compare,
        compare_points=compare_points,
        labels=labels,
        limit=limit,
        title=title,
        notes=notes,
        compare_notes=compare_notes,
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page, encoding="utf-8")
    return target
