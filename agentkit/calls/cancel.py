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
    """Whether the user asked the turn to stop, and the model call a cancel interrupts.

    A call is awaited in the turn's own task (no task per call: a streamed reply awaits one
    per piece); a cancel interrupts it by cancelling that task while, and only while, it
    awaits the call — the cancellation is taken back (``Task.uncancel``) and raised as
    :class:`TurnCancelledError`. A cancellation from outside the turn propagates as before."""

    def __init__(self) -> None:
        self.requested = False
        self._task: asyncio.Task[Any] | None = None  # the task awaiting a call, while it does
        self._interrupted = False

    def check(self) -> None:
        if self.requested:
            raise TurnCancelledError("cancelled by the user")

    def cancel(self) -> None:
        """Ask the turn to stop (safe from any thread): an in-flight call is interrupted."""
        self.requested = True
        task = self._task
        if task is not None and not task.done():
            task.get_loop().call_soon_threadsafe(self._interrupt, task)

    def _interrupt(self, task: asyncio.Task[Any]) -> None:
        # on the loop: the task still awaits the call it was awaiting when cancel() ran?
        if self._task is task and not self._interrupted:
            self._interrupted = True
            task.cancel()

    async def run(self, awaitable: Awaitable[T]) -> T:
        """Await *awaitable*, so that :meth:`cancel` interrupts it (a cancellation of the
        whole turn from outside still propagates as CancelledError)."""
        self.check()
        task = asyncio.current_task()
        self._task, self._interrupted = task, False
        try:
            result = await awaitable
        except asyncio.CancelledError:
            if self._interrupted and task is not None and task.uncancel() == 0:
                raise TurnCancelledError("cancelled by the user") from None
            raise
        finally:
            self._task = None
        if self._interrupted and task is not None:
            task.uncancel()  # the call swallowed the interruption: the next check() stops
        return result
