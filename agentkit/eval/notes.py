"""What was said about each run, ready to show beside its transcript: the judges' verdicts
(kept in the results table's ``judgements`` column), the scanners' findings and the human
labels (kept beside the table's file: :func:`~agentkit.eval.scanners.load_findings`,
:func:`~agentkit.eval.labels.load_labels`).

The views (the run browser, the HTML report) read :class:`Note` values by row position, so
they show judges, findings and labels the same way without knowing where each is kept. This
module only regroups what those modules stored; it computes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from agentkit.errors import UsageError
from agentkit.eval.judges import load_judgements
from agentkit.eval.labels import Label, labels_path, load_labels
from agentkit.eval.results import run_ids
from agentkit.eval.scanners import Finding, findings_path, load_findings

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Note", "notes_beside", "run_notes"]


@dataclass(frozen=True)
class Note:
    """What was said about a run beside its transcript: a judge's verdict with its reason, a
    scanner's finding (pointing at the event it is about), the human label with its note."""

    kind: Literal["judge", "finding", "label"]
    #: the judge's or scanner's name (a label: who labelled)
    title: str
    #: pass / fail / judge_error (a judge), the severity (a finding), the label
    verdict: str
    #: the judge's reason, the finding's sentence, the label's note
    text: str = ""
    #: the run event it points at (its index in the whole run's events; None: the run)
    event: int | None = None


def _findings(findings: pd.DataFrame | Iterable[Finding] | None) -> list[Finding]:
    if findings is None:
        return []
    import pandas as pd

    if isinstance(findings, pd.DataFrame):
        return [
            Finding.model_validate({str(k): v for k, v in record.items()})
            for record in findings.to_dict("records")
        ]
    return list(findings)


def run_notes(
    results: pd.DataFrame,
    *,
    labels: Mapping[str, Label] | None = None,
    findings: pd.DataFrame | Iterable[Finding] | None = None,
) -> dict[int, list[Note]]:
    """Each row's notes by row position: its judgements (from the table), its *findings*
    (a findings table or values) and its label (from *labels*, by run id)."""
    ids = run_ids(results)
    rows = {run: position for position, run in enumerate(ids)}
    notes: dict[int, list[Note]] = {}
    for position, judgements in enumerate(load_judgements(results)):
        for judgement in judgements:
            score = "" if judgement.score is None else f" (score {judgement.score:.3g})"
            notes.setdefault(position, []).append(
                Note("judge", judgement.judge, judgement.outcome, judgement.reason + score)
            )
    for finding in _findings(findings):
        found = rows.get(finding.run)
        if found is None:
            continue  # a finding of a run not in this table (another table's findings)
        notes.setdefault(found, []).append(
            Note(
                "finding",
                finding.scanner or finding.kind,
                finding.severity,
                f"{finding.kind}: {finding.sentence}" if finding.scanner else finding.sentence,
                finding.event if finding.event >= 0 else None,
            )
        )
    for run, label in (labels or {}).items():
        labelled = rows.get(run)
        if labelled is not None:
            notes.setdefault(labelled, []).append(
                Note("label", label.who or "label", label.verdict, label.note)
            )
    return notes


def notes_beside(results: pd.DataFrame, path: Path | str) -> dict[int, list[Note]]:
    """:func:`run_notes` with the labels and findings kept beside the table's file *path*
    (each when it is there)."""
    labels = load_labels(path) if labels_path(path).is_file() else None
    findings = None
    if findings_path(path).is_file():
        try:
            findings = load_findings(path)
        except UsageError:
            findings = None
    return run_notes(results, labels=labels, findings=findings)
