"""Scoring a run with τ²'s own evaluator: nothing here decides a reward.

The run's trajectory (:class:`~agentkit.eval.tau2.toolset.Tau2Run`, read from the transcript's
state) is turned into τ²'s messages and a ``SimulationRun`` whose termination is
``user_stop`` when the user ended the conversation with one of τ²'s stop tokens and
``max_steps`` otherwise (cut short by agentkit's turn limit, a budget or an error: τ² gives
such a run 0). ``tau2.evaluator.evaluator.evaluate_simulation`` then scores it as τ²'s runner
does (``EvaluationType.ALL``): it replays the conversation's tool calls and the task's gold
actions on fresh environments, compares the databases (and the user's, in telecom), checks the
environment assertions, the actions, and the ``communicate_info`` strings, and multiplies the
parts the task's ``reward_basis`` names. Natural-language assertions (no task's
``reward_basis`` in this data includes them) are graded only when the scorer has a judge model
(``--judge-model``; τ²'s own ``NLAssertionsEvaluator``, its prompt and its parsing,
:mod:`agentkit.eval.tau2.judge`): ``tau2_nl_assertions`` is ``met`` / ``not met``, and
``not scored`` without a judge.

Each row also carries the task's null floor (``tau2_null_reward``): τ²'s evaluation of an empty
conversation that the user ended normally — what an agent that calls no tool and says nothing
useful gets. It needs no model, and is computed once per task per process.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar, Final

from pydantic import JsonValue

from agentkit.eval.scorer import RunScorer, SourceColumns, SourceScore
from agentkit.eval.tau2._package import tau2_module
from agentkit.eval.tau2.catalog import Tau2Task, find_task
from agentkit.eval.tau2.toolset import TOOLSET
from agentkit.eval.transcript import Transcript

__all__ = [
    "NOT_SCORED",
    "database_changes",
    "Tau2Columns",
    "Tau2Score",
    "Tau2Scorer",
    "evaluate",
    "null_reward",
    "score_messages",
]

#: what ``tau2_nl_assertions`` says: agentkit does not judge them
NOT_SCORED: Final = "not scored"
_DETAIL = 500


class Tau2Columns(SourceColumns):
    """A τ² row's own columns (NA in the rows of other scenarios)."""

    tau2_domain: str | None = None
    tau2_split: str | None = None
    tau2_task: str | None = None
    #: τ²'s reward (1.0: the task is solved)
    tau2_reward: float | None = None
    #: the databases at the end equal the gold actions' (τ²'s ``db_check``)
    tau2_db_match: bool | None = None
    #: every ``communicate_info`` string was in the agent's messages (None: the task has none)
    tau2_communicate: bool | None = None
    #: ``user_stop`` (the user's stop token ended it) or ``max_steps`` (cut short)
    tau2_termination: str | None = None
    #: the stop token the user ended on (``###STOP###``, ``###TRANSFER###`` …)
    tau2_stop: str | None = None
    #: the reward's parts, as the task's ``reward_basis`` names them (None: not in the basis)
    tau2_reward_db: float | None = None
    tau2_reward_env_assertion: float | None = None
    tau2_reward_action: float | None = None
    tau2_reward_communicate: float | None = None
    tau2_nl_assertions: str | None = None
    #: the task's null floor: τ²'s reward for an empty conversation ended normally
    tau2_null_reward: float | None = None


@dataclass(frozen=True, slots=True)
class Tau2Score:
    """What τ²'s evaluator said of one trajectory."""

    reward: float
    info: Any  # τ²'s RewardInfo
    termination: str

    @property
    def failures(self) -> list[str]:
        """Why the reward is not 1, in τ²'s own terms (empty when it is)."""
        if self.reward == 1.0:
            return []
        info, found = self.info, []
        note = (info.info or {}).get("note") if isinstance(info.info, dict) else None
        if note:
            found.append(str(note))
        if info.db_check is not None and not info.db_check.db_match:
            found.append(
                "db_check: the database at the end is not the gold actions' "
                f"(db_match=False, db_reward={info.db_check.db_reward})"
            )
        for check in info.env_assertions or []:
            if not check.met:
                assertion = check.env_assertion
                found.append(
                    f"env_assertion not met: {assertion.env_type}.{assertion.func_name}"
                    f"({json.dumps(assertion.arguments, default=str)})"
                )
        for check in info.action_checks or []:
            if not check.action_match:
                action = check.action
                found.append(
                    f"action not taken: {action.name}({json.dumps(action.arguments, default=str)})"
                )
        for check in info.communicate_checks or []:
            if not check.met:
                found.append(str(check.justification))
        return found


def _messages(entries: Sequence[Mapping[str, JsonValue]]) -> list[Any]:
    """τ²'s messages of a recorded trajectory."""
    message = tau2_module("data_model.message")
    made: list[Any] = []
    for entry in entries:
        role = entry.get("role")
        if role == "tool":
            made.append(
                message.ToolMessage(
                    id=str(entry.get("id")),
                    role="tool",
                    content=entry.get("content"),
                    requestor=entry.get("requestor") or "assistant",
                    error=bool(entry.get("error")),
                )
            )
            continue
        kind = message.AssistantMessage if role == "assistant" else message.UserMessage
        calls = entry.get("tool_calls")
        if isinstance(calls, list) and calls:
            made.append(
                kind(
                    role=role,
                    content=None,
                    tool_calls=[message.ToolCall.model_validate(call) for call in calls],
                )
            )
        elif isinstance(entry.get("content"), str) and str(entry.get("content")).strip():
            made.append(kind(role=role, content=entry["content"]))
    return made


def evaluate(task: Tau2Task, messages: Sequence[Any], *, stopped: bool) -> Tau2Score:
    """τ²'s evaluation of *messages* (τ²'s message objects) for *task*; *stopped*: the user
    ended the conversation with a stop token."""
    simulation = tau2_module("data_model.simulation")
    evaluator = tau2_module("evaluator.evaluator")
    reason = (
        simulation.TerminationReason.USER_STOP
        if stopped
        else (simulation.TerminationReason.MAX_STEPS)
    )
    run = simulation.SimulationRun(
        id=f"agentkit-{task.key}",
        task_id=task.id,
        start_time="",
        end_time="",
        duration=0.0,
        termination_reason=reason,
        messages=list(messages),
    )
    info = evaluator.evaluate_simulation(
        simulation=run,
        task=task.task,
        evaluation_type=evaluator.EvaluationType.ALL,
        solo_mode=False,
        domain=task.domain,
    )
    return Tau2Score(float(info.reward), info, reason.value)


def score_messages(
    task: Tau2Task, entries: Sequence[Mapping[str, JsonValue]], stop: str | None
) -> Tau2Score:
    """τ²'s evaluation of a recorded trajectory (:meth:`Tau2Run.snapshot`'s messages)."""
    return evaluate(task, _messages(entries), stopped=stop is not None)


@cache
def null_reward(key: str) -> float:
    """The null floor of task *key*: τ²'s reward for an empty conversation ended normally."""
    return evaluate(find_task(key), [], stopped=True).reward


def _state(transcript: Transcript) -> Mapping[str, JsonValue] | None:
    """The run's trajectory record: at the end, else after its last turn."""
    states = [transcript.final.state if transcript.final is not None else None]
    states += [turn.after.state for turn in reversed(transcript.turns) if turn.after is not None]
    for state in states:
        record = state.get(TOOLSET) if state else None
        if isinstance(record, dict):
            return record
    return None


def _part(info: Any, name: str) -> float | None:  # noqa: ANN401 - τ²'s RewardInfo
    for kind, value in (info.reward_breakdown or {}).items():
        if getattr(kind, "value", kind) == name:
            return float(value)
    return None


@dataclass(frozen=True)
class Tau2Scorer(RunScorer):
    """τ²'s evaluator scores the run from its transcript (see the module docstring)."""

    columns: ClassVar[type[SourceColumns]] = Tau2Columns
    turn_state: ClassVar[bool] = True
    key: str
    split: str
    #: the model spec that grades τ²'s natural-language assertions (None: not scored)
    judge: str | None = None

    def score(self, transcript: Transcript) -> SourceScore:
        task = find_task(self.key)
        record = _state(transcript)
        entries = record.get("messages") if record is not None else None
        stop = record.get("stop") if record is not None else None
        base = Tau2Columns(
            tau2_domain=task.domain,
            tau2_split=self.split,
            tau2_task=task.id,
            tau2_nl_assertions=NOT_SCORED if task.task.evaluation_criteria.nl_assertions else None,
            tau2_null_reward=null_reward(self.key),
        )
        try:
            score = score_messages(
                task,
                entries if isinstance(entries, list) else [],  # type: ignore[arg-type]
                stop if isinstance(stop, str) else None,
            )
        except Exception as error:  # an evaluator that crashed is a row, not a lost sweep
            why = f"tau2's evaluator failed: {type(error).__name__}: {error}"
            columns = base.model_copy(update={"tau2_reward": 0.0})
            return SourceScore(columns, passed=False, kind="tau2", detail=why[:_DETAIL])
        info = score.info
        checks = info.communicate_checks
        columns = base.model_copy(
            update={
                "tau2_reward": score.reward,
                "tau2_db_match": info.db_check.db_match if info.db_check is not None else None,
                "tau2_communicate": all(c.met for c in checks) if checks else None,
                "tau2_termination": score.termination,
                "tau2_stop": stop if isinstance(stop, str) else None,
                "tau2_reward_db": _part(info, "DB"),
                "tau2_reward_env_assertion": _part(info, "ENV_ASSERTION"),
                "tau2_reward_action": _part(info, "ACTION"),
                "tau2_reward_communicate": _part(info, "COMMUNICATE"),
            }
        )
        passed = score.reward == 1.0
        failures = score.failures
        if self.judge is not None and task.task.evaluation_criteria.nl_assertions:
            verdict = self._nl(task, entries if isinstance(entries, list) else [])
            columns = columns.model_copy(update={"tau2_nl_assertions": verdict})
        detail = "; ".join(failures)[:_DETAIL]
        return SourceScore(columns, passed=passed, kind="tau2", detail=detail)

    def _nl(self, task: Tau2Task, entries: list[Any]) -> str:
        """τ²'s natural-language assertions graded by the judge: ``met``, ``not met: …`` (the
        unmet ones) or ``judge_error: …`` — beside the reward, which no task's basis here
        makes them part of."""
        from agentkit.eval.tau2.judge import nl_assertions
        from agentkit.models.base import ChatModel
        from agentkit.models.spec import create_model

        assert self.judge is not None
        model = create_model(self.judge)
        if not isinstance(model, ChatModel):
            return f"judge_error: {self.judge} is not a chat model"
        try:
            info = nl_assertions(task.task, _messages(entries), model)
        except Exception as error:  # a judge's failure is its own, never the run's
            return f"judge_error: {type(error).__name__}: {error}"[:_DETAIL]
        if info.reward == 1.0:
            return "met"
        unmet = [str(check.nl_assertion) for check in info.nl_assertions or [] if not check.met]
        return f"not met: {'; '.join(unmet)}"[:_DETAIL]


def database_changes(transcript: Transcript) -> list[dict[str, JsonValue]]:
    """The calls of a run that may have changed a database (any tool τ² does not mark
    ``READ``; the agent's and the user's), in order, with what they answered — what the run
    browser's τ² view shows beside the steps."""
    record = _state(transcript)
    entries = record.get("messages") if record is not None else None
    domain = record.get("domain") if record is not None else None
    if not isinstance(entries, list) or not isinstance(domain, str):
        return []
    from agentkit.eval.tau2.environments import new_environment

    env = new_environment(domain)
    read = tau2_module("environment.toolkit").ToolType.READ
    answers = {
        str(entry.get("id")): entry.get("content")
        for entry in entries
        if isinstance(entry, dict) and entry.get("role") == "tool"
    }
    changes: list[dict[str, JsonValue]] = []
    for entry in entries:
        calls = entry.get("tool_calls") if isinstance(entry, dict) else None
        for call in calls if isinstance(calls, list) else []:
            if not isinstance(call, dict):
                continue
            name, requestor = str(call.get("name")), str(call.get("requestor"))
            kit = env.user_tools if requestor == "user" else env.tools
            if kit is not None and kit.has_tool(name) and kit.tool_type(name) == read:
                continue
            changes.append(
                {
                    "requestor": requestor,
                    "tool": name,
                    "arguments": call.get("arguments"),
                    "answer": answers.get(str(call.get("id"))),
                }
            )
    return changes
