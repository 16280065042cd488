"""The regression gate: is variant B worse than baseline A, yes or no, and why.

A CI job needs an exit status, not a report to read by eye. :func:`gate` pairs the runs of two
results tables exactly as :func:`~agentkit.eval.compare.compare` does and says B *regressed*
when any of three rules fires (each fired rule is a :class:`Regression` naming what it saw):

* ``mcnemar``: McNemar's exact two-sided test on the discordant pairs is below ``alpha``
  (0.05) **and** more pairs passed on A only than on B only (a significant improvement is not
  a regression);
* ``bootstrap``: the paired-bootstrap 95% interval of the pass-rate difference B - A lies
  entirely below zero (10,000 resamples from the seed the report prints,
  :data:`~agentkit.eval.stats.DEFAULT_SEED` unless given);
* ``scenario``: a scenario (at one point of the shared parameters) passed in every paired
  repeat on A and failed in every paired repeat on B. Under ``--repeat 1`` every run that
  broke is such a scenario: one run cannot tell a flaky scenario from a broken one, so a
  deterministic agent (the scripted model) gates on every broken run, and a sampled one should
  be run with ``--repeat 3`` or more.

Two tables with no run in common (renamed scenarios, a B that ran nothing) cannot show that B
is no worse: the gate fails them too (rule ``no_pairs``), rather than pass on no evidence.

A scenario whose paired repeats disagree on one side (some passed, some failed, on A or on B)
is *flaky*: it is listed as such (:class:`FlakyScenario`) and never a ``scenario`` regression
by itself. Its runs still count in the two tests over all pairs, so a change that makes many
scenarios flaky still fails the gate through them.

With ``exclude_sim_deviations=True`` the runs whose simulated user deviated (``sim_user_ok``
False: :mod:`agentkit.eval.sim_check`) are left out of both tables first, and the verdict says
how many.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from agentkit.eval.compare import Comparison, compare
from agentkit.eval.stats import DEFAULT_SEED

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ALPHA", "FlakyScenario", "GateVerdict", "Regression", "gate"]

#: the significance level of McNemar's test in the gate
ALPHA = 0.05


@dataclass(frozen=True, slots=True)
class Regression:
    """One rule that fired: which, and what it saw (``scenario``: where, for that rule)."""

    rule: Literal["mcnemar", "bootstrap", "scenario", "no_pairs"]
    detail: str
    scenario: str = ""

    def __str__(self) -> str:
        return f"{self.rule}: {self.detail}"


@dataclass(frozen=True, slots=True)
class FlakyScenario:
    """Two tables with no run in common (renamed scenarios, a B that ran nothing) cannot show that B
    is no worse: the gate fails them too (rule ``no_pairs``), rather than pass on no evidence.

    A scenario whose paired repeats disagree on one side (passed / ran, on A and B)."""

    scenario: str
    passed_a: int
    passed_b: int
    runs: int

    def __str__(self) -> str:
        return (
            f"{self.scenario}: A passed {self.passed_a}/{self.runs}, "
            f"B passed {self.passed_b}/{self.runs}"
        )


@dataclass(frozen=True)
class GateVerdict:
    """The gate's verdict on B against A (see the module docstring)."""

    regressions: tuple[Regression, ...]
    flaky: tuple[FlakyScenario, ...]
    comparison: Comparison
    alpha: float = ALPHA

    @property
    def regressed(self) -> bool:
        """B is worse than A by at least one rule."""
        return bool(self.regressions)

    @property
    def exit_code(self) -> int:
        """What ``agentkit compare --gate`` and ``eval --baseline`` exit with: 1 on a
        regression, else 0."""
        return 1 if self.regressed else 0

    def report(self) -> str:
        """The verdict as the CLI prints it, after the comparison's report."""
        d = self.comparison.difference.iloc[0]
        lines = [
            f"gate: {'REGRESSION' if self.regressed else 'no regression'} "
            f"(B against A over {int(d['pairs'])} pairs; McNemar p < {self.alpha:g} with more "
            "pairs passing on A only, a bootstrap interval below 0, or a scenario passing "
            "every repeat on A and failing every repeat on B)"
        ]
        lines += [f"  regression {item}" for item in self.regressions]
        if self.flaky:
            lines.append(
                f"  flaky (repeats disagree; not counted as regressions): {len(self.flaky)}"
            )
            lines += [f"    {item}" for item in self.flaky]
        left_a, left_b = self.comparison.excluded
        if left_a or left_b:
            lines.append(
                f"  left out as simulated-user deviations: {left_a} runs of A, {left_b} of B"
            )
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        """The verdict as JSON-able values."""
        return {
            "regressed": self.regressed,
            "alpha": self.alpha,
            "regressions": [
                {"rule": r.rule, "detail": r.detail, "scenario": r.scenario}
                for r in self.regressions
            ],
            "flaky": [
                {
                    "scenario": f.scenario,
                    "passed_a": f.passed_a,
                    "passed_b": f.passed_b,
                    "runs": f.runs,
                }
                for f in self.flaky
            ],
            "excluded": list(self.comparison.excluded),
        }


def gate(
    a: pd.DataFrame,
    b: pd.DataFrame,
    *,
    on: Sequence[str] | None = None,
    labels: tuple[str, str] = ("A", "B"),
    alpha: float = ALPHA,
    seed: int = DEFAULT_SEED,
    resamples: int = 10_000,
    exclude_sim_deviations: bool = False,
) -> GateVerdict:
    """Is *b* worse than the baseline *a*? (See the module docstring for the rules.)"""
    result = compare(
        a,
        b,
        on=on,
        labels=labels,
        seed=seed,
        resamples=resamples,
        exclude_sim_deviations=exclude_sim_deviations,
    )
    return verdict(result, alpha=alpha)


def verdict(result: Comparison, *, alpha: float = ALPHA) -> GateVerdict:
    """The gate's verdict on a comparison already made."""
    d = result.difference.iloc[0]
    regressions: list[Regression] = []
    if int(d["pairs"]) == 0:
        unpaired = len(result.unpaired)
        detail = f"no run of B pairs with a run of A ({unpaired} rows without a partner)"
        return GateVerdict((Regression("no_pairs", detail),), (), result, alpha)
    only_a, only_b, p_value = int(d["only_a"]), int(d["only_b"]), float(d["p_value"])
    if p_value < alpha and only_a > only_b:
        regressions.append(
            Regression(
                "mcnemar",
                f"p = {p_value:.3g} < {alpha:g}: {only_a} pairs passed on A only, "
                f"{only_b} on B only",
            )
        )
    high = float(d["ci_high"])
    if not math.isnan(high) and high < 0:
        regressions.append(
            Regression(
                "bootstrap",
                f"B - A = {float(d['difference']):+.3f}, 95% interval "
                f"[{float(d['ci_low']):+.3f}, {high:+.3f}] below 0 "
                f"({int(d['resamples'])} resamples, seed {int(d['seed'])})",
            )
        )
    stable, flaky = _scenarios(result)
    regressions += stable
    return GateVerdict(tuple(regressions), tuple(flaky), result, alpha)


def _scenarios(result: Comparison) -> tuple[list[Regression], list[FlakyScenario]]:
    """Per scenario (and shared parameters): those that passed every paired repeat on A and
    failed every one on B, and those whose repeats disagree on a side."""
    pairs = result.pairs
    if pairs.empty:
        return [], []
    group = [column for column in result.on if column != "repeat"]
    shown = [
        column
        for column in group
        if column != "scenario" and pairs[column].astype(str).nunique() > 1
    ]
    work = pairs[group].copy()
    work["a"] = pairs["passed_a"].astype(bool)
    work["b"] = pairs["passed_b"].astype(bool)
    counts = work.groupby(group, sort=True).agg(
        runs=("a", "size"), passed_a=("a", "sum"), passed_b=("b", "sum")
    )
    regressions: list[Regression] = []
    flaky: list[FlakyScenario] = []
    for key, record in zip(counts.index, counts.to_dict("records"), strict=True):
        values = key if isinstance(key, tuple) else (key,)
        where = dict(zip(group, values, strict=True))
        rest = [f"{c}={where[c]}" for c in shown if str(where[c]) != ""]
        label = str(where["scenario"]) + (f" [{', '.join(rest)}]" if rest else "")
        runs, passed_a, passed_b = (
            int(record["runs"]),
            int(record["passed_a"]),
            int(record["passed_b"]),
        )
        if 0 < passed_a < runs or 0 < passed_b < runs:
            flaky.append(FlakyScenario(label, passed_a, passed_b, runs))
        elif passed_a == runs and passed_b == 0:
            repeats = "the run" if runs == 1 else f"all {runs} repeats"
            regressions.append(
                Regression("scenario", f"{label} passed {repeats} on A, failed on B", label)
            )
    return regressions, flaky
