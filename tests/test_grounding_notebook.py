"""Notebook 02 tells its story on its default model (``desk-local-001``, the embedded
SmolLM2-135M): the request is answered with a question for what only the user knows, before
any consent, and no consent ever shows the tool's schema echoed back as arguments
(``agentkit.planning.grounding``). Real model, real kernel (papermill); no timing asserted."""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_notebooks import run_workbench_notebook

#: what a schema echoed back or a placeholder looks like in a consent's arguments
ECHOES = ("minLength", "maxLength", "'type'", '"type"', "][", "writeOnly")


@pytest.mark.real_model
def test_notebook_02_on_the_embedded_model_asks_before_any_consent(
    data_dir: Path, tmp_path: Path
) -> None:
    summary = run_workbench_notebook("02_plan_steps.ipynb", data_dir, tmp_path)
    stages = summary["stages"]
    assert all(stage["errors"] == [] for stage in stages), stages
    first = stages[0]
    assert (first["stage"], first["status"], first["pending"]) == (
        "request",
        "waiting_user",
        "question",
    ), first  # a question comes first: nothing is proposed with arguments nobody gave
    assert "api key" in first["reply"].lower()
    pending = [stage["pending"] for stage in stages]
    consent_at = pending.index("confirmation") if "confirmation" in pending else len(pending)
    assert "question" in pending[:consent_at]
    shown = "".join(row["arguments"] for row in summary["steps"])  # the calls as proposed
    shown += "".join(stage["reply"] for stage in stages)  # the question, the consent
    assert not [echo for echo in ECHOES if echo in shown], shown
    assert summary["exchange_accounts"] == []  # approve=False: nothing was written
    if "confirmation" in pending:  # the answer filled the call: it names what the user said
        assert '"account_name": "main"' in shown and "****abcd" in shown
