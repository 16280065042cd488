"""Notebook 10 as a regression test: papermill runs it (scripted models only) and its summary
must match what the library computes from the files it left beside the results."""

from __future__ import annotations

import json
from pathlib import Path

import papermill
from agentkit.eval import load_results
from agentkit.eval.labels import load_labels
from agentkit.eval.scanners import load_findings

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def test_10_labels_runs_and_scans_them(tmp_path: Path) -> None:
    out = tmp_path / "out"
    summary_path = tmp_path / "summary.json"
    papermill.execute_notebook(
        str(NOTEBOOKS / "10_judges_and_labels.ipynb"),
        str(tmp_path / "10.out.ipynb"),
        parameters={"out_dir": str(out), "summary_path": str(summary_path)},
        kernel_name="python3",
        cwd=str(NOTEBOOKS),
        progress_bar=False,
    )
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    table = out / "runs.parquet"
    assert summary["table"] == str(table)
    results = load_results(table)
    assert summary["runs"] == len(results) == 18  # 9 notes scenarios x 2 thresholds
    # every run labelled through the view, kept beside the table; the two that claim a
    # delete the tool refused are the fails
    labels = load_labels(table)
    assert summary["labels"] == {run: label.verdict for run, label in labels.items()}
    failed = sorted(run for run, label in labels.items() if label.label == "fail")
    assert failed == ["notes_claims_delete_en--p0", "notes_claims_delete_en--p1"]
    assert all(labels[run].note == "claims a delete the tool refused" for run in failed)
    # the scanner finds exactly those, and nothing in the shipped notes runs
    findings = load_findings(table)
    assert sorted(zip(findings["run"], findings["scanner"], strict=True)) == [
        (run, "false_success") for run in failed
    ]
    assert summary["finding_counts"]["notes_claims_delete_en"] == 2
    assert sum(summary["finding_counts"].values()) == 2
