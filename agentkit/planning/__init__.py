"""The planner engine (seed 002): plans, replans and runs tool steps with the user's consent.

A turn is a frozen context (:mod:`~agentkit.planning.state`) plus one owner per kind of change,
run as a graph of small typed stages, each naming the next (:mod:`~agentkit.planning.graph`;
:func:`~agentkit.planning.turn.drive` is the one loop):

=================================  ==========================================================
:mod:`~agentkit.planning.turn`     intake, the driver and the turn's end; :func:`drive`,
                                   :class:`PlannerEngine` (the engine interface)
:mod:`~agentkit.planning.graph`    :class:`Turn`, :class:`Stage`, :class:`End`, :class:`Strategy`
:mod:`~agentkit.planning.routing`  fast paths, resume (answer, consent), reset, new request
:mod:`~agentkit.planning.steps`    the execute loop and the step runners
:mod:`~agentkit.planning.strategies`  ``plan_replan``, ``next_step``, ``tool_loop``: one
                                   module each behind :class:`Strategy`, a registry by name
:mod:`~agentkit.calls.tracer`   the call tracer: the only way a model call is made
:mod:`~agentkit.planning.replies`  structured replies and the repair round
:mod:`~agentkit.planning.context`  what prompts are filled with
:mod:`~agentkit.planning.recording`  the flow recorder: the only ExecutionState writer
:mod:`~agentkit.planning.upkeep`   TaskState updates and compression after a turn
=================================  ==========================================================

The reply types live in :mod:`agentkit.planning.plan` (the schemas a model is asked to follow
are generated from them in :mod:`agentkit.planning.schemas`), the words recognised without a
model call in :mod:`agentkit.planning.intents`, the prompt templates in
``agentkit/planning/prompts/``, each turn's trace in :mod:`agentkit.calls.records`.
"""

from __future__ import annotations

from agentkit.calls.records import CallRecord
from agentkit.planning import intents
from agentkit.planning.graph import End, Stage, Strategy, Turn
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
from agentkit.planning.state import (
    PLANNER_VERSION,
    STAGE_TIMEOUTS,
    TurnContext,
    capability_signature,
)
from agentkit.planning.strategies import get_strategy, strategy_names
from agentkit.planning.strategies import register as register_strategy
from agentkit.planning.turn import PlannerEngine, drive

__all__ = [
    "PLANNER_VERSION",
    "PROMPT_NAMES",
    "STAGE_TIMEOUTS",
    "CallRecord",
    "ClassifyReply",
    "End",
    "PlanFormatError",
    "PlanReply",
    "PlannerEngine",
    "ReplanReply",
    "Stage",
    "StepReply",
    "Strategy",
    "Turn",
    "TurnContext",
    "act_schema",
    "capability_signature",
    "drive",
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
