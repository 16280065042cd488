"""Evaluation: scenarios, parameter sweeps, and a results table (``agentkit eval``).

A *scenario* (YAML or JSON under ``data/scenarios/``) names an agent, the state it starts from,
the user's turns (with the scripted model's replies for each, and tools the user runs outside
the chat between turns) and what should come of them. :func:`run_eval` runs every scenario at
every point of a parameter grid over the agent's config.json, each run in a data root of its
own, here or on a Dask cluster, and returns one pandas DataFrame row per run.

    from agentkit.eval import load_scenarios, run_eval, summarize
    df = run_eval(load_scenarios("data/scenarios"), model="scripted",
                  grid={"compression.token_threshold": [300, 900, 2000]})
    summarize(df)

Layers: :mod:`~agentkit.eval.scenario` (the file schema), :mod:`~agentkit.eval.params`
(``--set``/``--grid``), :mod:`~agentkit.eval.expectations` (checks over events and state),
:mod:`~agentkit.eval.point` (one run), :mod:`~agentkit.eval.executors` (local, Dask),
:mod:`~agentkit.eval.results` (the table), :mod:`~agentkit.eval.sweep` (``run_eval``).
pandas, pyarrow, dask and tqdm (the ``eval`` extra) are imported only when used.
"""

from __future__ import annotations

from agentkit.eval.expectations import EXPECTATION_KINDS, Check
from agentkit.eval.params import grid_points, parse_grid, parse_sets
from agentkit.eval.point import SCRIPTED, PointTask, run_point
from agentkit.eval.results import (
    TIMING_COLUMNS,
    check_output_path,
    failures,
    load_results,
    report,
    save_results,
    summarize,
    to_frame,
)
from agentkit.eval.scenario import Expectations, Scenario, Turn, load_scenario, load_scenarios
from agentkit.eval.sweep import plan_runs, run_eval

__all__ = [
    "EXPECTATION_KINDS",
    "SCRIPTED",
    "TIMING_COLUMNS",
    "Check",
    "Expectations",
    "PointTask",
    "Scenario",
    "Turn",
    "check_output_path",
    "failures",
    "grid_points",
    "load_results",
    "load_scenario",
    "load_scenarios",
    "parse_grid",
    "parse_sets",
    "plan_runs",
    "report",
    "run_eval",
    "run_point",
    "save_results",
    "summarize",
    "to_frame",
]
