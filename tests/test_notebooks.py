"""Notebooks double as regression tests: run each with papermill on a temporary data root."""

from __future__ import annotations

import json
from pathlib import Path

import papermill

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def test_conversations_notebook_runs_and_leaves_a_checked_conversation(
    data_dir: Path, tmp_path: Path
) -> None:
    summary_path = tmp_path / "summary.json"
    papermill.execute_notebook(
        str(NOTEBOOKS / "00_conversations.ipynb"),
        str(tmp_path / "out.ipynb"),
        parameters={"data_dir": str(data_dir), "summary_path": str(summary_path)},
        kernel_name="python3",
        cwd=str(NOTEBOOKS),
        progress_bar=False,
    )
    summary = json.loads(summary_path.read_text())
    assert summary["messages"] == [
        "你好, what can you do?",
        "我可以帮你整理想法 / I help you plan.",
    ]
    assert summary["message_count"] == 2
    assert summary["verify_ok"] is True
    folder = data_dir / "agents" / "innovator-001" / "conversations" / summary["conversation_id"]
    assert len(json.loads((folder / "history.json").read_text())) == 2
