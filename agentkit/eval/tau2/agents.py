"""What a τ² agent folder holds: τ²'s own agent instructions and a planner config.

The folders ``data/agents/tau2-{airline,retail,telecom}`` are written from the pinned wheel by
``scripts/tau2_agents.py`` (a test checks they match it): ``agent.md`` is τ²'s agent system
prompt for the domain (``AGENT_INSTRUCTION`` and the domain's policy in τ²'s ``SYSTEM_PROMPT``
layout, ``tau2/agent/llm_agent.py``), and ``config.json`` a planner on ``tool_loop`` whose
window holds the whole conversation (τ²'s agents see all of it: no compression).
"""

from __future__ import annotations

from pydantic import JsonValue

from agentkit.eval.tau2._package import tau2_module
from agentkit.eval.tau2.environments import policy

__all__ = ["agent_config", "instructions"]


def instructions(domain: str) -> str:
    """τ²'s agent system prompt for *domain*."""
    agent = tau2_module("agent.llm_agent")
    text = agent.SYSTEM_PROMPT.format(
        agent_instruction=agent.AGENT_INSTRUCTION, domain_policy=policy(domain)
    )
    return f"{text.strip()}\n"


def agent_config(domain: str) -> dict[str, JsonValue]:
    """The agent folder's config.json for *domain* (the task's toolset comes from the scenario)."""
    return {
        "name": f"tau2 {domain}",
        "description": (
            f"The agent tau2-bench's {domain} tasks run on (agentkit eval tau2:{domain}): tau2's "
            "own agent instructions and domain policy; each task's environment is its toolset "
            "for that run. Strategy and tool choice are grid axes."
        ),
        "model": "llama",
        "engine": "planner",
        "max_turns": 200,
        "compression": {"max_messages": 100000, "token_threshold": 100000000},
        "planner": {
            "strategy": "tool_loop",
            "tool_choice": "model",
            "max_steps": 40,
            "max_iterations": 64,
            "stage_timeout_scale": 6,
        },
    }
