"""Scenario turns that decide on the pending approval: `approve:` (with edited args) and
`reject:`, through Agent.adecide (source eval)."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentkit.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "data" / "scenarios"


def test_approve_and_reject_turns_decide_by_approval_id(data_dir: Path) -> None:
    pytest.importorskip("pandas")
    from agentkit.eval import run_eval

    table = run_eval(
        [SCENARIOS / "desk_approve_edited_en.yaml", SCENARIOS / "desk_reject_by_id_zh.yaml"],
        model="scripted",
        data_dir=data_dir,
        progress=False,
    )
    rows = table.set_index("scenario")
    assert bool(rows.loc["desk_approve_edited_en", "passed"]), rows.loc[
        "desk_approve_edited_en", "failures"
    ]
    assert bool(rows.loc["desk_reject_by_id_zh", "passed"]), rows.loc[
        "desk_reject_by_id_zh", "failures"
    ]


def test_a_turn_has_exactly_one_of_user_approve_or_reject(tmp_path: Path) -> None:
    from agentkit.eval.scenario import load_scenario

    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "v: 1\nid: bad\nlanguage: en\nagent: desk-001\nturns:\n  - user: hi\n    reject: true\n"
    )
    with pytest.raises(ConfigError, match="exactly one of 'user', 'approve' or 'reject'"):
        load_scenario(bad)
