"""Gold-action players of a τ² task: the reference agent and user of the figures and tests.

:class:`GoldAgent` is the function of an ``agentkit.testing.FunctionModel`` that plays the
agent under the ``tool_loop`` strategy: each act call makes the next of the task's gold actions
whose requestor is the assistant (one at a time, a call repeated with the same arguments made
once; a write waits for the user's consent like any other), then answers in text with the
task's ``communicate_info`` strings. *change* alters the actions first (to show what a wrong
argument scores).

:class:`GoldUser` plays τ²'s user: its first message states the task's known information and
the gold actions' argument values (so that agentkit's gate finds them said), it makes the gold
actions whose requestor is the user (telecom's device actions) as tool calls — one that fails
(too early: the agent has not done its part) again at its next move —, it answers
"yes" to everything else the agent says until the agent's message starts with
:data:`DONE` (or *patience* replies came without it), then ends with τ²'s stop token (*stop*:
another token, or None to never stop).

``gold_agent`` / ``gold_user`` find the task a request is about by its scenario's text, for
``--model function:agentkit.eval.tau2.gold:gold_agent`` on the command line. Neither is an
agent anyone should ship: they read the answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from agentkit.eval.tau2.catalog import Tau2Task, find_task
from agentkit.eval.tau2.environments import DOMAINS
from agentkit.models.base import ModelRequest, ToolCallRequest
from agentkit.models.function import tool_call

__all__ = ["DONE", "GoldAgent", "GoldUser", "gold_actions", "gold_agent", "gold_user"]

#: how the gold agent's last message starts
DONE: Final = "Done."
STOP: Final = "###STOP###"
#: the agent's replies ``gold_user`` waits for "Done." before it stops anyway
PATIENCE: Final = 8


def gold_actions(task: Tau2Task, requestor: str = "assistant") -> list[Any]:
    """The task's gold actions of *requestor*, in order."""
    actions = task.task.evaluation_criteria.actions or []
    return [action for action in actions if action.requestor == requestor]


class GoldAgent:
    """Replays *task*'s gold actions (see the module docstring)."""

    def __init__(
        self, task: Tau2Task, change: Callable[[list[Any]], list[Any]] | None = None
    ) -> None:
        self.task = task
        actions, seen = [], set()
        for action in gold_actions(task):  # a call made again with the same arguments is one
            said = json.dumps([action.name, action.arguments], sort_keys=True, default=str)
            if said not in seen:  # call (agentkit's planner does not repeat a call as it was)
                seen.add(said)
                actions.append(action.model_copy(deep=True))
        self.actions = change(actions) if change is not None else actions
        self.made = 0

    def __call__(self, request: ModelRequest) -> object:
        if not request.tools:
            return DONE
        if self.made < len(self.actions):
            action = self.actions[self.made]
            self.made += 1
            return tool_call(action.name, f"gold-{self.made}", **action.arguments)
        said = self.task.task.evaluation_criteria.communicate_info or []
        return " ".join([DONE, *said])


class GoldUser:
    """Plays *task*'s user from its gold actions (see the module docstring)."""

    def __init__(
        self, task: Tau2Task, *, stop: str | None = STOP, patience: int | None = None
    ) -> None:
        self.task = task
        self.stop = stop
        #: the agent's replies the user waits for "Done." before it stops anyway (None: forever)
        self.patience = patience
        self.replies = 0
        self.pending = [action.model_copy(deep=True) for action in gold_actions(task, "user")]
        self.tried: Any = None
        self.waiting = False
        self.opened = False

    def opening(self) -> str:
        instructions = self.task.task.user_scenario.instructions
        reason = getattr(instructions, "reason_for_call", None) or ""
        known = getattr(instructions, "known_info", None) or ""
        values = [action.arguments for action in gold_actions(self.task)]
        said = " ".join(f"Hello. {reason} {known}".split())
        return f"{said} Please make these changes for me: {json.dumps(values, ensure_ascii=False)}"

    def __call__(self, request: ModelRequest) -> object:
        last_message = request.messages[-1] if request.messages else None
        if (
            self.tried is not None
            and last_message is not None
            and last_message.role == "tool"
            and last_message.content.startswith("Error")
        ):  # too early (the agent has not done its part yet): again at the next move
            self.pending.insert(0, self.tried)
            self.tried = None
            self.waiting = True
        elif self.pending and request.tools and not self.waiting:
            action = self.tried = self.pending.pop(0)
            return ToolCallRequest(id=f"user-{action.action_id}", name=action.name,
                                   arguments=dict(action.arguments))  # fmt: skip
        self.tried = None
        self.waiting = False
        if not self.opened:
            self.opened = True
            return self.opening()
        last = request.messages[-1].content if request.messages else ""
        self.replies += 1
        done = request.messages and request.messages[-1].role == "user" and last.startswith(DONE)
        if done or (self.patience is not None and self.replies > self.patience):
            return self.stop if self.stop is not None else "Anything else?"
        return "yes"


_AGENTS: dict[str, GoldAgent] = {}
_USERS: dict[str, GoldUser] = {}


_LAST: list[str] = []


def _task_of(request: ModelRequest) -> Tau2Task:
    """The task a request is about: the one whose scenario text the system prompt holds
    (the user's), or whose user first message the conversation holds (the agent's); else
    the last one found (a later turn's request may not hold the first message: runs one at
    a time, as on the command line without --concurrency)."""
    text = "\n".join(message.content for message in request.messages)
    from agentkit.eval.tau2.catalog import load_tasks

    for domain in DOMAINS:
        for task in load_tasks(domain):
            if str(task.task.user_scenario) in text or GoldUser(task).opening() in text:
                _LAST[:] = [task.key]
                return find_task(task.key)
    if _LAST:
        return find_task(_LAST[0])
    raise LookupError("no tau2 task in this request")


def _opening(request: ModelRequest) -> bool:
    """The request is the first of its conversation on its side (nothing said back yet)."""
    said_back = any(message.role in ("assistant", "tool") for message in request.messages)
    return not said_back and not any("[tool_result" in m.content for m in request.messages)


def gold_agent(request: ModelRequest) -> object:
    """The gold agent of the task the request is about (a new one at each conversation's
    first request)."""
    task = _task_of(request)
    if _opening(request) or task.key not in _AGENTS:
        _AGENTS[task.key] = GoldAgent(task)
    return _AGENTS[task.key](request)


def gold_user(request: ModelRequest) -> object:
    """The gold user of the task the request is about (a new one at each conversation's
    first request; it stops after :data:`PATIENCE` replies without "Done.")."""
    task = _task_of(request)
    if _opening(request) or task.key not in _USERS:
        _USERS[task.key] = GoldUser(task, patience=PATIENCE)
    return _USERS[task.key](request)
