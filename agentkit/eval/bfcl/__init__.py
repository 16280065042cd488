"""BFCL (the Berkeley Function Calling Leaderboard) run through agentkit's evaluation.

``load_suite("bfcl:CATEGORY")`` (and ``agentkit eval bfcl:CATEGORY``; ``run_bfcl`` adds the
model-alone baseline in BFCL's prompt mode, ``bfcl_report`` the summary) turns the items of the
pinned ``bfcl-eval`` package into ordinary scenarios; BFCL's own checkers score the runs.
See :mod:`agentkit.eval.bfcl.suite` (scenarios), :mod:`~agentkit.eval.bfcl.catalog` (items and
samples), :mod:`~agentkit.eval.bfcl.toolset` (an item's functions as tools),
:mod:`~agentkit.eval.bfcl.scoring` (the checkers), :mod:`~agentkit.eval.bfcl._package` (how
the package is loaded, and why with a stand-in for its model registry).
"""

from __future__ import annotations

from agentkit.eval.bfcl._package import INSTALL, PINNED, BfclNotInstalledError
from agentkit.eval.bfcl.catalog import CATEGORIES, BfclItem, load_items, sample
from agentkit.eval.bfcl.prompt_mode import run_prompt_mode
from agentkit.eval.bfcl.run import run_bfcl, with_prompt_mode
from agentkit.eval.bfcl.scoring import BfclScore, Call, score_answer, score_calls, score_text
from agentkit.eval.bfcl.suite import (
    COLUMNS,
    DEFAULT_AGENT,
    BfclScenario,
    is_suite,
    load_suite,
    scenario_for,
)
from agentkit.eval.bfcl.summary import accuracy_table, bfcl_report, overall_accuracy

__all__ = [
    "CATEGORIES",
    "COLUMNS",
    "DEFAULT_AGENT",
    "INSTALL",
    "PINNED",
    "BfclItem",
    "BfclNotInstalledError",
    "BfclScenario",
    "BfclScore",
    "Call",
    "accuracy_table",
    "bfcl_report",
    "is_suite",
    "load_items",
    "load_suite",
    "overall_accuracy",
    "run_bfcl",
    "run_prompt_mode",
    "sample",
    "scenario_for",
    "score_answer",
    "score_calls",
    "score_text",
    "with_prompt_mode",
]
