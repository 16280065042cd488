"""The gate: every proposed tool call passes one policy before it is asked about or run.

Why one place: whatever proposed the call — a plan, a replan, a next batch, a ``tool_loop``
action, the router — the same ordered rules decide it, and the rule that held a call travels
in the events (``ask_user`` and ``step_complete`` carry ``rule`` and ``reason``), so the run
browser, the report, the scanners and the traces can show *why*. :class:`~agentkit.planning.
steps.ToolStep` is the one caller; :meth:`Policy.review` runs once per proposed call.

Each rule answers :class:`Allow` (possibly with filled arguments), :class:`Ask` (which fields,
why) or :class:`Refuse` (why); the first that does not allow decides. The rules:

``reads``
    a side-effecting call for a request that asks for nothing to change is refused
    (:mod:`agentkit.planning.reads`): a write is never proposed for a read.
``repeat``
    a read asked for again with no argument value it was not already given in this flow is
    refused: nothing new can come back, the answer comes from what is known.
``follow_up``
    with the router on, a further call the router would not route is refused
    (:mod:`agentkit.planning.follow_ups`; part of the ``small_model`` preset).
``grounding``
    a required argument the conversation did not give is asked for
    (:mod:`agentkit.planning.grounding`); an answer to that question fills the field it asked
    for (:mod:`agentkit.planning.answers`), and a field answered is never asked again in a row.
``consent``
    a side-effecting call waits for the user's consent.

Which rules run, in which order, is ``planner.gate`` (default: all five, in this order;
``follow_up`` acts only where the router is on — the ``small_model`` preset turns it on).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import JsonValue

from agentkit.config import GateRule
from agentkit.memory import PlanStep
from agentkit.planning import answers, follow_ups, reads
from agentkit.planning.graph import Turn
from agentkit.planning.grounding import check, sources
from agentkit.tools import Tool
from agentkit.tools.registry import ToolArgumentsError

__all__ = [
    "RULES",
    "Allow",
    "Ask",
    "Call",
    "Decision",
    "Policy",
    "Refuse",
    "Rule",
    "RuleName",
    "policy",
]

RuleName = GateRule


@dataclass(frozen=True, slots=True)
class Call:
    """A proposed tool call: the plan step, its tool (None: not in the registry) and the
    arguments it would run with."""

    step: PlanStep
    tool: Tool[Any] | None
    args: dict[str, JsonValue]


@dataclass(frozen=True, slots=True)
class Allow:
    """The rule lets the call go on, with *args* when it filled or dropped some."""

    args: dict[str, JsonValue] | None = None
    note: str = ""
    kind: Literal["allow"] = "allow"


@dataclass(frozen=True, slots=True)
class Ask:
    """The call waits for the user: *fields* to fill (a question), or none (a consent); with
    *args* when the rule filled some fields meanwhile (kept for the answer)."""

    rule: str
    why: str
    fields: tuple[str, ...] = ()
    args: dict[str, JsonValue] | None = None
    kind: Literal["ask"] = "ask"


@dataclass(frozen=True, slots=True)
class Refuse:
    """The call is not proposed; the turn answers from what is known."""

    rule: str
    why: str
    kind: Literal["refuse"] = "refuse"


Verdict = Allow | Ask | Refuse


@dataclass(frozen=True, slots=True)
class Decision:
    """The policy's answer for a call: the verdict of the rule that decided (Allow when none
    held it) and the call's arguments after every rule that ran."""

    verdict: Verdict
    args: dict[str, JsonValue]
    notes: tuple[str, ...] = ()


class Rule(Protocol):
    """One named rule of the gate."""

    @property
    def name(self) -> RuleName: ...

    def review(self, turn: Turn, call: Call) -> Verdict: ...


@dataclass(frozen=True, slots=True)
class ReadsStayReads:
    name: RuleName = "reads"

    def review(self, turn: Turn, call: Call) -> Verdict:
        if call.tool is not None and call.tool.side_effect and reads.drop_writes(turn):
            return Refuse(self.name, reads.WHY)
        return Allow()


@dataclass(frozen=True, slots=True)
class RepeatedRead:
    name: RuleName = "repeat"

    def review(self, turn: Turn, call: Call) -> Verdict:
        if call.tool is None or call.tool.side_effect:
            return Allow()
        runs = [
            s
            for s in turn.state.steps
            if s.status == "done" and s.tool_name == call.step.tool_name and s.id != call.step.id
        ]
        if not runs:
            return Allow()
        given = {json.dumps(v) for run in runs for v in follow_ups.leaves(run.tool_args)}
        if all(json.dumps(v) in given for v in follow_ups.leaves(call.args)):
            return Refuse(self.name, f"{call.step.tool_name} asked for again with no new value")
        return Allow()


@dataclass(frozen=True, slots=True)
class FollowUp:
    name: RuleName = "follow_up"

    def review(self, turn: Turn, call: Call) -> Verdict:
        earlier = [s for s in turn.state.steps if s.id != call.step.id]
        refused = follow_ups.follow_up_refusal(turn, call.step.tool_name, call.args, earlier)
        if refused:
            return Refuse(self.name, f"{refused} (the router admits no such follow-up)")
        return Allow()


@dataclass(frozen=True, slots=True)
class Grounded:
    name: RuleName = "grounding"

    def review(self, turn: Turn, call: Call) -> Verdict:
        tool = call.tool
        config = turn.ctx.config
        said_values = config.argument_values == "said"
        if tool is None or not (tool.side_effect or config.grounding == "all" or said_values):
            return Allow()
        # under said values a call needing no consent has its required numbers checked: where
        # the conversation holds no number the grammar cannot limit one, the model invents it
        numbers = not tool.side_effect and config.grounding != "all"
        found = sources(turn)
        args = dict(call.args)
        if config.labelled_arguments and turn.ctx.decision is None:
            args |= answers.labelled_values(tool, turn.ctx.text)  # the user's labelled words
        checked = check(tool, args, found, numbers=numbers)
        asked = answers.asked_for(turn.state, call.step)
        answered: set[str] = set()
        if checked.missing and asked is not None and asked.status == "done":
            filled = answers.fill_from_answer(tool, checked.args, checked.missing, turn.ctx.text)
            filled = _valid(turn, tool, checked.args, filled)
            answered = {n for n in checked.missing if filled.get(n) != checked.args.get(n)}
            checked = check(tool, filled, found, numbers=numbers)
        missing = tuple(n for n in checked.missing if n not in answered)
        args = checked.args
        if missing:
            args = _valid(turn, tool, args, answers.fill_from_examples(tool, args, missing, found))
            missing = check(tool, args, found, numbers=numbers).missing
            missing = tuple(n for n in missing if n not in answered)
        if said_values:
            args = _valid(turn, tool, args, answers.fill_listed_options(tool, args, found))
        if missing:
            why = f"not given in the conversation: {', '.join(missing)}"
            return Ask(self.name, why, missing, args)
        dropped = f"dropped {', '.join(checked.dropped)}" if checked.dropped else ""
        return Allow(args=args, note=dropped)


@dataclass(frozen=True, slots=True)
class Consent:
    name: RuleName = "consent"

    def review(self, turn: Turn, call: Call) -> Verdict:
        if call.tool is not None and call.tool.side_effect:
            return Ask(
                self.name, f"{call.step.tool_name} changes something: it runs only with consent"
            )
        return Allow()


RULES: Mapping[RuleName, Rule] = {
    "reads": ReadsStayReads(),
    "repeat": RepeatedRead(),
    "follow_up": FollowUp(),
    "grounding": Grounded(),
    "consent": Consent(),
}


@dataclass(frozen=True, slots=True)
class Policy:
    """An ordered list of rules; :meth:`review` is the gate every proposed call passes once."""

    rules: tuple[Rule, ...]

    def review(self, turn: Turn, step: PlanStep) -> Decision:
        tools = turn.tools
        tool = tools.get(step.tool_name) if step.tool_name in tools else None
        args: dict[str, JsonValue] = dict(turn.flow.tool_args(step))
        notes: list[str] = []
        for rule in self.rules:
            verdict = rule.review(turn, Call(step, tool, args))
            if isinstance(verdict, Refuse):
                return Decision(verdict, args, tuple(notes))
            if isinstance(verdict, Ask):
                return Decision(verdict, verdict.args or args, tuple(notes))
            if verdict.args is not None:
                args = verdict.args
            if verdict.note:
                notes.append(verdict.note)
        return Decision(Allow(), args, tuple(notes))


@functools.cache
def _policy(names: tuple[RuleName, ...]) -> Policy:
    return Policy(tuple(RULES[name] for name in names))


def policy(turn: Turn) -> Policy:
    """The gate this turn's config names (``planner.gate``)."""
    return _policy(tuple(turn.ctx.config.gate_rules()))


def _valid(
    turn: Turn, tool: Tool[Any], before: dict[str, JsonValue], filled: dict[str, JsonValue]
) -> dict[str, JsonValue]:
    """*filled*, less each filled field that makes the call invalid (it stays missing)."""
    result = dict(filled)
    for name in [n for n in filled if filled[n] != before.get(n)]:
        try:
            turn.tools.validate(tool.name, result)
        except ToolArgumentsError as error:
            if any(problem.split(".")[0] == name for problem, _ in error.problems):
                if name in before:
                    result[name] = before[name]
                else:
                    result.pop(name)
    return result
