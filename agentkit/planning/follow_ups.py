"""What may follow the router's first call in a turn (``tool_loop`` with the router).

The gate's ``follow_up`` rule (:mod:`agentkit.planning.gate`). The router
(:mod:`agentkit.planning.tool_choice`) routes a request's first call; a small model
asked to go on then calls again whatever is done. The invariant kept here: a further call runs
only when the router would route it too (:func:`follow_up_refusal`), so a single request gets
one call and a request for several things one call per thing said.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import JsonValue

from agentkit.memory import PlanStep
from agentkit.models.base import ChatModel
from agentkit.planning import grounding
from agentkit.planning.graph import Turn
from agentkit.planning.tool_ranking import rank_tools

__all__ = ["follow_up_refusal", "leaves", "router_on"]


def router_on(turn: Turn) -> bool:
    """The tool-choice router routes this turn's first call: ``planner.tool_choice:
    router``, tools to route among, and a chat model to settle with."""
    ctx = turn.ctx
    return (
        ctx.config.tool_choice == "router"
        and len(turn.tools) > 0
        and isinstance(ctx.model, ChatModel)
    )


def follow_up_refusal(
    turn: Turn, tool_name: str, tool_args: Mapping[str, JsonValue], steps: Sequence[PlanStep]
) -> str:
    """Why the router does not admit *tool_name* as a further call of this turn, after the
    calls in *steps* ran (``""``: it does, or the router is off or nothing ran yet).

    The router routed the request's first call; a small model asked to go on calls again
    whatever is done — another tool the request never named, or the same one with its last
    values stretched (*Miami, Florida* → *Miami, Florida in the upcoming 7*), reshuffled or
    joined by an option nobody asked for. So a further call must be one the router would
    route too. Another tool only when the request's words pick it as well as the best-ranked
    tool (a lexical candidate within the near-tie margin of the leader). The same tool only
    as the next of several things asked: its last call with one argument's value replaced by
    a value the user said (or a tool returned) that is no variant of one given (*Miami and
    Boston*: two calls); arguments left out keep their defaults, an added one is an option
    nobody asked for."""
    done = [s for s in steps if s.type == "tool" and s.status == "done"]
    if not router_on(turn) or not done:
        return ""
    runs = [s for s in done if s.tool_name == tool_name]
    if runs:
        return _same_tool_refusal(turn, tool_name, tool_args, runs[-1], done)
    if "lexical" not in turn.ctx.config.router_signals:
        return ""
    scores = {item.name: item.score for item in rank_tools(turn.tools, turn.ctx.text)}
    score, best = scores.get(tool_name, 0.0), max(scores.values(), default=0.0)
    config = turn.ctx.config
    if score < config.router_weak_score or score * config.router_near_tie < best:
        return f"{tool_name} is not a tool the request's words pick"
    return ""


def _same_tool_refusal(
    turn: Turn,
    tool_name: str,
    tool_args: Mapping[str, JsonValue],
    last: PlanStep,
    done: Sequence[PlanStep],
) -> str:
    before = last.tool_args
    changed = [key for key, value in tool_args.items() if before.get(key) != value]
    if len(changed) != 1 or changed[0] not in before:
        return (
            f"{tool_name} again with {len(changed)} arguments changed or added (the next of "
            "several things asked replaces one value)"
        )
    given = [leaf for step in done for leaf in leaves(step.tool_args)]
    found = grounding.sources(turn)
    values = leaves(tool_args[changed[0]])
    if values and all(
        _said(found, leaf) and not any(_variant(leaf, old) for old in given) for leaf in values
    ):
        return ""
    return f"{tool_name} again with no new value the user said"


def leaves(node: JsonValue) -> list[JsonValue]:
    """The leaf values of a call's arguments (inside objects and lists), in order."""
    if isinstance(node, dict):
        return [leaf for value in node.values() for leaf in leaves(value)]
    if isinstance(node, list):
        return [leaf for value in node for leaf in leaves(value)]
    return [node]


def _said(found: grounding.Sources, leaf: JsonValue) -> bool:
    if isinstance(leaf, bool) or leaf is None:
        return False
    if isinstance(leaf, int | float):
        return found.has_number(leaf)
    return isinstance(leaf, str) and found.says(leaf)


def _variant(value: JsonValue, given: JsonValue) -> bool:
    """*value* is *given* again: equal, or a string that holds it or is held by it."""
    if isinstance(value, str) and isinstance(given, str):
        a, b = " ".join(value.casefold().split()), " ".join(given.casefold().split())
        return bool(a and b) and (a in b or b in a)
    return value == given
