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
:mod:`~agentkit.eval.point` (one run: its :mod:`~agentkit.eval.task`, the
:mod:`~agentkit.eval.world` it runs in, the :mod:`~agentkit.eval.dialogue` that drives it),
:mod:`~agentkit.eval.row` (its typed row), :mod:`~agentkit.eval.transcript` (what it showed,
kept in the table: ``load_transcripts(df)``), :mod:`~agentkit.eval.scorer` (a scenario
source's own columns), :mod:`~agentkit.eval.judges` (model judges: ``expect: judges``),
:mod:`~agentkit.eval.executors` (local, Dask),
:mod:`~agentkit.eval.results` (the table), :mod:`~agentkit.eval.sweep` (``run_eval``);
:mod:`~agentkit.eval.simulator` (simulated users), :mod:`~agentkit.eval.budget` (budgets),
:mod:`~agentkit.eval.concurrency` and :mod:`~agentkit.eval.pools` (runs at once),
:mod:`~agentkit.eval.stats` and :mod:`~agentkit.eval.compare` (paired comparisons),
:mod:`~agentkit.eval.gate` (the regression gate: ``gate(a, b)``) and
:mod:`~agentkit.eval.baselines` (named baselines under the data root);
:mod:`~agentkit.eval.trajectory` (``expect: trajectory``), :mod:`~agentkit.eval.pricing`
(``cost_usd``) and :mod:`~agentkit.eval.sim_check` (``sim_user_ok``);
:mod:`~agentkit.eval.labels` (a person's labels, kept beside the table),
:mod:`~agentkit.eval.agreement` (a judge against them: kappa with its interval) and
:mod:`~agentkit.eval.scanners` (transcript scanners that flag rare failures);
:mod:`~agentkit.eval.reading` (the one walker over a kept run: the typed view every reader
of a transcript reads), :mod:`~agentkit.eval.timeline` (a run as a reader sees it),
:mod:`~agentkit.eval.pairs` (paired runs flips first, the first divergence),
:mod:`~agentkit.eval.notes` (judges, findings and labels by run) and
:mod:`~agentkit.eval.report` (``agentkit report``: one HTML file).
pandas, pyarrow, dask and tqdm (the ``eval`` extra) are imported only when used.
"""

from __future__ import annotations

from agentkit.eval.agreement import Agreement, agreement, judge_agreement
from agentkit.eval.baselines import Baseline, list_baselines, load_baseline, pin_baseline
from agentkit.eval.budget import RunBudget
from agentkit.eval.compare import Comparison, compare
from agentkit.eval.executors import SweepInterrupted
from agentkit.eval.expectations import EXPECTATION_KINDS, Check
from agentkit.eval.gate import FlakyScenario, GateVerdict, Regression, gate
from agentkit.eval.judges import (
    GraderVerdict,
    Judge,
    Judgement,
    JudgeReply,
    load_judgements,
)
from agentkit.eval.judges.grading import GraderModels, JudgeCache, judge_run, judge_transcript
from agentkit.eval.labels import Label, add_label, load_labels, with_labels
from agentkit.eval.params import grid_points, parse_grid, parse_sets
from agentkit.eval.point import run_point
from agentkit.eval.pricing import RunCost, price_usage
from agentkit.eval.results import (
    RUN_SPECIFIC_COLUMNS,
    TIMING_COLUMNS,
    check_output_path,
    failures,
    load_results,
    reliability,
    repeats,
    report_text,
    run_ids,
    save_results,
    summarize,
    to_frame,
)
from agentkit.eval.row import RunRow
from agentkit.eval.scenario import (
    Comparator,
    Expectations,
    ExpectedCall,
    Scenario,
    SimulatedUser,
    Trajectory,
    Turn,
    load_scenario,
    load_scenarios,
)
from agentkit.eval.scorer import RunScorer, SourceColumns, SourceScore
from agentkit.eval.scoring import Rescored, judge_verdicts, rescore
from agentkit.eval.sim_check import SimDeviation, check_sim_user
from agentkit.eval.sweep import plan_runs, run_eval
from agentkit.eval.task import SCRIPTED, PointTask
from agentkit.eval.transcript import RunState, Transcript, UserTurn, load_transcripts

__all__ = [
    "Agreement",
    "Baseline",
    "Check",
    "Comparator",
    "Comparison",
    "EXPECTATION_KINDS",
    "Expectations",
    "ExpectedCall",
    "FlakyScenario",
    "GateVerdict",
    "GraderModels",
    "GraderVerdict",
    "Judge",
    "JudgeCache",
    "JudgeReply",
    "Judgement",
    "Label",
    "PointTask",
    "RUN_SPECIFIC_COLUMNS",
    "Regression",
    "Rescored",
    "RunBudget",
    "RunCost",
    "RunRow",
    "RunScorer",
    "RunState",
    "SCRIPTED",
    "Scenario",
    "SimDeviation",
    "SimulatedUser",
    "SourceColumns",
    "SourceScore",
    "SweepInterrupted",
    "TIMING_COLUMNS",
    "Trajectory",
    "Transcript",
    "Turn",
    "UserTurn",
    "add_label",
    "agreement",
    "check_output_path",
    "check_sim_user",
    "compare",
    "failures",
    "gate",
    "grid_points",
    "judge_agreement",
    "judge_run",
    "judge_transcript",
    "judge_verdicts",
    "list_baselines",
    "load_baseline",
    "load_judgements",
    "load_labels",
    "load_results",
    "load_scenario",
    "load_scenarios",
    "load_transcripts",
    "parse_grid",
    "parse_sets",
    "pin_baseline",
    "plan_runs",
    "price_usage",
    "reliability",
    "repeats",
    "report_text",
    "rescore",
    "run_eval",
    "run_ids",
    "run_point",
    "save_results",
    "summarize",
    "to_frame",
    "with_labels",
]
