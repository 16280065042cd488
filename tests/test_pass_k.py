"""pass^k and pass@k of a ``--repeat`` sweep equal the formula (per scenario C(c, k) / C(n, k)
and 1 - C(n - c, k) / C(n, k), averaged over the scenarios with at least k runs) on a
hand-made table with uneven repeats, in the summary, in ``compare`` and in the report."""

from __future__ import annotations

from math import comb
from pathlib import Path

import pandas as pd
import pytest
from agentkit.eval import compare, reliability, summarize

#: scenario → the passed column of each repeat: 3 runs (2 passed), 2 runs (1), 3 runs (3)
RUNS = {"x": [True, False, True], "y": [False, True], "z": [True, True, True]}


def table(runs: dict[str, list[bool]]) -> pd.DataFrame:
    rows = [
        {
            "scenario": name,
            "point": 0,
            "repeat": repeat,
            "model": "scripted",
            "passed": passed,
            "outcome": "passed" if passed else "failed",
            "error": "",
            "checks_failed": 0,
            "compressions": 0,
            "model_calls": 1,
            "output_tokens": 1,
            "fact_retention": None,
            "latency_ms": 1.0,
        }
        for name, passes in runs.items()
        for repeat, passed in enumerate(passes)
    ]
    frame = pd.DataFrame(rows)
    frame.attrs["params"] = []
    return frame


def by_formula(k: int) -> tuple[float, float, int]:
    counted = [(len(p), sum(p)) for p in RUNS.values() if len(p) >= k]
    hat = sum(comb(c, k) / comb(n, k) for n, c in counted) / len(counted)
    at = sum(1 - comb(n - c, k) / comb(n, k) for n, c in counted) / len(counted)
    return hat, at, len(counted)


def test_pass_hat_k_and_pass_at_k_equal_the_formula_with_uneven_repeats() -> None:
    figures = reliability(table(RUNS), ["scenario"]).set_index("k")
    assert list(figures.index) == [1, 2, 3]
    for k in (1, 2, 3):
        hat, at, scenarios = by_formula(k)
        assert figures.loc[k, "pass^k"] == pytest.approx(hat)
        assert figures.loc[k, "pass@k"] == pytest.approx(at)
        assert figures.loc[k, "scenarios"] == scenarios
    # by hand: k=1 the mean pass rate, k=2 (1/3 + 0 + 1) / 3, k=3 over x and z only
    assert figures.loc[1, "pass^k"] == pytest.approx((2 / 3 + 1 / 2 + 1) / 3)
    assert figures.loc[2, "pass^k"] == pytest.approx(4 / 9)
    assert (figures.loc[3, "pass^k"], figures.loc[3, "scenarios"]) == (0.5, 2)
    assert figures.loc[2, "pass@k"] == 1.0
    chosen = reliability(table(RUNS), ["scenario"], ks=[2]).set_index("k")
    assert chosen.loc[2, "pass^k"] == pytest.approx(4 / 9)


def test_the_summary_carries_pass_hat_k_for_the_sweeps_k() -> None:
    summary = summarize(table(RUNS))
    assert summary["pass^3"].iloc[0] == pytest.approx(by_formula(3)[0])
    assert summary["pass@3"].iloc[0] == pytest.approx(by_formula(3)[1])


def test_compare_reports_pass_hat_k_per_side() -> None:
    a = table(RUNS)
    b = table({"x": [True, True, True], "y": [False, False], "z": [True, False, True]})
    result = compare(a, b)
    rows = result.reliability.set_index(["side", "k"])
    assert rows.loc[("A", 2), "pass^k"] == pytest.approx(4 / 9)
    # B: x 1, y 0, z C(2,2)/C(3,2) = 1/3
    assert rows.loc[("B", 2), "pass^k"] == pytest.approx((1 + 0 + 1 / 3) / 3)
    text = result.report()
    assert "reliability over the paired repeats (per scenario, averaged):" in text
    assert "k=2: A pass^2 0.444 pass@2 1.000  B pass^2 0.444 pass@2 0.667  (3 scenarios)" in text
    assert result.to_json()["reliability"]


def test_the_report_shows_pass_hat_k(tmp_path: Path) -> None:
    from agentkit.eval.report import render_report

    page = render_report(table(RUNS), compare=table(RUNS))
    assert "Reliability over the repeats: pass^k and pass@k" in page
    assert "Reliability over the paired repeats: pass^k and pass@k" in page
    assert "gate: no regression" in page
