"""A small sweep for the report and its views: a chat run, a planner run with a consent, a
simulated-user run, a run whose user types secrets, and one that flips between the two points
(``planner.max_steps`` 2 → 8: at 2 its three-step plan is refused), on the scripted model."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from agentkit import testing
from agentkit.eval import load_scenario, run_eval

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "data" / "scenarios"
CHAT = "chat_sessions_en"
CONSENT = "desk_create_trader_en"
SIMULATED = "desk_sim_create_trader_en"
SECRETS = "desk_secret_masking_en"
FLIPS = "desk_delete_confirmed_zh"
NAMES = (CHAT, CONSENT, SIMULATED, SECRETS, FLIPS)
GRID = {"planner.max_steps": [2, 8]}
#: what the user of SECRETS types, raw (the table keeps the user's words as typed)
RAW_SECRETS = ("BNKEY5566", "BNSECRET7788")


def two_point_sweep(root: Path) -> pd.DataFrame:
    data = testing.data_root(root / "data", source=REPO / "data")
    scenarios = [load_scenario(SCENARIOS / f"{name}.yaml") for name in NAMES]
    return run_eval(scenarios, model="scripted", grid=GRID, data_dir=data, progress=False)


def row_of(frame: pd.DataFrame, scenario: str, point: int) -> int:
    """The row position of *scenario* at *point*."""
    rows = frame.index[(frame["scenario"] == scenario) & (frame["point"] == point)].tolist()
    assert len(rows) == 1, (scenario, point, rows)
    return int(frame.index.get_loc(rows[0]))
