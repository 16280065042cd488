"""One planner turn (engine ``planner``; seed 002): intake, the stages, and the turn's end.

Intake: the user message is persisted first and ``session`` is the first event (as in chat).
Then :func:`~agentkit.planning.routing.route` decides what the message is (a fast path, an
answer to what is pending, a new request) and hands over to the stages: the strategy
(:mod:`agentkit.planning.strategies`), the execute loop and steps
(:mod:`agentkit.planning.steps`), model calls (:mod:`agentkit.planning.calls`), prompt context
(:mod:`agentkit.planning.context`) and state recording (:mod:`agentkit.planning.recording`),
all passing one :class:`~agentkit.planning.state.TurnState`. At the end: the assistant message
and status are persisted, memory upkeep runs (:mod:`agentkit.planning.upkeep`), and ``result``
is the last event.

No exception escapes :meth:`PlannerTurn.run`: failures become an ``error`` event, status failed
and a ``result``. Every model call is traced (``{messageId}/calls.jsonl`` in the conversation
folder).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from agentkit.config import CompressionConfig, PlannerConfig
from agentkit.events import AgentEvent, ResultEvent, SessionEvent
from agentkit.memory import MemoryRepository
from agentkit.models.base import ChatModel, SessionBackend
from agentkit.planning import recording, routing, upkeep
from agentkit.planning.state import (
    PLANNER_VERSION,
    STAGE_TIMEOUTS,
    PlannerDeps,
    TurnCancelledError,
    TurnFailedError,
    TurnState,
)
from agentkit.planning.strategies import get_strategy
from agentkit.planning.trace import CallRecord
from agentkit.store import ConversationKey, ConversationStore
from agentkit.tools import ToolRegistry
from agentkit.types import Message

if TYPE_CHECKING:
    from agentkit.engine import AgentRuntime

__all__ = ["PlannerEngine", "PlannerTurn", "run_turn_state"]


class PlannerEngine:
    """Engine ``planner`` (:class:`agentkit.engine.Engine`): one :class:`PlannerTurn` per
    turn, over the agent's runtime (its tools, planner config, memory and traces)."""

    async def run_turn(
        self, runtime: AgentRuntime, key: ConversationKey, text: str
    ) -> AsyncIterator[AgentEvent]:
        config = runtime.config
        turn = PlannerTurn(
            key=key,
            text=text,
            store=runtime.store,
            memory=runtime.memory,
            model=runtime.model,
            tools=runtime.tools,
            config=config.planner,
            system_prompt=runtime.system_prompt(),
            agent_dir=runtime.folder.path,
            conversation_dir=runtime.traces(key),
            max_turns=config.max_turns,
            compression=config.compression,
        )
        running = runtime.turns.running(key.agent_id, key.conversation_id)
        if running is not None:
            await running.on_cancel(turn.cancel)
        async for event in turn.run():
            yield event


@dataclass
class PlannerTurn:
    """Everything one planner turn needs; :meth:`run` streams its events, :meth:`cancel`
    stops it at its next safe point.

    ``conversation_dir`` is where ``{messageId}/calls.jsonl`` goes; None keeps the records in
    :attr:`calls` only (in-memory stores, tests). ``agent_dir`` is where prompt overrides live.
    """

    key: ConversationKey
    text: str
    store: ConversationStore
    memory: MemoryRepository
    model: ChatModel | SessionBackend
    tools: ToolRegistry
    config: PlannerConfig = field(default_factory=PlannerConfig)
    system_prompt: str = ""
    agent_dir: Path | None = None
    conversation_dir: Path | None = None
    max_turns: int = 20
    compression: CompressionConfig | None = None
    stage_timeouts: Mapping[str, float] = field(default_factory=lambda: dict(STAGE_TIMEOUTS))
    calls: list[CallRecord] = field(default_factory=list)
    #: the state the turn's stages pass along (built from the fields above)
    state: TurnState = field(init=False)

    def __post_init__(self) -> None:
        deps = PlannerDeps(
            key=self.key,
            text=self.text,
            store=self.store,
            memory=self.memory,
            model=self.model,
            tools=self.tools,
            strategy=get_strategy(self.config.strategy),
            config=self.config,
            system_prompt=self.system_prompt,
            agent_dir=self.agent_dir,
            traces=self.conversation_dir,
            max_turns=self.max_turns,
            compression=self.compression,
            stage_timeouts=self.stage_timeouts,
        )
        self.state = TurnState(deps=deps, calls=self.calls)

    def run(self) -> AsyncIterator[AgentEvent]:
        return run_turn_state(self.state)

    def cancel(self) -> None:
        """Stop the turn: an in-flight model call is interrupted, no further step starts, and
        the turn ends with status cancelled. A tool that is running finishes first (a write is
        never cut in half); finished steps stay done."""
        self.state.cancel_requested = True
        inflight = self.state.inflight
        if inflight is not None and not inflight.done():  # safe from any thread
            inflight.get_loop().call_soon_threadsafe(inflight.cancel)


async def run_turn_state(turn: TurnState) -> AsyncIterator[AgentEvent]:
    """The turn: intake, the routed stages, the end (see the module docstring)."""
    deps = turn.deps
    key, store = deps.key, deps.store
    turn.history = store.recent(key, 2 * deps.max_turns)
    scenario: Literal["A", "C"] = "C" if turn.history else "A"
    question = Message.user(deps.text)
    turn.message_id = question.message_id
    store.append(key, question, status="running")  # durable before any model call
    injected = f"planner {PLANNER_VERSION}: system prompt + memory layers"
    store.annotate(key, turn.message_id, "SESSION", f"scenario {scenario}: {injected}")
    yield SessionEvent(
        agent_id=key.agent_id,
        conversation_id=key.conversation_id,
        message_id=turn.message_id,
        scenario=scenario,
        injected=injected,
        history_messages=len(turn.history),
        model=deps.model.spec,
    )
    try:
        async for event in routing.route(turn):
            yield event
    except TurnFailedError as failure:
        for event in recording.failed(turn, failure.code, str(failure)):
            yield event
    except TurnCancelledError:
        for event in recording.cancelled(turn):
            yield event
    except Exception as error:  # the turn boundary: never an exception out of the stream
        for event in recording.failed(turn, "internal_error", f"{type(error).__name__}: {error}"):
            yield event
    recording.persist(turn)
    if turn.status == "completed":
        await upkeep.update_task_state_from_window(turn)
        async for event in upkeep.maybe_compress_window(turn):
            yield event
    yield ResultEvent(
        conversation_id=key.conversation_id,
        message_id=turn.message_id,
        status=turn.status,
        text=turn.answer,
        usage=turn.usage,
        latency_ms=round((time.perf_counter() - turn.started) * 1000, 3),
    )
