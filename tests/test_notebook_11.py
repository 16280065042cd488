"""Notebook 11 as a regression test: a sweep at two points on the scripted model, browsed,
compared and written as a report (papermill, checked through the summary it writes)."""

from __future__ import annotations

import json
from pathlib import Path

import papermill

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def test_11_browses_compares_and_writes_the_report(data_dir: Path, tmp_path: Path) -> None:
    summary_path = tmp_path / "summary.json"
    papermill.execute_notebook(
        str(NOTEBOOKS / "11_browse_and_report.ipynb"),
        str(tmp_path / "out.ipynb"),
        parameters={
            "data_dir": str(data_dir),
            "out_dir": str(tmp_path / "out"),
            "summary_path": str(summary_path),
        },
        kernel_name="python3",
        cwd=str(NOTEBOOKS),
        progress_bar=False,
    )
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    assert summary["runs"] == 10
    assert summary["failed"] == ["desk_delete_confirmed_zh"]
    # the browser's filter on "failed": the one failed run, its planner error shown
    assert len(summary["browser_rows"]) == 1
    assert summary["browser_run"] == "desk_delete_confirmed_zh--p0"
    assert summary["browser_has_error"] is True
    # the points side by side: the flip first, parted at turn 1
    assert summary["first_pair"] == {"scenario": "desk_delete_confirmed_zh", "flip": "fixed"}
    assert summary["divergence_turn"] == 1
    assert "5 pairs" in summary["headline"] and "1 fixed" in summary["headline"]
    # the report: every run, the two flipped ones marked
    assert summary["report_runs"] == 10 and summary["report_flipped_rows"] == 2
    assert (tmp_path / "out" / "report.html").stat().st_size == summary["report_bytes"]
    assert (tmp_path / "out" / "runs.parquet").is_file()
    # the report is linked, by a path from the notebook's working folder
    assert summary["report_link"].endswith("out/report.html")
    shown = (tmp_path / "out.ipynb").read_text(encoding="utf-8")
    assert f"]({summary['report_link']})" in shown
