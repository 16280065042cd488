"""The shipped scenarios include judged ones, so the judge → label → agreement loop works from
the shell on shipped data: ``agentkit eval --tag judged`` (the scripted judges decide),
``agentkit label``, ``agentkit agreement``; and ``agentkit score --judge FILE`` says why a
judge could not decide."""

from __future__ import annotations

from pathlib import Path

from agentkit import testing
from agentkit.eval import load_results, load_scenarios, run_ids

from .conftest import run_cli

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "data" / "scenarios"


def test_the_judged_scenarios_have_a_scripted_judge_named_helpful() -> None:
    judged = load_scenarios(SCENARIOS, tags=["judged"])
    assert len(judged) >= 3
    for scenario in judged:
        names = [judge.name for judge in scenario.expect.judges]
        assert names == ["helpful"], scenario.id
        assert all(judge.script for judge in scenario.expect.judges), scenario.id
    # only the judged ones carry a judge (a judge on a real model costs a call per run)
    every = load_scenarios(SCENARIOS)
    assert {s.id for s in every if s.expect.judges} == {s.id for s in judged}


def test_eval_label_agreement_from_the_shell_on_the_shipped_scenarios(tmp_path: Path) -> None:
    root = testing.data_root(tmp_path / "data", source=REPO / "data")
    runs = tmp_path / "runs.parquet"
    made = run_cli(
        "--data-dir", str(root), "eval", str(SCENARIOS), "--tag", "judged", "--model",
        "scripted", "--repeat", "4", "--out", str(runs), "--no-progress",
    )  # fmt: skip
    assert made.exit_code == 0, made.stderr
    table = load_results(runs)
    assert len(table) == 12 and table["passed"].all()
    assert set(table["judge_helpful"]) == {"pass"} and not table["judge_errors"].any()
    ids = run_ids(table)

    few = run_cli("agreement", str(runs), "--judge", "helpful")
    assert few.exit_code == 0 and "0 runs labelled and judged, too few" in few.stdout

    first = ids[0]
    labelled = run_cli("label", str(runs), first, "fail", "--note", "names no trader")
    assert labelled.exit_code == 0, labelled.stderr
    for run in ids[1:]:
        assert run_cli("label", str(runs), run, "pass").exit_code == 0
    done = run_cli("agreement", str(runs), "--judge", "helpful", "--seed", "3")
    assert done.exit_code == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("judge helpful: agreement 91.7% on 12 runs, kappa "), lines[0]
    assert f"  {first}: human fail, judge pass  — names no trader" in lines


def test_score_with_a_judge_file_prints_each_judge_error_with_its_reason(tmp_path: Path) -> None:
    root = testing.data_root(tmp_path / "data", source=REPO / "data")
    runs = tmp_path / "runs.parquet"
    made = run_cli(
        "--data-dir", str(root), "eval", str(SCENARIOS), "--tag", "judged", "--model",
        "scripted", "--out", str(runs), "--no-progress",
    )  # fmt: skip
    assert made.exit_code == 0, made.stderr
    file = tmp_path / "judges.yaml"
    file.write_text("- name: terse\n  rubric: The answer is one sentence.\n", encoding="utf-8")
    done = run_cli(
        "--data-dir", str(root), "score", str(runs), "--judge", str(file),
        "--out", str(tmp_path / "scored.parquet"), "--scenarios", str(SCENARIOS),
    )  # fmt: skip
    assert done.exit_code == 0, done.stderr
    lines = done.stdout.splitlines()
    header = "3 judge errors (a judge could not decide: counted apart, not as failures):"
    assert header in lines
    reason = lines[lines.index(header) + 1]
    # the scripted model has no reply for a judge without a script: the line says so
    assert reason.startswith("  terse (3 runs, e.g. desk_delete_refused_en--p0): ")
    assert "no scripted replies" in reason and "--judge-model" in reason
