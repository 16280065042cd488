"""Scoring stored runs: re-scoring a results table from its transcripts, and reading the
judges' verdicts out of one.

:func:`rescore` makes a new table from a stored one without running anything: each run's
expectations are checked again against its transcript (the scenario files give them: an
edited expectation takes effect), the judges are asked again (only those whose input changed:
a grader whose model, rubric and view of the run are unchanged is taken from the stored
judgements, :class:`~agentkit.eval.judges.grading.JudgeCache`), and scanners run over the
transcripts (:mod:`agentkit.eval.scanners`). No agent model is called: only the judges' models
are, and only for what is new.

The verdict columns (``passed``, ``outcome``, ``exp_*``, ``checks``, ``checks_failed``,
``failures``) are made again the way the run made them — the same checks in the same order:
each turn's own expectations where the run read the state after it (not the turn a budget
stopped), the scenario's over the whole run where it got that far, a scenario source's
verdict, then one check per judge that decided — so re-scoring a table with unchanged
scenarios gives back its verdicts exactly. A run that could not finish (``error``), was
stopped by its budget or never started keeps that outcome; its figures, timings and
transcript are copied as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import TypeAdapter, ValidationError

from agentkit.agent_folder import resolve_data_dir
from agentkit.calls.records import CallRecord
from agentkit.calls.secrets import SecretMask
from agentkit.errors import ConfigError, UsageError
from agentkit.eval.expectations import (
    EXPECTATION_KINDS,
    Check,
    Observed,
    TurnFacts,
    check,
    summarize_checks,
    turn_facts,
)
from agentkit.eval.judges.grading import (
    GraderModels,
    JudgeCache,
    check_judge_models,
    judge_checks,
    judge_transcript,
)
from agentkit.eval.judges.table import judge_names, load_judgements
from agentkit.eval.judges.values import Judge, Judgement
from agentkit.eval.point import run_sync
from agentkit.eval.reading import read_run
from agentkit.eval.results import param_columns, require_pandas, run_ids, to_frame
from agentkit.eval.row import RunRow, outcome_of
from agentkit.eval.scanners import AgentContexts
from agentkit.eval.scenario import Scenario, load_scenarios, read_file
from agentkit.eval.sim_check import sim_user_columns
from agentkit.eval.transcript import Transcript, load_transcripts
from agentkit.models.base import ChatModel
from agentkit.telemetry import Telemetry

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Rescored",
    "judge_verdicts",
    "kept_scenarios",
    "load_judges",
    "rescore",
    "scenario_checks",
]

_JUDGES = TypeAdapter(tuple[Judge, ...])


@dataclass(frozen=True)
class Rescored:
    """A re-scored table and what it took."""

    #: the new results table
    table: pd.DataFrame
    #: the scanners' findings (None: no scanner ran)
    findings: pd.DataFrame | None
    #: grader calls made now, and grader verdicts taken from the stored judgements
    asked: int
    reused: int
    #: runs whose ``passed`` differs from the stored table's
    changed: int
    #: the record of every grader call made now (through the model-call tracer)
    records: list[CallRecord]

    def report(self) -> str:
        """What the CLI prints."""
        rows = len(self.table)
        passed = int(self.table["passed"].sum()) if rows else 0
        lines = [
            f"re-scored {rows} runs: {passed} passed, {self.changed} changed verdict; "
            f"judge calls: {self.asked} asked, {self.reused} reused"
        ]
        errors = int(self.table["judge_errors"].sum()) if rows else 0
        if errors:
            lines.append(f"{errors} judge errors (counted apart: not the agent's failures)")
        if self.findings is not None:
            lines.append(f"{len(self.findings)} findings")
        return "\n".join(lines)


def load_judges(path: Path | str) -> tuple[Judge, ...]:
    """The judges of a YAML or JSON file: a list of judges, or ``{judges: [...]}`` (a
    :class:`ConfigError` names the file and the field)."""
    file = Path(path)
    data = read_file(file)
    if isinstance(data, dict) and set(data) == {"judges"}:
        data = data["judges"]
        prefix = "judges."
    else:
        prefix = ""
    if not isinstance(data, list):
        raise ConfigError(file, "", "must hold a list of judges (or a mapping judges: [...])")
    try:
        judges = _JUDGES.validate_python(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = prefix + ".".join(str(part) for part in first["loc"])
        problem = "unknown key" if first["type"] == "extra_forbidden" else first["msg"]
        raise ConfigError(file, where, problem) from None
    names = [judge.name for judge in judges]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ConfigError(file, "", f"judge names are given twice: {twice}")
    if not judges:
        raise ConfigError(file, "", "holds no judge")
    return judges


def scenario_checks(scenario: Scenario, transcript: Transcript, row: RunRow) -> list[Check]:
    """The expectation checks of a stored run, made as the run made them (see the module
    docstring): each turn's where the state after it was read, then the whole run's."""
    stopped = row.outcome in ("budget", "not_started")
    checks: list[Check] = []
    facts = TurnFacts()
    turns = read_run(transcript).turns
    for position, read in enumerate(turns):
        turn = read.turn
        seen = turn_facts(read)
        facts = facts.then(seen)
        if scenario.simulated_user is not None or not 0 < turn.number <= len(scenario.turns):
            continue
        expect = scenario.turns[turn.number - 1].expect
        last = position == len(turns) - 1
        if expect.is_empty or turn.after is None or (row.outcome == "budget" and last):
            continue
        checks += check(expect, Observed.of(seen, turn.after), f"turn {turn.number}")
    if transcript.final is not None and not stopped:
        checks += check(scenario.expect, Observed.of(facts, transcript.final), "run")
    return checks


def rescore(
    results: pd.DataFrame,
    scenarios: Sequence[Scenario] | Sequence[Path | str] | Path | str | None = None,
    *,
    judges: Sequence[str | Judge] | None = None,
    expectations_only: bool = False,
    judge_model: str | ChatModel | None = None,
    scanners: Sequence[str] | None = None,
    data_dir: Path | str | None = None,
    fallback: Path | str | None = None,
) -> Rescored:
    """*results* scored again from its transcripts (see the module docstring).

    *scenarios*: the scenario files (or folders, or Scenario values) to score the table's
    runs by, overriding the scenarios the runs' transcripts kept (None: each run by its own,
    the files not needed; *fallback*, files again, for a run of a table written before
    transcripts kept their scenario).
    *judges*: which judges to ask again — names of the scenarios' judges, or Judge values
    for every run (None: every judge of the scenarios; judgements not asked again are kept).
    *expectations_only*: re-check the expectations and keep the stored judgements.
    *judge_model*: who grades (a judge's own model wins; default: the run's ``model``).
    *scanners*: scanner names (``agentkit.eval.scanners``) to run over the transcripts.
    *data_dir*: the data root whose agents give the judges' prompt overrides and secrets.
    Bad input (no transcripts, a run whose scenario is missing, an unknown judge) is a
    :class:`UsageError` before any model is asked."""
    require_pandas()
    root = resolve_data_dir(data_dir)
    transcripts = load_transcripts(results)  # a table without transcripts: a UsageError
    missing = [number for number, item in enumerate(transcripts) if item is None]
    if missing:
        raise UsageError(
            f"row {missing[0]} of the table kept no transcript: it cannot be re-scored"
        )
    cells = [{str(k): v for k, v in record.items()} for record in results.to_dict("records")]
    wanted = {str(r["scenario"]) for r in cells}
    if scenarios is not None:
        by_id = _scenarios(scenarios)
    else:
        by_id = kept_scenarios(transcripts)
        if fallback is not None and wanted - set(by_id):
            by_id = {**_scenarios(fallback), **by_id}
    unknown = sorted(wanted - set(by_id))
    if unknown:
        where = (
            "among the scenarios given (--scenarios)"
            if scenarios is not None
            else "kept in the table (written before transcripts kept their scenario): "
            "give its scenario file or folder with --scenarios"
        )
        raise UsageError(f"no scenario {unknown[0]!r} {where}")
    asked = _chosen_judges(by_id.values(), judges, expectations_only)
    check_judge_models([judge for chosen in asked.values() for judge in chosen], judge_model)
    stored = load_judgements(results)
    params = [column for column in param_columns(results) if column != "model"]
    rows = [
        RunRow.from_record(
            record,
            params,
            by_id[str(record["scenario"])].scorer.columns  # type: ignore[union-attr]
            if by_id[str(record["scenario"])].scorer is not None
            else None,
        )
        for record in cells
    ]
    cache = JudgeCache.of(stored)
    records: list[CallRecord] = []
    contexts = AgentContexts(root)
    new_judgements = run_sync(_judge_all(rows, asked, cache, judge_model, contexts, records))
    made: list[RunRow] = []
    for row, judgements in zip(rows, new_judgements, strict=True):
        made.append(_rescored(row, by_id[row.scenario], judgements))
    table = to_frame(made, params=params)
    changed = sum(
        1 for before, after in zip(rows, made, strict=True) if before.passed != after.passed
    )
    findings = None
    if scanners is not None:
        table, findings = _scan(table, scanners, contexts)
    return Rescored(
        table, findings, asked=len(records), reused=cache.hits, changed=changed, records=records
    )


def kept_scenarios(transcripts: Iterable[Transcript | None]) -> dict[str, Scenario]:
    """By id, the scenarios the transcripts kept (the first of each id; one that no longer
    validates, e.g. a field this release dropped, is left out: its files are needed)."""
    kept: dict[str, Scenario] = {}
    for transcript in transcripts:
        spec = transcript.scenario_spec if transcript is not None else None
        if spec is None or transcript is None or transcript.scenario in kept:
            continue
        try:
            kept[transcript.scenario] = Scenario.model_validate(spec)
        except ValidationError:
            continue
    return kept


def _scenarios(
    scenarios: Sequence[Scenario] | Sequence[Path | str] | Path | str,
) -> dict[str, Scenario]:
    if isinstance(scenarios, str | Path):
        loaded = load_scenarios(scenarios)
    else:
        items = list(scenarios)
        given = [item for item in items if isinstance(item, Scenario)]
        paths = [item for item in items if not isinstance(item, Scenario)]
        loaded = given + (load_scenarios(paths) if paths else [])
    return {scenario.id: scenario for scenario in loaded}


def _chosen_judges(
    scenarios: Iterable[Scenario], judges: Sequence[str | Judge] | None, expectations_only: bool
) -> dict[str, tuple[Judge, ...]]:
    """By scenario id, the judges to ask again."""
    chosen: dict[str, tuple[Judge, ...]] = {}
    every = list(scenarios)
    if expectations_only:
        return {scenario.id: () for scenario in every}
    names = [item for item in judges or () if isinstance(item, str)]
    values = tuple(item for item in judges or () if isinstance(item, Judge))
    known = {judge.name for scenario in every for judge in scenario.expect.judges}
    for name in names:
        if name not in known:
            listed = ", ".join(sorted(known)) or "none"
            raise UsageError(f"no judge {name!r} in the scenarios (their judges: {listed})")
    for scenario in every:
        own = scenario.expect.judges
        picked = own if judges is None else tuple(j for j in own if j.name in names)
        extra = {judge.name for judge in values}
        chosen[scenario.id] = tuple(j for j in picked if j.name not in extra) + values
    return chosen


async def _judge_all(  # noqa: PLR0917 - the re-score's parts
    rows: Sequence[RunRow],
    asked: Mapping[str, tuple[Judge, ...]],
    cache: JudgeCache,
    judge_model: str | ChatModel | None,
    contexts: AgentContexts,
    records: list[CallRecord],
) -> list[tuple[Judgement, ...]]:
    """Each row's judgements (asked again where chosen, else as stored); *records* gets a
    record per grader call made."""
    root = contexts.data_dir
    pools: dict[tuple[str, str], GraderModels] = {}
    result: list[tuple[Judgement, ...]] = []
    sweep = Telemetry().workflow("agentkit.score", attributes={"agentkit.eval.runs": len(rows)})
    try:
        with sweep.root.activate():
            for row in rows:
                judges = asked.get(row.scenario, ())
                judged = row.outcome not in ("error", "budget", "not_started")
                if not judges or not judged:
                    result.append(row.judgements)
                    continue
                default = judge_model if judge_model is not None else row.model or None
                key = (default if isinstance(default, str) else "", row.agent)
                models = pools.get(key)
                if models is None:
                    models = pools[key] = GraderModels(default, base_dir=_agent_dir(root, row))
                fresh = await judge_transcript(
                    judges,
                    row.transcript,
                    models,
                    cache=cache,
                    agent_dir=_agent_dir(root, row),
                    mask=_mask(contexts, row.agent),
                    records=records,
                )
                renewed = {judgement.judge for judgement in fresh}
                kept = tuple(item for item in row.judgements if item.judge not in renewed)
                result.append(kept + fresh)
    finally:
        for models in pools.values():
            await models.aclose()
        sweep.end()
    return result


def _agent_dir(root: Path, row: RunRow) -> Path | None:
    folder = root / "agents" / row.agent
    return folder if folder.is_dir() else None


def _mask(contexts: AgentContexts, agent: str) -> SecretMask:
    """What a judge of the agent's runs is sent is masked of its secrets (its secret store,
    its toolsets' secret patterns); an agent the data root lacks has none."""
    context = contexts.of(agent) if agent else None
    if context is None:
        return SecretMask()
    secrets = context.secrets
    return SecretMask(known=lambda: secrets, patterns=context.secret_patterns)


def _rescored(row: RunRow, scenario: Scenario, judgements: tuple[Judgement, ...]) -> RunRow:
    """*row* with its verdict made again from its transcript and *judgements*."""
    checks = scenario_checks(scenario, row.transcript, row) if row.outcome != "not_started" else []
    expectations = {
        kind: verdict
        for kind, verdict in summarize_checks(checks).items()
        if kind in EXPECTATION_KINDS
    }
    error = row.error
    scorer = scenario.scorer
    if scorer is not None and row.outcome != "not_started":
        try:
            score = scorer.score(row.transcript)
        except Exception as failure:  # as a run: the row keeps the scorer's failure
            error = error or f"the scorer failed: {type(failure).__name__}: {failure}"
        else:
            if score.passed is not None:
                detail = "" if score.passed else score.detail
                checks.append(Check(score.kind, "run", score.passed, detail))
            row = replace(row, source=score.columns)
    checks += judge_checks(judgements)
    failed = [item for item in checks if not item.passed]
    if row.outcome != "not_started":
        sim_ok, sim_issues = sim_user_columns(
            scenario.simulated_user, row.transcript, row.sim_stopped_by
        )
        row = replace(row, sim_user_ok=sim_ok, sim_user_issues=sim_issues)
    outcome = outcome_of(
        error=error,
        failed=bool(failed),
        budget=row.outcome == "budget",
        not_started=row.outcome == "not_started",
    )
    return replace(
        row,
        passed=outcome == "passed",
        outcome=outcome,
        expectations=expectations,
        checks=len(checks),
        checks_failed=len(failed),
        failures="; ".join(str(item) for item in failed),
        error=error,
        judgements=judgements,
    )


def _scan(
    table: pd.DataFrame, scanners: Sequence[str], contexts: AgentContexts
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The scanners' findings over *table*, and the table with its ``findings`` counts (the
    scanners are :mod:`agentkit.eval.scanners`'; each run's context its agent's)."""
    from agentkit.eval.scanners import scan_results, with_finding_counts

    findings = scan_results(table, list(scanners) or None, contexts)
    return with_finding_counts(table, findings), findings


def judge_verdicts(results: pd.DataFrame, judge: str) -> dict[str, Judgement]:
    """*judge*'s judgement of each run it judged, by run id
    (:func:`~agentkit.eval.results.run_ids`).
    A judge the table does not have is a :class:`UsageError` naming the judges it has."""
    rows = load_judgements(results)
    known = judge_names(rows)
    if judge not in known:
        listed = ", ".join(known) or "none"
        raise UsageError(f"no judge {judge!r} in this table (its judges: {listed})")
    verdicts: dict[str, Judgement] = {}
    for run, judgements in zip(run_ids(results), rows, strict=True):
        found = next((item for item in judgements if item.judge == judge), None)
        if found is not None:
            verdicts[run] = found
    return verdicts
