"""The cancel switch of one turn: whether the user asked it to stop, and the model call a
cancel interrupts (a running tool is never interrupted: a write is never cut in half)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from agentkit.calls.errors import TurnCancelledError

__all__ = ["CancelScope"]

T = TypeVar("T")


class CancelScope:
    """Whether the user asked the turn to stop, and the model call a cancel interrupts."""

    def __init__(self) -> None:
        self.requested = False
        self._inflight: asyncio.Future[Any] | None = None

    def check(self) -> None:
        if self.requested:
            raise TurnCancelledError("cancelled by the user")

    def cancel(self) -> None:
        """Ask the turn to stop (safe from any thread): an in-flight call is interrupted."""
        self.requested = True
        inflight = self._inflight
        if inflight is not None and not inflight.done():
            inflight.get_loop().call_soon_threadsafe(inflight.cancel)

    async def run(self, awaitable: Awaitable[T]) -> T:
        """Await *awaitable* as a task of its own, so that :meth:`cancel` interrupts it (a
        cancellation of the whole turn from outside still propagates as CancelledError)."""
        self.check()
        task = asyncio.ensure_future(awaitable)
        self._inflight = task
        try:
            return await task
        except asyncio.CancelledError:
            if self.requested and task.cancelled():
                raise TurnCancelledError("cancelled by the user") from None
            raise
        finally:
            self._inflight = None
