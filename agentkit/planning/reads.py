"""Reads stay reads, in every strategy: no side-effecting step for a request that asks for
nothing to change.

The router never offers a side-effecting tool for a read (a question, a request to see or
find something that says no change) or for small talk. This is the same rule for whatever
else puts steps into a turn — a plan, a replan, a next batch, a ``tool_loop`` action, on any
model: such a step is dropped before it is stored or announced, and each drop is noted in
the turn's log (``[READS]``) and as an observation the answer can see. A plan's write is dropped
here before the plan is announced; any other (a ``tool_loop`` action, a router's call) is
refused by the gate's ``reads`` rule (:mod:`agentkit.planning.gate`). A write is never
proposed as a consent for a read; a request that does say a change (*delete*, 删除 …) is
planned as the model planned it, and every side-effecting call still waits for consent.
"""

from __future__ import annotations

import json

from agentkit.memory import Observation, PlanStep
from agentkit.planning.graph import Turn
from agentkit.planning.intents import is_small_talk
from agentkit.planning.state import cut
from agentkit.planning.tool_ranking import asks_to_read, says_change

__all__ = ["WHY", "asks_nothing_to_change", "drop_writes", "keep_reads"]

#: why a side-effecting call is not proposed in such a turn (the gate's ``reads`` rule)
WHY = "the request asks for nothing to change, so no side-effecting tool is proposed"


def asks_nothing_to_change(text: str) -> bool:
    """*text* is small talk, or a read (a question, a request to see or find something),
    and says no change in so many words (add, delete, rename … 新建, 删除)."""
    return not says_change(text) and (is_small_talk(text) or asks_to_read(text))


def drop_writes(turn: Turn) -> bool:
    """Whether this turn's side-effecting steps are to be dropped: its request asks for
    nothing to change. A turn that carries an answer or a decision is not a new request."""
    return turn.ctx.decision is None and asks_nothing_to_change(turn.ctx.text)


def keep_reads(turn: Turn, steps: tuple[PlanStep, ...], where: str) -> tuple[PlanStep, ...]:
    """*steps* without their side-effecting tool steps when the request asks for nothing to
    change (each drop noted); *where* names what planned them (``plan``, ``replan`` …)."""
    if not drop_writes(turn):
        return steps
    tools = turn.tools
    kept: list[PlanStep] = []
    for step in steps:
        if (
            step.type == "tool"
            and step.tool_name in tools
            and tools.get(step.tool_name).side_effect
        ):
            note_dropped(turn, step, where)
        else:
            kept.append(step)
    return tuple(kept)


def note_dropped(turn: Turn, step: PlanStep, where: str) -> None:
    """Note in the turn log, and as an observation, that *step* was not proposed."""
    args = json.dumps(turn.ctx.mask.json(dict(step.tool_args)), ensure_ascii=False, sort_keys=True)
    text = f"{where}: {step.tool_name} {cut(args, 200)} dropped: {WHY}"
    turn.ctx.note("READS", text)
    state = turn.state
    turn.flow.save(state.observe(Observation(step_id=step.id, kind="note", content=text)))
