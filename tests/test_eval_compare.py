"""Paired comparison of two results tables: intervals, McNemar's exact test, flips, unpaired rows;
and the sweep view's per-variant pass rates."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from agentkit.errors import UsageError
from agentkit.eval import compare, save_results
from agentkit.eval.stats import (
    DEFAULT_SEED,
    mcnemar_exact,
    paired_bootstrap,
    pass_at_k,
    pass_hat_k,
    wilson_interval,
)
from scipy import stats

from .conftest import run_cli

#: scenario → (passed on A, passed on B): 1 broke, 5 fixed, 4 pass on both, 2 fail on both
OUTCOMES = {
    "s01": (True, False),
    **{f"s0{n}": (False, True) for n in range(2, 7)},
    **{f"s{n:02d}": (True, True) for n in range(7, 11)},
    "s11": (False, False),
    "s12": (False, False),
}


def table(side: int, strategy: str, extra: dict[str, bool] | None = None) -> pd.DataFrame:
    outcomes = {name: pair[side] for name, pair in OUTCOMES.items()} | (extra or {})
    rows = [
        {
            "scenario": name,
            "point": 0,
            "repeat": 0,
            "planner.strategy": strategy,
            "compression.keep_recent": 4,
            "model": "scripted",
            "passed": passed,
            "outcome": "passed" if passed else "failed",
            "error": "",
            "input_tokens": 100 + 10 * side,
            "output_tokens": 20,
            "model_calls": 3 + side,
            "latency_ms": 50.0 * (1 + side),
        }
        for name, passed in outcomes.items()
    ]
    frame = pd.DataFrame(rows)
    frame.attrs["params"] = ["planner.strategy", "compression.keep_recent"]
    return frame


def binomial_p(b: int, c: int) -> float:
    """McNemar's exact two-sided p-value, computed directly."""
    n = b + c
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n)


def test_compare_pairs_runs_and_reports_intervals_the_exact_test_and_the_flips() -> None:
    a = table(0, "plan_replan", {"only_on_a": True})
    b = table(1, "next_step")
    b.loc[len(b)] = {**b.iloc[0].to_dict(), "scenario": "never_ran", "outcome": "not_started",
                     "passed": False}  # fmt: skip
    result = compare(a, b)
    assert result.on == ("scenario", "repeat", "compression.keep_recent", "model")
    assert result.varies == ("planner.strategy",)
    d = result.difference.iloc[0]
    assert (d["pairs"], d["only_a"], d["only_b"]) == (12, 1, 5)
    assert d["p_value"] == pytest.approx(binomial_p(1, 5)) == pytest.approx(0.21875)
    assert d["difference"] == pytest.approx(4 / 12)
    assert d["ci_low"] <= d["difference"] <= d["ci_high"] and d["seed"] == DEFAULT_SEED
    sides = result.sides.set_index("side")
    assert list(sides["passed"]) == [5, 9] and list(sides["runs"]) == [12, 12]
    for label, passed in (("A", 5), ("B", 9)):
        wilson = stats.binomtest(passed, 12).proportion_ci(0.95, method="wilson")
        assert sides.loc[label, "ci_low"] == pytest.approx(wilson.low)
        assert sides.loc[label, "ci_high"] == pytest.approx(wilson.high)
    flips = dict(zip(result.flipped["scenario"], result.flipped["flip"], strict=True))
    assert flips == {"s01": "broke", **{f"s0{n}": "fixed" for n in range(2, 7)}}
    unpaired = result.unpaired.set_index("scenario")
    assert unpaired.loc["only_on_a", "side"] == "A"
    assert unpaired.loc["never_ran", "outcome"] == "not_started"
    deltas = result.deltas.set_index("metric")
    assert deltas.loc["tokens", "mean_delta"] == pytest.approx(10)
    assert deltas.loc["model_calls", "median_delta"] == pytest.approx(1)
    assert deltas.loc["latency_ms", "a_mean"] == pytest.approx(50)
    text = result.report()
    assert "McNemar exact two-sided p = 0.2188" in text
    assert f"seed {DEFAULT_SEED}" in text and "differs (not paired on): planner.strategy" in text
    assert "fixed (failed on A, passed on B): 5" in text and "  s01" in text
    assert "A only: only_on_a (passed)" in text and "B only: never_ran (not_started)" in text
    again = compare(a, b)  # a fixed seed: the same interval every time
    assert again.difference.equals(result.difference)
    other = compare(a, b, seed=1).difference.iloc[0]
    assert other["difference"] == d["difference"]


def test_the_statistics_match_their_definitions() -> None:
    for b, c in [(0, 0), (0, 3), (1, 5), (7, 2), (10, 10), (3, 40)]:
        assert mcnemar_exact(b, c) == pytest.approx(binomial_p(b, c))
    assert wilson_interval(0, 10)[0] == 0.0
    assert wilson_interval(10, 10)[1] == pytest.approx(1.0)
    assert all(math.isnan(x) for x in wilson_interval(0, 0))
    diff, low, high = paired_bootstrap([True] * 5, [True] * 5)
    assert (diff, low, high) == (0.0, 0.0, 0.0)
    assert pass_at_k(3, 2, 3) == 1.0 and pass_hat_k(3, 2, 3) == 0.0
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5) and pass_hat_k(4, 3, 2) == pytest.approx(0.5)
    assert math.isnan(pass_at_k(2, 1, 3))


def test_agentkit_compare_prints_the_comparison_and_writes_it(tmp_path: Path) -> None:
    a = save_results(table(0, "plan_replan"), tmp_path / "a.parquet")
    b = save_results(table(1, "next_step"), tmp_path / "b.csv")
    out = tmp_path / "cmp.json"
    result = run_cli("compare", str(a), str(b), "--out", str(out), "--seed", "7")
    assert result.exit_code == 0, result.stderr
    assert "McNemar exact two-sided p = 0.2188" in result.stdout
    assert "seed 7" in result.stdout and f"wrote {out}" in result.stdout
    saved = json.loads(out.read_text())
    assert saved["difference"]["only_b"] == 5 and saved["seed"] == 7
    assert {f["scenario"] for f in saved["flipped"]} == {"s01", *(f"s0{n}" for n in range(2, 7))}
    pairs = tmp_path / "pairs.csv"
    assert run_cli("compare", str(a), str(b), "--out", str(pairs)).exit_code == 0
    assert pd.read_csv(pairs)["flip"].fillna("").tolist().count("fixed") == 5
    bad = run_cli("compare", str(a), str(b), "--on", "nothing")
    assert bad.exit_code == 2 and "cannot pair on ['nothing']" in bad.stderr
    with pytest.raises(UsageError):
        compare(table(0, "x"), table(1, "y"), on=["nothing"])


def test_the_sweep_view_plots_each_variants_pass_rate_with_its_interval() -> None:
    from lab.sweep_view import figure_png, pass_rate_figure, variant_rates

    both = pd.concat([table(0, "plan_replan"), table(1, "next_step")], ignore_index=True)
    both.attrs["params"] = ["planner.strategy"]
    rates = variant_rates(both)
    assert list(rates["variant"]) == ["planner.strategy=plan_replan", "planner.strategy=next_step"]
    assert list(rates["passed"]) == [5, 9]
    assert rates["ci_low"].iloc[1] == pytest.approx(wilson_interval(9, 12)[0])
    labelled = variant_rates({"A": table(0, "x"), "B": table(1, "y")})
    assert list(labelled["variant"]) == ["A", "B"] and list(labelled["runs"]) == [12, 12]
    figure = pass_rate_figure(rates, title="strategies")
    (axes,) = figure.axes
    assert axes.get_title() == "strategies"
    assert [t.get_text() for t in axes.get_xticklabels()] == list(rates["variant"])
    assert figure_png(figure).startswith(b"\x89PNG")
