"""Stdio for ``agentkit acp``: a private stdout for protocol frames, and the guarded reader.

Why: an ACP client parses our stdout as JSON-RPC, one message per line, so one stray write
(a library's banner, a C extension printing to fd 1, a ``print`` left in a tool) corrupts the
stream. :func:`claim_stdout` keeps a private duplicate of fd 1 for protocol frames and points
fd 1 and ``sys.stdout`` at stderr, so anything else that is written lands in the client's log
instead of its parser.

:class:`GuardedStdio` is the message transport the library's connection runs on (the
``send``/``receive``/``close`` shape of ``acp``'s ``Transport``): ``receive`` reads one line at
a time, never more than ``max_line`` bytes of it (a longer line is skipped to its newline and
answered with an error), puts it through :func:`~agentkit.acp_server.frames.judge`, answers
what must be answered itself, and returns only well-formed messages. ``send`` writes one
line per message in a single write, so frames never interleave.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import stat
import sys
import threading
from collections.abc import Callable
from typing import Any, BinaryIO, Final

from agentkit.acp_server.frames import Drop, Forward, Reply, judge, oversized

__all__ = ["MAX_LINE", "GuardedStdio", "claim_stdout", "open_stdio"]

log = logging.getLogger("agentkit.acp")

#: the longest line read; a prompt is at most 32,000 characters, so this leaves ample room
#: for embedded context and refuses a client that streams an endless line
MAX_LINE: Final = 8 * 1024 * 1024
_CHUNK: Final = 65536


def claim_stdout() -> BinaryIO:
    """Keep fd 1 for protocol frames only: return a binary file on a duplicate of it, and
    point fd 1 and ``sys.stdout`` at stderr from now on."""
    sys.stdout.flush()
    protocol = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return protocol


class _PipeOut(asyncio.Protocol):
    """Flow control for the output pipe: ``drain`` waits while the client is not reading."""

    def __init__(self) -> None:
        self._resumed: asyncio.Future[None] | None = None
        self.lost: BaseException | None = None

    def pause_writing(self) -> None:
        if self._resumed is None:
            self._resumed = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._resumed is not None and not self._resumed.done():
            self._resumed.set_result(None)
        self._resumed = None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or ConnectionResetError("the client closed our stdout")
        self.resume_writing()

    async def drain(self) -> None:
        if self.lost is not None:
            raise ConnectionResetError(str(self.lost))
        if self._resumed is not None:
            await self._resumed


class GuardedStdio:
    """JSON-RPC messages over two byte streams, with every inbound line judged first."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        write: Callable[[bytes], None],
        drain: Callable[[], Any],
        close: Callable[[], None],
        *,
        max_line: int = MAX_LINE,
    ) -> None:
        self._reader = reader
        self._write = write
        self._drain = drain
        self._close = close
        self._max_line = max_line
        self._closed = False
        #: what the guard did, for tests and the log: answered / dropped / forwarded counts
        self.answered = 0
        self.dropped = 0

    async def send(self, message: dict[str, Any]) -> None:
        if self._closed:
            raise ConnectionResetError("the transport is closed")
        try:
            text = json.dumps(message, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError):  # e.g. an exception object inside error data
            text = json.dumps(_plain(message), separators=(",", ":"), allow_nan=False)
        self._write(text.encode("ascii") + b"\n")
        await self._drain()

    async def receive(self) -> dict[str, Any] | None:
        """The next well-formed message, or None at end of input."""
        while True:
            line = await self._read_line()
            if line is None:
                return None
            verdict = oversized(self._max_line) if isinstance(line, int) else judge(line)
            if isinstance(verdict, Forward):
                return verdict.message
            if isinstance(verdict, Drop):
                if verdict.reason != "blank line":
                    self.dropped += 1
                    log.warning("ignored an inbound line: %s", verdict.reason)
                continue
            assert isinstance(verdict, Reply)
            self.answered += 1
            log.warning("answered an inbound line with an error: %s", verdict.reason)
            with contextlib.suppress(ConnectionError):
                await self.send(verdict.response)

    async def _read_line(self) -> bytes | int | None:
        """One line without its newline; the number of bytes skipped when it was over the
        cap; None at end of input (a last line without a newline is still a line)."""
        skipped = 0
        while True:
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.LimitOverrunError as error:
                await self._reader.readexactly(error.consumed)
                skipped += error.consumed
                continue
            except asyncio.IncompleteReadError as error:
                if skipped or len(error.partial) > self._max_line:
                    return skipped + len(error.partial)
                return error.partial or None
            if skipped or len(line) > self._max_line + 1:
                return skipped + len(line)
            return line[:-1]

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._close()


def _plain(value: object) -> Any:  # noqa: ANN401 - any JSON value
    """*value* with what JSON cannot hold replaced: non-finite floats by null, other objects
    by their text (the library puts pydantic's error details, exceptions included, in data)."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, str | int | bool):
        return value
    return str(value)


def _pollable(fd: int) -> bool:
    """True for what the event loop can watch: a pipe, a socket or a terminal."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))


def _feed_from_thread(
    loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader, fd: int
) -> None:
    """Stdin that is a regular file cannot be a pipe transport: read it in a thread."""

    def pump() -> None:
        try:
            while chunk := os.read(fd, _CHUNK):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
        except OSError:
            pass
        finally:
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=pump, name="agentkit-acp-stdin", daemon=True).start()


async def open_stdio(protocol_out: BinaryIO, *, max_line: int = MAX_LINE) -> GuardedStdio:
    """The guarded transport on stdin and *protocol_out* (see :func:`claim_stdout`)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=max_line, loop=loop)
    if not _pollable(sys.stdin.fileno()):  # a regular file, /dev/null: epoll refuses them
        _feed_from_thread(loop, reader, sys.stdin.fileno())
    else:
        try:
            await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader, loop=loop), sys.stdin
            )
        except ValueError:
            _feed_from_thread(loop, reader, sys.stdin.fileno())
    try:
        out = _PipeOut()
        transport, _ = await loop.connect_write_pipe(lambda: out, protocol_out)
    except ValueError:  # a regular file: plain blocking writes

        def write_file(data: bytes) -> None:
            protocol_out.write(data)
            protocol_out.flush()

        async def no_drain() -> None:
            return None

        return GuardedStdio(reader, write_file, no_drain, protocol_out.close, max_line=max_line)

    def write_pipe(data: bytes) -> None:
        if out.lost is not None or transport.is_closing():
            raise ConnectionResetError("the client closed our stdout")
        transport.write(data)

    return GuardedStdio(reader, write_pipe, out.drain, transport.close, max_line=max_line)
