"""One engine interface over one per-agent runtime.

An engine runs one turn of a conversation and streams its events: ``session`` first, ``result``
last, failures as ``error`` events (never an exception out of the stream once ``session`` was
sent). Both engines implement :class:`Engine` — ``chat`` (:class:`agentkit.chat.ChatEngine`)
and ``planner`` (:class:`agentkit.planning.PlannerEngine`) — over a turn's
:class:`~agentkit.planning.state.TurnContext`, which the :class:`AgentRuntime` builds (the one
place: :meth:`AgentRuntime.context`) from what every turn of the agent shares: its folder and
config, the conversation store, the session pool (live sessions and the running turns),
memory (the ``system_config`` store), background upkeep, its tools and its model.

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
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from pathlib import Path
from typing import Protocol

from agentkit.agent_folder import AgentFolder
from agentkit.config import AgentConfig
from agentkit.errors import ConversationBusyError
from agentkit.events import AgentEvent
from agentkit.layout import DataLayout
from agentkit.memory import MemoryRepository
from agentkit.models.base import ChatModel, SessionBackend
from agentkit.models.spec import create_model, resolve_model_spec
from agentkit.planning.approvals import Decision
from agentkit.planning.background import ADMIT_SECONDS, BackgroundUpkeep
from agentkit.planning.state import TurnContext
from agentkit.sessions import RunningTurn, SessionPool, TurnRegistry
from agentkit.store import ConfigStore, ConversationKey, ConversationStore, SqliteConfigStore
from agentkit.telemetry import Telemetry
from agentkit.tools import AgentTools, ToolRegistry

__all__ = ["AgentRuntime", "Engine", "open_tools"]


#: how often an admission that waits asks again for a busy conversation
_RETRY_SECONDS = 0.01


class Engine(Protocol):
    """Runs one admitted turn over its context; its final commit carries the answer, the
    conversation's status and the turn's checkpoint in one durable write."""

    def run_turn(self, ctx: TurnContext) -> AsyncIterator[AgentEvent]:
        """The turn's events (``session`` first, ``result`` last)."""
        ...


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

    def context(
        self,
        key: ConversationKey,
        text: str,
        *,
        running: RunningTurn | None = None,
        decision: Decision | None = None,
    ) -> TurnContext:
        """The frozen context of an admitted turn: the one place a turn's inputs are built."""
        config = self.config
        return TurnContext(
            key=key,
            text=text,
            decision=decision,
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
