"""Retrying runs that ended in an error, and resuming a sweep from its earlier table."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from agentkit.eval import (
    RUN_SPECIFIC_COLUMNS,
    PointTask,
    RunRow,
    load_results,
    load_scenarios,
    run_eval,
    save_results,
)
from agentkit.eval import point as point_module
from agentkit.eval.scenario import OutOfBandCall

from .conftest import run_cli
from .test_eval_runs import SCENARIOS, row, scenario

GRID = {"planner.max_steps": [3, 8]}


def comparable(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns=[*RUN_SPECIFIC_COLUMNS, "attempts"]).reset_index(drop=True)


def counting_attempts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the scenario of every attempt the (in-process) executor makes."""
    seen: list[str] = []
    real = point_module._attempt

    def attempt(task: PointTask) -> RunRow:
        seen.append(task.scenario.id)
        return real(task)

    monkeypatch.setattr(point_module, "_attempt", attempt)
    return seen


def test_an_error_row_is_retried_and_a_failed_expectation_is_not(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = scenario("desk_status_command_en")
    broken_turn = good.turns[0].model_copy(
        update={"before": (OutOfBandCall(tool="delete_trader", args={"trader_id": "tr-404"}),)}
    )
    broken = good.model_copy(update={"id": "broken", "turns": (broken_turn,)})
    seen = counting_attempts(monkeypatch)
    frame = run_eval([broken, good], model="scripted", data_dir=data_dir, retries=2, progress=False)
    assert seen == ["broken", "broken", "broken", "desk_status_command_en"]
    assert row(frame, "broken")["attempts"] == 3 and row(frame, "broken")["error"]
    assert row(frame, "desk_status_command_en")["attempts"] == 1


def test_a_flaky_run_passes_on_its_retry(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = point_module._attempt
    calls: list[int] = []

    def flaky(task: PointTask) -> RunRow:
        calls.append(1)
        result = real(task)
        if len(calls) == 1:  # the first attempt dies, as on a worker that lost its model
            return replace(result, passed=False, error="ConnectionError: worker lost")
        return result

    monkeypatch.setattr(point_module, "_attempt", flaky)
    chosen = [scenario("desk_status_command_en")]
    without = run_eval(chosen, model="scripted", data_dir=data_dir, progress=False)
    assert without["error"].iloc[0] == "ConnectionError: worker lost"
    calls.clear()
    frame = run_eval(chosen, model="scripted", data_dir=data_dir, retries=1, progress=False)
    assert bool(frame["passed"].iloc[0]) and frame["attempts"].iloc[0] == 2
    with pytest.raises(Exception, match="negative"):
        run_eval(chosen, model="scripted", data_dir=data_dir, retries=-1, progress=False)


def test_resume_runs_only_the_missing_and_errored_runs(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen = load_scenarios(SCENARIOS, tags=["commands"])
    full = run_eval(chosen, model="scripted", grid=GRID, data_dir=data_dir, progress=False)
    assert len(full) == 2 * len(chosen) >= 4
    # An interrupted sweep: the last run never happened, the first one ended in an error.
    partial = full.iloc[:-1].copy()
    partial.loc[partial.index[0], "error"] = "TimeoutError: turn 1 took too long"
    previous = load_results(save_results(partial, tmp_path / "partial.parquet"))
    seen = counting_attempts(monkeypatch)
    resumed = run_eval(
        chosen, model="scripted", grid=GRID, data_dir=data_dir, previous=previous, progress=False
    )
    assert seen == [full["scenario"].iloc[0], full["scenario"].iloc[-1]]  # two runs, not all
    pd.testing.assert_frame_equal(comparable(resumed), comparable(full))


def test_cli_resume(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.parquet"
    keep = tmp_path / "runs"
    args = ["--data-dir", str(data_dir), "eval", str(SCENARIOS), "--model", "scripted"]
    args += ["--tag", "commands", "--grid", "planner.max_steps=3,8", "--no-progress"]
    first = run_cli(*args, "--out", str(out))
    assert first.exit_code == 0, first.stderr
    before = load_results(out)
    again = run_cli(*args, "--out", str(out), "--resume", "--keep", str(keep))
    assert again.exit_code == 0, again.stderr
    assert not keep.exists() or not any(keep.iterdir())  # nothing had to run again
    pd.testing.assert_frame_equal(load_results(out), before)  # timings too: the same rows
    refused = run_cli(*args, "--resume")
    assert refused.exit_code == 2 and "--resume needs --out" in refused.stderr
    assert refused.stderr.count("\n") == 1
