"""Trajectory expectations: the tool calls a run made, with their arguments, against the calls
a scenario expects (``expect: trajectory``), by an order mode and an argument mode.

"Read before you write", "the right tool with the wrong argument", "these three calls in any
order" are each one :class:`~agentkit.eval.scenario.Trajectory`. :func:`match_trajectory`
returns the first mismatch as a sentence — a call missing, one extra, one out of order, or
which argument of which call differs and how — or "" when the calls match. Calls are
numbered from 1 in the order the agent made them; expected calls by their place in
``calls``.

The order modes (as LangChain agentevals' strict / unordered / subset / superset and Google
ADK's EXACT / IN_ORDER / ANY_ORDER):

* ``strict`` — the same calls, in the same order, no other call;
* ``in_order`` — the expected calls, in their order, other calls may come between them;
* ``any_order`` — the same calls in any order, no other call;
* ``subset`` — every call made is one of the expected (an expected one may not be made);
* ``superset`` — every expected call is made, in any order; other calls may be made too.

Unordered modes match expected and made calls one to one (a maximum bipartite matching, so
two calls of one tool with different arguments find their partners whatever the order).

Argument modes: ``exact`` (the same argument names, each value matching), ``subset`` (the
expected arguments are among the call's, each value matching; the call may pass more) and
``ignore`` (tool names only). A value matches by equality (1 equals 1.0), or by the
comparator named for the argument (``comparators: {price: {numeric: {tolerance: 0.5}}}``,
``{symbol: case_insensitive}``, or ``tool.argument`` for one tool's).

Nothing here reads files or runs anything: it is a pure function of the calls.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentkit.eval.scenario import Comparator, ExpectedCall, Trajectory

__all__ = ["SeenCall", "argument_problem", "match_trajectory"]


@dataclass(frozen=True, slots=True)
class SeenCall:
    """A tool call the agent made: its name, its arguments, and whether it was the planner's
    own re-read of the live state (not a planned call)."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    live: bool = False


def match_trajectory(expected: Trajectory, calls: Sequence[SeenCall]) -> str:
    """The first mismatch between *expected* and the *calls* made ("" when they match)."""
    made = [call for call in calls if expected.include_live_reads or not call.live]
    order = expected.order
    if order == "strict":
        return _strict(expected, made)
    if order == "in_order":
        return _in_order(expected, made)
    return _unordered(expected, made)


def _strict(expected: Trajectory, made: Sequence[SeenCall]) -> str:
    wanted = expected.calls
    for index, (want, call) in enumerate(zip(wanted, made, strict=False), start=1):
        if want.tool != call.name:
            later = [n for n, c in enumerate(made, start=1) if n > index and c.name == want.tool]
            if later:
                return (
                    f"out of order: expected call {index} to be {want.tool}, "
                    f"called {call.name} (and {want.tool} as call {later[0]})"
                )
            return f"call {index}: expected {want.tool}, called {call.name}"
        problem = argument_problem(expected, want, call)
        if problem:
            return f"call {index} ({call.name}): {problem}"
    if len(made) < len(wanted):
        missing = wanted[len(made)]
        return f"missing call {len(made) + 1}: {_shown(missing.tool, missing.args)}"
    if len(made) > len(wanted):
        extra = made[len(wanted)]
        return f"extra call {len(wanted) + 1}: {_shown(extra.name, extra.arguments)}"
    return ""


def _in_order(expected: Trajectory, made: Sequence[SeenCall]) -> str:
    position = 0
    for number, want in enumerate(expected.calls, start=1):
        found = next(
            (
                index
                for index in range(position, len(made))
                if made[index].name == want.tool
                and not argument_problem(expected, want, made[index])
            ),
            None,
        )
        if found is not None:
            position = found + 1
            continue
        same_tool = [index for index in range(position, len(made)) if made[index].name == want.tool]
        if same_tool:
            call = made[same_tool[0]]
            problem = argument_problem(expected, want, call)
            return f"call {same_tool[0] + 1} ({call.name}, expected call {number}): {problem}"
        earlier = [
            index
            for index in range(position)
            if made[index].name == want.tool and not argument_problem(expected, want, made[index])
        ]
        if earlier:
            before = expected.calls[number - 2].tool if number > 1 else ""
            return (
                f"out of order: expected call {number} ({want.tool}) after {before}, "
                f"but it was call {earlier[0] + 1}, before that"
            )
        return f"missing call: {_shown(want.tool, want.args)} (expected call {number})"
    return ""


def _unordered(expected: Trajectory, made: Sequence[SeenCall]) -> str:
    wanted = expected.calls
    partner = _matching(expected, made)  # expected index → made index
    taken = set(partner.values())
    check_missing = expected.order in ("any_order", "superset")
    check_extra = expected.order in ("any_order", "subset")
    if check_missing:
        for number, want in enumerate(wanted, start=1):
            if number - 1 in partner:
                continue
            loose = [i for i, call in enumerate(made) if call.name == want.tool and i not in taken]
            if loose:
                call = made[loose[0]]
                problem = argument_problem(expected, want, call)
                return f"call {loose[0] + 1} ({call.name}, expected call {number}): {problem}"
            return f"missing call: {_shown(want.tool, want.args)} (expected call {number})"
    if check_extra:
        for index, call in enumerate(made):
            if index not in taken:
                return f"extra call {index + 1}: {_shown(call.name, call.arguments)}"
    return ""


def _matching(expected: Trajectory, made: Sequence[SeenCall]) -> dict[int, int]:
    """A maximum one-to-one matching of expected calls to made calls (Kuhn's augmenting
    paths; trajectories are short)."""
    fits = [
        [
            index
            for index, call in enumerate(made)
            if call.name == want.tool and not argument_problem(expected, want, call)
        ]
        for want in expected.calls
    ]
    owner: dict[int, int] = {}  # made index → expected index

    def place(want: int, seen: set[int]) -> bool:
        for index in fits[want]:
            if index in seen:
                continue
            seen.add(index)
            if index not in owner or place(owner[index], seen):
                owner[index] = want
                return True
        return False

    for want in range(len(expected.calls)):
        place(want, set())
    return {want: index for index, want in owner.items()}


def argument_problem(expected: Trajectory, want: ExpectedCall, call: SeenCall) -> str:
    """How *call*'s arguments differ from *want*'s under the trajectory's argument mode
    ("" when they match)."""
    if expected.args == "ignore":
        return ""
    given = call.arguments
    for name, value in want.args.items():
        if name not in given:
            return f"argument {name} missing (expected {_value(value)})"
        comparator = expected.comparators.get(f"{want.tool}.{name}") or expected.comparators.get(
            name
        )
        problem = _value_problem(value, given[name], comparator)
        if problem is not None:
            return f"argument {name} = {_value(given[name])}, expected {_value(value)}{problem}"
    if expected.args == "exact":
        extra = sorted(set(given) - set(want.args))
        if extra:
            return f"unexpected argument {extra[0]} = {_value(given[extra[0]])}"
    return ""


def _value_problem(expected: object, found: object, comparator: Comparator | None) -> str | None:
    """None when *found* matches *expected*; else how it was compared (" (numeric, …)", or
    "" for plain equality)."""
    if comparator is not None and comparator.numeric is not None:
        a, b = _number(expected), _number(found)
        tolerance = comparator.numeric.tolerance
        if a is not None and b is not None and abs(a - b) <= tolerance:
            return None
        return f" (numeric, tolerance {tolerance:g})"
    folded = comparator is not None and comparator.case_insensitive
    if folded and isinstance(expected, str) and isinstance(found, str):
        return None if expected.casefold() == found.casefold() else " (case-insensitive)"
    return None if _equal(expected, found) else ""


def _equal(expected: object, found: object) -> bool:
    numbers = (_plain_number(expected), _plain_number(found))
    if numbers[0] is not None and numbers[1] is not None:
        return numbers[0] == numbers[1]
    if isinstance(expected, dict) and isinstance(found, dict):
        return expected.keys() == found.keys() and all(
            _equal(value, found[key]) for key, value in expected.items()
        )
    if isinstance(expected, list) and isinstance(found, list):
        return len(expected) == len(found) and all(
            _equal(x, y) for x, y in zip(expected, found, strict=True)
        )
    return expected == found and type(expected) is type(found)


def _plain_number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _number(value: object) -> float | None:
    """A number, or text that reads as one (a model may pass "12.5")."""
    number = _plain_number(value)
    if number is not None:
        return number
    if isinstance(value, str):
        try:
            parsed = float(value.strip())
        except ValueError:
            return None
        return parsed if math.isfinite(parsed) else None
    return None


def _value(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:79] + "…"


def _shown(tool: str, args: Mapping[str, Any]) -> str:
    return f"{tool}({_value(dict(args))})" if args else tool
