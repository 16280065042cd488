"""Budgets: a run stopped at a safe point with outcome ``budget``; a sweep budget that leaves runs
unstarted and a resume that finishes them; Ctrl-C that stops cleanly so --resume picks up."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from agentkit import FunctionModel, ModelRequest
from agentkit.eval import (
    RUN_SPECIFIC_COLUMNS,
    PointTask,
    RunRow,
    SweepInterrupted,
    load_results,
    load_scenarios,
    run_eval,
    summarize,
)
from agentkit.eval import budget as budget_module
from agentkit.eval import point as point_module

from .conftest import run_cli
from .test_eval_runs import SCENARIOS, row, scenario

TRADER = "desk_create_trader_en"


def comparable(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns=[*RUN_SPECIFIC_COLUMNS, "attempts"]).reset_index(drop=True)


def test_a_model_call_budget_stops_the_run_mid_flow_and_keeps_its_conversation(
    data_dir: Path, tmp_path: Path
) -> None:
    keep = tmp_path / "runs"
    frame = run_eval(
        [scenario(TRADER)],
        model="scripted",
        max_model_calls=1,
        keep_dir=keep,
        data_dir=data_dir,
        progress=False,
    )
    got = row(frame, TRADER)
    assert got["outcome"] == "budget" and got["passed"] is False and got["error"] == ""
    assert got["budget_reason"] == "max_model_calls: 1 model calls made, the limit is 1"
    # the plan call was made and its read step ran; the replan call was never sent: the turn
    # was cancelled at that safe point, and the run stopped there
    assert (got["turns"], got["result_status"]) == (1, "cancelled")
    assert got["tools"] == "get_exchange_configs"
    assert got["checks"] == 0  # a run stopped by its budget is not judged
    (history,) = keep.glob("*/agents/desk-001/conversations/*/history.json")
    messages = json.loads(history.read_text(encoding="utf-8"))
    assert [m["role"] for m in messages] == ["user", "assistant"]  # whole, parseable
    summary = summarize(frame)
    assert summary["over_budget"].tolist() == [1] and summary["passed"].tolist() == [0]


def test_token_and_time_budgets(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    frame = run_eval(
        [scenario(TRADER)], model="scripted", max_tokens=2000, data_dir=data_dir, progress=False
    )
    tokens = row(frame, TRADER)
    assert tokens["outcome"] == "budget" and tokens["budget_reason"].startswith("max_tokens: ")
    assert tokens["input_tokens"] + tokens["output_tokens"] >= 2000

    calls: list[str] = []

    async def never(request: ModelRequest) -> str:
        calls.append(request.purpose)
        await asyncio.Event().wait()  # never answers: only the deadline can end this run
        raise AssertionError("unreachable")

    # The meter's clock stands still, so the run's setup (opening the agent: slow under load)
    # spends none of the 0.3 s and the first turn is always sent; the deadline is then the
    # timer the turn arms on its loop's clock, which ends the turn whether it fires before
    # the plan call or during it.
    stopped = time.monotonic()
    monkeypatch.setattr(budget_module, "time", SimpleNamespace(monotonic=lambda: stopped))
    (timed,) = run_eval(
        [scenario(TRADER)],
        model=FunctionModel(never),
        max_seconds=0.3,
        data_dir=data_dir,
        progress=False,
    ).to_dict("records")
    assert timed["outcome"] == "budget" and timed["budget_reason"].startswith("max_seconds: ")
    assert calls in ([], ["plan"])  # the plan call, if it started, never answered: interrupted
    assert (timed["turns"], timed["result_status"]) == (1, "cancelled")


def test_a_sweep_budget_leaves_runs_unstarted_and_resume_finishes_them(
    data_dir: Path, tmp_path: Path
) -> None:
    chosen = load_scenarios(SCENARIOS, tags=["consent"])[:4]
    full = run_eval(chosen, model="scripted", data_dir=data_dir, progress=False)
    out = tmp_path / "r.parquet"
    args = ["--data-dir", str(data_dir), "eval", *(str(s.source) for s in chosen)]
    args += ["--model", "scripted", "--no-progress", "--out", str(out)]
    first = run_cli(*args, "--sweep-max-tokens", "1")
    assert first.exit_code == 0, first.stderr
    table = load_results(out)
    assert table["outcome"].tolist()[0] != "not_started"
    assert table["outcome"].tolist()[1:] == ["not_started"] * 3  # the first run spent it
    assert str(table["budget_reason"].iloc[1]).startswith("sweep_max_tokens: ")
    assert "3 of 4 runs not started (sweep_max_tokens: " in first.stdout
    assert summarize(table)["not_started"].tolist() == [3]
    again = run_cli(*args, "--resume")
    assert again.exit_code == 0, again.stderr
    pd.testing.assert_frame_equal(comparable(load_results(out)), comparable(full))


def test_ctrl_c_stops_the_sweep_cleanly_and_resume_picks_up(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen = [*load_scenarios(SCENARIOS, tags=["commands"]), scenario(TRADER)]
    real = point_module._attempt
    seen: list[str] = []

    def interrupted(task: PointTask) -> RunRow:
        seen.append(task.scenario.id)
        if len(seen) == 2:
            raise KeyboardInterrupt
        return real(task)

    monkeypatch.setattr(point_module, "_attempt", interrupted)
    with pytest.raises(SweepInterrupted) as caught:
        run_eval(chosen, model="scripted", data_dir=data_dir, progress=False)
    partial = caught.value.results
    assert caught.value.finished == 1 and len(partial) == len(chosen)
    assert partial["outcome"].tolist()[1:] == ["not_started"] * (len(chosen) - 1)
    assert partial["budget_reason"].tolist()[1:] == ["interrupted"] * (len(chosen) - 1)

    out = tmp_path / "r.parquet"
    seen.clear()
    args = ["--data-dir", str(data_dir), "eval", *(str(s.source) for s in chosen)]
    args += ["--model", "scripted", "--no-progress", "--out", str(out)]
    stopped = run_cli(*args)
    assert stopped.exit_code == 130
    assert "stopped after 1 of 3 runs; wrote" in stopped.stderr and stopped.stdout == ""
    monkeypatch.setattr(point_module, "_attempt", real)
    resumed = run_cli(*args, "--resume")
    assert resumed.exit_code == 0, resumed.stderr
    assert "all 3 runs passed" in resumed.stdout
    assert load_results(out)["outcome"].tolist() == ["passed"] * 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-seconds", "0"], "--max-seconds must be positive"),
        (["--max-tokens", "0"], "--max-tokens"),
        (["--concurrency", "0"], "--concurrency"),
        (["--repeat", "0"], "--repeat"),
        (["--tag", "simulated_user", "--user-model", "gpt-5"], "unknown backend 'gpt-5'"),
    ],
    ids=["zero-seconds", "zero-tokens", "zero-concurrency", "zero-repeat", "bad-user-model"],
)
def test_bad_budget_or_concurrency_is_one_line_and_exit_2_before_any_run(
    data_dir: Path, args: list[str], message: str
) -> None:
    tag = [] if "--tag" in args else ["--tag", "commands"]
    result = run_cli(
        "--data-dir", str(data_dir), "eval", str(SCENARIOS), "--model", "scripted", *tag,
        "--no-progress", *args,
    )  # fmt: skip
    assert result.exit_code == 2, result
    assert message in result.stderr and result.stdout == ""


CHAT = "chat_sessions_en"


def test_budgets_stop_a_chat_turn_as_they_stop_a_planner_turn(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a call budget: the first turn's one chat call spends it, so the second user message is
    # never sent (a chat turn makes one call: the between-turns safe point is where it stops)
    keep = tmp_path / "runs"
    frame = run_eval(
        [scenario(CHAT)],
        model="scripted",
        max_model_calls=1,
        keep_dir=keep,
        data_dir=data_dir,
        progress=False,
    )
    got = row(frame, CHAT)
    assert got["outcome"] == "budget" and got["passed"] is False
    assert got["budget_reason"] == "max_model_calls: 1 model calls made, the limit is 1"
    assert (got["turns"], got["result_status"], got["model_calls"]) == (1, "completed", 1)
    (history,) = keep.glob("*/agents/innovator-001/conversations/*/history.json")
    messages = json.loads(history.read_text(encoding="utf-8"))
    assert [m["role"] for m in messages] == ["user", "assistant"]  # the first turn, whole

    # a deadline while the chat model has not sent its first delta: the turn is cancelled
    started: list[str] = []

    async def silent(request: ModelRequest) -> str:
        started.append(request.purpose)
        await asyncio.Event().wait()  # never streams a delta: only the deadline ends it
        raise AssertionError("unreachable")

    stopped = time.monotonic()
    monkeypatch.setattr(budget_module, "time", SimpleNamespace(monotonic=lambda: stopped))
    (timed,) = run_eval(
        [scenario(CHAT)],
        model=FunctionModel(silent),
        max_seconds=0.3,
        data_dir=data_dir,
        progress=False,
    ).to_dict("records")
    assert timed["outcome"] == "budget" and timed["budget_reason"].startswith("max_seconds: ")
    assert started in ([], ["chat"])
    assert (timed["turns"], timed["result_status"]) == (1, "cancelled")
