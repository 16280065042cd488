"""Who speaks for the user in a run: the scenario's fixed turns, or a simulated user — two
:class:`Dialogue` drivers over one :class:`Chat`, the run's conversation with its agent.

:class:`Chat` sends one user message (or one decision on the pending approval) the way every
edge does (``Agent.send_message`` / ``Agent.adecide``: the stream ends with the memory upkeep's
``compression`` event when it compressed), under the turn's time limit and the run's budget,
and writes what it saw into
the run's :class:`RunLog`: the turn into the transcript (also a turn cut short by its time
limit), its facts, its usage and, when the turn has its own expectations, their checks
against the state right after it (kept in the transcript; after every turn when the
scenario's scorer asks for it, :attr:`~agentkit.eval.scorer.RunScorer.turn_state`).

Usage is counted from the events only: each turn's ``result`` usage (every model call of the
turn) plus each ``compression`` event's (the upkeep after it); the simulated user's own calls
are counted apart (:class:`UserSide`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agentkit.calls.records import CallRecord
from agentkit.errors import ModelError
from agentkit.eval.budget import BudgetedModel, Meter
from agentkit.eval.expectations import Check, Observed, TurnFacts, check, turn_facts
from agentkit.eval.scenario import Expectations, OutOfBandCall, Scenario, SimulatedUser
from agentkit.eval.simulator import (
    ModelUser,
    ScriptedUser,
    SimTurn,
    StopReason,
    UserSimulator,
    failure_text,
)
from agentkit.eval.source_user import UserContext
from agentkit.eval.task import SCRIPTED
from agentkit.eval.transcript import RunState, UserTurn
from agentkit.eval.world import RunWorld, ScenarioReplies
from agentkit.events import AgentEvent
from agentkit.models.base import ChatModel
from agentkit.types import Usage

__all__ = [
    "Chat",
    "Dialogue",
    "RunError",
    "RunLog",
    "ScriptedTurns",
    "SimulatedConversation",
    "UserSide",
    "dialogue_for",
]


#: a turn without expectations of its own
_UNCHECKED = Expectations()


class RunError(Exception):
    """A run cannot go on (the message says why, for the row's ``error``)."""


@dataclass
class RunLog:
    """What a run has shown so far (written by :class:`Chat`, read by the row)."""

    turns: list[UserTurn] = field(default_factory=list)
    facts: TurnFacts = field(default_factory=TurnFacts)
    checks: list[Check] = field(default_factory=list)
    #: the number of the last turn that ran
    turns_run: int = 0


@dataclass(frozen=True, slots=True)
class UserSide:
    """How the user's side of a run went (the ``sim_*`` columns)."""

    turns: int = 0
    stopped_by: StopReason | None = None
    usage: Usage = field(default_factory=Usage)
    calls: tuple[CallRecord, ...] = ()


class Chat:
    """The run's conversation with its agent (see the module docstring)."""

    def __init__(self, world: RunWorld, log: RunLog) -> None:
        self.world = world
        self.log = log
        self.agent = world.open()
        self.conversation_id = world.prepare(self.agent)

    @property
    def meter(self) -> Meter:
        return self.world.meter

    async def restart(self) -> None:
        """Open the agent afresh (a new process: its next turn restores the context)."""
        await self.agent.aclose()
        self.agent = self.world.open()

    async def outside(self, calls: Sequence[OutOfBandCall], number: int) -> None:
        """The user runs tools outside the chat, with the agent's tools."""
        for call in calls:
            result = await self.agent.tools.arun(call.tool, dict(call.args))
            if not result.ok:
                raise RunError(
                    f"turn {number}: the out-of-band call {call.tool} failed: {result.text}"
                )

    async def send(self, said: UserTurn, expect: Expectations = _UNCHECKED) -> TurnFacts:
        """One turn (*said*: the user's message or decision); count and check what it did."""
        agent, conversation_id, meter = self.agent, self.conversation_id, self.meter
        meter.arm(lambda: agent.cancel(conversation_id))
        deadline = self._deadline()
        events: list[AgentEvent] = []
        try:
            await self._events(said, events)
        finally:
            meter.arm(None)
            if deadline is not None:
                deadline.cancel()
            self.log.turns.append(said.model_copy(update={"events": events}))
        facts = turn_facts(events)
        if not isinstance(agent.model, BudgetedModel):  # the meter could not count the calls
            meter.spend(facts.usage, facts.usage.calls)
        self.log.facts = self.log.facts.then(facts)
        self.log.turns_run = said.number
        meter.over()
        checked = not expect.is_empty and not meter.reason
        scorer = self.world.scenario.scorer
        if checked or (scorer is not None and scorer.turn_state):
            after = self.observe(facts.usage.calls)
            self.log.turns[-1] = self.log.turns[-1].model_copy(update={"after": after})
            if checked:
                seen = Observed.of(facts, after)
                self.log.checks += check(expect, seen, f"turn {said.number}")
        return facts

    def observe(self, model_calls: int) -> RunState:
        return self.world.observe(self.agent, self.conversation_id, model_calls)

    async def _events(self, said: UserTurn, events: list[AgentEvent]) -> None:
        agent, conversation_id = self.agent, self.conversation_id
        limit = self.world.task.turn_timeout
        if said.decision is None:
            stream = agent.send_message(conversation_id, said.said)
        else:  # the same decision path as Python, HTTP, ACP and the widgets
            pending = agent.pending_approvals(conversation_id)
            if not pending:
                raise RunError(f"turn {said.number}: nothing is waiting for an approval")
            stream = agent.adecide(
                conversation_id, pending[0].approval_id, said.decision, said.args, source="eval"
            )
        try:
            async with asyncio.timeout(limit):
                async for event in stream:  # memory upkeep's compression after the result too
                    events.append(event)
        except TimeoutError:
            raise RunError(
                f"turn {said.number} took longer than the limit of {limit:g} s"
            ) from None

    def _deadline(self) -> asyncio.TimerHandle | None:
        """At the run's ``max_seconds``, the running turn is cancelled (None: no limit)."""
        meter = self.meter
        remaining = meter.remaining_seconds()
        if remaining is None:
            return None
        tasks: list[asyncio.Task[None]] = []  # held until done (a loop keeps weak references)

        def expire() -> None:
            reason = meter.exceeded() or f"max_seconds: the limit of {remaining:g} s"
            tasks.append(asyncio.ensure_future(meter.stop_turn(reason)))

        return asyncio.get_running_loop().call_later(remaining, expire)

    async def aclose(self) -> None:
        await self.agent.aclose()


class Dialogue(Protocol):
    """Who speaks for the user: drives the run's turns through *chat* until it ends."""

    async def run(self, chat: Chat) -> None: ...

    def user_side(self) -> UserSide:
        """How the user's side went (also after :meth:`run` raised)."""
        ...


class ScriptedTurns:
    """The scenario's fixed turns, in order: messages, approvals and rejections, the
    out-of-band calls before them and restarts; each turn's own scripted replies when the
    run is scripted."""

    def __init__(self, scenario: Scenario, replies: ScenarioReplies | None) -> None:
        self.scenario = scenario
        self.replies = replies

    async def run(self, chat: Chat) -> None:
        for number, turn in enumerate(self.scenario.turns, 1):
            if chat.meter.over():
                return
            if turn.restart:
                await chat.restart()
            await chat.outside(turn.before, number)
            if self.replies is not None:
                self.replies.turn(number - 1)
            said = UserTurn(number=number, said=turn.user or "", restart=turn.restart)
            if turn.approve is not None:
                args = dict(turn.approve.args) if turn.approve.args is not None else None
                said = said.model_copy(update={"decision": "approve", "args": args})
            elif turn.reject:
                said = said.model_copy(update={"decision": "reject"})
            await chat.send(said, turn.expect)
            if chat.meter.reason:
                return

    def user_side(self) -> UserSide:
        return UserSide()


class SimulatedConversation:
    """A simulated user writes each message after reading the agent's reply, until it is
    done, gives up, the run's budget is spent or ``max_turns`` messages were sent."""

    def __init__(self, world: RunWorld, user: SimulatedUser) -> None:
        self.world = world
        self.user = user
        self.turns = 0
        self.stopped_by: StopReason | None = None
        self.usage = Usage()
        self._records: list[CallRecord] = []

    def user_side(self) -> UserSide:
        return UserSide(self.turns, self.stopped_by, self.usage, tuple(self._records))

    def _spent(self, usage: Usage) -> None:
        self.usage += usage.model_copy(update={"calls": 1})
        self.world.meter.spend(usage, 1)

    def _simulator(self, chat: Chat) -> tuple[UserSimulator, ChatModel | None]:
        """Who plays the user, and the model to close afterwards (one this run made)."""
        world = self.world
        spec = world.task.user_model
        if spec is None or spec == SCRIPTED:
            return ScriptedUser(world.scenario.user_script), None
        made: ChatModel | None = None
        if isinstance(spec, str):
            backend = world.backend(spec)
            if not isinstance(backend, ChatModel):
                raise RunError(f"the simulated user needs a chat model, not {spec!r}")
            model = made = backend
        else:
            model = spec
        source = world.scenario.source_user
        if source is not None:  # the scenario source's own user (agentkit.eval.source_user)
            context = UserContext(
                agent_dir=world.folder,
                language=world.scenario.language,
                conversation_id=chat.conversation_id,
                on_call=self._spent,
                mask=chat.agent.tools.mask,
            )
            player = source.simulator(model, context)
            self._records = player.records
            return player, made
        user = ModelUser(
            model,
            self.user,
            language=world.scenario.language,
            agent_dir=world.folder,
            on_call=self._spent,
            conversation_id=chat.conversation_id,
            mask=chat.agent.tools.mask,
        )
        self._records = user.records
        return user, made

    async def run(self, chat: Chat) -> None:
        simulator, made = self._simulator(chat)
        conversation: list[SimTurn] = []
        meter = chat.meter
        try:
            while True:
                if meter.over():
                    self.stopped_by = "budget"
                    return
                try:
                    move = await simulator.next_move(conversation)
                except ModelError as error:
                    self.stopped_by = "error"
                    raise RunError(failure_text(error)) from None
                if move.action != "say":
                    self.stopped_by = "user_done" if move.action == "done" else "user_gave_up"
                    return
                if self.turns >= self.user.max_turns:
                    self.stopped_by = "max_turns"
                    return
                if meter.over():
                    self.stopped_by = "budget"
                    return
                self.turns += 1
                conversation.append(SimTurn("user", move.message))
                facts = await chat.send(UserTurn(number=self.turns, said=move.message))
                # a turn that asked for consent ended there (waiting_confirmation)
                conversation.append(SimTurn("agent", facts.answer, consent=bool(facts.consents)))
                if meter.reason:
                    self.stopped_by = "budget"
                    return
        finally:
            if made is not None:
                await made.aclose()


def dialogue_for(world: RunWorld) -> Dialogue:
    """The scenario's driver: its simulated user, else its fixed turns."""
    user = world.scenario.simulated_user
    if user is not None:
        return SimulatedConversation(world, user)
    return ScriptedTurns(world.scenario, world.replies)
