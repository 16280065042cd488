"""What a planner strategy is: the part of a turn in which strategies differ.

Everything else — routing a message (resume, reset, consent), recording state, the model calls
and their repair round, the step runners — is shared, so strategies can be compared on one
scenario with the same ExecutionState, consent rule, resume rule and events. A strategy says:

* :meth:`Strategy.start`: how a new request is planned and run (after the live-state check);
* :meth:`Strategy.after_step`: what happens after a tool or reason step ran;
* :meth:`Strategy.more_steps`: what happens when no step is pending (plan more, or finish);
* :meth:`Strategy.resume`: how the run continues after a resumed step (a confirmed tool, an
  answered question);
* :meth:`Strategy.answered`: what an answer to a question does to the rest of the plan.

Only :meth:`start` must be written; the rest default to "execute what is planned". A new
strategy is a module with a subclass and one :func:`~agentkit.planning.strategies.register`
call; its ``name`` is what an agent's ``config.json`` names (``planner.strategy``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from typing import ClassVar

from agentkit.events import AgentEvent
from agentkit.memory import ExecutionState
from agentkit.planning.state import TurnState
from agentkit.planning.steps import execute

__all__ = ["Strategy", "no_events"]


async def no_events() -> AsyncIterator[AgentEvent]:
    """An empty event stream (a stage with nothing to do)."""
    nothing: tuple[AgentEvent, ...] = ()
    for event in nothing:
        yield event


class Strategy(ABC):
    """One way of planning a turn; instances are stateless (the turn's state is passed in)."""

    #: the name an agent's config selects it by; part of the capability signature
    name: ClassVar[str]

    @abstractmethod
    def start(self, turn: TurnState) -> AsyncIterator[AgentEvent]:
        """Plan and run a new request. ``turn.state`` is the stored ``planning`` state,
        ``turn.task`` the TaskState, ``turn.live`` whether this is a live-state request."""

    def after_step(self, turn: TurnState, step_id: str) -> AsyncIterator[AgentEvent]:
        """After a tool or reason step ran (while the flow is running); nothing by default."""
        return no_events()

    def more_steps(self, turn: TurnState) -> AsyncIterator[AgentEvent]:
        """No step is pending: add steps to run, or add none to finish (the default)."""
        return no_events()

    async def resume(self, turn: TurnState, step_id: str) -> AsyncIterator[AgentEvent]:
        """After a resumed step: the decision :meth:`after_step` makes, then the rest."""
        async for event in self.after_step(turn, step_id):
            yield event
        async for event in execute(turn):
            yield event

    def answered(self, state: ExecutionState) -> ExecutionState:
        """The state once the user answered a question (the answer is observed already)."""
        return state
