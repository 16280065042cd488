"""``agentkit report``: one self-contained HTML file of a results table (and its comparison)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agentkit._extras import require
from agentkit.cli._app import app, clean_errors
from agentkit.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["report_command"]


def _points(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    parts = [part.strip() for part in text.split(",")]
    if len(parts) != 2 or not all(part.isdigit() for part in parts):
        raise UsageError(f"--points takes two point numbers as A,B (e.g. 0,1), not {text!r}")
    return int(parts[0]), int(parts[1])


#: ``agentkit compare``'s option: two points of table A's sweep instead of a table B
ComparePoints = Annotated[
    str | None,
    typer.Option("--points", help="Compare two points of A's sweep instead: A,B (e.g. 0,1)."),
]


def _tables_to_compare(
    a: Path, b: Path | None, points: str | None, *, without: tuple[str, ...] = ()
) -> tuple[pd.DataFrame, pd.DataFrame, tuple[str, str]]:
    """``agentkit compare``'s two sides and their labels: two tables, or two points of table
    *a*'s sweep (``--points A,B``). A table compared with itself is warned about on stderr:
    every pair is then a run with itself, and nothing can differ."""
    from agentkit.eval import load_results
    from agentkit.eval.pairs import point_label
    from agentkit.eval.pairs import points as point_tables

    chosen = _points(points)
    if chosen is not None:
        if b is not None:
            raise UsageError("give a second table or --points, not both")
        frame = load_results(a, without=without)
        first, second = point_tables(frame, *chosen)
        labels = (point_label(frame, chosen[0]), point_label(frame, chosen[1]))
        return first, second, labels
    if b is None:
        raise UsageError("give a second table to compare with, or --points A,B (e.g. 0,1)")
    first, second = load_results(a, without=without), load_results(b, without=without)
    _warn_if_same(a, b, first, second)
    return first, second, (str(a), str(b))


def _warn_if_same(a: Path, b: Path, first: pd.DataFrame, second: pd.DataFrame) -> None:
    """Say on stderr when table *b* is table *a* (the same file, or the same rows)."""
    if a.resolve() == b.resolve() or first.equals(second):
        typer.echo(
            f"agentkit: warning: {b} is the same table as {a}: every run is paired with itself "
            "and nothing can differ (two points of one sweep: --points A,B)",
            err=True,
        )


@app.command("report")
def report_command(
    results: Annotated[Path, typer.Argument(help="Results table (.parquet or .csv).")],
    out: Annotated[Path, typer.Option("--out", help="The HTML file to write (report.html).")],
    compare: Annotated[
        Path | None,
        typer.Option("--compare", help="Another results table: compare RESULTS (A) with it (B)."),
    ] = None,
    points: Annotated[
        str | None,
        typer.Option("--points", help="Compare two points of RESULTS instead: A,B (e.g. 0,1)."),
    ] = None,
    limit: Annotated[
        int,
        typer.Option(
            "--limit",
            help="Transcripts held at most (flipped runs first, then failures); the other "
            "runs keep their row and the page says how many were left out.",
        ),
    ] = 300,
    title: Annotated[
        str, typer.Option("--title", help="The page's title.")
    ] = "agentkit evaluation report",
) -> None:
    """Write one self-contained HTML report (no network: styles, script and plot inline): the
    summary and per-tag tables, pass-rate intervals, the comparison when asked (McNemar, the
    bootstrap interval, the pairs flips first, side by side), and every run's transcript
    collapsed under its row, filterable by outcome and by "flipped". Judge verdicts (in the
    table), scanner findings and labels (kept beside it) show with each run."""
    with clean_errors():
        require("eval", "agentkit report", "pandas", "jinja2")
        from agentkit.eval import load_results
        from agentkit.eval.notes import notes_beside
        from agentkit.eval.report import write_report

        if out.suffix.lower() not in (".html", ".htm"):
            raise UsageError(f"--out takes an .html file, not {out.name!r}")
        if compare is not None and points is not None:
            raise UsageError("give --compare or --points, not both")
        chosen = _points(points)
        table = load_results(results)
        other = load_results(compare) if compare is not None else None
        if compare is not None and other is not None:
            _warn_if_same(results, compare, table, other)
        labels = (str(results), str(compare)) if compare is not None else ("A", "B")
        written = write_report(
            table,
            out,
            compare=other,
            compare_points=chosen,
            labels=labels,
            limit=limit,
            title=title,
            notes=notes_beside(table, results),
            compare_notes=notes_beside(other, compare) if other is not None and compare else None,
        )
        size = written.stat().st_size
        runs = f"{len(table)} runs" if other is None else f"{len(table)} + {len(other)} runs"
        typer.echo(f"wrote {written} ({size / 1024:.0f} KiB, {runs})")
