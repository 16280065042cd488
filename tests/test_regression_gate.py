"""The regression gate: ``gate(a, b)``, ``agentkit compare A B --gate``, named baselines and
``agentkit eval … --baseline NAME`` — exit 1 on a regression, 0 on a rerun of the same code,
a flaky scenario flagged but never failing the gate by itself."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from agentkit.eval import gate, load_results, save_results
from agentkit.eval.stats import DEFAULT_SEED, mcnemar_exact

from .conftest import run_cli
from .test_eval_runs import SCENARIOS


def table(
    outcomes: dict[str, list[bool]], *, sim_ok: dict[str, bool] | None = None
) -> pd.DataFrame:
    """A results table: per scenario, the passed column of each repeat."""
    rows = [
        {
            "scenario": name,
            "point": 0,
            "repeat": repeat,
            "planner.strategy": "plan_replan",
            "model": "scripted",
            "passed": passed,
            "outcome": "passed" if passed else "failed",
            "error": "",
            "input_tokens": 100,
            "output_tokens": 20,
            "model_calls": 3,
            "latency_ms": 10.0,
            **({"sim_user_ok": (sim_ok or {}).get(name, True)} if sim_ok is not None else {}),
        }
        for name, passes in outcomes.items()
        for repeat, passed in enumerate(passes)
    ]
    frame = pd.DataFrame(rows)
    frame.attrs["params"] = ["planner.strategy"]
    return frame


STABLE = {f"s{n:02d}": [True, True, True] for n in range(20)}


def test_a_rerun_of_the_same_results_is_no_regression() -> None:
    verdict = gate(table(STABLE), table(STABLE))
    assert not verdict.regressed and verdict.exit_code == 0
    assert verdict.regressions == () and verdict.flaky == ()
    assert "gate: no regression" in verdict.report()


def test_an_injected_regression_fires_every_rule_and_names_the_scenarios() -> None:
    broken = {**STABLE, **{f"s{n:02d}": [False, False, False] for n in range(8)}}
    verdict = gate(table(STABLE), table(broken))
    assert verdict.regressed and verdict.exit_code == 1
    rules = [item.rule for item in verdict.regressions]
    assert rules[:2] == ["mcnemar", "bootstrap"] and rules.count("scenario") == 8
    d = verdict.comparison.difference.iloc[0]
    assert (int(d["only_a"]), int(d["only_b"])) == (24, 0)
    assert f"p = {mcnemar_exact(24, 0):.3g} < 0.05: 24 pairs passed on A only" in str(
        verdict.regressions[0]
    )
    assert float(d["ci_high"]) < 0 and f"seed {DEFAULT_SEED}" in str(verdict.regressions[1])
    scenarios = [item.scenario for item in verdict.regressions if item.rule == "scenario"]
    assert scenarios == [f"s{n:02d}" for n in range(8)]
    assert "s00 passed all 3 repeats on A, failed on B" in verdict.report()


def test_one_stable_flip_is_a_regression_by_the_scenario_rule_alone() -> None:
    verdict = gate(table(STABLE), table({**STABLE, "s05": [False, False, False]}))
    assert [item.rule for item in verdict.regressions] == ["scenario"]
    assert verdict.regressions[0].scenario == "s05"


def test_a_flaky_scenario_is_flagged_but_does_not_fail_the_gate() -> None:
    flaky = {**STABLE, "s03": [True, False, True], "s07": [False, True, True]}
    verdict = gate(table(STABLE), table(flaky))
    assert not verdict.regressed and verdict.exit_code == 0
    assert [(f.scenario, f.passed_a, f.passed_b, f.runs) for f in verdict.flaky] == [
        ("s03", 3, 2, 3),
        ("s07", 3, 2, 3),
    ]
    assert "flaky (repeats disagree; not counted as regressions): 2" in verdict.report()
    # flaky on A's side too
    verdict = gate(table(flaky), table(STABLE))
    assert not verdict.regressed and len(verdict.flaky) == 2


def test_an_improvement_is_not_a_regression() -> None:
    worse = {name: [False, False, False] for name in STABLE}
    verdict = gate(table(worse), table(STABLE))
    assert not verdict.regressed
    assert float(verdict.comparison.difference.iloc[0]["p_value"]) < 0.05


def test_simulated_user_deviations_can_be_left_out_and_are_counted() -> None:
    broken = {**STABLE, "s01": [False, False, False]}
    flagged = {"s01": False}
    a, b = table(STABLE, sim_ok={}), table(broken, sim_ok=flagged)
    assert gate(a, b).regressed
    verdict = gate(a, b, exclude_sim_deviations=True)
    assert not verdict.regressed and verdict.comparison.excluded == (0, 3)
    assert "left out as simulated-user deviations: 0 runs of A, 3 of B" in verdict.report()
    assert "3 of B" in verdict.comparison.report()


def test_compare_gate_exits_1_on_a_regression_and_prints_it(tmp_path: Path) -> None:
    a, b, same = tmp_path / "a.parquet", tmp_path / "b.parquet", tmp_path / "same.parquet"
    save_results(table(STABLE), a)
    save_results(table({**STABLE, "s02": [False] * 3, "s11": [False] * 3}), b)
    save_results(table(STABLE), same)
    result = run_cli("compare", str(a), str(b), "--gate")
    assert result.exit_code == 1, result.stderr
    assert "gate: REGRESSION" in result.stdout
    assert "regression scenario: s02 passed all 3 repeats on A, failed on B" in result.stdout
    assert "regression scenario: s11" in result.stdout
    # without --gate the same comparison exits 0
    assert run_cli("compare", str(a), str(b)).exit_code == 0
    rerun = run_cli("compare", str(a), str(same), "--gate")
    assert rerun.exit_code == 0 and "gate: no regression" in rerun.stdout
    out = tmp_path / "verdict.json"
    run_cli("compare", str(a), str(b), "--gate", "--out", str(out))
    assert '"regressed": true' in out.read_text(encoding="utf-8")


def test_baselines_are_pinned_listed_and_removed(tmp_path: Path, data_dir: Path) -> None:
    results = tmp_path / "r.csv"
    save_results(table(STABLE), results)
    root = ["--data-dir", str(data_dir)]
    pinned = run_cli(*root, "baseline", "pin", str(results), "main-v1")
    assert pinned.exit_code == 0, pinned.stderr
    assert "pinned main-v1: 60 runs" in pinned.stdout
    assert (data_dir / "baselines" / "main-v1.parquet").is_file()
    listed = run_cli(*root, "baseline", "list")
    assert listed.stdout.startswith("main-v1\t60 runs\t")
    bad = run_cli(*root, "baseline", "pin", str(results), "../escape")
    assert bad.exit_code == 2 and "a baseline name is" in bad.stderr
    assert run_cli(*root, "baseline", "rm", "main-v1").exit_code == 0
    assert run_cli(*root, "baseline", "list").stdout.strip() == "no baselines pinned"
    missing = run_cli(*root, "baseline", "rm", "main-v1")
    assert missing.exit_code == 2 and "no baseline 'main-v1'" in missing.stderr


@pytest.mark.parametrize("rerun", [True, False])
def test_eval_with_a_baseline_gates_the_same_way(
    tmp_path: Path, data_dir: Path, rerun: bool
) -> None:
    """A scripted sweep pinned as a baseline; the same code again exits 0, the same sweep
    with a budget that stops every run (an injected regression) exits 1."""
    chosen = [str(SCENARIOS / f"{name}.yaml") for name in
              ("desk_create_trader_en", "notes_add_note_en", "notes_search_en")]  # fmt: skip
    root = ["--data-dir", str(data_dir)]
    first = tmp_path / "first.parquet"
    made = run_cli(*root, "eval", *chosen, "--model", "scripted", "--no-progress",
                   "--out", str(first))  # fmt: skip
    assert made.exit_code == 0, made.stdout + made.stderr
    assert load_results(first)["passed"].all()
    assert run_cli(*root, "baseline", "pin", str(first), "main").exit_code == 0
    extra = [] if rerun else ["--max-model-calls", "1"]
    gated = run_cli(*root, "eval", *chosen, "--model", "scripted", "--no-progress",
                    "--baseline", "main", *extra)  # fmt: skip
    if rerun:
        assert gated.exit_code == 0, gated.stdout + gated.stderr
        assert "gate: no regression" in gated.stdout
    else:
        assert gated.exit_code == 1, gated.stdout + gated.stderr
        assert "gate: REGRESSION" in gated.stdout
        for name in ("desk_create_trader_en", "notes_add_note_en"):
            assert f"regression scenario: {name} passed the run on A, failed on B" in gated.stdout
    unknown = run_cli(*root, "eval", *chosen, "--model", "scripted", "--no-progress",
                      "--baseline", "nope")  # fmt: skip
    assert unknown.exit_code == 2 and "no baseline 'nope'" in unknown.stderr


def test_tables_without_a_run_in_common_fail_the_gate() -> None:
    renamed = {f"t{n:02d}": passes for n, passes in enumerate(STABLE.values())}
    verdict = gate(table(STABLE), table(renamed))
    assert verdict.regressed and [item.rule for item in verdict.regressions] == ["no_pairs"]
    assert "no run of B pairs with a run of A (120 rows without a partner)" in verdict.report()
