"""How :mod:`agentkit.tools.mcp` reaches a server: a subprocess on stdio or a URL.

A transport yields the MCP session's two message streams. The stdio one starts the server from
an argv list (no shell) with a minimal environment, in its own process group, and hands the
process to the connection, which stops and reaps it; the toolset's connection runs on a
:class:`LoopThread` of its own, so it outlives any caller's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import threading
from collections.abc import AsyncIterator, Coroutine, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio
import mcp_types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import SessionMessage

from agentkit.tools.toolsets import ToolsetError

if TYPE_CHECKING:
    from agentkit.tools.mcp import _Connection

__all__ = ["HttpTransport", "LoopThread", "StdioTransport", "Transport"]

T = TypeVar("T")

#: variables a stdio server inherits from our environment; anything else comes from ``env``
_INHERITED_ENV: Final = ("PATH", "HOME", "LANG")
_LINE_LIMIT: Final = 16 * 1024 * 1024  # the longest JSON-RPC line read from a server


class LoopThread:
    """An event loop on a daemon thread of its own."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        if threading.current_thread() is not self._thread:
            self._thread.join()
            self.loop.close()


class Transport:
    """How to reach a server: :meth:`streams` yields the session's message streams."""

    def describe(self) -> str:
        raise NotImplementedError

    def streams(self, connection: _Connection) -> contextlib.AbstractAsyncContextManager[Any]:
        raise NotImplementedError


class StdioTransport(Transport):
    def __init__(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path) -> None:
        self.argv = tuple(argv)
        self.env = dict(env)
        self.cwd = cwd

    def describe(self) -> str:
        return f"the command {self.argv[0]!r}"

    def child_environment(self) -> dict[str, str]:
        inherited = {key: os.environ[key] for key in _INHERITED_ENV if key in os.environ}
        return {**inherited, **self.env}

    def command(self) -> list[str]:
        """The argv with its program resolved (no shell ever sees it)."""
        program = self.argv[0]
        if os.sep in program:
            path = Path(program) if Path(program).is_absolute() else self.cwd / program
            if not path.is_file():
                raise ToolsetError(f"the command {program!r} does not exist")
            return [str(path), *self.argv[1:]]
        search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        found = shutil.which(program, path=search)
        if found is None:
            raise ToolsetError(
                f"the command {program!r} was not found (beside {sys.executable} or on PATH)"
            )
        return [found, *self.argv[1:]]

    @contextlib.asynccontextmanager
    async def streams(self, connection: _Connection) -> AsyncIterator[Any]:
        try:
            process = await asyncio.create_subprocess_exec(
                *self.command(),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.child_environment(),
                cwd=self.cwd,
                start_new_session=True,
                limit=_LINE_LIMIT,
            )
        except OSError as error:
            raise ToolsetError(f"cannot start {self.argv[0]!r}: {error}") from None
        connection.attach(process)
        read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

        async def reader() -> None:
            assert process.stdout is not None
            async with read_writer:
                with contextlib.suppress(
                    OSError, ValueError, anyio.ClosedResourceError, anyio.BrokenResourceError
                ):
                    while line := await process.stdout.readline():
                        if not line.strip():
                            continue
                        try:
                            message = mcp_types.jsonrpc_message_adapter.validate_json(
                                line, by_name=False
                            )
                        except ValueError as error:
                            await read_writer.send(error)
                            continue
                        await read_writer.send(SessionMessage(message))
            connection.gone.set()  # EOF: the server closed its stdout (it exited, usually)

        async def writer() -> None:
            assert process.stdin is not None
            async with write_reader:
                with contextlib.suppress(
                    OSError, anyio.ClosedResourceError, anyio.BrokenResourceError
                ):
                    async for item in write_reader:
                        text = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                        process.stdin.write(text.encode("utf-8") + b"\n")
                        await process.stdin.drain()
            await read_writer.aclose()  # a server we cannot write to is gone for the session

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(reader)
                group.start_soon(writer)
                try:
                    yield read_stream, write_stream
                finally:
                    group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await connection.stop_process()


class HttpTransport(Transport):
    def __init__(self, url: str, headers: Mapping[str, str]) -> None:
        self.url = url
        self.headers = dict(headers)

    def describe(self) -> str:
        return f"the server at {self.url}"

    @contextlib.asynccontextmanager
    async def streams(self, connection: _Connection) -> AsyncIterator[Any]:
        async with (
            create_mcp_http_client(headers=self.headers) as client,
            streamable_http_client(self.url, http_client=client) as streams,
        ):
            yield streams
