"""Checking expectations against what a run showed.

:class:`Observed` is everything an expectation may look at, taken from the turn's typed events
(the same stream every edge consumes) and from the state right after it (ExecutionState,
TaskState, the toolsets' state snapshots). :func:`check` turns one :class:`Expectations` into a
list of :class:`Check` values, one per field that is set, each saying what was expected and
what was seen, so a failing row explains itself without re-running anything.

Nothing here reads files or calls a model: it is a pure function of its inputs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pydantic import JsonValue

from agentkit.eval.reading import TurnRead, read_turn
from agentkit.eval.scenario import Expectations
from agentkit.eval.trajectory import SeenCall, match_trajectory
from agentkit.eval.transcript import RunState
from agentkit.events import AgentEvent, CompressionEvent
from agentkit.memory import TaskState
from agentkit.memory.fidelity import fact_retention
from agentkit.types import Usage

__all__ = [
    "EXPECTATION_KINDS",
    "Check",
    "Observed",
    "TurnFacts",
    "check",
    "state_problems",
    "summarize_checks",
    "turn_facts",
]

#: every expectation field checked in code, in the order the result columns use (the model
#: judges, ``judges``, have columns of their own: :mod:`agentkit.eval.judges`)
EXPECTATION_KINDS: tuple[str, ...] = tuple(
    name for name in Expectations.model_fields if name != "judges"
)


@dataclass(frozen=True, slots=True)
class TurnFacts:
    """What the events of one or more turns showed."""

    planned_tools: tuple[str, ...] = ()
    #: every tool call with its arguments, the planner's live-state re-reads marked
    calls: tuple[SeenCall, ...] = ()
    questions: tuple[str, ...] = ()
    consents: tuple[str, ...] = ()  # tool names a confirmation was asked for
    live_state: bool = False
    plans: int = 0  # planning events: a new plan was started
    compressions: tuple[CompressionEvent, ...] = ()
    errors: tuple[str, ...] = ()
    steps: int = 0
    session: str = ""
    result_status: str = ""
    answer: str = ""
    #: the model calls counted: each turn's ``result`` usage (every call of the turn) and each
    #: ``compression`` event's (the memory upkeep after the result)
    usage: Usage = field(default_factory=Usage)
    latency_ms: float = 0.0

    def then(self, later: TurnFacts) -> TurnFacts:
        """These facts followed by *later*'s (counts add up; last-turn fields are *later*'s)."""
        return TurnFacts(
            planned_tools=self.planned_tools + later.planned_tools,
            calls=self.calls + later.calls,
            questions=self.questions + later.questions,
            consents=self.consents + later.consents,
            live_state=self.live_state or later.live_state,
            plans=self.plans + later.plans,
            compressions=self.compressions + later.compressions,
            errors=self.errors + later.errors,
            steps=self.steps + later.steps,
            session=later.session,
            result_status=later.result_status,
            answer=later.answer,
            usage=self.usage + later.usage,
            latency_ms=self.latency_ms + later.latency_ms,
        )


def turn_facts(events: Iterable[AgentEvent] | TurnRead) -> TurnFacts:
    """What one turn's events showed (read by :func:`~agentkit.eval.reading.read_turn`)."""
    read = events if isinstance(events, TurnRead) else read_turn(list(events))
    result = read.result
    return TurnFacts(
        planned_tools=tuple(call.name for call in read.planned_calls),
        calls=tuple(SeenCall(call.name, dict(call.arguments), call.live) for call in read.calls),
        questions=tuple(event.question for event in read.questions),
        consents=tuple(event.tool_name for event in read.consents),
        live_state=read.live_state,
        plans=read.plans,
        compressions=read.compressions,
        errors=tuple(f"{event.code}: {event.message}" for event in read.errors),
        steps=len(read.steps),
        session=read.session,
        result_status=result.status if result else "",
        answer=result.text if result else "",
        usage=read.usage,
        latency_ms=result.latency_ms if result else 0.0,
    )


@dataclass(frozen=True, slots=True)
class Observed:
    """The facts of a turn (or of the whole run) and the state after it."""

    facts: TurnFacts
    status: str  # the ExecutionState status, or "none"
    task_state: TaskState
    state: dict[str, JsonValue]  # each stateful toolset's snapshot, by toolset name
    model_calls: int

    @classmethod
    def of(cls, facts: TurnFacts, state: RunState) -> Observed:
        """*facts* and the stored *state* (a transcript's)."""
        return cls(facts, state.status, state.task_state, state.state, state.model_calls)


@dataclass(frozen=True, slots=True)
class Check:
    """One expectation checked: which field, where (``run`` or ``turn N``), and the verdict."""

    kind: str
    where: str
    passed: bool
    detail: str = ""

    def __str__(self) -> str:
        verdict = "ok" if self.passed else "FAILED"
        return f"{self.where}: {self.kind} {verdict}" + (f" ({self.detail})" if self.detail else "")


def _names(values: Sequence[str]) -> str:
    return "[" + ", ".join(values) + "]" if values else "none"


def _short(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def state_problems(expected: JsonValue, found: JsonValue, where: str = "") -> list[str]:
    """How *found* (a state snapshot) fails the partial match *expected*: a mapping needs the
    keys given (others may exist), a list the same items in any order, anything else equality.
    """
    label = where or "state"
    if isinstance(expected, dict):
        if not isinstance(found, dict):
            return [f"{label}: expected a mapping, found {_value(found)}"]
        problems: list[str] = []
        for key, value in expected.items():
            path = f"{where}.{key}" if where else key
            if key not in found:
                problems.append(f"{path} missing")
            else:
                problems += state_problems(value, found[key], path)
        return problems
    if isinstance(expected, list):
        if not isinstance(found, list) or not _same_items(expected, found):
            return [f"{label} = {_value(expected)}, found {_value(found)}"]
        return []
    if expected != found or (type(expected) is not type(found) and not _numbers(expected, found)):
        return [f"{label} = {_value(expected)}, found {_value(found)}"]
    return []


def _same_items(expected: list[JsonValue], found: list[JsonValue]) -> bool:
    rest = list(found)
    for item in expected:
        match = next((i for i, seen in enumerate(rest) if not state_problems(item, seen)), None)
        if match is None:
            return False
        del rest[match]
    return not rest


def _numbers(a: JsonValue, b: JsonValue) -> bool:
    return all(isinstance(x, int | float) and not isinstance(x, bool) for x in (a, b))


def _value(value: JsonValue) -> str:
    return _short(json.dumps(value, ensure_ascii=False, sort_keys=True), 80)


def check(expect: Expectations, seen: Observed, where: str) -> list[Check]:  # noqa: PLR0912, PLR0915
    """Every expectation that *expect* sets, checked against *seen*."""
    facts = seen.facts
    checks: list[Check] = []

    def add(kind: str, passed: bool, detail: str) -> None:
        checks.append(Check(kind, where, passed, "" if passed else detail))

    planned = facts.planned_tools
    if expect.tools_called:
        missing = [name for name in expect.tools_called if name not in planned]
        add("tools_called", not missing, f"not called: {_names(missing)}; called {_names(planned)}")
    if expect.tools_not_called:
        called = [name for name in expect.tools_not_called if name in planned]
        add("tools_not_called", not called, f"called anyway: {_names(called)}")
    if expect.tool_sequence is not None:
        add(
            "tool_sequence",
            tuple(expect.tool_sequence) == planned,
            f"expected {_names(expect.tool_sequence)}, called {_names(planned)}",
        )
    if expect.asked_user is not None:
        asked = bool(facts.questions)
        add("asked_user", asked == expect.asked_user, f"questions asked: {len(facts.questions)}")
    if expect.new_plan is not None:
        started = facts.plans > 0
        add("new_plan", started == expect.new_plan, f"new plans: {facts.plans}")
    if expect.consent_requested is not None:
        requested = bool(facts.consents)
        add(
            "consent_requested",
            requested == expect.consent_requested,
            f"confirmations asked for {_names(facts.consents)}",
        )
    if expect.consent_for:
        missing = [name for name in expect.consent_for if name not in facts.consents]
        add("consent_for", not missing, f"no confirmation for {_names(missing)}")
    if expect.status is not None:
        add("status", seen.status == expect.status, f"expected {expect.status}, was {seen.status}")
    if expect.result_status is not None:
        add(
            "result_status",
            facts.result_status == expect.result_status,
            f"expected {expect.result_status}, was {facts.result_status or 'no result'}",
        )
    if expect.session is not None:
        add("session", facts.session == expect.session, f"scenario {facts.session or '?'}")
    answer = facts.answer.casefold()
    if expect.answer_contains:
        missing = [text for text in expect.answer_contains if text.casefold() not in answer]
        add("answer_contains", not missing, f"missing {missing} in {_short(facts.answer)!r}")
    if expect.answer_not_contains:
        present = [text for text in expect.answer_not_contains if text.casefold() in answer]
        add("answer_not_contains", not present, f"found {present} in {_short(facts.answer)!r}")
    if expect.live_state is not None:
        add(
            "live_state",
            facts.live_state == expect.live_state,
            f"live state re-read: {facts.live_state}",
        )
    if expect.compressed is not None:
        compressed = bool(facts.compressions)
        add(
            "compressed",
            compressed == expect.compressed,
            f"compressions: {len(facts.compressions)}",
        )
    if expect.facts_in_task_state:
        retention = fact_retention(seen.task_state, expect.facts_in_task_state)
        add("facts_in_task_state", not retention.lost, f"lost {list(retention.lost)}")
    if expect.no_errors is not None:
        clean = not facts.errors
        add("no_errors", clean == expect.no_errors, "; ".join(facts.errors) or "no errors")
    if expect.max_model_calls is not None:
        add(
            "max_model_calls",
            seen.model_calls <= expect.max_model_calls,
            f"{seen.model_calls} calls > {expect.max_model_calls}",
        )
    if expect.state is not None:
        problems = state_problems(dict(expect.state), seen.state)
        add("state", not problems, "; ".join(problems))
    if expect.trajectory is not None:
        mismatch = match_trajectory(expect.trajectory, facts.calls)
        add("trajectory", not mismatch, mismatch)
    return checks


def summarize_checks(checks: Sequence[Check]) -> dict[str, bool]:
    """Per kind: True when every check of that kind passed (kinds without checks are absent)."""
    verdicts: dict[str, bool] = {}
    for item in checks:
        verdicts[item.kind] = verdicts.get(item.kind, True) and item.passed
    return verdicts
