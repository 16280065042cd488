"""One engine interface over one per-agent runtime, and one entry for a turn's input.

An engine runs one turn of a conversation and streams its events: ``session`` first, ``result``
last, failures as ``error`` events (never an exception out of the stream once ``session`` was
sent). Both engines implement :class:`Engine` — ``chat`` (:class:`agentkit.chat.ChatEngine`)
and ``planner`` (:class:`agentkit.planning.PlannerEngine`), named by the agent's config
(:data:`ENGINES`) — over a turn's :class:`~agentkit.planning.state.TurnContext`, which the
:class:`AgentRuntime` builds (the one place: :meth:`AgentRuntime.context`) from what every turn
of the agent shares: its folder and config, the conversation store, the session pool (live
sessions and the running turns), memory (the ``system_config`` store), background upkeep, its
tools and its model. Both end a turn with the context's one commit
(:meth:`~agentkit.planning.state.TurnContext.commit`: answer, status and checkpoint in one
durable write) and its ``result`` (:meth:`~agentkit.planning.state.TurnContext.result`).

**One entry.** A turn's input is one typed value (:data:`~agentkit.planning.state.TurnInput`):
a :class:`~agentkit.planning.state.UserMessage` or a
:class:`~agentkit.planning.approvals.Decision` on the conversation's pending approval, whichever
edge it comes from (``Agent.send_message`` and ``Agent.adecide`` build one). It goes through
:meth:`AgentRuntime.run_turn`: checked before anything is written, admitted, given its context,
run by the engine, followed by the memory upkeep's ``compression`` event. A decision stays a
decision all the way to the planner; it is never turned into words.

**One admission.** Every turn — a message, a decision on an approval, background memory
upkeep; from Python, HTTP, ACP, a widget or eval — enters a conversation through
:meth:`AgentRuntime.admit`: wait out the conversation's background upkeep (bounded), take the
store's writer lock (across processes), register the running turn (in this process); a busy
conversation raises :class:`~agentkit.errors.ConversationBusyError` (HTTP 409) unless the
caller asked to wait for it, and then only after its wait.

The tools are loaded when the agent is opened (:meth:`AgentRuntime.load_tools`: a toolset
that does not load is a config error then, never mid-turn); the model is made on first use,
so opening an agent loads no weights. Both are closed with the runtime.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from pathlib import Path
from typing import Protocol

from agentkit.agent_folder import AgentFolder
from agentkit.chat import ChatEngine
from agentkit.config import AgentConfig
from agentkit.errors import (
    ApprovalNotFoundError,
    ConversationBusyError,
    ConversationNotFoundError,
    UsageError,
)
from agentkit.events import AgentEvent
from agentkit.ids import check_id
from agentkit.layout import DataLayout
from agentkit.memory import MemoryRepository
from agentkit.models._requests import check_model_requests
from agentkit.models.base import ChatModel, SessionBackend
from agentkit.models.spec import create_model, resolve_model_spec
from agentkit.planning import approvals
from agentkit.planning.approvals import Decision
from agentkit.planning.background import ADMIT_SECONDS, BackgroundUpkeep
from agentkit.planning.state import TurnContext, TurnInput, UserMessage
from agentkit.planning.turn import PlannerEngine
from agentkit.sessions import RunningTurn, SessionPool, TurnRegistry
from agentkit.store import ConfigStore, ConversationKey, ConversationStore, SqliteConfigStore
from agentkit.telemetry import Telemetry
from agentkit.tools import AgentTools, ToolRegistry

__all__ = [
    "DECISION_WAIT_SECONDS",
    "ENGINES",
    "MAX_MESSAGE_LENGTH",
    "AgentRuntime",
    "Engine",
    "checked_input",
    "open_tools",
]


#: how often an admission that waits asks again for a busy conversation
_RETRY_SECONDS = 0.01
#: how long a decision waits for a turn in progress on its conversation (e.g. the decision
#: that won), before it is refused as busy
DECISION_WAIT_SECONDS = 30.0
MAX_MESSAGE_LENGTH = 32_000


class Engine(Protocol):
    """Runs one admitted turn over its context, and ends it with the context's one commit
    (:meth:`TurnContext.commit`: the answer, the conversation's status and the turn's
    checkpoint in one durable write) and ``result`` (:meth:`TurnContext.result`)."""

    def run_turn(self, ctx: TurnContext) -> AsyncIterator[AgentEvent]:
        """The turn's events (``session`` first, ``result`` last)."""
        ...


#: the engines by the name an agent's ``config.json`` gives (``engine``)
ENGINES: Mapping[str, Engine] = {"chat": ChatEngine(), "planner": PlannerEngine()}


def checked_input(value: TurnInput) -> TurnInput:
    """*value* as a turn takes it, or the :class:`~agentkit.errors.UsageError` (or
    :class:`~agentkit.errors.InvalidIdError`) that refuses it before anything is written: a
    message with some text and not too much (its surrounding blanks dropped), a decision that
    approves or rejects an approval by a well-formed id."""
    if isinstance(value, Decision):
        if value.decision not in ("approve", "reject"):
            raise UsageError(f"a decision is 'approve' or 'reject', not {value.decision!r}")
        check_id(value.approval_id, "approval")
        return value
    text = value.text.strip()
    if not text:
        raise UsageError("a message needs some text")
    if len(text) > MAX_MESSAGE_LENGTH:
        raise UsageError(f"a message has at most {MAX_MESSAGE_LENGTH} characters")
    return value if text == value.text else UserMessage(text)


def open_tools(
    folder: AgentFolder, resources: ExitStack, extra: Iterable[object] = ()
) -> AgentTools:
    """The agent's tools: its config's toolsets plus *extra* (tools given in Python); what
    they hold open (a database, a server process) is closed with *resources*. The one place
    an agent's tool registry is built."""
    return resources.enter_context(AgentTools.load(folder, extra))


class AgentRuntime:
    """What every turn of one agent runs on (see the module docstring)."""

    def __init__(
        self,
        folder: AgentFolder,
        store: ConversationStore,
        *,
        model: ChatModel | SessionBackend | str | None = None,
        pool: SessionPool | None = None,
        config_store: ConfigStore | None = None,
        tools: Iterable[object] = (),
    ) -> None:
        self.folder = folder
        self.store = store
        self.pool = pool if pool is not None else SessionPool()
        self._model_choice = model
        self._model: ChatModel | SessionBackend | None = None
        self._config_store = config_store
        self._owned_config_store: SqliteConfigStore | None = None
        self._memory: MemoryRepository | None = None
        self._extra_tools = tuple(tools)
        self._toolbox: AgentTools | None = None
        self._resources = ExitStack()
        #: every turn's spans (OpenTelemetry GenAI), kept for the last turns
        self.telemetry = Telemetry(agent_id=folder.agent_id, agent_name=folder.config.name)
        #: memory upkeep (TaskState update, compression) running after a turn's ``result``
        self.upkeep = BackgroundUpkeep()

    @property
    def agent_id(self) -> str:
        return self.folder.agent_id

    @property
    def config(self) -> AgentConfig:
        return self.folder.config

    @property
    def turns(self) -> TurnRegistry:
        """The running turns (shared by every agent of the same session pool)."""
        return self.pool.turns

    @asynccontextmanager
    async def admit(
        self, key: ConversationKey, *, wait: float = 0.0, upkeep: bool = True
    ) -> AsyncIterator[RunningTurn]:
        """Admit one turn of conversation *key* for the duration of the block (see the module
        docstring): wait for its background upkeep (*upkeep*; the upkeep job's own admission
        does not), then take its writer lock and register it. Busy: raises
        :class:`~agentkit.errors.ConversationBusyError` at once, or after asking again for up
        to *wait* seconds (a decision waits for the turn ahead of it)."""
        if upkeep:
            await self.upkeep.wait(key)
        deadline = time.monotonic() + wait
        while True:
            stack = AsyncExitStack()
            try:
                running = await stack.enter_async_context(
                    self.pool.turn(key.agent_id, key.conversation_id)
                )
                # another process's turn: busy at once; taken in a store thread (the lease
                # is the turn's, see ConversationStore.ahold)
                await stack.enter_async_context(self.store.ahold(key, timeout=0))
            except ConversationBusyError:
                await stack.aclose()
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(_RETRY_SECONDS)
                continue
            except BaseException:
                await stack.aclose()
                raise
            break
        async with stack:
            yield running

    async def run_turn(
        self, conversation_id: str, input: TurnInput
    ) -> AsyncGenerator[AgentEvent, None]:
        """Run one turn of the agent's conversation *conversation_id* on *input* — a message,
        or a decision on the conversation's pending approval — and stream its events
        (``session`` first, ``result``, then the ``compression`` event of the memory upkeep
        the turn left running, when it compressed). The one entry every edge's turn takes.

        Before anything is written (and not before the stream is read): the conversation id
        and the input are checked (:func:`checked_input`), the conversation must exist, the
        model is made (a bad spec fails here) and must be allowed to make requests; a
        decision must name the pending approval of a planner conversation (checked again
        under the writer lock, and consumed with the step's durable ``running`` point). A
        busy conversation raises :class:`~agentkit.errors.ConversationBusyError`; a decision
        first waits for the turn ahead of it (another decision, perhaps) for up to
        :data:`DECISION_WAIT_SECONDS`.
        """
        key = ConversationKey(self.agent_id, conversation_id)
        input = checked_input(input)
        if not self.store.exists(key):
            raise ConversationNotFoundError(key.agent_id, key.conversation_id)
        self.check_model()
        engine = ENGINES[self.config.engine]
        wait = 0.0
        if isinstance(input, Decision):
            self._check_decision(key, input)
            wait = DECISION_WAIT_SECONDS
        async with self.admit(key, wait=wait) as running:
            ctx = self.context(key, input, running=running)
            async for event in engine.run_turn(ctx):
                yield event
        if self.upkeep.pending(key):  # every edge sees it in the turn's stream; a caller
            compressed = await self.upkeep.wait(key)  # that stops at result does not wait
            if compressed is not None:
                yield compressed

    def check_model(self) -> None:
        """Make the model now (a bad spec fails before anything is written), and refuse a
        real one while requests are off (:mod:`agentkit.testing`)."""
        model = self.model
        if model.real_requests:
            check_model_requests(model.spec)

    def _check_decision(self, key: ConversationKey, decision: Decision) -> None:
        """Refuse a decision nothing waits for, before the turn is admitted."""
        if self.config.engine != "planner":  # a chat turn never asks for one
            raise ApprovalNotFoundError(key.conversation_id, decision.approval_id)
        stored = self.memory.load_execution_state(key.agent_id, key.conversation_id)
        flow = stored.value if stored is not None else None
        approvals.check(flow, decision, self.tools, key.conversation_id)

    def context(
        self,
        key: ConversationKey,
        input: TurnInput,
        *,
        running: RunningTurn | None = None,
    ) -> TurnContext:
        """The frozen context of an admitted turn: the one place a turn's inputs are built."""
        config = self.config
        return TurnContext(
            key=key,
            input=input,
            store=self.store,
            memory=self.memory,
            model=self.model,
            tools=self.tools,
            config=config.planner.for_model(self.model.spec),
            system_prompt=self.system_prompt(),
            agent_dir=self.folder.path,
            workdir=self.folder.files.workspace,
            max_turns=config.max_turns,
            compression=config.compression,
            telemetry=self.telemetry,
            pool=self.pool,
            upkeep=self.upkeep,
            admit_upkeep=lambda: self.admit(key, wait=ADMIT_SECONDS, upkeep=False),
            running=running,
        )

    def system_prompt(self) -> str:
        """The agent's prompt files, joined (read afresh, so an edit counts from the next
        turn)."""
        return self.folder.system_prompt()

    @property
    def model(self) -> ChatModel | SessionBackend:
        """The model backend: the one given, else ``--model``/``$AGENTKIT_MODEL``/config.json.

        Created on first use, so opening an agent never loads model weights.
        """
        if self._model is None:
            choice = self._model_choice
            if isinstance(choice, ChatModel | SessionBackend):
                self._model = choice
            else:
                spec = resolve_model_spec(choice, self.config.model)
                self._model = create_model(spec, base_dir=self.folder.path)
        return self._model

    @property
    def has_model(self) -> bool:
        """Whether the model was created (or given) yet."""
        return self._model is not None

    @property
    def memory(self) -> MemoryRepository:
        """The memory records, in the given config store or ``agentkit.db`` under the root."""
        if self._memory is None:  # one per runtime: it holds the running turn's staged state
            if self._config_store is None:
                owned = SqliteConfigStore(self.data_layout.config_db)
                self._config_store = self._owned_config_store = owned
            self._memory = MemoryRepository(self._config_store)
        return self._memory

    @property
    def data_layout(self) -> DataLayout:
        """The layout of the data root the agent folder lives under."""
        return self.folder.files.data_root

    def load_tools(self) -> AgentTools:
        """The agent's toolsets, loaded and started once (:func:`open_tools`)."""
        if self._toolbox is None:
            self._toolbox = open_tools(self.folder, self._resources, self._extra_tools)
        return self._toolbox

    @property
    def tools(self) -> ToolRegistry:
        """The agent's tools (:meth:`load_tools`)."""
        return self.load_tools().registry

    def call_records_dir(self, key: ConversationKey) -> Path | None:
        """The conversation folder that holds each turn's ``calls.jsonl``; None when the
        store keeps no files."""
        return self.store.folder(key)

    def close_with(self, close: Callable[[], object]) -> None:
        """Call *close* when the runtime's resources are closed (a store the agent opened)."""
        self._resources.callback(close)

    def close_resources(self) -> None:
        """Close the tools and the memory store this runtime opened (not the model)."""
        self._resources.close()
        self._toolbox = None
        if self._owned_config_store is not None:
            self._owned_config_store.close()
            self._config_store = self._owned_config_store = None
            self._memory = None

    async def aclose(self) -> None:
        """Wait for the memory upkeep still running (cancelling what is left past its bound),
        then close every live session (and its process), the model, the tools and memory."""
        await self.upkeep.close()
        await self.pool.close_all()
        if isinstance(self._model, ChatModel):
            await self._model.aclose()
        if self._toolbox is not None:
            await self._toolbox.aclose()  # an MCP server is stopped without blocking the loop
        self.close_resources()
