"""``Agent``: an agent folder plus its conversations (seed 16.4, in Python names).

The Agent is a thin facade over the agent's :class:`~agentkit.runtime.AgentRuntime` (store,
session pool and running turns, memory, traces, tools, model), built once by
:meth:`Agent.open`; it does not store or render anything itself. Every turn — a message
(:meth:`Agent.send_message`) or a decision on a pending approval (:meth:`Agent.adecide`) — is
one typed input through :meth:`Agent.run_turn` to the runtime's one entry
(:meth:`~agentkit.runtime.AgentRuntime.run_turn`), which admits it (one per conversation,
across processes) and hands it to the engine its config names (:data:`ENGINES`). The store is
injected (``Agent.open(..., store=InMemoryConversationStore())`` in tests), and the data root
is an argument, so several agents and data roots can live in one process.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from agentkit.agent_folder import AgentFolder, resolve_data_dir
from agentkit.branches import fork_conversation
from agentkit.calls.records import CallRecord
from agentkit.config import AgentConfig
from agentkit.errors import ConversationBusyError, ConversationNotFoundError, UsageError
from agentkit.events import AgentEvent, CompressionEvent, ResultEvent, SessionEvent
from agentkit.ids import check_id, new_conversation_id
from agentkit.loop import BackgroundLoop
from agentkit.memory import (
    ApprovalDecision,
    DecisionSource,
    ExecutionState,
    MemoryRepository,
    PendingApproval,
    TaskState,
    Versioned,
    chat_window,
)
from agentkit.models.base import ChatModel, SessionBackend
from agentkit.planning.approvals import Decision
from agentkit.planning.replay import TraceNotFoundError, load_call_records
from agentkit.planning.state import TurnInput, UserMessage
from agentkit.runtime import ENGINES, MAX_MESSAGE_LENGTH, AgentRuntime, checked_input
from agentkit.sessions import SessionPool
from agentkit.store import ConfigStore, ConversationKey, ConversationStore
from agentkit.store.choice import open_stores
from agentkit.store.records import ConversationRecord, window_start
from agentkit.telemetry import Telemetry
from agentkit.titles import conversation_title
from agentkit.tools import ToolRegistry
from agentkit.types import Conversation, ConversationMeta, Message

__all__ = ["ENGINES", "MAX_MESSAGE_LENGTH", "Agent", "TurnResult"]

DEFAULT_TITLE = "New conversation"
MAX_TITLE_LENGTH = 200


@dataclass
class TurnResult:
    """A finished turn, for synchronous callers: every event, and the reply."""

    events: list[AgentEvent] = field(default_factory=list)

    @property
    def session(self) -> SessionEvent:
        first = self.events[0]
        assert isinstance(first, SessionEvent)
        return first

    @property
    def result(self) -> ResultEvent:
        """The turn's ``result`` (a ``compression`` event of the upkeep after it may follow)."""
        return next(e for e in reversed(self.events) if isinstance(e, ResultEvent))

    @property
    def conversation_id(self) -> str:
        return self.result.conversation_id

    @property
    def text(self) -> str:
        return self.result.text


async def _until_result(events: AsyncGenerator[AgentEvent, None]) -> TurnResult:
    """A turn's events up to its ``result`` (the memory upkeep after it goes on in the
    background: ``Agent.wait_upkeep`` waits for it)."""
    result = TurnResult()
    async with contextlib.aclosing(events):
        async for event in events:
            result.events.append(event)
            if isinstance(event, ResultEvent):
                break
    return result


class Agent:
    """One agent: its folder (prompts, config) and its conversations, over its runtime."""

    def __init__(self, runtime: AgentRuntime) -> None:
        self.runtime = runtime
        self._loop: BackgroundLoop | None = None

    @property
    def folder(self) -> AgentFolder:
        return self.runtime.folder

    @property
    def store(self) -> ConversationStore:
        return self.runtime.store

    @property
    def pool(self) -> SessionPool:
        return self.runtime.pool

    @classmethod
    def open(
        cls,
        agent_id: str,
        *,
        data_dir: Path | str | None = None,
        store: ConversationStore | str | None = None,
        model: ChatModel | SessionBackend | str | None = None,
        pool: SessionPool | None = None,
        config_store: ConfigStore | None = None,
        tools: Iterable[object] = (),
    ) -> Agent:
        """Load ``{data_dir}/agents/{agent_id}``; the store defaults to the file store there.

        *store* is a store object, or a spec: a ``postgresql://…`` URL puts conversations and
        memory (unless *config_store* is given) in that database, opened here and closed with
        the agent; without one, ``$AGENTKIT_STORE`` names it (:mod:`agentkit.store.choice`).

        Opening recovers the agent's conversations that a crash left inconsistent (a cheap
        size check per conversation; only damaged ones are rebuilt), and loads the toolsets
        its config.json names (a toolset that does not load is a ConfigError here) plus
        *tools*: functions or tools given in Python (see :func:`agentkit.tool`).
        """
        root = resolve_data_dir(data_dir)
        folder = AgentFolder.load(root, agent_id)
        opened = None
        if not isinstance(store, ConversationStore):
            opened = open_stores(store, root)
            store = opened.conversations
            config_store = config_store if config_store is not None else opened.config
        try:
            store.recover(folder.agent_id)
            runtime = AgentRuntime(
                folder, store, model=model, pool=pool, config_store=config_store, tools=tools
            )
            agent = cls(runtime)
            if opened is not None:
                agent.runtime.close_with(opened.close)
            agent.runtime.load_tools()
        except BaseException:
            if opened is not None:
                opened.close()
            raise
        return agent

    @property
    def id(self) -> str:
        return self.folder.agent_id

    @property
    def config(self) -> AgentConfig:
        return self.folder.config

    def system_prompt(self) -> str:
        return self.folder.system_prompt()

    @property
    def telemetry(self) -> Telemetry:
        """The agent's traces: each turn's spans (``invoke_agent`` and its children), kept for
        its last turns — ``agent.telemetry.recorded(result.trace_id)``."""
        return self.runtime.telemetry

    @property
    def model(self) -> ChatModel | SessionBackend:
        """The model backend: the one given, else ``--model``/``$AGENTKIT_MODEL``/config.json.

        Created on first use, so opening an agent never loads model weights.
        """
        return self.runtime.model

    @property
    def tools(self) -> ToolRegistry:
        """The agent's tools (loaded once, when the agent is opened)."""
        return self.runtime.tools

    def call_records_dir(self, conversation_id: str) -> Path | None:
        """Where each turn's ``calls.jsonl`` of the conversation is (None: no files kept)."""
        return self.runtime.call_records_dir(self._key(check_id(conversation_id, "conversation")))

    def _key(self, conversation_id: str) -> ConversationKey:
        return ConversationKey(self.id, conversation_id)

    # -- seed 16.4 --------------------------------------------------------------------------

    def create_conversation(self, title: str = DEFAULT_TITLE) -> ConversationMeta:
        """Start an empty conversation with a fresh ``conv-…`` id."""
        title = " ".join(title.split()) or DEFAULT_TITLE
        if len(title) > MAX_TITLE_LENGTH:
            raise UsageError(f"a title has at most {MAX_TITLE_LENGTH} characters")
        return self.store.create(self._key(new_conversation_id()), title)

    def list_conversations(self) -> list[ConversationMeta]:
        """Every conversation's metadata, most recently updated first."""
        return self.store.conversations(self.id)

    def load_conversation_history(self, conversation_id: str) -> Sequence[Message]:
        """The conversation's messages, oldest first (a read-only, list-like sequence: a long
        history is parsed at once and each message validated when first read)."""
        return self.store.messages(self._key(conversation_id))

    def load_recent_messages(self, conversation_id: str, limit: int) -> list[Message]:
        """The last *limit* messages, oldest first; reads only the end of the history."""
        return self.store.recent(self._key(conversation_id), limit)

    def append_message(self, conversation_id: str, message: Message) -> ConversationMeta:
        """Append durably: the turn's ``messages.log``, ``history.json`` and ``meta.json``."""
        return self.store.append(self._key(conversation_id), message)

    def get_conversation(self, conversation_id: str) -> Conversation:
        """Metadata and messages together."""
        key = self._key(conversation_id)
        messages = self.store.messages(key)
        return Conversation(meta=self.store.meta(key), messages=tuple(messages))

    def delete_conversation(self, conversation_id: str) -> None:
        """Delete the conversation and its folder; refused while it is mid-turn here
        (another process's turn: the store's lock refuses it)."""
        self._idle(conversation_id)
        self.store.delete(self._key(conversation_id))

    def _idle(self, conversation_id: str) -> None:
        if self.pool.turns.is_running(self.id, conversation_id):
            raise ConversationBusyError(self.id, conversation_id, 0.0)

    def call_records(self, conversation_id: str, message_id: str) -> list[CallRecord]:
        """The model calls turn *message_id* traced, in call order (empty: none; a planner
        turn traces every call, a chat turn none). Raises
        :class:`~agentkit.planning.replay.TraceError` for a trace that does not parse."""
        try:
            return load_call_records(
                self.store, self._key(conversation_id), check_id(message_id, "message")
            )
        except TraceNotFoundError:
            return []

    def conversation_records(self, conversation_id: str) -> list[ConversationRecord]:
        """The conversation's typed records (compressions, ``/clear``), oldest first."""
        return self.store.records(self._key(conversation_id))

    def chat_window(self, conversation_id: str, *, compressed: bool = True) -> list[Message]:
        """The conversation's chat window as its next turn sees it (from where its records
        say it starts, without system messages); with *compressed* False, the whole dialogue
        since the last ``/clear`` (what the compression lab sweeps)."""
        key = self._key(conversation_id)
        start = window_start(self.store.records(key), compressed=compressed)
        return chat_window(self.store.messages(key), start)

    def turn_log(self, conversation_id: str, message_id: str) -> str:
        """The text of ``{messageId}/messages.log``."""
        check_id(message_id, "message")
        return self.store.turn_log(self._key(conversation_id), message_id)

    def fork(
        self, conversation_id: str, at: str | None = None, title: str | None = None
    ) -> ConversationMeta:
        """A new conversation: this one's history up to and including turn *at* (a message
        id; None: the last finished turn) and its memory as it stood then; ``forkedFrom`` in
        its meta.json. This conversation is not written to (see :mod:`agentkit.branches`).
        An empty or blank *at* is an invalid id, not "the last turn"."""
        if at is not None:
            check_id(at, "message")
        self._idle(check_id(conversation_id, "conversation"))
        return fork_conversation(self.runtime, self._key(conversation_id), at=at, title=title)

    # -- memory (seed 002: TaskState and ExecutionState) --------------------------------------

    @property
    def memory(self) -> MemoryRepository:
        """The planner's memory records, in the given config store or ``agentkit.db``."""
        return self.runtime.memory

    def _existing(self, conversation_id: str) -> str:
        if not self.store.exists(self._key(conversation_id)):
            raise ConversationNotFoundError(self.id, conversation_id)
        return conversation_id

    def task_state(self, conversation_id: str) -> Versioned[TaskState]:
        """The conversation's TaskState and its version (an empty one at version 0)."""
        return self.memory.load_task_state(self.id, self._existing(conversation_id))

    def save_task_state(
        self, conversation_id: str, state: TaskState, *, expected_version: int
    ) -> Versioned[TaskState]:
        """Store an edited TaskState; a stale *expected_version* raises VersionConflictError."""
        return self.memory.save_task_state(
            self.id, self._existing(conversation_id), state, expected_version=expected_version
        )

    def execution_state(self, conversation_id: str) -> Versioned[ExecutionState] | None:
        """The conversation's ExecutionState, or None when no plan is on record."""
        return self.memory.load_execution_state(self.id, self._existing(conversation_id))

    def clear_memory(self, conversation_id: str) -> None:
        """Forget TaskState and ExecutionState (the messages stay; ``/clear`` in a chat)."""
        self.memory.clear(self.id, self._existing(conversation_id))

    # -- turns ------------------------------------------------------------------------------

    def run_turn(
        self, conversation_id: str | None, input: TurnInput
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run one turn on *input* — a :class:`~agentkit.planning.state.UserMessage` or a
        :class:`~agentkit.planning.approvals.Decision` on the conversation's pending
        approval — and stream its events (``session`` first, ``result`` last; the memory
        upkeep's ``compression`` event may follow it). The one entry every edge's turn takes
        (:meth:`AgentRuntime.run_turn`); :meth:`send_message` and :meth:`adecide` build the
        input for it.

        A message with no conversation id starts a new conversation, titled after it. A
        conversation that is mid-turn (in this process or another) raises
        :class:`ConversationBusyError` before anything is written.
        """
        if conversation_id is None:
            return self._first_turn(input)
        return self.runtime.run_turn(conversation_id, input)

    async def _first_turn(self, input: TurnInput) -> AsyncGenerator[AgentEvent, None]:
        """The turn of a message that starts a new conversation, titled after it."""
        input = checked_input(input)  # before the conversation is created
        if not isinstance(input, UserMessage):
            raise UsageError("a decision names the conversation it decides in")
        self.runtime.check_model()  # a bad model spec fails before anything is written
        # the user's own words (agentkit.titles), a key they typed masked
        title = conversation_title(self.runtime.tools.mask.text(input.text))
        conversation_id = self.create_conversation(title).conversation_id
        # closed with this stream (a caller that stops at result lets the turn go at once)
        async with contextlib.aclosing(self.runtime.run_turn(conversation_id, input)) as events:
            async for event in events:
                yield event

    def send_message(
        self, conversation_id: str | None, text: str
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run one turn on the message *text*; stream its events (``session`` first,
        ``result`` last): :meth:`run_turn` with a
        :class:`~agentkit.planning.state.UserMessage`.

        With no conversation id a new conversation is created, titled after the message.
        A second turn on a conversation that is mid-turn (in this process or another) raises
        :class:`ConversationBusyError` before anything is written.
        """
        return self.run_turn(conversation_id, UserMessage(text))

    # -- approvals --------------------------------------------------------------------------

    def pending_approvals(self, conversation_id: str) -> list[PendingApproval]:
        """The side-effecting calls of the conversation waiting for a decision (at most one:
        a flow pauses on one consent at a time)."""
        stored = self.execution_state(conversation_id)
        pending = stored.value.pending_approval if stored is not None else None
        return [] if pending is None else [pending]

    def approval_decisions(self, conversation_id: str) -> list[ApprovalDecision]:
        """How the flow's approvals were decided, oldest first (the last ones kept)."""
        stored = self.execution_state(conversation_id)
        return list(stored.value.decisions) if stored is not None else []

    def adecide(
        self,
        conversation_id: str,
        approval_id: str,
        decision: Literal["approve", "reject"],
        args: Mapping[str, Any] | None = None,
        note: str = "",
        *,
        source: DecisionSource = "python",
    ) -> AsyncGenerator[AgentEvent, None]:
        """Decide on a pending approval and continue the turn; stream its events as
        :meth:`send_message` does: :meth:`run_turn` with a
        :class:`~agentkit.planning.approvals.Decision`, which the planner reads as that value
        (never as words). *args* replaces the planned arguments of that one call (validated
        against the tool's schema first: an invalid edit raises
        :class:`InvalidApprovalArgsError` and runs nothing).

        Exactly once, whoever answers first: the decision is checked before anything is
        written, waits for a turn in progress on the conversation (another decision,
        perhaps), is checked again under the writer lock and is consumed with the step's
        durable ``running`` point; a second decision raises :class:`ApprovalDecidedError`
        (saying what was decided and when), an unknown id :class:`ApprovalNotFoundError`."""
        chosen = Decision(
            approval_id, decision, source, dict(args) if args is not None else None, note
        )
        return self.run_turn(conversation_id, chosen)

    def decide(
        self,
        conversation_id: str,
        approval_id: str,
        decision: Literal["approve", "reject"],
        args: Mapping[str, Any] | None = None,
        note: str = "",
        *,
        source: DecisionSource = "python",
    ) -> TurnResult:
        """:meth:`adecide`, synchronously (as :meth:`send` is to :meth:`send_message`)."""

        events = self.adecide(conversation_id, approval_id, decision, args, note, source=source)
        return self.loop.run(_until_result(events))

    def turn_running(self, conversation_id: str) -> bool:
        """Whether a turn (or its memory upkeep) of the conversation is running in this
        process now (another process's turn shows as busy when this one sends)."""
        check_id(conversation_id, "conversation")
        key = self._key(conversation_id)
        return self.pool.turns.is_running(self.id, conversation_id) or (
            self.runtime.upkeep.pending(key)
        )

    async def cancel(self, conversation_id: str) -> bool:
        """Ask the running turn of a conversation to stop; False when none is running.

        A chat turn stops its session's reply; a planner turn stops at its next safe point
        (an in-flight model call is interrupted; a running tool finishes first)."""
        running = self.pool.turns.running(self.id, check_id(conversation_id, "conversation"))
        if running is None:
            return False
        await running.cancel()
        return True

    async def await_upkeep(self, conversation_id: str) -> CompressionEvent | None:
        """Wait for the memory upkeep the conversation's last turn left running after its
        ``result`` (TaskState update, compression; at most ``compression.wait_seconds``,
        then it is cancelled); its ``compression`` event, or None (nothing to do, nothing
        compressed, or cancelled)."""
        return await self.runtime.upkeep.wait(self._key(conversation_id))

    def wait_upkeep(self, conversation_id: str) -> CompressionEvent | None:
        """:meth:`await_upkeep`, synchronously (on the agent's loop, as :meth:`send`)."""
        return self.loop.run(self.await_upkeep(conversation_id))

    async def aclose(self) -> None:
        """Close every live session (and its process), the model, the tools and memory."""
        await self.runtime.aclose()

    # -- synchronous helpers (scripts, notebooks) -------------------------------------------

    def send(self, text: str, conversation_id: str | None = None) -> TurnResult:
        """:meth:`send_message`, synchronously: run the turn and return all its events.

        Runs on the agent's own background loop, so live sessions survive between calls
        (the second message is scenario B) and it works inside Jupyter's running loop.
        """

        return self.loop.run(_until_result(self.send_message(conversation_id, text)))

    @property
    def loop(self) -> BackgroundLoop:
        """The agent's own event loop (a thread), created on first use: :meth:`send` runs
        there, and so must anything that should reach the same live sessions (widgets)."""
        if self._loop is None:
            self._loop = BackgroundLoop()
        return self._loop

    def close(self) -> None:
        """Close live sessions and the background loop (synchronous counterpart of aclose)."""
        if self._loop is not None:
            self._loop.run(self.aclose())
            self._loop.close()
            self._loop = None
        self.runtime.close_resources()

    def __enter__(self) -> Agent:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
