"""Trajectory expectations (``expect: trajectory``): each order and argument mode passes and
fails on scripted flows built for it, each failure naming its first mismatch.

The flows are real runs of the shipped scenarios under the scripted model: a run that reads
the exchange accounts, then creates trader Alpha (``get_exchange_configs`` {} then
``create_trader`` {name: Alpha, exchange_id: ex-1, model_id: model-1}), and a run whose only
tool calls are the planner's own re-reads of the live state. Each trajectory is checked
against a run's stored transcript exactly as ``agentkit score`` re-checks it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from agentkit.errors import ConfigError
from agentkit.eval import (
    Expectations,
    RunRow,
    Scenario,
    Trajectory,
    load_scenario,
    load_transcripts,
    rescore,
    run_eval,
)
from agentkit.eval.scoring import scenario_checks

from .test_eval_runs import SCENARIOS, scenario

CREATE = {"name": "Alpha", "exchange_id": "ex-1", "model_id": "model-1"}


@pytest.fixture(scope="module")
def flows(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Scenario, RunRow]]:
    """The scripted flows, run once: by scenario id, the scenario and its row."""
    from agentkit import testing

    from .conftest import SAMPLE_AGENTS

    root = testing.data_root(tmp_path_factory.mktemp("flows") / "data", source=SAMPLE_AGENTS.parent)
    chosen = [scenario("desk_create_trader_en"), scenario("desk_classify_live_state_en")]
    frame = run_eval(chosen, model="scripted", data_dir=root, progress=False)
    assert frame["passed"].all(), frame["failures"].tolist()
    rows = [RunRow.from_record({str(k): v for k, v in r.items()}) for r in frame.to_dict("records")]
    return {item.id: (item, row) for item, row in zip(chosen, rows, strict=True)}


def verdict(
    flows: dict[str, tuple[Scenario, RunRow]], trajectory: dict[str, Any], flow: str
) -> tuple[bool, str]:
    """Whether the run of *flow* meets *trajectory* (the run-level check), and why not."""
    item, row = flows[flow]
    variant = item.model_copy(
        update={"expect": Expectations(trajectory=Trajectory.model_validate(trajectory))}
    )
    checks = [c for c in scenario_checks(variant, row.transcript, row) if c.kind == "trajectory"]
    assert len(checks) == 1
    return checks[0].passed, checks[0].detail


def trader(
    trajectory: dict[str, Any], flows: dict[str, tuple[Scenario, RunRow]]
) -> tuple[bool, str]:
    return verdict(flows, trajectory, "desk_create_trader_en")


READ = {"tool": "get_exchange_configs"}
WRITE = {"tool": "create_trader", "args": CREATE}


def test_strict_passes_on_the_same_calls_and_names_each_kind_of_mismatch(flows: Any) -> None:
    assert trader({"calls": [READ, WRITE], "order": "strict"}, flows) == (True, "")
    ok, why = trader({"calls": [WRITE, READ], "order": "strict"}, flows)
    assert not ok and why.startswith("out of order: expected call 1 to be create_trader")
    ok, why = trader({"calls": [READ], "order": "strict"}, flows)
    assert not ok and why.startswith("extra call 2: create_trader(")
    ok, why = trader({"calls": [READ, WRITE, {"tool": "delete_trader"}], "order": "strict"}, flows)
    assert (ok, why) == (False, "missing call 3: delete_trader")
    ok, why = trader(
        {"calls": [READ, {"tool": "create_trader", "args": {**CREATE, "name": "Beta"}}]}, flows
    )
    assert (ok, why) == (False, 'call 2 (create_trader): argument name = "Alpha", expected "Beta"')


def test_in_order_allows_calls_between_but_not_a_swap(flows: Any) -> None:
    assert trader({"calls": [WRITE], "order": "in_order"}, flows) == (True, "")
    assert trader({"calls": [READ, WRITE], "order": "in_order"}, flows) == (True, "")
    ok, why = trader({"calls": [WRITE, READ], "order": "in_order"}, flows)
    assert not ok
    assert why == (
        "out of order: expected call 2 (get_exchange_configs) after create_trader, "
        "but it was call 1, before that"
    )
    ok, why = trader({"calls": [READ, {"tool": "update_trader"}], "order": "in_order"}, flows)
    assert (ok, why) == (False, "missing call: update_trader (expected call 2)")


def test_any_order_needs_the_same_calls_in_any_order(flows: Any) -> None:
    assert trader({"calls": [WRITE, READ], "order": "any_order"}, flows) == (True, "")
    ok, why = trader({"calls": [WRITE], "order": "any_order"}, flows)
    assert (ok, why) == (False, "extra call 1: get_exchange_configs")
    ok, why = trader({"calls": [WRITE, READ, READ], "order": "any_order"}, flows)
    assert (ok, why) == (False, "missing call: get_exchange_configs (expected call 3)")


def test_subset_allows_expected_calls_not_made_but_no_other_call(flows: Any) -> None:
    calls = [READ, WRITE, {"tool": "delete_trader"}]
    assert trader({"calls": calls, "order": "subset"}, flows) == (True, "")
    ok, why = trader({"calls": [READ, {"tool": "delete_trader"}], "order": "subset"}, flows)
    assert not ok and why.startswith("extra call 2: create_trader(")


def test_superset_allows_other_calls_but_needs_every_expected_one(flows: Any) -> None:
    assert trader({"calls": [WRITE], "order": "superset"}, flows) == (True, "")
    ok, why = trader({"calls": [WRITE, {"tool": "delete_trader"}], "order": "superset"}, flows)
    assert (ok, why) == (False, "missing call: delete_trader (expected call 2)")


def test_argument_modes_exact_subset_ignore(flows: Any) -> None:
    partial = {"tool": "create_trader", "args": {"name": "Alpha"}}
    ok, why = trader({"calls": [READ, partial], "args": "exact"}, flows)
    assert (ok, why) == (False, 'call 2 (create_trader): unexpected argument exchange_id = "ex-1"')
    assert trader({"calls": [READ, partial], "args": "subset"}, flows) == (True, "")
    wrong = {"tool": "create_trader", "args": {"name": "Beta", "leverage": 3}}
    ok, why = trader({"calls": [READ, wrong], "args": "subset"}, flows)
    assert (ok, why) == (False, 'call 2 (create_trader): argument name = "Alpha", expected "Beta"')
    assert trader({"calls": [READ, wrong], "args": "ignore"}, flows) == (True, "")
    missing = {"tool": "create_trader", "args": {"leverage": 3}}
    ok, why = trader({"calls": [READ, missing], "args": "subset"}, flows)
    assert (ok, why) == (False, "call 2 (create_trader): argument leverage missing (expected 3)")


def test_per_argument_comparators(flows: Any) -> None:
    shouted = {"tool": "create_trader", "args": {**CREATE, "name": "ALPHA"}}
    ok, why = trader({"calls": [READ, shouted]}, flows)
    assert (ok, why) == (False, 'call 2 (create_trader): argument name = "Alpha", expected "ALPHA"')
    folded = {"calls": [READ, shouted], "comparators": {"name": "case_insensitive"}}
    assert trader(folded, flows) == (True, "")
    by_tool = {
        "calls": [READ, shouted],
        "comparators": {"create_trader.name": {"case_insensitive": True}},
    }
    assert trader(by_tool, flows) == (True, "")
    other = {"calls": [READ, {"tool": "create_trader", "args": {**CREATE, "name": "Alpine"}}],
             "comparators": {"name": "case_insensitive"}}  # fmt: skip
    ok, why = trader(other, flows)
    assert why == (
        'call 2 (create_trader): argument name = "Alpha", expected "Alpine" (case-insensitive)'
    )
    # a numeric comparator with a tolerance (the run passed exchange_id "ex-1": not a number)
    numeric = {"calls": [READ, {"tool": "create_trader", "args": {**CREATE, "exchange_id": 1}}],
               "comparators": {"exchange_id": {"numeric": {"tolerance": 0.5}}}}  # fmt: skip
    ok, why = trader(numeric, flows)
    assert why == (
        'call 2 (create_trader): argument exchange_id = "ex-1", expected 1 (numeric, tolerance 0.5)'
    )


def test_numeric_tolerance_on_a_number_the_agent_passed() -> None:
    from agentkit.eval.trajectory import SeenCall, match_trajectory

    calls = [SeenCall("set_price", {"price": "12.4", "symbol": "btc"})]
    loose = Trajectory.model_validate({
        "calls": [{"tool": "set_price", "args": {"price": 12.5, "symbol": "BTC"}}],
        "comparators": {"price": {"numeric": {"tolerance": 0.2}}, "symbol": "case_insensitive"},
    })  # fmt: skip
    assert match_trajectory(loose, calls) == ""
    tight = Trajectory.model_validate({
        "calls": [{"tool": "set_price", "args": {"price": 12.5, "symbol": "BTC"}}],
        "comparators": {"price": {"numeric": {"tolerance": 0.05}}, "symbol": "case_insensitive"},
    })  # fmt: skip
    assert match_trajectory(tight, calls) == (
        'call 1 (set_price): argument price = "12.4", expected 12.5 (numeric, tolerance 0.05)'
    )


def test_live_reads_are_left_out_unless_asked_for(flows: Any) -> None:
    live = "desk_classify_live_state_en"
    assert verdict(flows, {"calls": []}, live) == (True, "")
    ok, why = verdict(flows, {"calls": [], "include_live_reads": True}, live)
    assert not ok and why.startswith("extra call 1: ")
    _, row = flows[live]
    read = next(e.name for e in row.transcript.events() if getattr(e, "id", "").startswith("live-"))
    ok, why = verdict(
        flows, {"calls": [{"tool": read}], "include_live_reads": True, "order": "superset"}, live
    )
    assert (ok, why) == (True, "")


def test_a_trajectory_in_a_scenario_file_is_a_column_and_a_failure_reason(
    flows: Any, tmp_path: Path, data_dir: Path
) -> None:
    from agentkit.eval import to_frame

    _, row = flows["desk_create_trader_en"]
    table = to_frame([row])
    text = (SCENARIOS / "desk_create_trader_en.yaml").read_text(encoding="utf-8")
    edited = text.replace(
        "  tool_sequence: [get_exchange_configs, create_trader]\n",
        "  trajectory:\n"
        "    calls: [{tool: create_trader, args: {name: Beta}}]\n"
        "    order: in_order\n"
        "    args: subset\n",
    )
    path = tmp_path / "desk_create_trader_en.yaml"
    path.write_text(edited, encoding="utf-8")
    result = rescore(table, [path], data_dir=data_dir).table
    record = result.iloc[0]
    assert not bool(record["passed"]) and record["exp_trajectory"] == False  # noqa: E712
    assert (
        'run: trajectory FAILED (call 2 (create_trader, expected call 1): argument name = "Alpha", '
        'expected "Beta")'
    ) in record["failures"]
    assert pd.isna(table.iloc[0]["exp_trajectory"])  # the run itself did not check one
    assert load_transcripts(result)[0] is not None


def test_the_schema_is_validated(tmp_path: Path) -> None:
    text = (SCENARIOS / "desk_create_trader_en.yaml").read_text(encoding="utf-8")
    bad = text.replace(
        "  tool_sequence: [get_exchange_configs, create_trader]\n",
        "  trajectory: {calls: [{tool: create_trader}], order: sideways}\n",
    )
    path = tmp_path / "bad.yaml"
    path.write_text(bad, encoding="utf-8")
    with pytest.raises(ConfigError, match=r"expect\.trajectory\.order"):
        load_scenario(path)
    unknown = text.replace(
        "  tool_sequence: [get_exchange_configs, create_trader]\n",
        "  trajectory: {calls: [{tool: create_trader, argz: {}}]}\n",
    )
    path.write_text(unknown, encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown key"):
        load_scenario(path)


def test_a_turn_level_trajectory_reads_that_turns_calls_only(flows: Any) -> None:
    item, row = flows["desk_create_trader_en"]

    def at_turn(number: int, trajectory: dict[str, Any]) -> list[tuple[bool, str]]:
        turns = list(item.turns)
        expect = Expectations(trajectory=Trajectory.model_validate(trajectory))
        turns[number - 1] = turns[number - 1].model_copy(update={"expect": expect})
        variant = item.model_copy(update={"turns": tuple(turns), "expect": Expectations()})
        checks = scenario_checks(variant, row.transcript, row)
        return [(c.passed, c.detail) for c in checks if c.kind == "trajectory"]

    assert at_turn(1, {"calls": [READ]}) == [(True, "")]
    assert at_turn(3, {"calls": [WRITE]}) == [(True, "")]
    assert at_turn(3, {"calls": [READ, WRITE]}) == [
        (False, "call 1: expected get_exchange_configs, called create_trader")
    ]
