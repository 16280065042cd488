"""One run: one scenario at one parameter point, in a data root of its own.

This is the unit a worker executes (in this process, a process pool, or on a Dask worker), so
it is a plain function of a picklable :class:`PointTask` and returns a plain ``dict`` row.

Invariants:

* **independence**: every run builds a fresh data root (a temporary folder, removed afterwards
  unless ``keep_dir`` asks to keep it): the agent's files as shipped in the task (so a remote
  worker needs no shared disk), its config.json with the point's parameters, an empty
  ``agentkit.db``, and the toolsets' state seeded from the scenario through the agent's own
  toolsets (each seeds its own). Runs share nothing and can run in any order, anywhere, and
  give the same row for the scripted model;
* **one row per run, whatever happens**: a run that cannot finish (a failing out-of-band call,
  a crash, the turn time limit) is a row with ``error`` set and ``passed`` False;
* rows carry no run-specific paths or ids (errors are scrubbed of the data root), so two
  executors can be compared row for row — but for the timings and the trace ids
  (:data:`~agentkit.eval.results.TIMING_COLUMNS`).

Each attempt is a span ``eval_run {scenario}``, a child of the sweep's
``invoke_workflow agentkit.eval`` span through the task's W3C ``traceparent`` (so also in a
worker process or on a Dask worker); it is made current while the turns run, so each turn's
``invoke_agent`` span is its child, in the same trace. Its outcome is recorded as
``gen_ai.evaluation.result`` events on it (``passed``, one per expectation kind,
``fact_retention``), and the row carries its ``trace_id`` and ``span_id``. A worker process
sets the OpenTelemetry SDK up from the ``OTEL_*`` variables when the sweep is exported
(:mod:`agentkit.telemetry.setup`) and flushes after each run.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from agentkit.agent import Agent
from agentkit.eval.expectations import (
    Check,
    Observed,
    TurnFacts,
    check,
    summarize_checks,
    turn_facts,
)
from agentkit.eval.params import Params
from agentkit.eval.scenario import Scenario
from agentkit.events import AgentEvent, SessionEvent
from agentkit.layout import DataLayout
from agentkit.memory.fidelity import fact_retention
from agentkit.models.base import (
    ChatMessage,
    ChatModel,
    Completion,
    JsonSchema,
    ModelEvent,
    Purpose,
    SessionBackend,
    ToolSpec,
)
from agentkit.models.scripted import ScriptedModel
from agentkit.models.spec import create_model
from agentkit.telemetry import Telemetry, Trace
from agentkit.telemetry import semconv as sc
from agentkit.types import Message

__all__ = [
    "SCRIPTED",
    "PointTask",
    "TurnScriptedModel",
    "model_label",
    "run_point",
    "snapshot_agent",
]

#: the model spec that means "each scenario's own scripted replies"
SCRIPTED = "scripted"
_SKIPPED_PARTS = ("conversations", "logs", "workspace")
_ANSWER_CHARS = 500

T = TypeVar("T")


@dataclass(frozen=True)
class PointTask:
    """Everything a worker needs for one run (picklable; no open files, no paths it must see)."""

    index: int
    point: int
    scenario: Scenario
    agent_files: tuple[tuple[str, bytes], ...]
    config: dict[str, Any]
    params: Params
    #: a spec string, or a model object (runs in this process only: see ``run_eval``)
    model: str | ChatModel | SessionBackend
    keep_dir: str | None = None
    turn_timeout: float | None = None
    retries: int = 0
    #: the sweep span's W3C traceparent: each attempt's span is its child (None: a new trace)
    traceparent: str | None = None


def model_label(model: str | ChatModel | SessionBackend) -> str:
    """The results table's ``model`` value: the spec string, or a model object's spec."""
    return model if isinstance(model, str) else model.spec or type(model).__name__


def snapshot_agent(agent_dir: Path) -> tuple[tuple[str, bytes], ...]:
    """The agent folder's files (prompts, config, tools, skills, knowledge …) as (path, bytes)
    pairs, without its conversations, logs, lock files, compiled Python or working state (a run
    starts from the scenario's state): what ``workspace/`` holds is left out."""
    files: list[tuple[str, bytes]] = []
    for path in sorted(agent_dir.rglob("*")):
        relative = path.relative_to(agent_dir)
        if not path.is_file() or relative.parts[0] in _SKIPPED_PARTS:
            continue
        if path.name.startswith(".") or "__pycache__" in relative.parts:
            continue
        files.append((relative.as_posix(), path.read_bytes()))
    return tuple(files)


class TurnScriptedModel(ChatModel):
    """A scenario's scripted replies: a fresh :class:`ScriptedModel` for each turn's script."""

    native_tools = True

    def __init__(self, scenario: Scenario) -> None:
        self.spec = SCRIPTED
        self._scenario = scenario
        self._current: ScriptedModel | None = None

    def start_turn(self, index: int) -> None:
        script = self._scenario.turns[index].script or {}
        self._current = ScriptedModel(
            {purpose: list(replies) for purpose, replies in script.items()},
            name=f"{self._scenario.id}#turn{index + 1}",
        )

    def _model(self) -> ScriptedModel:
        if self._current is None:
            raise RuntimeError("start_turn() was not called")
        return self._current

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        purpose: Purpose,
        schema: JsonSchema | None = None,
    ) -> AsyncIterator[ModelEvent]:
        async for event in self._model().stream(messages, purpose=purpose, schema=schema):
            yield event

    async def complete_with_tools(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: Sequence[ToolSpec],
        purpose: Purpose = "act",
    ) -> Completion:
        return await self._model().complete_with_tools(messages, tools=tools, purpose=purpose)


class _RunError(Exception):
    """A run cannot go on (the message says why, for the row's ``error``)."""


def _run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
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


def run_point(task: PointTask) -> dict[str, Any]:
    """Run *task*; return its result row (see :mod:`agentkit.eval.results` for the columns).

    A run that could not finish (its row has ``error``: a crash, the turn time limit, a failed
    out-of-band call) is tried again from a fresh data root, up to ``task.retries`` more times;
    ``attempts`` says how many it took. Failed *expectations* are outcomes, never retried."""
    worker = _in_worker()
    if worker and task.traceparent is not None:
        _export_from_worker()
    attempts = 0
    try:
        while True:
            attempts += 1
            row = _attempt(task)
            if not row["error"] or attempts > task.retries:
                return {**row, "attempts": attempts}
    finally:
        if worker:
            from agentkit.telemetry.setup import flush

            flush()  # a pool's worker process may end without its exit handlers


def _in_worker() -> bool:
    import multiprocessing

    return multiprocessing.current_process().name != "MainProcess"


_WORKER_SETUP: list[object] = []


def _export_from_worker() -> None:
    """Once per worker process: the SDK from the ``OTEL_*`` variables, when they ask for it."""
    if not _WORKER_SETUP:
        from agentkit.telemetry.setup import configure_from_env

        _WORKER_SETUP.append(configure_from_env(warn=False))


def _attempt(task: PointTask) -> dict[str, Any]:
    if task.keep_dir is not None:
        root = Path(task.keep_dir) / f"{task.scenario.id}--p{task.point}"
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
    else:
        root = Path(tempfile.mkdtemp(prefix="agentkit-eval-"))
    try:
        return _run_sync(_Run(task, root).row())
    finally:
        if task.keep_dir is None:
            shutil.rmtree(root, ignore_errors=True)


class _Run:
    """The state of one run while it goes (one object per run, used once)."""

    def __init__(self, task: PointTask, root: Path) -> None:
        self.task = task
        self.scenario = task.scenario
        self.root = root
        self.files = DataLayout(root).agent(self.scenario.agent)
        self.folder = self.files.dir
        self.scripted = task.model == SCRIPTED
        self.checks: list[Check] = []
        self.facts = TurnFacts()
        self.model_calls = 0
        self.turns_run = 0

    # -- setting up --

    def _materialise(self) -> None:
        for relative, content in self.task.agent_files:
            path = self.folder / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        self.files.config.write_text(
            json.dumps(self.task.config, ensure_ascii=False, indent=2), encoding="utf-8"
        )
        self.files.workspace.mkdir(exist_ok=True)

    def _model(self, scripts: TurnScriptedModel | None) -> ChatModel | SessionBackend:
        if scripts is not None:
            return scripts
        if not isinstance(self.task.model, str):
            return self.task.model  # given as an object: shared by the runs of this process
        return create_model(self.task.model, base_dir=self.folder)

    # -- observing --

    def _traced_calls(self, message_id: str, conversation_id: str) -> int:
        calls = self.files.conversation(conversation_id).calls(message_id)
        if not calls.is_file():
            return 0
        return sum(1 for line in calls.read_text(encoding="utf-8").splitlines() if line.strip())

    def _observe(
        self, agent: Agent, conversation_id: str, facts: TurnFacts, calls: int
    ) -> Observed:
        state = agent.execution_state(conversation_id)
        snapshot = agent.runtime.load_tools().snapshot()
        return Observed(
            facts=facts,
            status=state.value.status if state is not None else "none",
            task_state=agent.task_state(conversation_id).value,
            state=snapshot,
            model_calls=calls,
        )

    # -- the run --

    async def _turns(self) -> Observed:
        scenario = self.scenario
        scripts = TurnScriptedModel(scenario) if self.scripted else None
        agent = Agent.open(scenario.agent, data_dir=self.root, model=self._model(scripts))
        try:
            # the state the run starts from, through the agent's own toolsets
            agent.runtime.load_tools().seed(scenario.state)
            conversation_id = agent.create_conversation(
                scenario.title or scenario.id
            ).conversation_id
            if scenario.task_state is not None:
                agent.save_task_state(conversation_id, scenario.task_state, expected_version=0)
            turn_id = ""
            for message in scenario.history:
                if message.role == "user" or not turn_id:
                    opened = Message.user(message.content)
                    turn_id = opened.message_id
                    if message.role == "user":
                        agent.append_message(conversation_id, opened)
                        continue
                agent.append_message(
                    conversation_id, Message.assistant(message.content, message_id=turn_id)
                )
            for number, turn in enumerate(scenario.turns, 1):
                if turn.restart:
                    await agent.aclose()
                    agent = Agent.open(
                        scenario.agent, data_dir=self.root, model=self._model(scripts)
                    )
                for call in turn.before:  # the user, outside the chat, with the agent's tools
                    result = await agent.tools.arun(call.tool, dict(call.args))
                    if not result.ok:
                        raise _RunError(
                            f"turn {number}: the out-of-band call {call.tool} failed: {result.text}"
                        )
                if scripts is not None:
                    scripts.start_turn(number - 1)
                events = await self._send(agent, conversation_id, turn.user, number)
                facts = turn_facts(events)
                message_id = next((e.message_id for e in events if isinstance(e, SessionEvent)), "")
                calls = self._traced_calls(message_id, conversation_id) + len(facts.compressions)
                if agent.config.engine == "chat":
                    calls += 1
                self.model_calls += calls
                self.facts = self.facts.then(facts)
                self.turns_run = number
                if not turn.expect.is_empty:
                    seen = self._observe(agent, conversation_id, facts, calls)
                    self.checks += check(turn.expect, seen, f"turn {number}")
            final = self._observe(agent, conversation_id, self.facts, self.model_calls)
            self.checks += check(scenario.expect, final, "run")
            return final
        finally:
            await agent.aclose()

    async def _send(
        self, agent: Agent, conversation_id: str, text: str, number: int
    ) -> list[AgentEvent]:
        events: list[AgentEvent] = []
        limit = self.task.turn_timeout
        try:
            async with asyncio.timeout(limit):
                async for event in agent.send_message(conversation_id, text):
                    events.append(event)
        except TimeoutError:
            raise _RunError(f"turn {number} took longer than the limit of {limit:g} s") from None
        return events

    async def row(self) -> dict[str, Any]:
        trace = self._trace()
        started = time.perf_counter()
        error = error_type = ""
        final: Observed | None = None
        try:
            with trace.root.activate():  # the turns' spans are the run's children
                self._materialise()
                final = await self._turns()
        except _RunError as failure:
            error, error_type = str(failure), "eval_run_error"
        except Exception as failure:  # one row per run, whatever happens
            error, error_type = f"{type(failure).__name__}: {failure}", type(failure).__qualname__
        except BaseException as failure:  # cancelled: the span ends, the error goes on
            trace.end(error_type=type(failure).__qualname__)
            raise
        wall_ms = (time.perf_counter() - started) * 1000
        row = self._row(final, error.replace(str(self.root), "<run>"), wall_ms)
        _evaluated(trace, row)
        trace.end(error_type=error_type or None, message=row["error"])
        return {**row, "trace_id": trace.trace_id, "span_id": trace.root.span_id}

    def _trace(self) -> Trace:
        task, scenario = self.task, self.scenario
        attributes: dict[str, object] = {
            "agentkit.eval.scenario": scenario.id,
            "agentkit.eval.agent": scenario.agent,
            "agentkit.eval.point": task.point,
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

    def _row(self, final: Observed | None, error: str, wall_ms: float) -> dict[str, Any]:
        task, scenario, facts = self.task, self.scenario, self.facts
        failed = [item for item in self.checks if not item.passed]
        last = facts.compressions[-1] if facts.compressions else None
        retention = (
            fact_retention(final.task_state, scenario.facts)
            if final is not None and scenario.facts
            else None
        )
        row: dict[str, Any] = {
            "scenario": scenario.id,
            "title": scenario.title,
            "language": scenario.language,
            "agent": scenario.agent,
            "tags": ",".join(scenario.tags),
            "point": task.point,
            **task.params,
            "model": model_label(task.model),
            "passed": not error and not failed,
            "checks": len(self.checks),
            "checks_failed": len(failed),
            "failures": "; ".join(str(item) for item in failed),
            "error": error,
            "turns": self.turns_run,
            "steps": facts.steps,
            "tool_calls": len(facts.planned_tools),
            "tools": ",".join(facts.planned_tools),
            "questions": len(facts.questions),
            "consents": len(facts.consents),
            "model_calls": self.model_calls,
            "input_tokens": facts.input_tokens,
            "output_tokens": facts.output_tokens,
            "compressions": len(facts.compressions),
            "messages_before": last.messages_before if last else None,
            "messages_after": last.messages_after if last else None,
            "tokens_before": last.tokens_before if last else None,
            "tokens_after": last.tokens_after if last else None,
            "facts_total": retention.total if retention else None,
            "facts_kept": len(retention.kept) if retention else None,
            "fact_retention": retention.ratio if retention else None,
            "final_status": final.status if final else "",
            "result_status": facts.result_status,
            "answer": facts.answer[:_ANSWER_CHARS],
            "errors": " | ".join(facts.errors),
            "latency_ms": round(facts.latency_ms, 3),
            "wall_ms": round(wall_ms, 3),
        }
        for kind, passed in summarize_checks(self.checks).items():
            row[f"exp_{kind}"] = passed
        return row


def _evaluated(trace: Trace, row: dict[str, Any]) -> None:
    """The run's outcome as ``gen_ai.evaluation.result`` events on its span."""

    def result(name: str, value: float, label: str | None, explanation: str = "") -> None:
        trace.event(sc.EVALUATION_EVENT, {
            sc.EVALUATION_NAME: name,
            sc.EVALUATION_SCORE_VALUE: value,
            sc.EVALUATION_SCORE_LABEL: label,
            sc.EVALUATION_EXPLANATION: explanation[:_ANSWER_CHARS] or None,
        })  # fmt: skip

    passed = bool(row["passed"])
    why = row["error"] or row["failures"]
    result("passed", 1.0 if passed else 0.0, "pass" if passed else "fail", why)
    for key, value in row.items():
        if key.startswith("exp_") and isinstance(value, bool):
            result(key[len("exp_") :], 1.0 if value else 0.0, "pass" if value else "fail")
    if row.get("fact_retention") is not None:
        result("fact_retention", float(row["fact_retention"]), None)
