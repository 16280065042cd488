"""Two variants side by side with no dead end: ``agentkit compare RESULTS --points A,B``
compares two points of one sweep, a table compared with itself is warned about, and the
``--compare`` report's summary shows both sides with their own counts and whole labels."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pandas as pd
import pytest
from agentkit.eval import compare, save_results
from agentkit.eval.pairs import point_label, points
from agentkit.eval.report import Interval, interval_svg

from ._report_sweep import FLIPS, two_point_sweep
from .conftest import run_cli


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    return two_point_sweep(tmp_path_factory.mktemp("sweep"))


@pytest.fixture(scope="module")
def tables(sweep: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("tables")
    a, b = points(sweep, 0, 1)
    return {
        "sweep": save_results(sweep, folder / "sweep.parquet"),
        "a": save_results(a, folder / "a.parquet"),
        "b": save_results(b, folder / "b.parquet"),
    }


def _text(page: str, start: str, end: str) -> str:
    part = page[page.index(start) : page.index(end)]
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", part)).split())


def test_compare_takes_two_points_of_one_sweep(
    sweep: pd.DataFrame, tables: dict[str, Path]
) -> None:
    done = run_cli("compare", str(tables["sweep"]), "--points", "0,1")
    assert done.exit_code == 0, done.stderr
    a, b = points(sweep, 0, 1)
    labels = (point_label(sweep, 0), point_label(sweep, 1))
    assert labels == ("planner.max_steps=2", "planner.max_steps=8")
    assert done.stdout == compare(a, b, labels=labels).report() + "\n"
    assert done.stdout.startswith("A = planner.max_steps=2\nB = planner.max_steps=8\n")
    assert FLIPS in done.stdout and done.stderr == ""
    # the points' order is the sides' order
    again = run_cli("compare", str(tables["sweep"]), "--points", "1,0")
    assert again.stdout.startswith("A = planner.max_steps=8\nB = planner.max_steps=2\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give a second table to compare with, or --points A,B"),
        (["{b}", "--points", "0,1"], "give a second table or --points, not both"),
        (["--points", "0"], "--points takes two point numbers"),
        (["--points", "0,7"], "no point 7"),
        (["--points", "1,1"], "not point 1 with itself"),
    ],
)
def test_compare_refuses_a_bad_choice_of_sides_in_one_line(
    tables: dict[str, Path], args: list[str], message: str
) -> None:
    filled = [arg.format(b=tables["b"]) for arg in args]
    done = run_cli("compare", str(tables["sweep"]), *filled)
    assert done.exit_code == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert message in line, line


def test_comparing_a_table_with_itself_warns(tables: dict[str, Path], tmp_path: Path) -> None:
    same = run_cli("compare", str(tables["a"]), str(tables["a"]))
    assert same.exit_code == 0
    [warning] = same.stderr.splitlines()
    assert warning.startswith("agentkit: warning:") and "same table" in warning
    assert "--points A,B" in warning
    # a copy of it under another name is the same table too
    copy = tmp_path / "copy.parquet"
    copy.write_bytes(tables["a"].read_bytes())
    assert "same table" in run_cli("compare", str(tables["a"]), str(copy)).stderr
    # two different tables: no warning
    assert run_cli("compare", str(tables["a"]), str(tables["b"])).stderr == ""
    # the report of a table compared with itself says so too
    out = str(tmp_path / "same.html")
    report = run_cli("report", str(tables["a"]), "--compare", str(copy), "--out", out)
    assert report.exit_code == 0 and "same table" in report.stderr


def test_the_compare_report_summary_shows_both_sides_with_their_counts(
    tables: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "report.html"
    a, b = str(tables["a"]), str(tables["b"])
    done = run_cli("report", a, "--compare", b, "--out", str(out))
    assert done.exit_code == 0, done.stderr
    runs_a = len(pd.read_parquet(tables["a"]))
    runs_b = len(pd.read_parquet(tables["b"]))
    assert done.stdout.strip().endswith(f"{runs_a} + {runs_b} runs)")
    page = out.read_text(encoding="utf-8")
    header = _text(page, "<header>", "</header>")
    assert f"A = {a}: {runs_a} runs · B = {b}: {runs_b} runs" in header
    summary = _text(page, '<section id="summary">', "<h3>Pass rate per variant</h3>")
    rows = re.findall(r"([AB]) = \S+ (\d+) (\d+) (\d+)", summary)
    assert rows, summary
    counts = {side: (steps, int(ran)) for side, steps, ran, _ in rows}
    assert counts == {"A": ("2", runs_a), "B": ("8", runs_b)}
    # the plot's labels are whole: the differing value is shown, not cut
    plot = page[page.index("<svg") : page.index("</svg>")]
    assert "…" not in plot
    assert f">{a}: planner.max_steps=2<" in plot and f">{b}: planner.max_steps=8<" in plot


def test_the_interval_plot_makes_room_for_a_long_label() -> None:
    label = "results/baseline-2026-12-06.parquet: compression.token_threshold=2000"
    svg = interval_svg([Interval(label, 3, 4, 0.3, 0.95), Interval("short", 1, 4, 0.05, 0.7)])
    assert f"</title>{label}</text>" in svg
    width = int(re.search(r'width="(\d+)"', svg).group(1))  # type: ignore[union-attr]
    short = int(re.search(r'width="(\d+)"', interval_svg([])).group(1))  # type: ignore[union-attr]
    assert width > short
