"""What a planner strategy is: the part of a turn in which strategies differ.

Everything else — routing a message (resume, reset, consent), recording state, the model calls
and their repair round, the step runners — is shared, so strategies can be compared on one
scenario with the same ExecutionState, consent rule, resume rule and events. A strategy is a
module over the turn's stages (:data:`~agentkit.planning.state.Stage`): each method returns
the stage that runs next, never runs one itself.

* :meth:`Strategy.start`: how a new request is planned and run (after the live-state check);
* :meth:`Strategy.after_step`: what follows a tool or reason step (while the flow runs);
* :meth:`Strategy.more_steps`: what runs when no step is pending (None: the flow finishes);
* :meth:`Strategy.resume`: how the run continues after a resumed step (a confirmed tool, an
  answered question);
* :meth:`Strategy.answered`: what an answer to a question does to the rest of the plan.

Only :meth:`start` must be written; the rest default to "execute what is planned". A new
strategy is a module with a subclass and one :func:`~agentkit.planning.strategies.register`
call; its ``name`` is what an agent's ``config.json`` names (``planner.strategy``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from agentkit.memory import ExecutionState
from agentkit.planning.state import Stage, Turn
from agentkit.planning.steps import execute

__all__ = ["Strategy"]


class Strategy(ABC):
    """One way of planning a turn; instances are stateless (the turn is passed in)."""

    #: the name an agent's config selects it by; part of the capability signature
    name: ClassVar[str]

    @abstractmethod
    def start(self, turn: Turn) -> Stage:
        """The stage that plans and runs a new request. ``turn.state`` is the stored
        ``planning`` state, ``turn.ctx.task`` the TaskState, ``turn.request.live`` whether
        this is a live-state request."""

    def after_step(self, turn: Turn, step_id: str) -> Stage:
        """After a tool or reason step ran (while the flow is running): the next step."""
        return execute

    def more_steps(self, turn: Turn) -> Stage | None:
        """No step is pending: a stage that adds steps (and goes on with ``execute``), or
        None to finish (the default)."""
        return None

    def resume(self, turn: Turn, step_id: str) -> Stage:
        """After a resumed step: the decision :meth:`after_step` makes, then the rest."""
        return self.after_step(turn, step_id)

    def answered(self, state: ExecutionState) -> ExecutionState:
        """The state once the user answered a question (the answer is observed already)."""
        return state
