"""A planner turn as a graph: :class:`Turn`, its :class:`Stage` nodes, :class:`End`, and the
:class:`Strategy` that composes them.

A stage is a small value (a dataclass) whose :meth:`Stage.run` yields the turn's events and
then, as its last item, the stage that runs next or an :class:`End` carrying the answer and the
status. The graph is in the types: each stage names what may follow it in its ``run``
annotation. :func:`agentkit.planning.turn.drive` is the only loop that runs stages, the only
place the answer is set and the only keeper of the loop's counters (``max_iterations``).

A turn (:class:`Turn`) holds what it was given (:class:`~agentkit.planning.state.TurnContext`)
and what it read at intake (:class:`~agentkit.planning.state.Intake`), the tools it offers,
and one owner for each kind of change, so no stage keeps a mutable record of its own:

* the flow recorder (:class:`~agentkit.planning.recording.FlowRecorder`), the only writer of
  ExecutionState;
* the call tracer (:class:`~agentkit.calls.tracer.CallTracer`), the only way a model call
  is made (timed, interruptible, traced in the turn's records and as a span);
* what routing decided about a new request (:class:`~agentkit.planning.state.Request`) and the
  prompt context built from it once (:meth:`Turn.decide`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import ClassVar

from agentkit.calls.tracer import CallTracer
from agentkit.events import AgentEvent
from agentkit.memory import ExecutionState
from agentkit.planning.context import PromptContext
from agentkit.planning.recording import FlowRecorder
from agentkit.planning.state import Intake, Request, TurnContext, TurnStatus
from agentkit.telemetry import TurnTrace
from agentkit.tools import ToolRegistry

__all__ = ["End", "Stage", "Strategy", "Turn"]


@dataclass(frozen=True, slots=True)
class End:
    """The turn's end: its answer and its status (failures end by raising
    :class:`~agentkit.calls.errors.TurnFailedError`)."""

    answer: str
    status: TurnStatus = "completed"


class Stage(ABC):
    """One node of a turn's graph (see the module docstring)."""

    #: the execute loop's iterations: the driver counts these stages against
    #: ``max_iterations`` and checks for a cancel before each
    iteration: ClassVar[bool] = False

    @abstractmethod
    def run(self, turn: Turn) -> AsyncIterator[AgentEvent | Stage | End]:
        """The stage's events, then what follows it (a stage or :class:`End`)."""


class Strategy(ABC):
    """One way of planning a turn: the part of a turn in which strategies differ.

    Everything else — routing a message (resume, reset, consent), recording state, the model
    calls and their repair round, the step stages — is shared, so strategies can be compared
    on one scenario with the same ExecutionState, consent rule, resume rule and events. Each
    method returns the stage that runs next, never runs one itself; None means "go on
    executing what is planned". Instances are stateless (the turn is passed in); ``name`` is
    what an agent's ``config.json`` selects (``planner.strategy``). A new strategy is a
    subclass and one :func:`~agentkit.planning.strategies.register` call.
    """

    name: ClassVar[str]

    @abstractmethod
    def start(self, turn: Turn) -> Stage:
        """The stage that plans and runs a new request (after the live-state check)."""

    def after_step(self, turn: Turn, step_id: str) -> Stage | None:
        """What follows a tool or reason step while the flow runs (None: the next step)."""
        return None

    def more_steps(self, turn: Turn) -> Stage | None:
        """What runs when no step is pending (None: the flow finishes)."""
        return None

    def resume(self, turn: Turn, step_id: str) -> Stage | None:
        """After a resumed step (a confirmed tool, an answered question): by default what
        :meth:`after_step` decides."""
        return self.after_step(turn, step_id)

    def answered(self, state: ExecutionState) -> ExecutionState:
        """The state once the user answered a question (the answer is observed already)."""
        return state


@dataclass(slots=True)
class Turn:
    """A planner turn as its stages see it (see the module docstring)."""

    ctx: TurnContext
    intake: Intake
    strategy: Strategy
    #: the tools this turn offers (all of the agent's, or those that fit the model's window)
    tools: ToolRegistry
    flow: FlowRecorder
    #: makes, times and records every model call of the turn (its call records)
    tracer: CallTracer
    prompt: PromptContext
    #: the capability signature a flow of this turn is stored (and resumed) under
    signature: str
    #: the turn's spans (``invoke_agent`` and its children); None: not traced
    trace: TurnTrace | None = None
    request: Request = field(default_factory=Request)

    @property
    def state(self) -> ExecutionState:
        """The ExecutionState as recorded now, or an empty one."""
        return self.flow.current

    def decide(self, request: Request) -> None:
        """What routing decided about a new request; the prompts are filled from it."""
        self.request = request
        self.prompt = self.prompt.for_request(request)

    def check_cancel(self) -> None:
        self.ctx.cancel_scope.check()
