"""Evaluation runs on the scripted model: real agents, real data roots, the results table."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pandas as pd
import pytest
from agentkit.errors import UsageError
from agentkit.eval import (
    RUN_SPECIFIC_COLUMNS,
    Expectations,
    Scenario,
    load_results,
    load_scenario,
    load_scenarios,
    plan_runs,
    run_eval,
    save_results,
    summarize,
)
from agentkit.eval.scenario import OutOfBandCall

from .conftest import tree

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "data" / "scenarios"


def scenario(name: str) -> Scenario:
    return load_scenario(SCENARIOS / f"{name}.yaml")


def row(frame: pd.DataFrame, scenario_id: str) -> dict[str, object]:
    rows = frame[frame["scenario"] == scenario_id].to_dict("records")
    assert len(rows) == 1
    return rows[0]


def test_every_shipped_scenario_passes_on_its_scripted_replies(data_dir: Path) -> None:
    before = tree(data_dir)
    frame = run_eval(SCENARIOS, model="scripted", data_dir=data_dir, progress=False)
    assert list(frame["scenario"]) == [s.id for s in load_scenarios(SCENARIOS)]
    failed = frame.loc[~frame["passed"], ["scenario", "failures", "error"]]
    assert failed.empty, failed.to_dict("records")
    assert (frame["checks"] > 0).all() and (frame["error"] == "").all()
    trader = row(frame, "desk_create_trader_en")
    assert trader["tools"] == "get_exchange_configs,create_trader"
    assert (trader["questions"], trader["consents"], trader["turns"]) == (1, 1, 3)
    assert trader["model_calls"] == 5  # plan, 3 replans, respond (the turns' usage)
    assert trader["final_status"] == "completed"
    assert trader["exp_consent_for"] is True and trader["exp_state"] is True
    assert pd.isna(trader["exp_compressed"])  # not checked by this scenario
    memory = row(frame, "memory_compression_facts_en")
    assert memory["compressions"] == 1 and memory["fact_retention"] == 0.75
    assert (memory["messages_before"], memory["messages_after"]) == (12, 4)
    assert memory["tokens_after"] < memory["tokens_before"]
    assert row(frame, "desk_status_command_en")["model_calls"] == 0
    assert tree(data_dir) == before  # every run had a data root of its own


def test_a_threshold_grid_changes_what_compression_keeps(data_dir: Path) -> None:
    frame = run_eval(
        SCENARIOS,
        model="scripted",
        tags=["compression"],
        grid={"compression.token_threshold": [300, 2000]},
        data_dir=data_dir,
        progress=False,
    )
    assert frame.attrs["params"] == ["compression.token_threshold"]
    assert len(frame) == 6 and list(frame["point"]) == [0, 1] * 3
    low = frame[frame["compression.token_threshold"] == 300]
    high = frame[frame["compression.token_threshold"] == 2000]
    assert low["passed"].all() and (low["compressions"] == 1).all()
    assert sorted(low["fact_retention"]) == [0.5, 0.75, 0.75]
    assert not high["passed"].any() and (high["compressions"] == 0).all()
    assert high["failures"].str.contains("run: compressed FAILED").all()
    summary = summarize(frame)
    assert list(summary["compression.token_threshold"]) == [300, 2000]
    assert list(summary["pass_rate"]) == [1.0, 0.0]


def test_expectations_fail_with_what_was_expected_and_seen(data_dir: Path) -> None:
    wrong = scenario("desk_create_trader_en").model_copy(
        update={
            "expect": Expectations(
                tools_not_called=("create_trader",),
                answer_contains=("Beta",),
                state={
                    "desk": {
                        "traders": ["Beta"],
                        "trader_fields": {"Alpha": {"model_id": "model-2"}},
                    }
                },
            )
        }
    )
    result = run_eval([wrong], model="scripted", data_dir=data_dir, progress=False)
    got = row(result, "desk_create_trader_en")
    assert got["passed"] is False and got["error"] == ""
    assert got["exp_tools_not_called"] is False and got["exp_state"] is False
    assert got["exp_answer_contains"] is False
    assert got["exp_consent_for"] is True  # the turn-level checks still pass
    failures = str(got["failures"])
    assert "run: tools_not_called FAILED (called anyway: [create_trader])" in failures
    assert 'desk.traders = ["Beta"], found ["Alpha"]' in failures
    assert 'desk.trader_fields.Alpha.model_id = "model-2", found "model-1"' in failures
    assert got["checks_failed"] == 3


def test_a_kind_checked_at_several_turns_fails_when_one_of_them_does(data_dir: Path) -> None:
    original = scenario("desk_create_trader_en")
    turns = list(original.turns)
    turns[1] = turns[1].model_copy(update={"expect": Expectations(status="completed")})
    result = run_eval(
        [original.model_copy(update={"turns": tuple(turns)})],
        model="scripted",
        data_dir=data_dir,
        progress=False,
    )
    got = row(result, "desk_create_trader_en")
    assert got["exp_status"] is False and got["passed"] is False
    assert "turn 2: status FAILED (expected completed, was waiting_confirmation)" in str(
        got["failures"]
    )


def test_a_failing_out_of_band_call_is_an_error_row_and_the_sweep_goes_on(data_dir: Path) -> None:
    good = scenario("desk_status_command_en")
    broken_turn = good.turns[0].model_copy(
        update={
            "before": (
                OutOfBandCall(
                    tool="create_trader",
                    args={"name": "Ghost", "exchange_id": "ex-9", "model_id": "model-9"},
                ),
            )
        }
    )
    broken = good.model_copy(update={"id": "broken", "turns": (broken_turn,)})
    frame = run_eval([broken, good], model="scripted", data_dir=data_dir, progress=False)
    assert list(frame["scenario"]) == ["broken", "desk_status_command_en"]
    bad = row(frame, "broken")
    assert bad["passed"] is False and bad["turns"] == 0
    assert str(bad["error"]).startswith("turn 1: the out-of-band call create_trader failed")
    assert "ex-9" in str(bad["error"]) and "<run>" not in str(bad["error"])
    assert row(frame, "desk_status_command_en")["passed"] is True


def test_keep_dir_keeps_each_run_to_browse(data_dir: Path, tmp_path: Path) -> None:
    keep = tmp_path / "runs"
    run_eval(
        [scenario("desk_create_trader_en")],
        model="scripted",
        grid={"compression.keep_recent": [4, 8]},
        data_dir=data_dir,
        keep_dir=keep,
        progress=False,
    )
    assert sorted(p.name for p in keep.iterdir()) == [
        "desk_create_trader_en--p0",
        "desk_create_trader_en--p1",
    ]
    root = keep / "desk_create_trader_en--p1" / "agents" / "desk-001"
    assert '"keep_recent": 8' in (root / "config.json").read_text()
    traces = sorted(root.glob("conversations/*/*/calls.jsonl"))
    assert len(traces) == 3  # one per turn


def test_sweep_problems_are_found_before_any_run(data_dir: Path) -> None:
    unscripted = scenario("desk_status_command_en")
    turns = (unscripted.turns[0], unscripted.turns[0].model_copy(update={"script": None}))
    unscripted = unscripted.model_copy(update={"turns": turns})
    with pytest.raises(UsageError, match=r"'desk_status_command_en' has no script for turn\(s\) 2"):
        plan_runs([unscripted], model="scripted", data_dir=data_dir)
    assert [t.model for t in plan_runs([unscripted], model="llama", data_dir=data_dir)] == [
        "llama"
    ]  # a real model needs no script
    elsewhere = unscripted.model_copy(update={"agent": "nobody-007"})
    with pytest.raises(UsageError, match="no agent 'nobody-007'"):
        plan_runs([elsewhere], model="llama", data_dir=data_dir)
    with pytest.raises(UsageError, match="not both"):
        plan_runs([unscripted], model="llama", grid={"model": ["llama"]}, data_dir=data_dir)
    with pytest.raises(UsageError, match="unknown backend"):
        plan_runs([unscripted], model="gpt-5", data_dir=data_dir)
    bad_config = unscripted.model_copy(update={"config": {"compression": {"tokens": 5}}})
    with pytest.raises(UsageError, match=r"'compression\.tokens': unknown key"):
        plan_runs([bad_config], model="llama", data_dir=data_dir)
    with pytest.raises(UsageError, match="--workers must be at least 1"):
        run_eval([scenario("desk_status_command_en")], model="scripted", workers=0,
                 data_dir=data_dir, progress=False)  # fmt: skip
    with pytest.raises(UsageError, match="--executor must be"):
        run_eval([scenario("desk_status_command_en")], model="scripted", executor="ray://x:1",
                 data_dir=data_dir, progress=False)  # fmt: skip


def test_the_table_round_trips_through_parquet_and_csv(data_dir: Path, tmp_path: Path) -> None:
    frame = run_eval(
        load_scenarios(SCENARIOS, tags=["commands"]),
        model="scripted",
        grid={"planner.strategy": ["plan_replan", "next_step"]},
        data_dir=data_dir,
        progress=False,
    )
    parquet = load_results(save_results(frame, tmp_path / "r.parquet"))
    pd.testing.assert_frame_equal(parquet, frame)
    csv = load_results(save_results(frame, tmp_path / "r.csv"))
    assert list(csv["scenario"]) == list(frame["scenario"])
    assert list(csv["planner.strategy"]) == ["plan_replan", "next_step"] * 2
    assert csv["passed"].tolist() == frame["passed"].tolist()
    with pytest.raises(UsageError, match=r"\.parquet or \.csv"):
        save_results(frame, tmp_path / "r.xlsx")


def test_a_process_pool_gives_the_same_table_as_one_process(data_dir: Path) -> None:
    chosen = load_scenarios(SCENARIOS, tags=["consent"])[:2]
    one = run_eval(chosen, model="scripted", data_dir=data_dir, progress=False)
    pool = run_eval(chosen, model="scripted", workers=2, data_dir=data_dir, progress=False)
    pd.testing.assert_frame_equal(
        one.drop(columns=list(RUN_SPECIFIC_COLUMNS)), pool.drop(columns=list(RUN_SPECIFIC_COLUMNS))
    )


def test_run_eval_works_where_an_event_loop_is_running(data_dir: Path) -> None:
    """As in a notebook cell: the kernel's loop is running in the calling thread."""

    async def cell() -> pd.DataFrame:
        return run_eval(
            [scenario("desk_haole_is_an_answer_zh")],
            model="scripted",
            data_dir=data_dir,
            progress=False,
        )

    frame = asyncio.run(cell())
    assert frame["passed"].tolist() == [True]
    assert frame["exp_new_plan"].tolist() == [True]
