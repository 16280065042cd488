"""Server-sent events, written straight to the ASGI server: the framing of a turn's events
and the one loop that streams them.

Only this module knows SSE framing. A frame is ``id: {messageId}:{n}``, ``event: <type>``
and ``data: <JSON>``, lines ended by CRLF and the frame by an empty line (the bytes
sse-starlette wrote before it, so clients see no change). :func:`stream` writes a response's
frames as they come, with no task group and nothing per frame but the ``send`` itself:

- a client that goes away stops the stream at once: one small task per stream waits for its
  ``http.disconnect``, and wakes every few seconds to send a keep-alive comment
  (``: ping - <time>``) every :data:`PING_SECONDS` and to drop a client that has not read
  for :data:`SEND_TIMEOUT` (one send blocked that long; the ASGI server closes it);
- on server shutdown a stream goes on until the ASGI server stops waiting for it (uvicorn's
  graceful timeout: ``agentkit serve`` waits 30 s), then ends cleanly.

Ending a stream never ends the turn behind it: the turn runs in its own task
(:mod:`agentkit.api.turns`), and the frames' generator, closed here, is what lets it go.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

__all__ = [
    "HEADERS",
    "PING_SECONDS",
    "SEND_TIMEOUT",
    "SseResponse",
    "frame",
    "stream",
]

#: seconds a frozen client may block one write before the stream is dropped (the turn itself
#: is unaffected); and the keep-alive comment interval
SEND_TIMEOUT = 60.0
PING_SECONDS = 15.0
#: how often a stream's watcher wakes to ping and to look for a frozen client
_TICK = 5.0

#: the response head of every stream (what sse-starlette sent, in its order)
HEADERS: list[tuple[bytes, bytes]] = [
    (b"cache-control", b"no-store"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
    (b"content-type", b"text/event-stream; charset=utf-8"),
]
_START: Message = {"type": "http.response.start", "status": 200, "headers": HEADERS}
_END: Message = {"type": "http.response.body", "body": b"", "more_body": False}
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def frame(event: str, data: str, event_id: str) -> bytes:
    """One SSE frame. Line breaks are dropped from *event* and *id*, and split *data* into
    several ``data:`` lines (JSON has none: the common case costs one format)."""
    if "\r" in event_id or "\n" in event_id:
        event_id = _LINE_BREAK.sub("", event_id)
    if "\r" in event or "\n" in event:
        event = _LINE_BREAK.sub("", event)
    if "\r" in data or "\n" in data:
        data = "\r\n".join(f"data: {line}" for line in _LINE_BREAK.split(data))
        return f"id: {event_id}\r\nevent: {event}\r\n{data}\r\n\r\n".encode()
    return f"id: {event_id}\r\nevent: {event}\r\ndata: {data}\r\n\r\n".encode()


def _ping() -> bytes:
    return f": ping - {datetime.now(UTC)}\r\n\r\n".encode()


class _Stream:
    """One response's writer task, and the task that watches its client."""

    __slots__ = ("ended", "sending", "sent", "task")

    def __init__(self) -> None:
        self.task = asyncio.current_task()
        self.sending = False  # the writer waits in send (the client does not read)
        self.sent = 0
        self.ended = ""  # why the writer was stopped: "client gone", "frozen"

    def stop(self, why: str) -> None:
        self.ended = why
        if self.task is not None:
            self.task.cancel()

    async def watch(self, receive: Receive, send: Send) -> None:
        """Stop the writer when the client leaves or stops reading; ping while it stays.
        Wakes every :data:`_TICK` seconds, never per frame."""
        waited = 0.0  # seconds since the last ping
        stalled = 0.0  # seconds the writer has been stuck in one send
        seen = -1
        while True:
            try:
                async with asyncio.timeout(_TICK):
                    message = await receive()
            except TimeoutError:
                waited += _TICK
                stalled = stalled + _TICK if self.sending and self.sent == seen else 0.0
                seen = self.sent
                if stalled >= SEND_TIMEOUT:
                    self.stop("frozen")
                    return
                if waited >= PING_SECONDS and not self.sending:
                    waited = 0.0
                    try:
                        async with asyncio.timeout(SEND_TIMEOUT):
                            await send(
                                {"type": "http.response.body", "body": _ping(), "more_body": True}
                            )
                    except TimeoutError:
                        self.stop("frozen")
                        return
                continue
            if message["type"] == "http.disconnect":
                self.stop("client gone")
                return


async def stream(frames: AsyncIterator[bytes], receive: Receive, send: Send) -> None:
    """Write *frames* as one ``text/event-stream`` response; closes *frames* whatever
    happens (see the module docstring for what ends a stream early)."""
    state = _Stream()
    watcher: asyncio.Task[None] | None = None
    try:
        await send(_START)
        watcher = asyncio.create_task(state.watch(receive, send), name="sse client")
        async for chunk in frames:
            state.sending = True
            try:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except OSError:  # the client is gone (ASGI 2.4 servers say so)
                return
            state.sending = False
            state.sent += 1
        await send(_END)
    except asyncio.CancelledError:  # by the watcher, or by the server shutting down
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()  # handled: this stream ends here
        if not state.ended:  # the server stopped waiting: end the stream cleanly
            with contextlib.suppress(Exception):
                await send(_END)
    finally:
        if watcher is not None:  # before the next await: it never stops a finished stream
            watcher.cancel()
        await _close(frames)


async def _close(frames: AsyncIterator[bytes]) -> None:
    aclose = getattr(frames, "aclose", None)
    if aclose is not None:
        await aclose()


class SseResponse(Response):
    """A ``text/event-stream`` response of *frames* for a FastAPI route (same bytes as
    :func:`stream` writes for the plain routes)."""

    media_type = "text/event-stream"

    def __init__(self, frames: AsyncIterator[bytes], status_code: int = 200) -> None:
        self.frames = frames
        self.status_code = status_code  # (its default is what FastAPI documents)
        self.background = None
        self.raw_headers = list(HEADERS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await stream(self.frames, receive, send)
        if self.background is not None:
            await self.background()
