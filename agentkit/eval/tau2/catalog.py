"""τ²'s tasks by domain and split, and fixed samples of them.

The tasks are τ²'s own (``get_tasks(split)`` of each domain's environment module: the wheel's
v0.2.0 data), read once per process. A task is named in agentkit by its domain and its
position in the domain's task file (``airline`` task 3 is ``airline/3``): τ²'s ids are not
all valid agentkit ids (telecom's hold brackets and bars), so scenario ids and toolset names
use the position, and the ``tau2_task`` column keeps τ²'s own id.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from agentkit.errors import UsageError
from agentkit.eval.tau2._package import tau2_module
from agentkit.eval.tau2.environments import DOMAINS

__all__ = [
    "DEFAULT_SPLIT",
    "Tau2Task",
    "check_domain",
    "find_task",
    "load_tasks",
    "sample",
    "splits",
]

#: the split ``--split`` names unless told otherwise (τ²'s own default)
DEFAULT_SPLIT = "base"


@dataclass(frozen=True)
class Tau2Task:
    """One τ² task: its domain, its position in the domain's task file, and τ²'s ``Task``."""

    domain: str
    position: int
    task: Any

    @property
    def id(self) -> str:
        """τ²'s own id of the task."""
        return str(self.task.id)

    @property
    def key(self) -> str:
        """``DOMAIN__POSITION``: how a toolset and a scenario name the task."""
        return f"{self.domain}__{self.position}"


def check_domain(domain: str) -> str:
    """*domain*, or a :class:`UsageError` listing the domains."""
    if domain not in DOMAINS:
        raise UsageError(f"unknown tau2 domain {domain!r}; the domains are: {', '.join(DOMAINS)}")
    return domain


@cache
def splits(domain: str) -> tuple[str, ...]:
    """τ²'s split names of *domain* (``base``, ``train``, ``test`` …), as the wheel has them."""
    module = tau2_module(f"domains.{check_domain(domain)}.environment")
    return tuple(module.get_tasks_split())


def check_split(domain: str, split: str) -> str:
    """*split*, or a :class:`UsageError` listing *domain*'s splits."""
    known = splits(domain)
    if split not in known:
        raise UsageError(
            f"unknown tau2 split {split!r} of {domain}; its splits are: {', '.join(known)}"
        )
    return split


@cache
def _all_tasks(domain: str) -> tuple[Tau2Task, ...]:
    module = tau2_module(f"domains.{check_domain(domain)}.environment")
    return tuple(Tau2Task(domain, n, task) for n, task in enumerate(module.get_tasks(None)))


@cache
def load_tasks(domain: str, split: str = DEFAULT_SPLIT) -> tuple[Tau2Task, ...]:
    """*domain*'s tasks of *split*, in the task file's order."""
    wanted = set(
        tau2_module(f"domains.{domain}.environment").get_tasks_split()[check_split(domain, split)]
    )
    return tuple(task for task in _all_tasks(domain) if task.id in wanted)


def find_task(key: str) -> Tau2Task:
    """The task ``DOMAIN__POSITION`` names (a LookupError if there is none)."""
    domain, _, position = key.partition("__")
    tasks = _all_tasks(check_domain(domain))
    if not position.isdigit() or int(position) >= len(tasks):
        raise LookupError(f"no tau2 task {key!r}")
    return tasks[int(position)]


def sample(tasks: Sequence[Tau2Task], limit: int | None, seed: int) -> list[Tau2Task]:
    """*limit* of *tasks* drawn with *seed*, in their own order (all of them without a limit)."""
    if limit is None or limit >= len(tasks):
        return list(tasks)
    chosen = set(random.Random(seed).sample(range(len(tasks)), limit))  # noqa: S311 - a sample
    return [task for index, task in enumerate(tasks) if index in chosen]
