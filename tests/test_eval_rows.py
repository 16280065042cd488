"""The results row is declared once (RunRow): its columns are pinned here, a stored row reads
back as the same typed row, and a scenario source adds its own columns through a scorer."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import pandas as pd
import pytest
from agentkit.errors import ConfigError
from agentkit.eval import (
    RunRow,
    RunScorer,
    SourceColumns,
    SourceScore,
    Transcript,
    load_results,
    load_scenario,
    load_scenarios,
    load_transcripts,
    run_eval,
    save_results,
    to_frame,
)
from agentkit.events import ToolCallEvent

from .test_eval_runs import SCENARIOS, row, scenario

#: the results table's columns without parameters, in order (names kept from before RunRow)
COLUMNS = [
    "scenario", "title", "language", "agent", "tags", "point", "repeat",
    "model", "user_model", "passed", "outcome",
    "exp_tools_called", "exp_tools_not_called", "exp_tool_sequence", "exp_asked_user",
    "exp_new_plan", "exp_consent_requested", "exp_consent_for", "exp_status",
    "exp_result_status", "exp_session", "exp_answer_contains", "exp_answer_not_contains",
    "exp_live_state", "exp_compressed", "exp_facts_in_task_state", "exp_no_errors",
    "exp_max_model_calls", "exp_state", "exp_trajectory",
    "checks", "checks_failed", "failures", "error",
    "turns", "steps", "tool_calls", "tools", "questions", "consents",
    "model_calls", "input_tokens", "output_tokens", "cached_tokens", "cost_usd", "cost_note",
    "compressions", "messages_before", "messages_after", "tokens_before", "tokens_after",
    "compression_strategy", "facts_ungrounded", "facts_total", "facts_kept", "fact_retention",
    "final_status", "result_status", "answer", "errors", "budget_reason",
    "sim_turns", "sim_stopped_by", "sim_model_calls", "sim_tokens", "sim_user_ok",
    "sim_user_issues", "attempts",
    "transport_retries",
    "latency_ms", "wall_ms", "trace_id", "span_id",
    "judge_errors", "judge_calls", "judge_tokens", "judgements",
    "transcript",
]  # fmt: skip


def test_the_columns_are_pinned(data_dir: Path) -> None:
    assert RunRow.columns() == COLUMNS and len(COLUMNS) == 78
    frame = run_eval(
        [scenario("desk_status_command_en")], model="scripted", data_dir=data_dir, progress=False
    )
    assert list(frame.columns) == COLUMNS
    grid = run_eval(
        [scenario("desk_status_command_en")],
        grid={"compression.keep_recent": [4, 8], "model": ["scripted"]},
        data_dir=data_dir,
        progress=False,
    )
    parameters = ["compression.keep_recent"]  # the model has its own column
    assert list(grid.columns) == [*COLUMNS[:7], *parameters, *COLUMNS[7:]]
    assert grid.attrs["params"] == parameters


def test_a_stored_row_reads_back_as_the_same_row(data_dir: Path, tmp_path: Path) -> None:
    params = ["planner.strategy"]
    frame = run_eval(
        [*load_scenarios(SCENARIOS, tags=["commands"]), scenario("memory_compression_facts_en")],
        model="scripted",
        grid={"planner.strategy": ["plan_replan", "next_step"]},
        data_dir=data_dir,
        progress=False,
    )
    for suffix in (".parquet", ".csv"):
        stored = load_results(save_results(frame, tmp_path / f"r{suffix}"))
        rows = [RunRow.from_record(record, params) for record in stored.to_dict("records")]
        assert [r.transcript for r in rows] == load_transcripts(frame)
        pd.testing.assert_frame_equal(to_frame(rows, params), frame)


# -- a scenario source's own columns ------------------------------------------------------------


class ProbeColumns(SourceColumns):
    probe_id: str | None = None
    probe_tools: int | None = None
    probe_valid: bool | None = None


@dataclass(frozen=True)
class ProbeScorer(RunScorer):
    """Valid when the run called *tool* (read from the transcript only)."""

    columns: ClassVar[type[SourceColumns]] = ProbeColumns
    item: str
    tool: str

    def score(self, transcript: Transcript) -> SourceScore:
        called = [e.name for e in transcript.events() if isinstance(e, ToolCallEvent)]
        if not transcript.turns:
            return SourceScore(ProbeColumns(probe_id=self.item))
        valid = self.tool in called
        return SourceScore(
            ProbeColumns(probe_id=self.item, probe_tools=len(called), probe_valid=valid),
            passed=valid,
            kind="probe",
            detail=f"{self.tool} was not called",
        )


def test_a_scorer_adds_its_columns_and_its_verdict(data_dir: Path, tmp_path: Path) -> None:
    trader = scenario("desk_create_trader_en")
    right = trader.model_copy(update={"scorer": ProbeScorer("item-1", "create_trader")})
    wrong = trader.model_copy(
        update={"id": "wrong", "scorer": ProbeScorer("item-2", "delete_trader")}
    )
    plain = scenario("desk_status_command_en")
    frame = run_eval([right, wrong, plain], model="scripted", data_dir=data_dir, progress=False)
    names = ["probe_id", "probe_tools", "probe_valid"]
    at = list(frame.columns).index("transport_retries") + 1
    assert list(frame.columns) == [*COLUMNS[:at], *names, *COLUMNS[at:]]
    good, bad, other = (row(frame, name) for name in (trader.id, "wrong", plain.id))
    assert (good["probe_id"], good["probe_tools"], good["probe_valid"]) == ("item-1", 6, True)
    assert good["passed"] is True and good["checks"] == bad["checks"]
    assert bad["passed"] is False and bad["probe_valid"] is False
    assert bad["failures"] == "run: probe FAILED (delete_trader was not called)"
    assert bad["checks_failed"] == 1 and bad["exp_consent_for"] is True  # no exp_probe column
    assert pd.isna(other["probe_id"]) and other["passed"] is True
    # a resumed sweep reads the source columns back with the task's scorer
    out = save_results(frame, tmp_path / "r.parquet")
    again = run_eval(
        [right, wrong, plain],
        model="scripted",
        data_dir=data_dir,
        previous=load_results(out),
        progress=False,
    )
    assert again["probe_id"].tolist()[:2] == ["item-1", "item-2"]
    assert again["wall_ms"].tolist()[:2] == frame["wall_ms"].tolist()[:2]  # not run again


def test_a_run_that_never_started_still_has_its_source_columns(data_dir: Path) -> None:
    trader = scenario("desk_create_trader_en")
    first, second = (
        trader.model_copy(update={"id": f"t{n}", "scorer": ProbeScorer(f"item-{n}", "x")})
        for n in (1, 2)
    )
    frame = run_eval(
        [first, second], model="scripted", sweep_max_tokens=1, data_dir=data_dir, progress=False
    )
    assert frame["outcome"].tolist()[1] == "not_started"
    assert frame["probe_id"].tolist() == ["item-1", "item-2"]
    assert pd.isna(frame["probe_valid"].iloc[1]) and frame["checks"].iloc[1] == 0


def test_a_scenario_file_cannot_set_a_scorer(tmp_path: Path) -> None:
    data = load_scenario(SCENARIOS / "desk_status_command_en.yaml").model_dump(mode="json")
    assert "scorer" not in data
    data["scorer"] = {"item": "x", "tool": "y"}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_scenario(path)
    assert caught.value.field == "scorer"


def test_a_row_refuses_what_is_no_column() -> None:
    stored = {column: None for column in COLUMNS} | {"scenario": "s", "outcome": "passed"}
    good = RunRow.from_record(stored)
    assert good.transcript.turns == [] and good.messages_before is None and good.tags == ""
    with pytest.raises(ValueError, match="not expectation kinds"):
        replace(good, expectations={"bfcl": True})
    with pytest.raises(ValueError, match="the model is its own column"):
        replace(good, params={"model": "llama"})
