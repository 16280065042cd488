"""Scoring stored runs: reading the judges' verdicts of a results table, and re-scoring it.

Scoring reads a run's transcript, never runs it again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit.errors import UsageError
from agentkit.eval.judges.table import judge_names, load_judgements
from agentkit.eval.judges.values import Judgement
from agentkit.eval.results import run_ids

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["judge_verdicts"]


def judge_verdicts(results: pd.DataFrame, judge: str) -> dict[str, Judgement]:
    """*judge*'s judgement of each run it judged, by run id
    (:func:`~agentkit.eval.results.run_ids`).
    A judge the table does not have is a :class:`UsageError` naming the judges it has."""
    rows = load_judgements(results)
    known = judge_names(rows)
    if judge not in known:
        listed = ", ".join(known) or "none"
        raise UsageError(f"no judge {judge!r} in this table (its judges: {listed})")
    verdicts: dict[str, Judgement] = {}
    for run, judgements in zip(run_ids(results), rows, strict=True):
        found = next((item for item in judgements if item.judge == judge), None)
        if found is not None:
            verdicts[run] = found
    return verdicts
