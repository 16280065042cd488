"""Notebook 12 as a regression test: a few τ² airline tasks on the scripted gold and null
agents, browsed with their database changes and compared (papermill, through its summary)."""

from __future__ import annotations

import json
from pathlib import Path

import papermill
from agentkit import testing
from agentkit.eval.tau2 import DOMAINS, agent_for

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def test_12_runs_browses_and_compares_tau2_tasks(tmp_path: Path) -> None:
    root = testing.data_root(tmp_path / "data", [agent_for(domain) for domain in DOMAINS])
    summary_path = tmp_path / "summary.json"
    papermill.execute_notebook(
        str(NOTEBOOKS / "12_tau2.ipynb"),
        str(tmp_path / "out.ipynb"),
        parameters={"data_dir": str(root), "summary_path": str(summary_path)},
        kernel_name="python3",
        cwd=str(NOTEBOOKS),
        progress_bar=False,
    )
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    assert summary["runs"] == 3
    assert summary["rewards_a"] == [1.0, 1.0, 1.0]  # the gold actions solve every task
    assert summary["rewards_b"] == summary["null_floor"]  # saying nothing earns the floor
    assert summary["consents"] >= 1  # a write waited for the simulated user's "yes"
    assert any(summary["changes"].values())  # and is listed among the database changes
    assert len(summary["browser_rows"]) == 3 and "3 pairs" in summary["headline"]
