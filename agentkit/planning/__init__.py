"""The planner engine (seed 002): plans, replans and runs tool steps with the user's consent.

:class:`PlannerTurn` runs one turn and streams its events; :func:`planner_turn_events` builds
one for an agent folder (what ``Agent.send_message`` calls for engine ``planner``). The reply
formats live in :mod:`agentkit.planning.plan`, the words recognised without a model call in
:mod:`agentkit.planning.intents`, the prompt templates in ``agentkit/planning/prompts/``.
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
    plan_schema,
    replan_schema,
)
from agentkit.planning.prompts import PROMPT_NAMES, load_prompt, render_prompt
from agentkit.planning.runtime import (
    PLANNER_VERSION,
    CallRecord,
    PlannerTurn,
    append_call_record,
    capability_signature,
    conversation_dir,
    planner_turn_events,
)

__all__ = [
    "PLANNER_VERSION",
    "PROMPT_NAMES",
    "CallRecord",
    "ClassifyReply",
    "PlanFormatError",
    "PlanReply",
    "PlannerTurn",
    "ReplanReply",
    "StepReply",
    "append_call_record",
    "capability_signature",
    "conversation_dir",
    "extract_json",
    "intents",
    "load_prompt",
    "parse_plan",
    "parse_replan",
    "plan_schema",
    "planner_turn_events",
    "render_prompt",
    "replan_schema",
]
