"""One HTTP connection pool per model endpoint, shared by the runs that go at once.

With ``--concurrency N`` a process runs N runs on one event loop; each run opens its own agent
and so its own model. For ``openai:`` specs :class:`EndpointPools` gives every such model the
same :class:`~agentkit.models.transport.PooledTransport` for the same base URL (and key): one
pool of up to N keep-alive connections (sharded, so that 64 of them cost no more CPU than 8),
instead of fresh connections per run. A run closing its model leaves the shared pool open; the
pools are closed once, when the batch of runs ends. Other backends are created as usual
(``create_model``).
"""

from __future__ import annotations

import os
from types import TracebackType

from agentkit.models.base import ChatModel
from agentkit.models.openai import DEFAULT_BASE_URL, OpenAIModel
from agentkit.models.transport import PooledTransport, env_proxy

__all__ = ["EndpointPools"]


class EndpointPools:
    """The connection pools of one event loop's runs (*connections*: how many run at once),
    by (base URL, API key)."""

    def __init__(self, connections: int) -> None:
        self.connections = max(1, connections)
        self._pools: dict[tuple[str, str], PooledTransport] = {}

    def openai_model(self, model: str) -> ChatModel:
        """``openai:MODEL`` as :meth:`OpenAIModel.from_env` makes it, on the shared pool."""
        base_url = (
            os.environ.get("AGENTKIT_OPENAI_BASE_URL")
            or os.environ.get("OPENAI_BASE_URL")
            or DEFAULT_BASE_URL
        ).rstrip("/")
        key = (base_url, os.environ.get("OPENAI_API_KEY") or "")
        pool = self._pools.get(key)
        if pool is None:
            proxy = env_proxy(base_url)
            pool = self._pools[key] = PooledTransport(self.connections, proxy=proxy)
        return OpenAIModel.from_env(model, transport=pool.share())

    def __len__(self) -> int:
        """How many endpoints have a pool."""
        return len(self._pools)

    async def aclose(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            await pool.aclose()

    async def __aenter__(self) -> EndpointPools:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
