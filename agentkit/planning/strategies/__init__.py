"""Planner strategies, by name: the registry an agent's ``planner.strategy`` is looked up in.

A strategy (:class:`Strategy`) is the part of a turn in which strategies differ; see
:mod:`agentkit.planning.strategies.base`. The built-in ones:

* ``plan_replan`` (:mod:`.plan_replan`): the seed's — a whole plan, a replan decision after
  each tool or reason step;
* ``next_step`` (:mod:`.next_step`): one batch at a time, the next planned from the results;
* ``tool_loop`` (:mod:`.tool_loop`): one action per call (native function calling or a JSON
  action) until the model answers.

Adding one is a new module with a :class:`Strategy` subclass and one :func:`register` call
(here for a built-in one, anywhere for your own); nothing else switches on the name.
"""

from __future__ import annotations

import re

from agentkit.config import add_strategy_name
from agentkit.errors import UsageError
from agentkit.planning.strategies.base import Strategy
from agentkit.planning.strategies.next_step import NextStep
from agentkit.planning.strategies.plan_replan import PlanReplan
from agentkit.planning.strategies.tool_loop import ToolLoop

__all__ = [
    "Strategy",
    "UnknownStrategyError",
    "get_strategy",
    "register",
    "strategy_names",
]

_REGISTRY: dict[str, Strategy] = {}
_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")


class UnknownStrategyError(UsageError, LookupError):
    """A strategy name no registered strategy has (the message lists the known ones)."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"unknown planner strategy {name!r}; known: {', '.join(strategy_names())}")


def register(strategy: Strategy) -> Strategy:
    """Make *strategy* selectable by its ``name`` in an agent's config (``planner.strategy``);
    a later one of the same name replaces it."""
    if not _NAME.fullmatch(strategy.name):
        raise UsageError(f"a strategy name is snake_case ([a-z][a-z0-9_]*), not {strategy.name!r}")
    _REGISTRY[strategy.name] = strategy
    add_strategy_name(strategy.name)
    return strategy


def get_strategy(name: str) -> Strategy:
    """The registered strategy called *name*, or :class:`UnknownStrategyError`."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownStrategyError(name) from None


def strategy_names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


register(PlanReplan())
register(NextStep())
register(ToolLoop())
