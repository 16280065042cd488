"""The planner engine (seed 002): plans, replans and runs tool steps with the user's consent.

A turn is a frozen context plus one owner per kind of change (:mod:`~agentkit.planning.state`),
run as a few small stages, each naming the next (:func:`~agentkit.planning.turn.drive`):

=================================  ==========================================================
:mod:`~agentkit.planning.turn`     intake and the turn's end; :class:`PlannerTurn`,
                                   :class:`PlannerEngine` (the engine interface)
:mod:`~agentkit.planning.routing`  fast paths, resume (answer, consent), reset, new request
:mod:`~agentkit.planning.steps`    the execute loop and the step runners
:mod:`~agentkit.planning.strategies`  ``plan_replan``, ``next_step``, ``tool_loop``: one
                                   module each behind :class:`Strategy`, a registry by name
:mod:`~agentkit.planning.tracer`   the call tracer: the only way a model call is made
:mod:`~agentkit.planning.calls`    structured calls and the repair round
:mod:`~agentkit.planning.context`  what prompts are filled with
:mod:`~agentkit.planning.recording`  the flow recorder: the only ExecutionState writer
:mod:`~agentkit.planning.upkeep`   TaskState updates and compression after a turn
=================================  ==========================================================

The reply types live in :mod:`agentkit.planning.plan` (the schemas a model is asked to follow
are generated from them in :mod:`agentkit.planning.schemas`), the words recognised without a
model call in :mod:`agentkit.planning.intents`, the prompt templates in
``agentkit/planning/prompts/``, each turn's trace in :mod:`agentkit.planning.trace`.
"""

from __future__ import annotations

from agentkit.planning import intents
from agentkit.planning.plan import (
    ClassifyReply,
    PlanFormatError,
    PlanReply,
    ReplanReply,
    StepReply,
    extract_json,
    parse_plan,
    parse_replan,
)
from agentkit.planning.prompts import PROMPT_NAMES, load_prompt, render_prompt
from agentkit.planning.schemas import act_schema, plan_schema, replan_schema
from agentkit.planning.state import PLANNER_VERSION, STAGE_TIMEOUTS, capability_signature
from agentkit.planning.strategies import Strategy, get_strategy, strategy_names
from agentkit.planning.strategies import register as register_strategy
from agentkit.planning.trace import CallRecord
from agentkit.planning.turn import PlannerEngine, PlannerTurn

__all__ = [
    "PLANNER_VERSION",
    "PROMPT_NAMES",
    "STAGE_TIMEOUTS",
    "CallRecord",
    "ClassifyReply",
    "PlanFormatError",
    "PlanReply",
    "PlannerEngine",
    "PlannerTurn",
    "ReplanReply",
    "StepReply",
    "Strategy",
    "act_schema",
    "capability_signature",
    "extract_json",
    "get_strategy",
    "intents",
    "load_prompt",
    "parse_plan",
    "parse_replan",
    "plan_schema",
    "register_strategy",
    "render_prompt",
    "replan_schema",
    "strategy_names",
]
