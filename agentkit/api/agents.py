"""The agents one server serves: opened once, sharing one store, one session pool, one model.

All state of a server lives in a :class:`ServedAgents` built by ``create_app`` (never at
module level), so two apps on two data roots can run in one process. Agents are opened on
first use and cached by id: consecutive chats on a conversation then find their live session
in the shared pool (scenario B); a new server on the same data root starts with an empty pool
(scenario C).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentkit.agent import Agent
from agentkit.agent_folder import AgentFolder, list_agent_ids
from agentkit.errors import ModelSpecError
from agentkit.ids import check_id
from agentkit.models.base import ChatModel, SessionBackend
from agentkit.models.spec import create_model, parse_model_spec, resolve_model_spec
from agentkit.runtime import AgentRuntime
from agentkit.sessions import SessionPool
from agentkit.store import ConversationKey
from agentkit.store.choice import open_stores
from agentkit.store.turn_events import InMemoryTurnEvents, TurnEvents

__all__ = ["ServedAgents"]

Backend = ChatModel | SessionBackend


class ServedAgents:
    def __init__(
        self,
        data_dir: Path,
        model: Backend | str | None = None,
        store: str | None = None,
        *,
        workers: int = 1,
    ) -> None:
        self.data_dir = data_dir
        # the file store under data_dir, or the stores a postgresql:// URL names (store,
        # else $AGENTKIT_STORE): conversations and memory then live there, agent folders here
        self._stores = open_stores(store, data_dir, processes=workers)
        self.store = self._stores.conversations
        #: running turns' events and cancels: this process's, or every worker's and replica's
        #: (the file store's files under several workers, PostgreSQL)
        self.events: TurnEvents = self._stores.events or InMemoryTurnEvents()
        self.events.on_cancel(self._cancel_here)
        self.pool = SessionPool()
        self._override = model
        self._agents: dict[str, Agent] = {}
        self._models: dict[str, Backend] = {}
        self._opening = asyncio.Lock()

    def ids(self) -> list[str]:
        return list_agent_ids(self.data_dir)

    def folder(self, agent_id: str) -> AgentFolder:
        """The agent's folder (config re-read), without opening its conversations."""
        return AgentFolder.load(self.data_dir, check_id(agent_id, "agent"))

    def _model_for(self, folder: AgentFolder) -> Backend | str | None:
        """One backend per distinct spec, shared by the agents that name it (weights load once).

        A spec with a relative file path is relative to the agent's folder (to the working
        directory when it came from the command line), so it is keyed by that folder too. A
        spec that names no usable backend is passed on as is: the agent raises
        :class:`ModelSpecError` when a turn needs the model, and the rest of the API works.
        """
        if isinstance(self._override, ChatModel | SessionBackend):
            return self._override
        spec = resolve_model_spec(self._override, folder.config.model)
        base_dir = folder.path if self._override is None else None
        try:
            parsed = parse_model_spec(spec)
            relative = (
                bool(parsed.argument) and not Path(parsed.argument).expanduser().is_absolute()
            )
            key = f"{folder.path}|{spec}" if relative and base_dir else spec
            model = self._models.get(key)
            if model is None:
                model = self._models[key] = create_model(spec, base_dir=base_dir)
        except ModelSpecError:
            return spec
        return model

    async def get(self, agent_id: str) -> Agent:
        """The served agent; opening it the first time recovers its conversations."""
        check_id(agent_id, "agent")
        agent = self._agents.get(agent_id)
        if agent is not None:
            return agent
        async with self._opening:
            agent = self._agents.get(agent_id)
            if agent is None:
                folder = AgentFolder.load(self.data_dir, agent_id)
                self.store.recover(folder.agent_id)
                agent = Agent(
                    AgentRuntime(
                        folder,
                        self.store,
                        model=self._model_for(folder),
                        pool=self.pool,
                        config_store=self._stores.config,
                    )
                )
                # its toolsets load now (an MCP server starts): a bad one fails here, not mid-turn
                await asyncio.to_thread(agent.runtime.load_tools)
                self._agents[agent_id] = agent
        return agent

    async def _cancel_here(self, key: ConversationKey) -> None:
        """A cancel asked on any replica: stop the turn if it runs in this process."""
        if self.pool.turns.is_running(key.agent_id, key.conversation_id):
            agent = await self.get(key.agent_id)
            await agent.cancel(key.conversation_id)

    async def running_elsewhere(self, key: ConversationKey) -> bool:
        """Whether the conversation's turn runs in another process (another replica)."""
        if self.pool.turns.is_running(key.agent_id, key.conversation_id):
            return False
        return await asyncio.to_thread(self.events.turn_running, key)

    async def close_upkeep(self, timeout: float) -> int:
        """Let the agents' background memory upkeep finish (at most *timeout* seconds each),
        cancelling what is left (nothing of a cancelled one is written); how many were."""
        cancelled = 0
        for agent in self._agents.values():
            cancelled += await agent.runtime.upkeep.close(timeout)
        return cancelled

    async def aclose(self) -> None:
        """Close every live session, and each agent's model and memory store."""
        for agent in self._agents.values():
            await agent.aclose()  # closing a shared model or the shared pool twice is harmless
        await self.pool.close_all()
        self._agents.clear()
        self._models.clear()
        self._stores.close()
