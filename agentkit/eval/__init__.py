"""Evaluation: scenarios, parameter sweeps, and a results table (``agentkit eval``).

A *scenario* (YAML or JSON under ``data/scenarios/``) names an agent, the state it starts from,
the user's turns (with the scripted model's replies for each, and tools the user runs outside
the chat between turns) — or a simulated user with a persona, a goal and what it knows — and
what should come of them. :func:`run_eval` runs every scenario at
every point of a parameter grid over the agent's config.json, each run in a data root of its
own, here or on a Dask cluster, and returns one pandas DataFrame row per run.

    from agentkit.eval import load_scenarios, run_eval, summarize
    df = run_eval(load_scenarios("data/scenarios"), model="scripted",
                  grid={"compression.token_threshold": [300, 900, 2000]})
    summarize(df)
    compare(df_a, df_b).report()   # paired: Wilson intervals, bootstrap, McNemar, flips

Layers: :mod:`~agentkit.eval.scenario` (the file schema), :mod:`~agentkit.eval.params`
(``--set``/``--grid``), :mod:`~agentkit.eval.expectations` (checks over events and state),
:mod:`~agentkit.eval.point` (one run), :mod:`~agentkit.eval.executors` (local, Dask),
:mod:`~agentkit.eval.results` (the table), :mod:`~agentkit.eval.sweep` (``run_eval``);
:mod:`~agentkit.eval.simulator` (simulated users), :mod:`~agentkit.eval.budget` (budgets),
:mod:`~agentkit.eval.concurrency` and :mod:`~agentkit.eval.pools` (runs at once),
:mod:`~agentkit.eval.stats` and :mod:`~agentkit.eval.compare` (paired comparisons).
pandas, pyarrow, dask and tqdm (the ``eval`` extra) are imported only when used.
"""

from __future__ import annotations

from agentkit.eval.budget import RunBudget
from agentkit.eval.compare import Comparison, compare
from agentkit.eval.executors import SweepInterrupted
from agentkit.eval.expectations import EXPECTATION_KINDS, Check
from agentkit.eval.params import grid_points, parse_grid, parse_sets
from agentkit.eval.point import SCRIPTED, PointTask, run_point
from agentkit.eval.results import (
    TIMING_COLUMNS,
    check_output_path,
    failures,
    load_results,
    repeats,
    report,
    save_results,
    summarize,
    to_frame,
)
from agentkit.eval.scenario import (
    Expectations,
    Scenario,
    SimulatedUser,
    Turn,
    load_scenario,
    load_scenarios,
)
from agentkit.eval.sweep import plan_runs, run_eval

__all__ = [
    "EXPECTATION_KINDS",
    "SCRIPTED",
    "TIMING_COLUMNS",
    "Check",
    "Comparison",
    "Expectations",
    "PointTask",
    "RunBudget",
    "Scenario",
    "SimulatedUser",
    "SweepInterrupted",
    "Turn",
    "check_output_path",
    "compare",
    "failures",
    "grid_points",
    "load_results",
    "load_scenario",
    "load_scenarios",
    "parse_grid",
    "parse_sets",
    "plan_runs",
    "repeats",
    "report",
    "run_eval",
    "run_point",
    "save_results",
    "summarize",
    "to_frame",
]
