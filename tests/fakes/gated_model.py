"""A reply that waits at a gate the test opens: a turn held mid-reply on demand.

:class:`Gate` is not a model: its :meth:`Gate.stream` is a model function for
:class:`~agentkit.FunctionModel` (``Gate().model`` is one built on it, or call it from a
function of your own for the purposes that should wait). It streams ``before``, then waits
until the test thread calls :meth:`Gate.open_gate` (the server's loop runs in another thread,
so the gate is an ``asyncio.Event`` set through ``call_soon_threadsafe``; parked replies cost
nothing while they wait), then streams ``after`` and ends. ``waiting`` counts the replies parked
at the gate, ``parked`` is set once one has parked. No timing is involved: a test decides when
each turn may go on.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

from agentkit import FunctionModel, ModelRequest


class Gate:
    """A gate for model replies; :attr:`model` is a function model whose every reply waits at it."""

    def __init__(self, before: str = "first ", after: tuple[str, ...] = ("second ", "third")):
        self.before = before
        self.after = after
        #: replies parked at the gate now
        self.waiting = 0
        #: replies started through the gate
        self.calls = 0
        #: set (for the test thread) once a reply has parked at the gate
        self.parked = threading.Event()
        self.model = FunctionModel(self.stream, name="gated")
        self._open = False
        self._event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def open_gate(self) -> None:
        """Let every parked and every later reply go on (callable from any thread)."""
        self._open = True
        if self._loop is not None and self._event is not None:
            self._loop.call_soon_threadsafe(self._event.set)

    @property
    def reply(self) -> str:
        """The whole text of a reply that went through the gate."""
        return self.before + "".join(self.after)

    async def stream(self, request: ModelRequest) -> AsyncIterator[str]:
        """A model function: ``before``, the wait at the gate, then ``after``."""
        self.calls += 1
        yield self.before
        if self._event is None:
            self._event = asyncio.Event()  # the event first: open_gate reads _loop after _open
            self._loop = asyncio.get_running_loop()
        self.waiting += 1
        self.parked.set()
        try:
            if not self._open:
                await self._event.wait()
        finally:
            self.waiting -= 1
        for piece in self.after:
            yield piece
