"""τ² tasks as ordinary agentkit scenarios: ``load_suite("tau2:DOMAIN")``.

Each task becomes a :class:`Tau2Scenario` run by the evaluation harness like any scenario
(grids, ``--repeat``, budgets, concurrency, ``compare``, kept runs): the domain's agent folder
(``tau2-airline``, ``tau2-retail``, ``tau2-telecom`` under ``data/agents/``: the domain's
policy as its instructions, a planner on ``tool_loop``; strategy and ``tool_choice`` are grid
axes like any config key) gets the task's environment as its toolset
(:mod:`agentkit.eval.tau2.toolset`), the user is τ²'s user simulator played by
``--user-model`` (:mod:`agentkit.eval.tau2.user`), and the run is scored by τ²'s evaluator
(:mod:`agentkit.eval.tau2.scoring`), in the columns of
:class:`~agentkit.eval.tau2.scoring.Tau2Columns`.

A scenario's id is ``tau2-DOMAIN-POSITION`` (the task's position in the domain's task file);
``tau2_task`` holds τ²'s own id.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from pydantic import BaseModel, ConfigDict, JsonValue

from agentkit.errors import UsageError
from agentkit.eval.scenario import Scenario, SimulatedUser
from agentkit.eval.tau2.catalog import (
    DEFAULT_SPLIT,
    Tau2Task,
    check_domain,
    check_split,
    load_tasks,
    sample,
)
from agentkit.eval.tau2.scoring import Tau2Scorer
from agentkit.eval.tau2.toolset import toolset_spec
from agentkit.eval.tau2.user import Tau2UserSource

__all__ = [
    "MAX_USER_MESSAGES",
    "PREFIX",
    "Tau2Ref",
    "Tau2Scenario",
    "agent_for",
    "is_suite",
    "load_suite",
    "every_scenario",
    "parse_suite",
    "scenario_for",
]

#: how a suite is named on the command line and in :func:`load_suite`
PREFIX: Final = "tau2:"
#: the user's messages at most (τ²'s orchestrator stops at 100 steps, tool calls included)
MAX_USER_MESSAGES: Final = 50


#: a conversation title's length at most (telecom's task ids are long)
_TITLE_CHARS: Final = 120


def _title(text: str) -> str:
    return text if len(text) <= _TITLE_CHARS else f"{text[: _TITLE_CHARS - 1]}…"


def agent_for(domain: str) -> str:
    """The agent folder a domain's tasks run on unless another is named."""
    return f"tau2-{domain}"


class Tau2Ref(BaseModel):
    """Which τ² task a scenario runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    domain: str
    key: str
    task: str
    split: str


class Tau2Scenario(Scenario):
    """A scenario whose run τ²'s user plays and τ²'s evaluator scores."""

    tau2: Tau2Ref


def is_suite(name: str | object) -> bool:
    """True for a ``tau2:…`` suite name."""
    return isinstance(name, str) and name.startswith(PREFIX)


def parse_suite(name: str) -> list[str]:
    """The domains ``tau2:A,B`` names (each checked: an unknown one lists them all)."""
    if not is_suite(name):
        raise UsageError(f"not a tau2 suite: {name!r} (expected {PREFIX}DOMAIN)")
    domains = [part.strip() for part in name[len(PREFIX) :].split(",") if part.strip()]
    if not domains:
        raise UsageError(f"{name!r} names no domain (expected {PREFIX}DOMAIN)")
    return [check_domain(domain) for domain in domains]


def load_suite(
    name: str | Iterable[str],
    *,
    split: str = DEFAULT_SPLIT,
    limit: int | None = None,
    seed: int = 0,
    agent: str | None = None,
    judge_model: str | None = None,
) -> list[Tau2Scenario]:
    """The scenarios of ``tau2:DOMAIN`` (several: ``tau2:A,B`` or a list of names): each
    domain's *split* whole, or *limit* of its tasks drawn with *seed*, run on *agent* (by
    default the domain's own agent folder); *judge_model* grades τ²'s natural-language
    assertions (None: not scored)."""
    names = [name] if isinstance(name, str) else list(name)
    domains = [domain for each in names for domain in parse_suite(each)]
    for domain in domains:
        check_split(domain, split)
    scenarios: list[Tau2Scenario] = []
    for domain in dict.fromkeys(domains):
        for task in sample(load_tasks(domain, split), limit, seed):
            scenarios.append(scenario_for(task, split=split, agent=agent, judge_model=judge_model))
    return scenarios


def scenario_for(
    task: Tau2Task,
    *,
    split: str = DEFAULT_SPLIT,
    agent: str | None = None,
    judge_model: str | None = None,
) -> Tau2Scenario:
    """The scenario that runs *task* on *agent* (default: its domain's agent folder)."""
    scenario = task.task.user_scenario
    instructions = scenario.instructions
    goal = getattr(instructions, "reason_for_call", None) or str(instructions)
    config: dict[str, JsonValue] = {"toolsets": [toolset_spec(task)]}
    return Tau2Scenario(
        id=f"tau2-{task.domain}-{task.position}",
        title=_title(f"tau2 {task.domain} {task.id}"),
        language="en",
        agent=agent or agent_for(task.domain),
        tags=("tau2", task.domain),
        config=config,
        simulated_user=SimulatedUser(
            persona=scenario.persona or "a customer (tau2-bench's user simulator)",
            goal=" ".join(str(goal).split()) or "(see the task's instructions)",
            max_turns=MAX_USER_MESSAGES,
        ),
        tau2=Tau2Ref(domain=task.domain, key=task.key, task=task.id, split=split),
        scorer=Tau2Scorer(task.key, split, judge_model),
        source_user=Tau2UserSource(task.key),
    )


def every_scenario(
    name: str | Iterable[str], *, agent: str | None = None, judge_model: str | None = None
) -> list[Tau2Scenario]:
    """A scenario for every task of the domains *name* names, whatever its split (each under
    the first of its splits, ``base`` first): what re-scoring a stored table needs
    (``agentkit score RESULTS --scenarios tau2:DOMAIN``)."""
    from agentkit.eval.tau2.catalog import splits

    names = [name] if isinstance(name, str) else list(name)
    scenarios: dict[str, Tau2Scenario] = {}
    for domain in dict.fromkeys(d for each in names for d in parse_suite(each)):
        ordered = [DEFAULT_SPLIT, *(s for s in splits(domain) if s != DEFAULT_SPLIT)]
        for split in ordered:
            for task in load_tasks(domain, split):
                made = scenario_for(task, split=split, agent=agent, judge_model=judge_model)
                scenarios.setdefault(made.id, made)
    return list(scenarios.values())
