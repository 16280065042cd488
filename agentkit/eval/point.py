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

A scenario with a ``simulated_user`` runs as a conversation: the simulator
(:mod:`agentkit.eval.simulator`) writes each user message after reading the agent's reply, until
it is done, gives up, or ``max_turns`` messages were sent; ``sim_turns`` and ``sim_stopped_by``
say how it went. A run's budget (:mod:`agentkit.eval.budget`) stops it at a safe point with
``outcome`` ``budget``. :func:`run_point_async` is the same run on the caller's event loop (what
``--concurrency`` runs N at once), with the loop's shared connection pools.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import JsonValue

from agentkit.agent import Agent
from agentkit.errors import ModelError
from agentkit.eval.budget import BudgetedModel, Meter, RunBudget
from agentkit.eval.expectations import (
    Check,
    Observed,
    TurnFacts,
    check,
    summarize_checks,
    turn_facts,
)
from agentkit.eval.params import Params
from agentkit.eval.scenario import Expectations, Scenario, SimulatedUser
from agentkit.eval.scenario import Turn as ScenarioTurn
from agentkit.eval.simulator import (
    ModelUser,
    ScriptedUser,
    SimTurn,
    UserSimulator,
    failure_text,
)
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
from agentkit.types import Message, Usage

if TYPE_CHECKING:
    from agentkit.eval.pools import EndpointPools

__all__ = [
    "SCRIPTED",
    "PointTask",
    "TurnScriptedModel",
    "model_label",
    "not_started_row",
    "run_point",
    "run_point_async",
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
    #: which repeat of this (scenario, point) this is (``--repeat K``: 0 … K-1)
    repeat: int = 0
    #: who plays a simulated user: a spec (``scripted``: the scenario's user_script) or a
    #: model object; None for a scenario with fixed turns
    user_model: str | ChatModel | None = None
    #: what the run may spend
    budget: RunBudget = field(default_factory=RunBudget)

    @property
    def run_name(self) -> str:
        """``{scenario}--p{point}`` (``--r{repeat}`` after it for a repeat past the first)."""
        name = f"{self.scenario.id}--p{self.point}"
        return f"{name}--r{self.repeat}" if self.repeat else name


def model_label(model: str | ChatModel | SessionBackend | None) -> str:
    """The results table's ``model`` value: the spec string, or a model object's spec."""
    if model is None:
        return ""
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


async def run_point_async(task: PointTask, pools: EndpointPools | None = None) -> dict[str, Any]:
    """:func:`run_point` on the running event loop (many runs at once on one loop); *pools*
    gives the runs' ``openai:`` models one connection pool per endpoint."""
    attempts = 0
    while True:
        attempts += 1
        row = await _attempt_async(task, pools)
        if not row["error"] or attempts > task.retries:
            return {**row, "attempts": attempts}


def not_started_row(task: PointTask, reason: str) -> dict[str, Any]:
    """The row of a run that never started (the sweep's budget was spent, or it was stopped):
    every column, nothing run, ``outcome`` ``not_started`` and *reason* in ``budget_reason``."""
    run = _Run(task, Path("."))
    row = run._row(None, "", 0.0)
    return {
        **row,
        "passed": False,
        "outcome": "not_started",
        "budget_reason": reason,
        "trace_id": "",
        "span_id": "",
        "attempts": 0,
    }


def _in_worker() -> bool:
    import multiprocessing

    return multiprocessing.current_process().name != "MainProcess"


_WORKER_SETUP: list[object] = []


def _export_from_worker() -> None:
    """Once per worker process: the SDK from the ``OTEL_*`` variables, when they ask for it."""
    if not _WORKER_SETUP:
        from agentkit.telemetry.setup import configure_from_env

        _WORKER_SETUP.append(configure_from_env(warn=False))


def _run_root(task: PointTask) -> Path:
    """A fresh data root for one attempt (under ``keep_dir`` when the runs are kept)."""
    if task.keep_dir is not None:
        root = Path(task.keep_dir) / task.run_name
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        return root
    return Path(tempfile.mkdtemp(prefix="agentkit-eval-"))


def _attempt(task: PointTask) -> dict[str, Any]:
    root = _run_root(task)
    try:
        return _run_sync(_Run(task, root).row())
    finally:
        if task.keep_dir is None:
            shutil.rmtree(root, ignore_errors=True)


async def _attempt_async(task: PointTask, pools: EndpointPools | None) -> dict[str, Any]:
    """:func:`_attempt` on the running loop; removing the data root is done in a thread (to
    its end, also when the run is cancelled), so that the other runs' turns go on meanwhile."""
    root = _run_root(task)
    try:
        return await _Run(task, root, pools).row()
    finally:
        if task.keep_dir is None:
            await asyncio.shield(asyncio.to_thread(shutil.rmtree, root, ignore_errors=True))


class _Run:
    """The state of one run while it goes (one object per run, used once)."""

    def __init__(self, task: PointTask, root: Path, pools: EndpointPools | None = None) -> None:
        self.task = task
        self.scenario = task.scenario
        self.root = root
        self.pools = pools
        self.files = DataLayout(root).agent(self.scenario.agent)
        self.folder = self.files.dir
        self.scripted = task.model == SCRIPTED
        self.checks: list[Check] = []
        self.facts = TurnFacts()
        self.model_calls = 0
        self.turns_run = 0
        self.meter = Meter(task.budget)
        self.metered = False  # the agent's model counts its own calls (a BudgetedModel)
        self.sim_turns = 0
        self.sim_stopped_by = ""
        self.sim_calls = 0
        self.sim_tokens = 0

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

    def _backend(self, spec: str) -> ChatModel | SessionBackend:
        """The model a spec names, for this run (shared pools; the repeat's seed)."""
        if self.pools is not None and spec.startswith("openai:"):
            model: ChatModel | SessionBackend = self.pools.openai_model(spec.partition(":")[2])
        else:
            model = create_model(spec, base_dir=self.folder)
        seed = getattr(model, "seed", None)
        if self.task.repeat and isinstance(seed, int) and not isinstance(seed, bool):
            model.seed = seed + self.task.repeat  # type: ignore[union-attr]  # a backend's seed
        return model

    def _model(self, scripts: ChatModel | None) -> ChatModel | SessionBackend:
        if scripts is not None:
            model: ChatModel | SessionBackend = scripts
        elif not isinstance(self.task.model, str):
            model = self.task.model  # given as an object: shared by the runs of this process
        else:
            model = self._backend(self.task.model)
        if self.task.budget.is_empty or not isinstance(model, ChatModel):
            return model
        self.metered = True
        return BudgetedModel(model, self.meter)

    def _open(self, scripts: ChatModel | None) -> Agent:
        return Agent.open(self.scenario.agent, data_dir=self.root, model=self._model(scripts))

    def _prepare(self, agent: Agent) -> str:
        """The starting state, the conversation and its earlier messages; its id."""
        scenario = self.scenario
        agent.runtime.load_tools().seed(scenario.state)  # through the agent's own toolsets
        conversation_id = agent.create_conversation(scenario.title or scenario.id).conversation_id
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
        return conversation_id

    # -- observing --

    def _traced_calls(self, agent: Agent, message_id: str, conversation_id: str) -> int:
        return len(agent.call_records(conversation_id, message_id))

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
        scripts: ChatModel | None = None
        if self.scripted:
            replies: dict[str, list[JsonValue]] = {
                purpose: list(items) for purpose, items in (scenario.script or {}).items()
            }
            scripts = (
                TurnScriptedModel(scenario)
                if scenario.simulated_user is None
                else ScriptedModel(replies, name=scenario.id)  # one script for the whole run
            )
        agent = self._open(scripts)
        try:
            conversation_id = self._prepare(agent)
            if scenario.simulated_user is not None:
                await self._simulate(agent, conversation_id, scenario.simulated_user)
            else:
                for number, turn in enumerate(scenario.turns, 1):
                    if self.meter.over():
                        break
                    if turn.restart:
                        await agent.aclose()
                        agent = self._open(scripts)
                    for call in turn.before:  # the user, outside the chat, with the agent's tools
                        result = await agent.tools.arun(call.tool, dict(call.args))
                        if not result.ok:
                            raise _RunError(
                                f"turn {number}: the out-of-band call {call.tool} failed: "
                                f"{result.text}"
                            )
                    if isinstance(scripts, TurnScriptedModel):
                        scripts.start_turn(number - 1)
                    decision = _decision_of(turn)
                    await self._turn(
                        agent, conversation_id, turn.user or "", number, turn.expect, decision
                    )
                    if self.meter.reason:
                        break
            final = self._observe(agent, conversation_id, self.facts, self.model_calls)
            if not self.meter.reason:  # a run stopped by its budget is not judged
                self.checks += check(scenario.expect, final, "run")
            return final
        finally:
            await agent.aclose()

    async def _turn(  # noqa: PLR0917 - the turn's parts, each used once
        self,
        agent: Agent,
        conversation_id: str,
        text: str,
        number: int,
        expect: Expectations,
        decision: tuple[Literal["approve", "reject"], dict[str, Any] | None] | None = None,
    ) -> TurnFacts:
        """Send one user message (or decide on the pending approval); count and check what
        the turn did."""
        self.meter.arm(lambda: agent.cancel(conversation_id))
        deadline = self._deadline(agent, conversation_id)
        try:
            events = await self._send(agent, conversation_id, text, number, decision)
        finally:
            self.meter.arm(None)
            if deadline is not None:
                deadline.cancel()
        facts = turn_facts(events)
        message_id = next((e.message_id for e in events if isinstance(e, SessionEvent)), "")
        # summaries are traced too (purpose ``summarize``)
        calls = self._traced_calls(agent, message_id, conversation_id) if message_id else 0
        if agent.config.engine == "chat":
            calls += 1
        self.model_calls += calls
        if not self.metered:  # a backend the meter cannot wrap: counted after the turn
            self.meter.spend(Usage(input_tokens=facts.input_tokens,
                                   output_tokens=facts.output_tokens), calls)  # fmt: skip
        self.facts = self.facts.then(facts)
        self.turns_run = number
        self.meter.over()
        if not expect.is_empty and not self.meter.reason:
            seen = self._observe(agent, conversation_id, facts, calls)
            self.checks += check(expect, seen, f"turn {number}")
        return facts

    async def _send(
        self,
        agent: Agent,
        conversation_id: str,
        text: str,
        number: int,
        decision: tuple[Literal["approve", "reject"], dict[str, Any] | None] | None = None,
    ) -> list[AgentEvent]:
        events: list[AgentEvent] = []
        limit = self.task.turn_timeout
        if decision is None:
            stream = agent.send_message(conversation_id, text)
        else:  # the same decision path as Python, HTTP, ACP and the widgets
            pending = agent.pending_approvals(conversation_id)
            if not pending:
                raise _RunError(f"turn {number}: nothing is waiting for an approval")
            verdict, args = decision
            stream = agent.adecide(
                conversation_id, pending[0].approval_id, verdict, args, source="eval"
            )
        try:
            async with asyncio.timeout(limit):
                async for event in stream:  # a compression after result comes in it too
                    events.append(event)
        except TimeoutError:
            raise _RunError(f"turn {number} took longer than the limit of {limit:g} s") from None
        return events

    def _deadline(self, agent: Agent, conversation_id: str) -> asyncio.TimerHandle | None:
        """At the run's ``max_seconds``, the running turn is cancelled (None: no limit)."""
        remaining = self.meter.remaining_seconds()
        if remaining is None:
            return None
        tasks: list[asyncio.Task[None]] = []  # held until done (a loop keeps weak references)

        def expire() -> None:
            reason = self.meter.exceeded() or f"max_seconds: the limit of {remaining:g} s"
            tasks.append(asyncio.ensure_future(self.meter.stop_turn(reason)))

        return asyncio.get_running_loop().call_later(remaining, expire)

    # -- a simulated user --

    def _simulator(self, user: SimulatedUser) -> tuple[UserSimulator, ChatModel | None]:
        """Who plays the user, and the model to close afterwards (one this run made)."""
        spec = self.task.user_model
        if spec is None or spec == SCRIPTED:
            return ScriptedUser(self.scenario.user_script), None
        made: ChatModel | None = None
        if isinstance(spec, str):
            backend = self._backend(spec)
            if not isinstance(backend, ChatModel):
                raise _RunError(f"the simulated user needs a chat model, not {spec!r}")
            model = made = backend
        else:
            model = spec

        def spent(usage: Usage) -> None:
            self.sim_calls += 1
            self.sim_tokens += usage.input_tokens + usage.output_tokens
            self.meter.spend(usage, 1)

        simulator = ModelUser(
            model, user, language=self.scenario.language, agent_dir=self.folder, on_call=spent
        )
        return simulator, made

    async def _simulate(self, agent: Agent, conversation_id: str, user: SimulatedUser) -> None:
        """The conversation: the simulator's message, the agent's turn, until it ends."""
        simulator, made = self._simulator(user)
        conversation: list[SimTurn] = []
        try:
            while True:
                if self.meter.over():
                    self.sim_stopped_by = "budget"
                    return
                try:
                    move = await simulator.next_move(conversation)
                except ModelError as error:
                    self.sim_stopped_by = "error"
                    raise _RunError(failure_text(error)) from None
                if move.action != "say":
                    self.sim_stopped_by = "user_done" if move.action == "done" else "user_gave_up"
                    return
                if self.sim_turns >= user.max_turns:
                    self.sim_stopped_by = "max_turns"
                    return
                if self.meter.over():
                    self.sim_stopped_by = "budget"
                    return
                self.sim_turns += 1
                conversation.append(SimTurn("user", move.message))
                facts = await self._turn(
                    agent, conversation_id, move.message, self.sim_turns, Expectations()
                )
                # a turn that asked for consent ended there (waiting_confirmation)
                conversation.append(SimTurn("agent", facts.answer, consent=bool(facts.consents)))
                if self.meter.reason:
                    self.sim_stopped_by = "budget"
                    return
        finally:
            if made is not None:
                await made.aclose()

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

    def _row(self, final: Observed | None, error: str, wall_ms: float) -> dict[str, Any]:
        task, scenario, facts = self.task, self.scenario, self.facts
        failed = [item for item in self.checks if not item.passed]
        last = facts.compressions[-1] if facts.compressions else None
        retention = (
            fact_retention(final.task_state, scenario.facts)
            if final is not None and scenario.facts
            else None
        )
        budget = self.meter.reason
        passed = not error and not failed and not budget
        outcome = "error" if error else "budget" if budget else "passed" if passed else "failed"
        row: dict[str, Any] = {
            "scenario": scenario.id,
            "title": scenario.title,
            "language": scenario.language,
            "agent": scenario.agent,
            "tags": ",".join(scenario.tags),
            "point": task.point,
            "repeat": task.repeat,
            **task.params,
            "model": model_label(task.model),
            "user_model": model_label(task.user_model),
            "passed": passed,
            "outcome": outcome,
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
            "compression_strategy": last.strategy if last else "",
            "facts_ungrounded": sum(c.facts_ungrounded for c in facts.compressions),
            "facts_total": retention.total if retention else None,
            "facts_kept": len(retention.kept) if retention else None,
            "fact_retention": retention.ratio if retention else None,
            "final_status": final.status if final else "",
            "result_status": facts.result_status,
            "answer": facts.answer[:_ANSWER_CHARS],
            "errors": " | ".join(facts.errors),
            "budget_reason": budget,
            "sim_turns": self.sim_turns,
            "sim_stopped_by": self.sim_stopped_by,
            "sim_model_calls": self.sim_calls,
            "sim_tokens": self.sim_tokens,
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


def _decision_of(
    turn: ScenarioTurn,
) -> tuple[Literal["approve", "reject"], dict[str, Any] | None] | None:
    """A scenario turn's decision on the pending approval (None: a user message)."""
    if turn.approve is not None:
        return "approve", dict(turn.approve.args) if turn.approve.args is not None else None
    if turn.reject:
        return "reject", None
    return None
