"""One HTTP connection pool per model endpoint, shared by the runs that go at once.

With ``--concurrency N`` a process runs N runs on one event loop; each run opens its own agent
and so its own model. For ``openai:`` specs :class:`EndpointPools` gives every such model the
same transport for the same base URL (and key): one pool of up to N keep-alive connections,
instead of a client, a TLS context and fresh connections per run. A run closing its model
leaves the shared transport open; the pools are closed once, when the batch of runs ends.
Other backends are created as usual (``create_model``).

An endpoint's pool is split into shards of about :data:`SHARD` connections, and a new model
takes the shard that has the fewest models open: httpcore's pool does work proportional to
its connections squared on every request and response (it re-checks each connection), which
at 64 connections costs more CPU than the runs themselves; eight shards of eight do not.

A connection goes back to its pool only when its response was read to the end. The client
stops reading at the stream's ``data: [DONE]``, which leaves the body's last bytes (the blank
line, the chunked encoding's final chunk) unread, so every call would open a new connection:
a response closed early is drained for up to 50 ms first (those bytes have usually arrived
with ``[DONE]``), and the connection is kept.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import AsyncIterator
from types import TracebackType

import httpx

from agentkit.models.base import ChatModel
from agentkit.models.openai import DEFAULT_BASE_URL, OpenAIModel

__all__ = ["SHARD", "EndpointPools"]

#: connections per shard of an endpoint's pool (see the module docstring)
SHARD = 8


_DRAIN_SECONDS = 0.05


class _Draining(httpx.AsyncByteStream):
    """A response body that, closed before its end, reads the rest briefly (see above)."""

    def __init__(self, inner: httpx.AsyncByteStream) -> None:
        self.inner = inner
        self._chunks: AsyncIterator[bytes] | None = None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        self._chunks = aiter(self.inner)
        async for chunk in self._chunks:
            yield chunk

    async def aclose(self) -> None:
        chunks = self._chunks
        if chunks is not None:
            try:
                async with asyncio.timeout(_DRAIN_SECONDS):
                    async for _ in chunks:
                        pass
            except (TimeoutError, httpx.TransportError):
                pass  # still streaming, or broken: the connection is closed, not kept
        await self.inner.aclose()


class _Shard:
    """One part of an endpoint's pool, and how many open models use it."""

    def __init__(self, connections: int, tls: ssl.SSLContext) -> None:
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        self.transport = httpx.AsyncHTTPTransport(verify=tls, limits=limits)
        self.users = 0


class _Shared(httpx.AsyncBaseTransport):
    """A shard as one model's transport: the model closing it leaves it open for the others
    (the pools' owner closes it)."""

    def __init__(self, shard: _Shard) -> None:
        self.shard = shard
        self.closed = False
        shard.users += 1

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.shard.transport.handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_Draining(response.stream),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        """The model is done with it: one user fewer (the shard itself stays open)."""
        if not self.closed:
            self.closed = True
            self.shard.users -= 1


class EndpointPools:
    """The connection pools of one event loop's runs (*connections*: how many run at once),
    by (base URL, API key)."""

    def __init__(self, connections: int) -> None:
        self.connections = max(1, connections)
        self._pools: dict[tuple[str, str], list[_Shard]] = {}
        self._tls: ssl.SSLContext | None = None  # made once (loading the CA store costs ~20 ms)

    def openai_model(self, model: str) -> ChatModel:
        """``openai:MODEL`` as :meth:`OpenAIModel.from_env` makes it, on the shared pool."""
        base_url = (
            os.environ.get("AGENTKIT_OPENAI_BASE_URL")
            or os.environ.get("OPENAI_BASE_URL")
            or DEFAULT_BASE_URL
        ).rstrip("/")
        api_key = os.environ.get("OPENAI_API_KEY") or None
        key = (base_url, api_key or "")
        shards = self._pools.get(key)
        if shards is None:
            count = -(-self.connections // SHARD)
            size = -(-self.connections // count)
            if self._tls is None:
                self._tls = httpx.create_ssl_context()
            shards = self._pools[key] = [_Shard(size, self._tls) for _ in range(count)]
        shard = min(shards, key=lambda item: item.users)
        return OpenAIModel(model, base_url=base_url, api_key=api_key, transport=_Shared(shard))

    def __len__(self) -> int:
        """How many endpoints have a pool."""
        return len(self._pools)

    async def aclose(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        for shards in pools:
            for shard in shards:
                await shard.transport.aclose()

    async def __aenter__(self) -> EndpointPools:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
