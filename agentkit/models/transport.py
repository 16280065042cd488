"""The HTTP transport of the OpenAI-compatible backend: pooled connections, retry schedule,
retry counting.

Three things every user of :class:`~agentkit.models.openai.OpenAIModel` needs once many calls
go at once (a server with concurrent turns, a sweep with ``--concurrency``), kept here so that
the backend has them whoever creates it:

* **a sharded pool** (:class:`PooledTransport`): httpcore's connection pool re-checks every
  connection for every queued request on each request and response, work proportional to its
  connections squared, which at 64 connections costs more CPU than the calls themselves. A
  :class:`PooledTransport` is shards of up to :data:`SHARD` connections; a request goes to the
  shard with the fewest requests in flight, and a new shard is opened only when every shard
  is full. One TLS context is made per process (loading the CA store costs ~20 ms), not one
  per model; a proxy the environment names is used as ``httpx.AsyncClient`` would
  (:func:`env_proxy`).
* **the retry schedule** (:func:`retry_delay`): as the official OpenAI and Anthropic clients
  do: ``Retry-After`` (or ``retry-after-ms``) when the server sends it, else
  ``min(backoff * 2**attempt, 8 s)`` shortened by up to 25 % at random (jitter, so that many
  clients refused together do not come back together).
* **counting** (:func:`counting_transport`): the retries made, and the requests that failed
  for good, while a block runs (a sweep's run), noted by the backend (:func:`note_retry`,
  :func:`note_failure`) through a context variable, so every model of the run counts -- its
  own, a simulated user's -- and concurrent runs on one event loop do not mix (each is an
  asyncio task with its own context). A caller that recovers from a failed call (a planner
  falling back) does not hide it from the count.

A connection is reused only when its response was read to the end; the backend reads a
stream past ``data: [DONE]`` for that (see :mod:`agentkit.models.openai`).
"""

from __future__ import annotations

import contextlib
import random
import ssl
import urllib.request
from collections.abc import AsyncIterator, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from types import TracebackType
from urllib.parse import urlsplit

import httpx

__all__ = [
    "MAX_BACKOFF",
    "SHARD",
    "PooledTransport",
    "SharedTransport",
    "TransportCount",
    "counting_transport",
    "env_proxy",
    "note_failure",
    "note_retry",
    "retry_delay",
]

#: connections per shard of a pool (see the module docstring)
SHARD = 4
#: the longest pause of the backoff schedule (seconds), as the official clients cap it
MAX_BACKOFF = 8.0


@cache
def _tls() -> ssl.SSLContext:
    """The process's default TLS context (certifi's CA store, as httpx makes it)."""
    return httpx.create_ssl_context()


class _Shard:
    """Up to :data:`SHARD` connections, and how many requests are in flight on them."""

    __slots__ = ("in_flight", "transport")

    def __init__(self, connections: int, verify: ssl.SSLContext | bool, proxy: str | None) -> None:
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        self.transport = httpx.AsyncHTTPTransport(verify=verify, limits=limits, proxy=proxy)
        self.in_flight = 0


class _Tracked(httpx.AsyncByteStream):
    """A response body that gives its shard's slot back when it is closed."""

    __slots__ = ("_inner", "_shard")

    def __init__(self, inner: httpx.AsyncByteStream, shard: _Shard) -> None:
        self._inner: httpx.AsyncByteStream | None = inner
        self._shard = shard

    async def __aiter__(self) -> AsyncIterator[bytes]:
        assert self._inner is not None, "the response body is closed"
        async for chunk in self._inner:
            yield chunk

    async def aclose(self) -> None:
        inner, self._inner = self._inner, None
        if inner is not None:
            self._shard.in_flight -= 1
            await inner.aclose()


class PooledTransport(httpx.AsyncBaseTransport):
    """Keep-alive connections to any host, in shards of :data:`SHARD` (see the module
    docstring); up to *connections* in all.

    :meth:`share` hands a model a view that does not close the pool, for pools that outlive
    the models using them (a sweep's runs on one event loop)."""

    def __init__(
        self,
        connections: int = 100,
        *,
        verify: ssl.SSLContext | bool = True,
        proxy: str | None = None,
    ) -> None:
        self.connections = max(1, connections)
        self.proxy = proxy
        self._verify = _tls() if verify is True else verify
        self._shards: list[_Shard] = []
        self._closed = False

    @property
    def shards(self) -> int:
        """How many shards are open."""
        return len(self._shards)

    def _shard(self) -> _Shard:
        best = min(self._shards, key=_load, default=None)
        opened = len(self._shards) * SHARD
        if (best is None or best.in_flight >= SHARD) and opened < self.connections:
            best = _Shard(min(SHARD, self.connections - opened), self._verify, self.proxy)
            self._shards.append(best)
        assert best is not None
        return best

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._closed:
            raise RuntimeError("the connection pool is closed")
        shard = self._shard()
        shard.in_flight += 1
        try:
            response = await shard.transport.handle_async_request(request)
        except BaseException:
            shard.in_flight -= 1
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _Tracked(response.stream, shard)
        return response

    def share(self) -> SharedTransport:
        """This pool as one model's transport: closing it leaves the pool open."""
        return SharedTransport(self)

    async def aclose(self) -> None:
        self._closed = True
        shards, self._shards = self._shards, []
        for shard in shards:
            await shard.transport.aclose()

    async def __aenter__(self) -> PooledTransport:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None = None,
        error: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        await self.aclose()


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for *url* (``HTTPS_PROXY``, ``HTTP_PROXY``,
    ``ALL_PROXY``, minus ``NO_PROXY``), as an ``httpx.AsyncClient`` would use; None: direct."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    chosen = proxies.get(parts.scheme) or proxies.get("all")
    if not chosen or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return chosen if "://" in chosen else f"http://{chosen}"


def _load(shard: _Shard) -> int:
    return shard.in_flight


class SharedTransport(httpx.AsyncBaseTransport):
    """A :class:`PooledTransport` lent to one model: the model closing it leaves the pool
    open for the others (the pool's owner closes it)."""

    def __init__(self, pool: PooledTransport) -> None:
        self.pool = pool

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self.pool.handle_async_request(request)

    async def aclose(self) -> None:
        """The model is done with the pool (which stays open)."""


# -- the retry schedule -----------------------------------------------------------------------


def retry_delay(
    headers: Mapping[str, str] | None, attempt: int, backoff: float, *, cap: float
) -> float:
    """Seconds before retry number *attempt* + 1 (see the module docstring); a server's
    ``Retry-After`` is honoured up to *cap*."""
    if headers is not None:
        asked = _retry_after(headers)
        if asked is not None:
            return min(asked, cap)
    delay = min(backoff * 2.0**attempt, MAX_BACKOFF)
    return delay * (1 - 0.25 * random.random())  # noqa: S311  # jitter, not a secret


def _retry_after(headers: Mapping[str, str]) -> float | None:
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            value = float(headers[name]) * scale
        except (KeyError, ValueError):  # absent, or an HTTP date: our own schedule
            continue
        return max(value, 0.0)
    return None


# -- counting retries and failures -------------------------------------------------------------


@dataclass
class TransportCount:
    """What the transport went through while a :func:`counting_transport` block ran: the
    requests sent again after a transient fault, and the requests that failed for good
    (exhausted retries, a fault that is not retried: the endpoint down, a 401, a read
    timeout, a broken stream), with the last failure's message."""

    retries: int = 0
    failures: int = 0
    last_failure: str = ""


_COUNT: ContextVar[TransportCount | None] = ContextVar("agentkit_transport", default=None)


@contextlib.contextmanager
def counting_transport() -> Iterator[TransportCount]:
    """Count the transport retries and failures in this context (and the tasks it starts)."""
    count = TransportCount()
    token = _COUNT.set(count)
    try:
        yield count
    finally:
        _COUNT.reset(token)


def note_retry() -> None:
    """One request is sent again: counted by the enclosing :func:`counting_transport`."""
    count = _COUNT.get()
    if count is not None:
        count.retries += 1


def note_failure(message: str) -> None:
    """One request failed for good (*message*: why): counted by :func:`counting_transport`."""
    count = _COUNT.get()
    if count is not None:
        count.failures += 1
        count.last_failure = message
