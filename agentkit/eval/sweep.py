"""``run_eval``: scenarios at parameter points → runs → one results table.

Everything that can be wrong with a sweep is found *before* the first run: a scenario file
that does not validate, an unknown agent, a toolset that does not load, a tool or toolset
state the agent does not have, an unknown config key, a value its field refuses, a scenario
without scripts under ``--model scripted``, a malformed model spec, an unknown executor. A
sweep that starts runs to the end, with one row per scenario and point (see
:mod:`agentkit.eval.point` for why each run is independent and :mod:`agentkit.eval.results`
for the columns).

The model of a run is, in this order: a ``model`` key of the point (``--grid model=a,b``), the
*model* argument (``--model``), the agent's config.json. The spec ``scripted`` means each
scenario's own scripted replies; any other spec is a real backend, and the expectations then
measure how often it does the right thing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentkit.agent_folder import AgentFolder, resolve_data_dir
from agentkit.errors import AgentNotFoundError, UsageError
from agentkit.eval.budget import RunBudget
from agentkit.eval.executors import ExecutorSpec, SweepInterrupted, describe_executor, run_tasks
from agentkit.eval.judges.grading import check_judge_models
from agentkit.eval.params import apply_params, grid_points, merge_config, validate_config
from agentkit.eval.results import param_columns, require_pandas, to_frame
from agentkit.eval.row import RunRow
from agentkit.eval.scenario import Scenario, check_against_tools, load_scenarios
from agentkit.eval.simulator import user_model_for
from agentkit.eval.task import SCRIPTED, PointTask, model_label, snapshot_agent
from agentkit.ids import check_id
from agentkit.models.base import ChatModel, SessionBackend
from agentkit.models.spec import parse_model_spec
from agentkit.telemetry import Telemetry, Trace
from agentkit.telemetry import semconv as sc
from agentkit.tools import AgentTools

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["plan_runs", "run_eval"]

ScenarioSource = Path | str | Sequence[Path | str] | Sequence[Scenario]


def _scenarios(source: ScenarioSource, tags: Iterable[str]) -> list[Scenario]:
    if isinstance(source, str | Path):
        return load_scenarios(source, tags=tags)
    items = list(source)
    if items and all(isinstance(item, Scenario) for item in items):
        wanted = set(tags)
        chosen = [
            s for s in items if isinstance(s, Scenario) and (not wanted or wanted & set(s.tags))
        ]
        if not chosen:
            raise UsageError(f"no scenario carries any of the tags {sorted(wanted)}")
        return chosen
    if any(isinstance(item, Scenario) for item in items):
        raise UsageError("give scenarios either as Scenario objects or as paths, not both")
    return load_scenarios([item for item in items if isinstance(item, str | Path)], tags=tags)


def _agent_base(
    data_dir: Path, agent_id: str, scenarios: Sequence[Scenario]
) -> tuple[tuple[tuple[str, bytes], ...], dict[str, Any]]:
    """The agent's files and its raw config.json (validated once, here), after checking the
    agent's *scenarios* against its tools (its toolsets are loaded once for that)."""
    check_id(agent_id, "agent")
    folder = AgentFolder.load(data_dir, agent_id)  # AgentNotFoundError, ConfigError
    with AgentTools.load(folder) as tools:  # ConfigError when a toolset does not load
        for scenario in scenarios:
            check_against_tools(scenario, tools)
    config_file = folder.files.config
    raw: dict[str, Any] = (
        json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}
    )
    return snapshot_agent(folder.path), raw


def plan_runs(
    scenarios: Sequence[Scenario],
    *,
    model: str | ChatModel | SessionBackend | None = None,
    sets: Mapping[str, object] | None = None,
    grid: Mapping[str, Sequence[object]] | None = None,
    data_dir: Path | str | None = None,
    keep_dir: Path | str | None = None,
    turn_timeout: float | None = None,
    retries: int = 0,
    repeat: int = 1,
    user_model: str | ChatModel | None = None,
    budget: RunBudget | None = None,
    judge_model: str | ChatModel | None = None,
) -> list[PointTask]:
    """Every run of the sweep, checked, in order (scenario by scenario, points in grid order,
    the repeats of a point one after another)."""
    if not scenarios:
        raise UsageError("no scenarios to run")
    _check_counts(turn_timeout, retries, repeat)
    check_judge_models([judge for item in scenarios for judge in item.expect.judges], judge_model)
    points = grid_points(sets, grid)
    if model is not None and any("model" in point for point in points):
        raise UsageError(
            "give the model with --model or as the 'model' key of --set/--grid, not both"
        )
    root = resolve_data_dir(data_dir)
    bases: dict[str, tuple[tuple[tuple[str, bytes], ...], dict[str, Any]]] = {}
    tasks: list[PointTask] = []
    for scenario in scenarios:
        if scenario.agent not in bases:
            mine = [item for item in scenarios if item.agent == scenario.agent]
            try:
                bases[scenario.agent] = _agent_base(root, scenario.agent, mine)
            except AgentNotFoundError:
                raise UsageError(
                    f"scenario {scenario.id!r}: no agent {scenario.agent!r} under {root / 'agents'}"
                ) from None
        files, base = bases[scenario.agent]
        for number, point in enumerate(points):
            config = apply_params(merge_config(base, scenario.config), point)
            checked = validate_config(config, f"scenario {scenario.id!r}")
            spec: str | ChatModel | SessionBackend = (
                model
                if model is not None and not isinstance(model, str)
                else str(point.get("model") or model or checked.model)
            )
            if spec == SCRIPTED:
                missing = scenario.missing_scripts()
                if missing:
                    raise UsageError(
                        f"scenario {scenario.id!r} has no script for turn(s) "
                        f"{', '.join(map(str, missing))}: it cannot run with --model scripted"
                    )
            elif isinstance(spec, str):
                parse_model_spec(spec)  # ModelSpecError (a UsageError) before any run
            user = user_model_for(scenario, spec, user_model)
            for again in range(repeat):
                tasks.append(
                    PointTask(
                        index=len(tasks),
                        point=number,
                        scenario=scenario,
                        agent_files=files,
                        config=config,
                        params=dict(point),
                        model=spec,
                        keep_dir=str(keep_dir) if keep_dir is not None else None,
                        turn_timeout=turn_timeout,
                        retries=retries,
                        repeat=again,
                        user_model=user,
                        budget=budget or RunBudget(),
                        judge_model=judge_model,
                    )
                )
    return tasks


def _check_counts(turn_timeout: float | None, retries: int, repeat: int) -> None:
    if turn_timeout is not None and turn_timeout <= 0:
        raise UsageError(f"the turn time limit must be positive, got {turn_timeout}")
    if retries < 0:
        raise UsageError(f"retries cannot be negative, got {retries}")
    if repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {repeat}")


def run_eval(
    scenarios: ScenarioSource,
    *,
    model: str | ChatModel | SessionBackend | None = None,
    sets: Mapping[str, object] | None = None,
    grid: Mapping[str, Sequence[object]] | None = None,
    workers: int = 1,
    executor: ExecutorSpec = None,
    data_dir: Path | str | None = None,
    tags: Iterable[str] = (),
    keep_dir: Path | str | None = None,
    turn_timeout: float | None = None,
    progress: bool = True,
    retries: int = 0,
    previous: pd.DataFrame | None = None,
    repeat: int = 1,
    user_model: str | ChatModel | None = None,
    max_tokens: int | None = None,
    max_model_calls: int | None = None,
    max_seconds: float | None = None,
    sweep_max_tokens: int | None = None,
    concurrency: int = 1,
    judge_model: str | ChatModel | None = None,
    max_cost: float | None = None,
) -> pd.DataFrame:
    """Run every scenario at every parameter point; the results table (one row per run).

    *scenarios*: files or folders (the scenario files directly in them), or Scenario objects.
    *model*: a spec string (``scripted`` for each scenario's own script), or a model object
    such as a :class:`~agentkit.FunctionModel`, shared by every run (in this process only).
    *sets*/*grid*: dotted config keys → a value / a list of values (text is read as on the
    command line). *executor*: ``None``/``"local"`` (with *workers* processes),
    ``"dask://HOST:PORT"``, or a ``distributed.Client``. The sweep is one trace: an
    ``invoke_workflow agentkit.eval`` span whose children are the runs' spans, each with its
    turns under it (:mod:`agentkit.eval.point`). *data_dir*: the data root whose
    ``agents/`` hold the scenarios' agents (default: ``$AGENTKIT_DATA_DIR``, else ``./data``).
    *keep_dir*: keep each run's data root there (``{scenario}--p{point}``), to browse its
    conversations and model-call traces. *turn_timeout*: seconds a turn may take (else the
    run is an error row). *progress*: show a progress bar (stderr). *retries*: run a row that
    ended in an error again, up to this many times. *previous*: an earlier results table of
    this sweep (resuming): its finished runs (no ``error``, started) are kept as they are and
    only the missing, errored or not started ones run. *repeat*: run each scenario at each
    point that many times (``repeat`` column; pass@k and pass^k in :func:`summarize`).
    *user_model*: who plays a ``simulated_user`` (default: the run's model; ``scripted``: the
    scenario's ``user_script``). *max_tokens*, *max_model_calls*, *max_seconds*: each run's
    budget (:mod:`agentkit.eval.budget`); *sweep_max_tokens*: no run starts once the sweep has
    spent that many tokens. *concurrency*: runs going at once in each process (async).
    *max_cost*: US dollars one run's agent model calls may cost (a model genai-prices does not
    price is a UsageError before any run: :mod:`agentkit.eval.pricing`).
    *judge_model*: who grades the scenarios' judges (``expect: judges``; a spec, or
    ``scripted`` for each judge's ``script``; default: the run's model).
    Ctrl-C raises :class:`~agentkit.eval.executors.SweepInterrupted` whose ``results`` is the
    table so far (finished runs and ``not_started`` rows), ready to save and resume.
    """
    require_pandas()  # before any run, not after the last one
    remote = executor is not None and not (isinstance(executor, str) and executor in ("", "local"))
    shared = [item for item in (model, user_model, judge_model) if item is not None]
    if any(not isinstance(item, str) for item in shared) and (workers > 1 or remote):
        raise UsageError(
            "a model object runs in this process only (workers=1, the local executor); "
            "for workers or Dask name it by a spec, e.g. function:my_module:reply"
        )
    budget = RunBudget(max_tokens, max_model_calls, max_seconds, max_cost)
    chosen = _scenarios(scenarios, tags)
    tasks = plan_runs(
        chosen,
        model=model,
        sets=sets,
        grid=grid,
        data_dir=data_dir,
        keep_dir=keep_dir,
        turn_timeout=turn_timeout,
        retries=retries,
        repeat=repeat,
        user_model=user_model,
        budget=budget,
        judge_model=judge_model,
    )
    if max_cost is not None:
        _check_priced(tasks)
    done = _finished_rows(previous, tasks) if previous is not None else {}
    sweep = _sweep_trace(executor, workers, len(tasks))
    parent = sweep.root.trace_context()["traceparent"]  # each run's span is the sweep's child
    todo = [  # re-indexed: executors return rows by task index
        replace(task, index=number, traceparent=parent)
        for number, task in enumerate(t for t in tasks if _run_key(t) not in done)
    ]
    keys = list(tasks[0].params) if tasks else []
    params = [key for key in keys if key != "model"]
    try:
        try:
            made = run_tasks(
                todo,
                executor=executor,
                workers=workers,
                concurrency=concurrency,
                progress=progress,
                sweep_max_tokens=sweep_max_tokens,
            )
        except SweepInterrupted as stopped:
            fresh = iter(stopped.rows)
            stopped.results = to_frame(
                [done.get(_run_key(task)) or next(fresh) for task in tasks], params=params
            )
            raise
        fresh = iter(made)
        rows = [done.get(_run_key(task)) or next(fresh) for task in tasks]
    except BaseException as error:
        sweep.end(error_type=type(error).__qualname__, message=str(error))
        raise
    passed = sum(1 for row in rows if row.passed)
    sweep.root.set("agentkit.eval.passed", passed)
    sweep.event(sc.EVALUATION_EVENT, {
        sc.EVALUATION_NAME: "pass_rate",
        sc.EVALUATION_SCORE_VALUE: passed / len(rows) if rows else 0.0,
    })  # fmt: skip
    sweep.end()
    return to_frame(rows, params=params)


def _check_priced(tasks: Sequence[PointTask]) -> None:
    """A money budget needs models genai-prices prices (a UsageError names the first that
    is not, before any run)."""
    from agentkit.eval.pricing import price_usage, require_prices
    from agentkit.types import Usage

    require_prices()
    for spec in dict.fromkeys(model_label(task.model) for task in tasks):
        cost = price_usage(spec, Usage(input_tokens=1, output_tokens=1))
        if cost.cost_usd is None:
            raise UsageError(f"--max-cost cannot be kept on {spec!r}: {cost.note}")


def _sweep_trace(executor: ExecutorSpec, workers: int, runs: int) -> Trace:
    """The sweep's span, ``invoke_workflow agentkit.eval`` (its runs are its children)."""
    return Telemetry().workflow(
        "agentkit.eval",
        attributes={
            "agentkit.eval.runs": runs,
            "agentkit.eval.executor": describe_executor(executor, workers),
        },
    )


RunKey = tuple[str, str, tuple[tuple[str, str], ...], int, str]


def _run_key(task: PointTask) -> RunKey:
    """Which run a task is: scenario, model, parameter values (as text, so a value read back
    from parquet or CSV matches the one parsed from the command line), repeat, user model."""
    params = tuple(
        sorted((key, str(value)) for key, value in task.params.items() if key != "model")
    )
    return (
        task.scenario.id,
        model_label(task.model),
        params,
        task.repeat,
        model_label(task.user_model),
    )


def _finished_rows(previous: pd.DataFrame, tasks: Sequence[PointTask]) -> dict[RunKey, RunRow]:
    """The rows of an earlier table that need no re-run, by run (read back as typed rows,
    with the source columns of the task they belong to)."""
    params = [column for column in param_columns(previous) if column != "model"]
    records: dict[RunKey, dict[str, object]] = {}
    for raw in previous.to_dict("records"):
        record = {str(key): value for key, value in raw.items()}
        if _cell(record.get("error")) or record.get("outcome") == "not_started":
            continue
        values = tuple(sorted((key, str(record[key])) for key in params))
        repeat = int(str(record.get("repeat", 0) or 0))
        user = _cell(record.get("user_model"))
        records[(str(record["scenario"]), str(record["model"]), values, repeat, user)] = record
    rows: dict[RunKey, RunRow] = {}
    for task in tasks:
        key = _run_key(task)
        if key in records:
            scorer = task.scenario.scorer
            source = scorer.columns if scorer is not None else None
            rows[key] = RunRow.from_record(records[key], params, source)
    return rows


def _cell(value: object) -> str:
    """A text cell of an earlier table ("" for a missing one: NaN when read from CSV)."""
    return value if isinstance(value, str) else ""
