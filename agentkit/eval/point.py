"""One run: one scenario at one parameter point, in a world of its own.

This is the unit a worker executes (in this process, a process pool, or on a Dask worker): a
plain function of a picklable :class:`~agentkit.eval.task.PointTask` returning a typed
:class:`~agentkit.eval.row.RunRow`. A run is three parts: the world it runs in
(:class:`~agentkit.eval.world.RunWorld`: its data root, agent, model, budget), the driver of
its dialogue (:mod:`agentkit.eval.dialogue`: fixed turns or a simulated user) and its row,
made here from what the dialogue logged, with the run's transcript in it.

Invariants:

* **independence**: every run builds a fresh data root (removed afterwards unless
  ``keep_dir`` asks to keep it), so runs share nothing, can run in any order, anywhere, and
  give the same row for the scripted model;
* **a run whose model endpoint failed is an error**, not a result: a model request that failed
  for good (the endpoint down after the backend's retries, a 401, a broken stream:
  :mod:`agentkit.models.transport` counts them) sets the row's ``error``, also when the agent
  carried on without the call (a planner's fallback); ``transport_retries`` counts the
  requests sent again;
* **one row per run, whatever happens**: a run that cannot finish (a failing out-of-band call,
  a crash, the turn time limit) is a row with ``error`` set and ``passed`` False, and keeps
  the transcript of what it did;
* rows carry no run-specific paths or ids in their figures (errors are scrubbed of the data
  root), so two executors can be compared row for row — but for the timings, the trace ids
  and the transcript (:data:`~agentkit.eval.results.RUN_SPECIFIC_COLUMNS`).

A run's budget (:mod:`agentkit.eval.budget`) stops it at a safe point with ``outcome``
``budget``. :func:`run_point_async` is the same run on the caller's event loop (what
``--concurrency`` runs N at once), with the loop's shared connection pools.

Each attempt is a span ``eval_run {scenario}``, a child of the sweep's
``invoke_workflow agentkit.eval`` span through the task's W3C ``traceparent`` (so also in a
worker process or on a Dask worker); it is made current while the turns run, so each turn's
``invoke_agent`` span — and the simulated user's — is its child, in the same trace. Its
outcome is recorded as ``gen_ai.evaluation.result`` events on it (``passed``, one per
expectation kind, a scenario source's verdict, ``fact_retention``), and the row carries its
``trace_id`` and ``span_id``. A worker process sets the OpenTelemetry SDK up from the
``OTEL_*`` variables when the sweep is exported (:mod:`agentkit.telemetry.setup`) and
flushes after each run.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import JsonValue

from agentkit.calls.secrets import SecretMask
from agentkit.errors import StoreError
from agentkit.eval.dialogue import Chat, RunError, RunLog, UserSide, dialogue_for
from agentkit.eval.expectations import EXPECTATION_KINDS, Check, Observed, check
from agentkit.eval.expectations import summarize_checks as verdicts
from agentkit.eval.judges.grading import GraderModels, judge_checks, judge_transcript
from agentkit.eval.judges.values import Judgement
from agentkit.eval.pricing import price_usage
from agentkit.eval.row import RunRow, outcome_of
from agentkit.eval.scenario import Scenario
from agentkit.eval.scorer import SourceScore
from agentkit.eval.sim_check import sim_user_columns
from agentkit.eval.task import PointTask, model_label
from agentkit.eval.transcript import RunState, Transcript
from agentkit.eval.world import RunWorld, run_root
from agentkit.memory.fidelity import fact_retention
from agentkit.models.base import ChatModel
from agentkit.models.transport import TransportCount, counting_transport
from agentkit.telemetry import Telemetry, Trace
from agentkit.telemetry import semconv as sc

if TYPE_CHECKING:
    from agentkit.eval.pools import EndpointPools

__all__ = ["not_started_row", "run_point", "run_point_async", "run_sync"]

_ANSWER_CHARS = 500

T = TypeVar("T")


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run *coroutine* to completion, also from a thread whose loop is running (Jupyter)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coroutine)
        except BaseException as error:  # handed back to the caller's thread
            box["error"] = error

    thread = threading.Thread(target=target, name="agentkit-eval-run")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    result: T = box["value"]
    return result


def run_point(task: PointTask) -> RunRow:
    """Run *task*; return its row (see :mod:`agentkit.eval.results` for the columns).

    A run that could not finish (its row has ``error``: a crash, the turn time limit, a failed
    out-of-band call) is tried again from a fresh data root, up to ``task.retries`` more times;
    ``attempts`` says how many it took. Failed *expectations* are outcomes, never retried."""
    worker = in_worker()
    if worker and task.traceparent is not None:
        export_from_worker()
    attempts = retried = 0
    try:
        while True:
            attempts += 1
            row = _attempt(task)
            retried += row.transport_retries
            if not row.error or attempts > task.retries:
                return row.with_attempts(attempts, retried)
    finally:
        if worker:
            from agentkit.telemetry.setup import flush

            flush()  # a pool's worker process may end without its exit handlers


async def run_point_async(task: PointTask, pools: EndpointPools | None = None) -> RunRow:
    """:func:`run_point` on the running event loop (many runs at once on one loop); *pools*
    gives the runs' ``openai:`` models one connection pool per endpoint."""
    attempts = retried = 0
    while True:
        attempts += 1
        row = await _attempt_async(task, pools)
        retried += row.transport_retries
        if not row.error or attempts > task.retries:
            return row.with_attempts(attempts, retried)


def not_started_row(task: PointTask, reason: str) -> RunRow:
    """The row of a run that never started (the sweep's budget was spent, or it was stopped):
    every column, nothing run, ``outcome`` ``not_started`` and *reason* in ``budget_reason``."""
    return _row(task, RunLog(), UserSide(), None, not_started=reason)[0]


def in_worker() -> bool:
    """This is a pool's worker process (not the sweep's own)."""
    import multiprocessing

    return multiprocessing.current_process().name != "MainProcess"


_WORKER_SETUP: list[object] = []


def export_from_worker() -> None:
    """Once per worker process: the SDK from the ``OTEL_*`` variables, when they ask for it."""
    if not _WORKER_SETUP:
        from agentkit.telemetry.setup import configure_from_env

        _WORKER_SETUP.append(configure_from_env(warn=False))


def _attempt(task: PointTask) -> RunRow:
    root = run_root(task)
    try:
        return run_sync(_run(RunWorld(task, root)))
    finally:
        if task.keep_dir is None:
            shutil.rmtree(root, ignore_errors=True)


async def _attempt_async(task: PointTask, pools: EndpointPools | None) -> RunRow:
    """:func:`_attempt` on the running loop; removing the data root is done in a thread (to
    its end, also when the run is cancelled), so that the other runs' turns go on meanwhile."""
    root = run_root(task)
    try:
        return await _run(RunWorld(task, root, pools))
    finally:
        if task.keep_dir is None:
            await asyncio.shield(asyncio.to_thread(shutil.rmtree, root, ignore_errors=True))


async def _run(world: RunWorld) -> RunRow:
    """The run in *world*: its span, its dialogue, its checks, its row."""
    with counting_transport() as transport:  # every model of the run counts its requests
        return await _counted(world, transport)


async def _counted(world: RunWorld, transport: TransportCount) -> RunRow:
    task, scenario = world.task, world.scenario
    trace = _trace(task)
    started = time.perf_counter()
    log = RunLog()
    dialogue = dialogue_for(world)
    error = error_type = ""
    final: RunState | None = None
    judgements: tuple[Judgement, ...] = ()
    mask = run_mask(scenario, None)
    try:
        with trace.root.activate():  # the turns' and the judges' spans are the run's children
            world.materialise()
            chat = Chat(world, log)
            try:
                await dialogue.run(chat)
                final = chat.observe(log.facts.usage.calls)
            finally:
                mask = run_mask(scenario, chat.agent.tools.mask)
                await chat.aclose()
            if not world.meter.reason:  # a run stopped by its budget is not judged
                log.checks += check(scenario.expect, Observed.of(log.facts, final), "run")
                seen = _transcript(task, log, dialogue.user_side(), final).masked(mask)
                judgements = await _judge(world, seen, mask)
    except RunError as failure:
        error, error_type = str(failure), "eval_run_error"
    except Exception as failure:  # one row per run, whatever happens
        error, error_type = f"{type(failure).__name__}: {failure}", type(failure).__qualname__
    except BaseException as failure:  # cancelled: the span ends, the error goes on
        trace.end(error_type=type(failure).__qualname__)
        raise
    if transport.failures and not error:  # whatever the agent made of it, not a fair result
        error = f"{transport.failures} model request(s) failed: {transport.last_failure}"
        error_type = "transport_error"
    wall_ms = (time.perf_counter() - started) * 1000
    row, score = _row(
        task,
        log,
        dialogue.user_side(),
        final,
        judgements=judgements,
        error=error.replace(str(world.root), "<run>"),
        budget=world.meter.reason,
        wall_ms=wall_ms,
        transport_retries=transport.retries,
        trace_id=trace.trace_id,
        span_id=trace.root.span_id,
        mask=mask,
    )
    _evaluated(trace, row, score)
    trace.end(error_type=error_type or None, message=row.error)
    return row


def _trace(task: PointTask) -> Trace:
    scenario = task.scenario
    attributes: dict[str, object] = {
        "agentkit.eval.scenario": scenario.id,
        "agentkit.eval.agent": scenario.agent,
        "agentkit.eval.point": task.point,
        "agentkit.eval.repeat": task.repeat,
        "agentkit.eval.model": model_label(task.model),
    }
    for key, value in task.params.items():
        if key != "model":
            attributes[f"agentkit.eval.param.{key}"] = (
                value if isinstance(value, str | int | float | bool) else str(value)
            )
    return Telemetry().trace(
        f"eval_run {scenario.id}", attributes=attributes, traceparent=task.traceparent
    )


async def _judge(
    world: RunWorld, transcript: Transcript, mask: SecretMask
) -> tuple[Judgement, ...]:
    """The scenario's judges on the run (graded by each judge's model, else the task's judge
    model, else the run's model); a grader that fails is a ``judge_error``, never raised."""
    judges = world.scenario.expect.judges
    if not judges:
        return ()
    task = world.task
    chosen = task.judge_model if task.judge_model is not None else task.model
    default = chosen if isinstance(chosen, str | ChatModel) else None
    models = GraderModels(default, base_dir=world.folder)
    # the graders' requests are counted apart: a judge's failed request is its judge_error,
    # never the run's transport error
    with counting_transport():
        try:
            return await judge_transcript(
                judges, transcript, models, agent_dir=world.folder, mask=mask
            )
        finally:
            await models.aclose()


def _transcript(task: PointTask, log: RunLog, user: UserSide, final: RunState | None) -> Transcript:
    """What the run showed, as its row keeps it."""
    return Transcript(
        run=task.run_name,
        scenario=task.scenario.id,
        scenario_spec=scenario_spec(task.scenario),
        turns=log.turns,
        final=final,
        user_calls=list(user.calls),
    )


def scenario_spec(scenario: Scenario) -> dict[str, JsonValue] | None:
    """What a transcript keeps of its scenario: the fields of its file, enough to build it
    again (:class:`Scenario`); None when it does not dump (a suite's own values)."""
    try:
        spec = scenario.model_dump(mode="json", exclude_defaults=True)
        Scenario.model_validate(spec)
    except (ValueError, TypeError):
        return None
    return spec


def _score(task: PointTask, transcript: Transcript) -> tuple[SourceScore | None, str]:
    """The scenario source's score of the run (None: no scorer), and why scoring failed."""
    scorer = task.scenario.scorer
    if scorer is None:
        return None, ""
    try:
        return scorer.score(transcript), ""
    except Exception as failure:  # the row still is made, with the scorer's failure
        return None, f"the scorer failed: {type(failure).__name__}: {failure}"


def _row(
    task: PointTask,
    log: RunLog,
    user: UserSide,
    final: RunState | None,
    *,
    judgements: tuple[Judgement, ...] = (),
    error: str = "",
    budget: str = "",
    wall_ms: float = 0.0,
    transport_retries: int = 0,
    trace_id: str = "",
    span_id: str = "",
    not_started: str | None = None,
    mask: SecretMask | None = None,
) -> tuple[RunRow, SourceScore | None]:
    """The row of a run that logged *log* (or never started: *not_started* says why), and
    its scenario source's score; every secret *mask* knows (default: the scenario's
    secret-named values) masked before anything reads the transcript."""
    scenario, facts = task.scenario, log.facts
    mask = run_mask(scenario, None) if mask is None else mask
    transcript = _transcript(task, log, user, final).masked(mask)
    score, scoring_error = _score(task, transcript)
    error = error or scoring_error
    checks = list(log.checks)
    if score is not None and score.passed is not None:
        checks.append(Check(score.kind, "run", score.passed, "" if score.passed else score.detail))
    checks += judge_checks(judgements)
    failed = [item for item in checks if not item.passed]
    last = facts.compressions[-1] if facts.compressions else None
    retention = (
        fact_retention(final.task_state, scenario.facts)
        if final is not None and scenario.facts
        else None
    )
    outcome = outcome_of(
        error=error, failed=bool(failed), budget=bool(budget), not_started=not_started is not None
    )
    passed = outcome == "passed"
    cost = price_usage(model_label(task.model), facts.usage)
    sim_ok, sim_issues = (
        sim_user_columns(scenario.simulated_user, transcript, user.stopped_by or "")
        if not_started is None
        else (None, "")
    )
    row = RunRow(
        scenario=scenario.id,
        title=scenario.title,
        language=scenario.language,
        agent=scenario.agent,
        tags=",".join(scenario.tags),
        point=task.point,
        repeat=task.repeat,
        params={key: value for key, value in task.params.items() if key != "model"},
        model=model_label(task.model),
        user_model=model_label(task.user_model),
        passed=passed,
        outcome=outcome,
        expectations={
            kind: verdict
            for kind, verdict in verdicts(log.checks).items()
            if kind in EXPECTATION_KINDS
        },
        checks=len(checks),
        checks_failed=len(failed),
        failures="; ".join(str(item) for item in failed),
        error=error,
        turns=log.turns_run,
        steps=facts.steps,
        tool_calls=len(facts.planned_tools),
        tools=",".join(facts.planned_tools),
        questions=len(facts.questions),
        consents=len(facts.consents),
        model_calls=facts.usage.calls,
        input_tokens=facts.usage.input_tokens,
        output_tokens=facts.usage.output_tokens,
        cached_tokens=facts.usage.cached_tokens,
        cost_usd=cost.cost_usd if not_started is None else None,
        cost_note=cost.note if not_started is None else "",
        compressions=len(facts.compressions),
        messages_before=last.messages_before if last else None,
        messages_after=last.messages_after if last else None,
        tokens_before=last.tokens_before if last else None,
        tokens_after=last.tokens_after if last else None,
        compression_strategy=last.strategy if last else "",
        facts_ungrounded=sum(c.facts_ungrounded for c in facts.compressions),
        facts_total=retention.total if retention else None,
        facts_kept=len(retention.kept) if retention else None,
        fact_retention=retention.ratio if retention else None,
        final_status=final.status if final else "",
        result_status=facts.result_status,
        answer=facts.answer[:_ANSWER_CHARS],
        errors=" | ".join(facts.errors),
        budget_reason=not_started if not_started is not None else budget,
        sim_turns=user.turns,
        sim_stopped_by=user.stopped_by or "",
        sim_model_calls=user.usage.calls,
        sim_tokens=user.usage.input_tokens + user.usage.output_tokens,
        sim_user_ok=sim_ok,
        sim_user_issues=sim_issues,
        attempts=0,
        transport_retries=transport_retries,
        source=score.columns if score is not None else None,
        latency_ms=round(facts.latency_ms, 3),
        wall_ms=round(wall_ms, 3),
        trace_id=trace_id,
        span_id=span_id,
        judgements=judgements,
        transcript=transcript,
    )
    return row.masked(mask, transcript=False), score


def run_mask(scenario: Scenario, agent: SecretMask | None) -> SecretMask:
    """What a run's row is masked with: the agent's mask (its toolsets' secret patterns and
    the values their secret store holds; None: the run never opened its agent) and every
    value the scenario passes as a secret-named argument (its script's planned calls, its
    approvals' edited arguments, the tools run before a turn, its starting state, what a
    simulated user knows) — the same secrets the conversation's journal masks."""
    if agent is None:
        mask = SecretMask()
    else:  # the store's values read now: the agent is closed before the row is made
        try:
            known = tuple(agent.values())
        except (StoreError, OSError):  # a store that broke with the run: its patterns still mask
            known = ()
        mask = SecretMask(lambda: known, agent.patterns, memo=agent.memo)
    mask.learn_json(scenario.model_dump(mode="json"))
    return mask


def _evaluated(trace: Trace, row: RunRow, score: SourceScore | None) -> None:
    """The run's outcome as attributes of its span (to filter and chart by) and as
    ``gen_ai.evaluation.result`` events on it."""
    verdicts = dict(row.expectations)
    if score is not None and score.passed is not None:
        verdicts[score.kind] = score.passed  # a scenario source's own judge
    trace.evaluation(passed=row.passed, outcome=row.outcome, checks=row.checks,
                     checks_failed=row.checks_failed, verdicts=verdicts)  # fmt: skip

    def result(name: str, value: float, label: str | None, explanation: str = "") -> None:
        trace.event(sc.EVALUATION_EVENT, {
            sc.EVALUATION_NAME: name,
            sc.EVALUATION_SCORE_VALUE: value,
            sc.EVALUATION_SCORE_LABEL: label,
            sc.EVALUATION_EXPLANATION: explanation[:_ANSWER_CHARS] or None,
        })  # fmt: skip

    why = row.error or row.failures
    result("passed", 1.0 if row.passed else 0.0, "pass" if row.passed else "fail", why)
    for kind in EXPECTATION_KINDS:
        verdict = row.expectations.get(kind)
        if verdict is not None:
            result(kind, 1.0 if verdict else 0.0, "pass" if verdict else "fail")
    if score is not None and score.passed is not None:
        verdict = score.passed
        result(score.kind, 1.0 if verdict else 0.0, "pass" if verdict else "fail", score.detail)
    if row.fact_retention is not None:
        result("fact_retention", float(row.fact_retention), None)
    for judgement in row.judgements:
        score_value = judgement.score if judgement.score is not None else float("nan")
        result(f"judge_{judgement.judge}", score_value, judgement.outcome, judgement.reason)
