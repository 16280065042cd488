"""Notebooks 04-06 as regression tests: papermill runs with scripted models, checked through
the JSON summary each notebook writes."""

from __future__ import annotations

import json
from pathlib import Path

import papermill
from agentkit import TaskState
from agentkit.memory.fidelity import fact_retention
from agentkit.memory.sweep import load_scenario

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
SCENARIOS = REPO / "data" / "scenarios" / "compression"
SUMMARY = {
    "current_goal": "launch the booking app on March 14 in Lisbon",
    "important_facts": ["launch budget 12,000 EUR", "the stack stays on Postgres"],
}


def execute(name: str, tmp_path: Path, **parameters: object) -> dict:
    summary_path = tmp_path / f"{name}.json"
    papermill.execute_notebook(
        str(NOTEBOOKS / f"{name}.ipynb"),
        str(tmp_path / f"{name}.out.ipynb"),
        parameters={**parameters, "summary_path": str(summary_path)},
        kernel_name="python3",
        cwd=str(NOTEBOOKS),
        progress_bar=False,
    )
    return json.loads(summary_path.read_text(encoding="utf-8"))


def script(tmp_path: Path, replies: dict) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps(replies, ensure_ascii=False), encoding="utf-8")
    return f"scripted:{path}"


def kept(path: Path, summary: dict) -> float | None:
    """The retention the summary should score on a scenario (pinned facts carried over)."""
    scenario = load_scenario(path)
    state = TaskState(**summary, pinned_facts=scenario.pinned_facts)
    return fact_retention(state, scenario.facts).ratio


def test_04_sweeps_the_thresholds_and_records_a_failed_summary(tmp_path: Path) -> None:
    spec = script(tmp_path, {"summarize": [SUMMARY, "{not json"]})
    summary = execute(
        "04_compression_thresholds", tmp_path, model_spec=spec, scenario_dir=str(SCENARIOS)
    )
    rows = {(r["N"], r["T"], r["K"]): r for r in summary["rows"]}
    assert summary["grid_points"] == len(rows) == 8
    assert summary["summarize_calls"] == 2  # one per K; N only decides whether
    for n in (4, 12):
        assert rows[(n, 100, 2)]["status"] == "compressed"
        assert rows[(n, 100, 6)]["status"] == "failed"  # the malformed reply, sweep went on
        assert "structured output did not validate" in rows[(n, 100, 6)]["error"]
        assert rows[(n, 600, 2)]["status"] == rows[(n, 600, 6)]["status"] == "under_threshold"
    done = rows[(4, 100, 2)]
    assert done["tokens_after"] < done["tokens_before"]
    expected = kept(SCENARIOS / "project_planning_en.json", SUMMARY)
    assert expected is not None
    assert done["facts_in_state"] == round(expected * done["facts_total"])
    assert summary["facts_in_state_by_K"] == {"2": done["facts_in_state"]}
    # the strategy comparison (model fails on the malformed reply; hybrid keeps its
    # extractive part): extractive keeps the six facts without a model call
    strategies = {row["strategy"]: row for row in summary["strategies"]}
    assert set(strategies) == {"extractive", "hybrid"}
    assert strategies["extractive"]["facts_kept"] == 6


def test_05_runs_the_evaluation_sweep_and_the_fidelity_probe(tmp_path: Path) -> None:
    from agentkit.eval import load_scenarios, run_eval

    grid = {"compression.token_threshold": [300, 2000]}
    spec = script(tmp_path, {"summarize": [SUMMARY]})
    summary = execute(
        "05_evaluation_sweep",
        tmp_path,
        grid=grid,
        data_dir=str(REPO / "data"),
        fidelity_model=spec,
        fidelity_dir=str(SCENARIOS),
    )
    # The notebook's figures are the library's: the same sweep run here gives the same table.
    expected = run_eval(
        load_scenarios([REPO / "data" / "scenarios"]),
        model="scripted",
        grid=grid,
        data_dir=REPO / "data",
        progress=False,
    )
    assert summary["model"] == "scripted"
    assert summary["scenarios"] == expected["scenario"].nunique() >= 20
    assert summary["runs"] == len(expected) and summary["passed"] == int(expected["passed"].sum())
    by_threshold = expected.groupby("compression.token_threshold")["passed"].mean()
    assert summary["pass_rate_by"]["compression.token_threshold"] == {
        str(value): float(rate) for value, rate in by_threshold.items()
    }
    assert {row["scenario"] for row in summary["failed"]} == set(
        expected.loc[~expected["passed"], "scenario"]
    )
    # it ends with the run browser (on the failed runs, when some failed) and the first two
    # points side by side (one pair per scenario)
    failed_rows = [i for i, passed in enumerate(expected["passed"]) if not passed]
    assert summary["browser_rows"] == (failed_rows or list(range(len(expected))))
    assert summary["pairs"] == expected["scenario"].nunique()
    names = sorted(path.stem for path in SCENARIOS.glob("*.json"))
    assert summary["fidelity"] == {
        name: {"4": kept(SCENARIOS / f"{name}.json", SUMMARY)} for name in names
    }
    # the plot shows every strategy the notebook names, each scenario a bar (or why not)
    by_strategy = summary["fidelity_by_strategy"]
    assert list(by_strategy) == ["model K=4", "extractive K=4"]
    assert by_strategy["model K=4"] == {name: summary["fidelity"][name]["4"] for name in names}
    assert all(set(row) == set(names) for row in by_strategy.values())
    assert any(value for value in by_strategy["extractive K=4"].values())


def test_06_records_a_turn_replays_it_with_the_edited_prompt_and_saves_it(
    data_dir: Path, tmp_path: Path
) -> None:
    new_plan = {
        "goal": "traders",
        "steps": [{"id": "only", "type": "respond", "title": "Answer", "instruction": "none"}],
    }
    spec = script(tmp_path, {"plan": [new_plan]})
    summary = execute(
        "06_prompt_lab", tmp_path, model_spec=spec, data_dir=str(data_dir), save_override=True
    )
    assert summary["recorded_purposes"] == ["plan", "replan", "respond"]
    assert summary["replayed"] == [
        {"purpose": "plan", "template": "plan", "problem": "", "error": "", "repaired": False}
    ]
    assert summary["old_plan"]["steps"][0]["tool_name"] == "list_traders"
    assert summary["new_plan"] == new_plan
    sent = summary["new_plan_prompt"]
    assert "prefer a single tool step" in sent and "Make a short plan" not in sent
    assert sent.rstrip().endswith("list my traders")  # the recorded request, re-rendered
    agent = data_dir / "agents" / "desk-001"
    calls = agent / "conversations" / summary["conversation_id"] / summary["message_id"]
    assert (calls / "calls.jsonl").is_file()
    override = Path(summary["override_path"])
    assert override == agent / "prompts" / "plan.md"
    assert "prefer a single tool step" in override.read_text(encoding="utf-8")
