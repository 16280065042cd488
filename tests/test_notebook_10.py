"""Notebook 10 as a regression test: papermill runs it (scripted models only) and its summary
must match what the library computes from the files it left beside the results."""

from __future__ import annotations

import json
from pathlib import Path

import papermill
from agentkit.eval import judge_agreement, load_results, run_ids
from agentkit.eval.labels import load_labels
from agentkit.eval.scanners import load_findings

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def test_10_labels_judges_and_scans_runs(tmp_path: Path) -> None:
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
    # Run All leaves two runs for the reader to label, the view on the first, its buttons live
    runs = run_ids(results)
    assert summary["unlabelled"] == runs[:2] and len(labels) == len(runs) - 2
    assert summary["view_run"] == runs[0] and summary["buttons_disabled"] == [False] * 3
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
    # the judges' verdicts are in the table, and the agreement the notebook shows is the
    # library's on the files it left: the judge that sees the tool calls agrees with every
    # label, the one that sees the answer only believes the false success
    for name, shown in summary["judges"].items():
        found = judge_agreement(table, name)
        assert shown == {
            "runs": found.runs, "rate": found.rate, "kappa": found.kappa, "low": found.low,
            "high": found.high, "seed": found.seed,
            "disagreements": [item.run for item in found.disagreements],
        }  # fmt: skip
        assert summary["judge_columns"][name] == results[f"judge_{name}"].astype(str).tolist()
    assert summary["judges"]["with_tools"]["kappa"] == 1.0
    assert summary["judges"]["with_tools"]["disagreements"] == []
    assert set(failed) <= set(summary["judges"]["answer_only"]["disagreements"])
    assert summary["judges"]["answer_only"]["kappa"] < 0.5
    assert "too few for an agreement figure" in summary["few_labels"]


def test_10_writes_beside_itself_by_default(tmp_path: Path) -> None:
    """Without out_dir the notebook writes under its working folder (what JupyterLab's file
    browser shows), not a temporary folder, and a second Run All starts it afresh."""
    work = tmp_path / "lab"
    work.mkdir()
    notebook = work / "10.ipynb"
    notebook.write_bytes((NOTEBOOKS / "10_judges_and_labels.ipynb").read_bytes())
    repo = NOTEBOOKS.parent
    parameters = {
        "data_dir": str(repo / "data"),
        "scenario_dir": str(repo / "data" / "scenarios"),
        "summary_path": str(tmp_path / "summary.json"),
    }
    for _ in range(2):
        papermill.execute_notebook(
            str(notebook), str(tmp_path / "10.out.ipynb"), parameters=parameters,
            kernel_name="python3", cwd=str(work), progress_bar=False,
        )  # fmt: skip
        summary = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
        assert summary["out"] == "results/10_judges_and_labels"
        assert len(summary["unlabelled"]) == 2  # the labels of the first Run All are gone
    assert (work / "results" / "10_judges_and_labels" / "runs.parquet").is_file()
    assert (work / "results" / "10_judges_and_labels" / "runs.labels.jsonl").is_file()
    shown = (tmp_path / "10.out.ipynb").read_text(encoding="utf-8")
    assert "](results/10_judges_and_labels/runs.labels.jsonl)" in shown  # the link
