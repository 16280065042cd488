"""How far a judge agrees with a person's labels: the number to show next to a judge's
pass rate before trusting it.

:func:`agreement` pairs the runs a person labelled (:mod:`~agentkit.eval.labels`) with the
verdicts a judge gave them, and reports the agreement rate, Cohen's kappa with a percentile
bootstrap 95% interval over the runs (from a printed seed: the same labels give the same
interval), the confusion matrix, and the runs where they disagree. With fewer than
``min_runs`` runs both labelled and judged it gives no number: :attr:`Agreement.enough` is
False and :meth:`Agreement.report` says how many more labels it needs.

Verdicts are compared as they are: ``pass``/``fail``, or scores (kappa over the score
categories). A run the judge could not judge (``None``: a ``judge_error``) is left out and
counted apart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agentkit.eval.labels import Label, load_labels
from agentkit.eval.stats import DEFAULT_SEED, kappa_bootstrap

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "MIN_LABELLED",
    "Agreement",
    "Disagreement",
    "Verdict",
    "agreement",
    "judge_agreement",
]

#: fewer runs both labelled and judged than this give no agreement figure
MIN_LABELLED = 10
#: bootstrap resamples of the kappa interval
RESAMPLES = 2_000

#: a verdict: ``pass``/``fail``, or a score
Verdict = str | float


@dataclass(frozen=True, slots=True)
class Disagreement:
    """A run where the person and the judge differ."""

    run: str
    human: str
    judge: str
    note: str = ""


@dataclass(frozen=True, slots=True)
class Agreement:
    """A judge's agreement with the labels (see the module docstring)."""

    judge: str
    #: runs both labelled and judged (the pairs compared)
    runs: int
    #: runs labelled but the judge gave no verdict (judge_error), and judged but unlabelled
    unjudged: int
    unlabelled: int
    min_runs: int
    #: the share of the pairs they agree on (None: too few runs)
    rate: float | None
    kappa: float | None
    #: kappa's percentile bootstrap 95% interval (None: too few runs, or undefined)
    low: float | None
    high: float | None
    seed: int
    resamples: int
    #: the verdicts seen, in order, and counts[human][judge]
    categories: tuple[str, ...]
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    disagreements: tuple[Disagreement, ...] = ()

    @property
    def enough(self) -> bool:
        """Whether there were enough runs for a figure."""
        return self.runs >= self.min_runs

    def confusion(self) -> pd.DataFrame:
        """The confusion matrix: rows the person's labels, columns the judge's verdicts."""
        import pandas as pd

        table = pd.DataFrame(
            [[self.counts.get(h, {}).get(j, 0) for j in self.categories] for h in self.categories],
            index=pd.Index(self.categories, name="human"),
            columns=pd.Index(self.categories, name=f"judge {self.judge}"),
        )
        return table

    def summary(self) -> str:
        """One line: the figures, or why there are none."""
        if not self.enough:
            return (
                f"judge {self.judge}: {self.runs} runs labelled and judged, too few for an "
                f"agreement figure (needs {self.min_runs}: label "
                f"{self.min_runs - self.runs} more)"
            )
        rate = f"{self.rate:.1%}" if self.rate is not None else "n/a"
        if self.kappa is None:
            kappa = "kappa undefined (one verdict only)"
        else:
            interval = (
                f" [{self.low:.3f}, {self.high:.3f}]"
                if self.low is not None and self.high is not None
                else ""
            )
            kappa = f"kappa {self.kappa:.3f}{interval}"
        return (
            f"judge {self.judge}: agreement {rate} on {self.runs} runs, {kappa} "
            f"(95% bootstrap, {self.resamples} resamples, seed {self.seed})"
        )

    def report(self, max_runs: int = 20) -> str:
        """The text ``agentkit agreement`` prints."""
        lines = [self.summary()]
        if self.unjudged:
            lines.append(f"{self.unjudged} labelled runs have no verdict of this judge")
        if self.runs:
            lines += ["", self.confusion().to_string()]
        if self.disagreements:
            lines += ["", f"disagreements ({len(self.disagreements)}):"]
            for item in self.disagreements[:max_runs]:
                note = f"  — {item.note}" if item.note else ""
                lines.append(f"  {item.run}: human {item.human}, judge {item.judge}{note}")
            if len(self.disagreements) > max_runs:
                lines.append(f"  … and {len(self.disagreements) - max_runs} more")
        elif self.runs:
            lines += ["", "no disagreements"]
        return "\n".join(lines)


def _text(verdict: Verdict) -> str:
    return verdict if isinstance(verdict, str) else f"{verdict:g}"


def agreement(
    human: Mapping[str, Verdict],
    judge: Mapping[str, Verdict | None],
    *,
    name: str = "judge",
    notes: Mapping[str, str] | None = None,
    seed: int = DEFAULT_SEED,
    resamples: int = RESAMPLES,
    min_runs: int = MIN_LABELLED,
) -> Agreement:
    """The agreement of *judge*'s verdicts with *human*'s labels, both by run id (a judge's
    None: no verdict). *notes*: the labels' notes, shown with the disagreements."""
    pairs = [
        (run, _text(label), _text(verdict))
        for run, label in human.items()
        if (verdict := judge.get(run)) is not None
    ]
    unjudged = sum(1 for run in human if judge.get(run) is None)
    unlabelled = sum(
        1 for run, verdict in judge.items() if verdict is not None and run not in human
    )
    categories = tuple(dict.fromkeys(sorted({v for _, h, j in pairs for v in (h, j)})))
    counts: dict[str, dict[str, int]] = {}
    for _, h, j in pairs:
        counts.setdefault(h, {})
        counts[h][j] = counts[h].get(j, 0) + 1
    said = notes or {}
    disagreements = tuple(
        Disagreement(run, h, j, said.get(run, "")) for run, h, j in pairs if h != j
    )
    rate = kappa = low = high = None
    if len(pairs) >= min_runs:
        rate = sum(1 for _, h, j in pairs if h == j) / len(pairs)
        value, lo, hi = kappa_bootstrap(
            [h for _, h, _ in pairs], [j for _, _, j in pairs], seed=seed, resamples=resamples
        )
        kappa, low, high = (None if math.isnan(x) else x for x in (value, lo, hi))
    return Agreement(
        judge=name,
        runs=len(pairs),
        unjudged=unjudged,
        unlabelled=unlabelled,
        min_runs=min_runs,
        rate=rate,
        kappa=kappa,
        low=low,
        high=high,
        seed=seed,
        resamples=resamples,
        categories=categories,
        counts=counts,
        disagreements=disagreements,
    )


def judge_agreement(
    results: Path | str,
    judge: str,
    *,
    table: pd.DataFrame | None = None,
    labels: Mapping[str, Label] | None = None,
    seed: int = DEFAULT_SEED,
    resamples: int = RESAMPLES,
    min_runs: int = MIN_LABELLED,
) -> Agreement:
    """The agreement of the judge *judge* of the results table *results* with the labels kept
    beside it (:func:`~agentkit.eval.labels.load_labels`; or *labels*, e.g. the labels of
    the table this one was re-scored from). A pass/fail label is compared with
    the judge's outcome, a score with its score; a ``judge_error`` is no verdict. A judge the
    table does not have is a :class:`UsageError` naming the ones it has."""
    from agentkit.eval.results import load_results
    from agentkit.eval.scoring import judge_verdicts

    frame = table if table is not None else load_results(results)
    judged = judge_verdicts(frame, judge)
    if labels is None:
        labels = load_labels(results)
    verdicts: dict[str, Verdict | None] = {}
    for run, judgement in judged.items():
        label = labels.get(run)
        scored = label is not None and not isinstance(label.label, str)
        if judgement.outcome == "judge_error":
            verdicts[run] = None
        elif scored:
            verdicts[run] = judgement.score
        else:
            verdicts[run] = judgement.outcome
    return agreement(
        {run: label.label for run, label in labels.items()},
        verdicts,
        name=judge,
        notes={run: label.note for run, label in labels.items()},
        seed=seed,
        resamples=resamples,
        min_runs=min_runs,
    )
