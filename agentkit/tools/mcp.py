"""Tools from MCP servers (the ``mcp`` package's client side): stdio and streamable HTTP.

An agent names a server in its config.json: ``{"mcp": ["mcp-server-time"], "name": "time"}``
runs a command as a subprocess speaking MCP on stdio; ``{"mcp_url": "http://…/mcp", "name":
"notes"}`` connects to a streamable-HTTP server. :class:`McpToolset` connects when the agent is
opened (a server that does not start is a config error then, not mid-turn), lists the tools,
and turns each into a registry tool whose arguments are checked against the server's
``inputSchema``. Tools keep the names their server gives them.

Invariants, and why:

* **Consent by default.** A tool is ``side_effect`` (the planner asks before each call)
  unless its server marks it ``readOnlyHint``; the agent's config can override either way.
* **Failures are tool results, never a crashed turn.** A result with ``isError``, a protocol
  error, a timeout and a server that dies mid-call all become
  :class:`~agentkit.tools.ToolFailedError` (``ok=False`` with a message saying what
  happened). A dead server is started again on the next call (so the next turn has it back).
* **Process hygiene, as in the ACP backend.** A stdio server is started from an argv list (no
  shell) with a minimal environment (``PATH``, ``HOME``, ``LANG`` plus the config's ``env``),
  in its own process group; closing ends the group (EOF, SIGTERM, SIGKILL) and reaps the
  process, and a finalizer kills the group if the toolset is dropped unclosed. A bare command
  name is looked up beside the running Python first (its virtualenv's ``bin``), then on PATH.
* **One loop per toolset.** The connection lives on the toolset's own event-loop thread, so
  it outlives any one turn and any caller's loop (scripts, Jupyter, the HTTP server); a call
  from another loop waits without blocking it.
* **Traced as the caller's child.** A call made while a span is active
  (:meth:`agentkit.telemetry.Telemetry.current`, the planner's ``execute_tool`` span) is a
  ``tools/call {tool}`` CLIENT span under it (``mcp.method.name``, ``gen_ai.tool.name``,
  ``network.transport``, ``mcp.protocol.version``; ``error.type`` ``tool_error`` for an
  ``isError`` result), and its W3C context goes to the server in ``params._meta``
  (``traceparent``). The span is started on the caller's loop (whose context holds the
  active span) and made current on the toolset's loop for the call, so the ``mcp`` package's
  own OpenTelemetry span, when an SDK is set up, nests under it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from pydantic import JsonValue

from agentkit._extras import missing
from agentkit.telemetry import Span, Telemetry
from agentkit.telemetry import semconv as sc
from agentkit.tools.registry import (
    SchemaArgs,
    Tool,
    ToolDefinitionError,
    ToolFailedError,
    schema_args_model,
)
from agentkit.tools.toolsets import Toolset, ToolsetError

try:
    import anyio
    import mcp_types
    from mcp.client.session import ClientSession
    from mcp.shared.exceptions import MCPError
except ImportError as _missing:  # pragma: no cover - depends on the installed extras
    raise missing("mcp", "an MCP toolset", _missing) from _missing

from agentkit.tools._mcp_transports import HttpTransport, LoopThread, StdioTransport, Transport

__all__ = ["McpToolset"]

_START_TIMEOUT: Final = 60.0  # seconds for a server to start and list its tools
_STOP_GRACE: Final = 2.0  # seconds between the steps of closing: EOF, SIGTERM, SIGKILL
_STDERR_TAIL: Final = 2000


class _McpCallError(ToolFailedError):
    """A failed call, with the ``error.type`` its span gets (``tool_error``, ``timeout``, a
    JSON-RPC error code, ``connection_closed``)."""

    def __init__(self, message: str, error_type: str) -> None:
        super().__init__(message)
        self.error_type = error_type


class _Connection:
    """One connected session with a server, held open by a task of its own (anyio scopes
    must be left by the task that entered them)."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.session: ClientSession | None = None
        self.listing: list[mcp_types.Tool] = []
        self.protocol_version = ""
        self.process: asyncio.subprocess.Process | None = None
        self.gone = asyncio.Event()  # the server exited or the session ended
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stderr = bytearray()
        self._stderr_task: asyncio.Task[None] | None = None
        self._exit_task: asyncio.Task[int] | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None

    @property
    def alive(self) -> bool:
        """Connected, and the server has not exited: its exit may not have reached this loop
        yet (the child watcher reaps it a moment later), so a killed server is also looked up
        in /proc, and a call right after the kill starts it again instead of failing."""
        if self.session is None or self.gone.is_set():
            return False
        if self.process is not None and _has_exited(self.process.pid):
            self.gone.set()
            return False
        return True

    def attach(self, process: asyncio.subprocess.Process) -> None:
        """Watch a freshly started server process: its exit, its stderr."""
        self.process = process
        self._exit_task = asyncio.create_task(process.wait())
        self._exit_task.add_done_callback(lambda _: self.gone.set())
        self._stderr_task = asyncio.create_task(self._drain_stderr())
        self._finalizer = weakref.finalize(self, _kill_group, process.pid)

    def stderr_tail(self) -> str:
        tail = self._stderr.decode("utf-8", "replace").strip()
        return f"; stderr: {tail[-500:]}" if tail else ""

    async def open(self, timeout: float) -> None:
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._hold(ready))
        try:
            await asyncio.wait_for(asyncio.shield(ready), timeout)
        except TimeoutError:
            await self.close()
            raise ToolsetError(
                f"{self.transport.describe()} did not start an MCP session within {timeout:g}s"
                + self.stderr_tail()
            ) from None
        except BaseException as error:
            await self.close()
            if isinstance(error, ToolsetError):
                raise
            if isinstance(error, Exception):
                raise ToolsetError(
                    f"{self.transport.describe()}: {_describe(error)}{self.stderr_tail()}"
                ) from None
            raise

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        from agentkit import __version__

        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self.transport.streams(self))
                session = await stack.enter_async_context(
                    ClientSession(
                        read,
                        write,
                        client_info=mcp_types.Implementation(name="agentkit", version=__version__),
                    )
                )
                initialized = await session.initialize()
                self.protocol_version = str(getattr(initialized, "protocol_version", "") or "")
                self.listing = await _list_tools(session)
                self.session = session
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as error:
            if not ready.done():
                if isinstance(error, Exception):
                    ready.set_exception(error)
                else:
                    ready.cancel()
            if not isinstance(error, Exception):
                raise
        finally:
            self.gone.set()

    async def call(
        self,
        name: str,
        arguments: dict[str, JsonValue],
        timeout: float,
        meta: dict[str, str] | None = None,
    ) -> Any:  # noqa: ANN401 - the server's CallToolResult
        session = self.session
        assert session is not None
        request = asyncio.ensure_future(
            session.call_tool(
                name,
                arguments,
                read_timeout_seconds=timeout,
                meta=mcp_types.RequestParamsMeta(**meta) if meta else None,  # type: ignore[typeddict-item]
            )
        )
        ended = asyncio.ensure_future(self.gone.wait())
        try:
            done, _ = await asyncio.wait(
                {request, ended}, timeout=timeout + 1, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            ended.cancel()
            if not request.done():
                request.cancel()
                with contextlib.suppress(BaseException):
                    await request
        if request not in done or request.cancelled():
            if self.gone.is_set():
                raise self._died()
            raise _McpCallError(f"the MCP server did not answer within {timeout:g}s", "timeout")
        error = request.exception()
        if error is None:
            return request.result()
        closed = isinstance(error, MCPError) and error.code == mcp_types.CONNECTION_CLOSED
        if closed or self.gone.is_set() or isinstance(error, anyio.ClosedResourceError):
            self.gone.set()
            if self.process is not None:  # for the exit code in the message
                await _exited(self.process, _STOP_GRACE)
            raise self._died()
        kind = str(error.code) if isinstance(error, MCPError) else type(error).__qualname__
        raise _McpCallError(f"the MCP call failed: {_describe(error)}", kind)

    def _died(self) -> ToolFailedError:
        code = self.process.returncode if self.process is not None else None
        how = f"exited with code {code}" if code is not None else "closed the connection"
        return _McpCallError(
            f"the MCP server {how} during the call{self.stderr_tail()}; "
            "it is started again on the next call",
            "connection_closed",
        )

    async def close(self) -> None:
        """End the session, then the server (for stdio: its whole process group)."""
        self._stop.set()
        if self._task is not None:
            done, _ = await asyncio.wait({self._task}, timeout=3 * _STOP_GRACE + 2)
            if not done:
                self._task.cancel()
                await asyncio.wait({self._task})
        await self.stop_process()

    async def stop_process(self) -> None:
        process, exit_task = self.process, self._exit_task
        if process is None or exit_task is None:
            return
        if process.stdin is not None and not process.stdin.is_closing():
            process.stdin.close()  # EOF: a well-behaved server exits on its own
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if await _exited(process, _STOP_GRACE):
                break
            _kill_group(process.pid, sig)
        await _exited(process, _STOP_GRACE)
        _kill_group(process.pid)  # whatever it left behind in its group
        # wait() also waits for the pipes: one a descendant still holds would keep it waiting
        done, _ = await asyncio.wait({exit_task}, timeout=_STOP_GRACE)
        if not done:
            exit_task.cancel()
        if self._finalizer is not None:
            self._finalizer.detach()
        if self._stderr_task is not None:
            drained, _ = await asyncio.wait({self._stderr_task}, timeout=_STOP_GRACE)
            if not drained:
                self._stderr_task.cancel()
                await asyncio.wait({self._stderr_task})
        transport = getattr(process, "_transport", None)
        if isinstance(transport, asyncio.SubprocessTransport) and not transport.is_closing():
            transport.close()

    async def _drain_stderr(self) -> None:
        assert self.process is not None
        stream = self.process.stderr
        if stream is None:
            return
        with contextlib.suppress(OSError, ValueError):
            while chunk := await stream.read(4096):
                self._stderr += chunk
                del self._stderr[:-_STDERR_TAIL]


class McpToolset(Toolset):
    """The tools of one MCP server. Build it with :meth:`stdio` or :meth:`http`, then
    :meth:`start` it (which lists the tools); :meth:`close` ends the session and the server."""

    def __init__(self, name: str, transport: Transport, *, timeout: float = 30.0) -> None:
        self.name = name
        self.timeout = timeout
        #: how many times a dead server was started again
        self.restarts = 0
        self._transport = transport
        self._thread: LoopThread | None = None
        self._connection: _Connection | None = None
        self._connecting: asyncio.Lock | None = None
        self._tools: tuple[Tool[Any], ...] = ()
        self._closed = False

    def __repr__(self) -> str:
        return f"McpToolset({self.name!r}, {self._transport.describe()})"

    @classmethod
    def stdio(
        cls,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | str = ".",
        timeout: float = 30.0,
    ) -> McpToolset:
        """A server started as ``argv`` (no shell) in *cwd*; *env* adds to its environment."""
        if not argv:
            raise ToolsetError("an MCP stdio server needs a command")
        return cls(name, StdioTransport(argv, env or {}, Path(cwd)), timeout=timeout)

    @classmethod
    def http(
        cls,
        name: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
    ) -> McpToolset:
        """A streamable-HTTP server at *url* (``headers`` go with every request)."""
        return cls(name, HttpTransport(url, headers or {}), timeout=timeout)

    @property
    def pid(self) -> int | None:
        """The running stdio server's process id (its process group id too)."""
        connection = self._connection
        if connection is None or connection.process is None:
            return None
        return connection.process.pid

    def start(self) -> None:
        """Connect, initialise the session and list the tools. Raises :class:`ToolsetError`."""
        if self._thread is not None:
            return
        self._thread = LoopThread(f"agentkit-mcp-{self.name}")
        try:
            listing = self._thread.submit(self._start()).result()
            self._tools = tuple(self._tool(spec) for spec in listing)
        except BaseException:
            self.close()
            raise

    def tools(self) -> Sequence[Tool[Any]]:
        return self._tools

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        thread = self._thread
        if thread is None:
            return
        if not thread.loop.is_closed():
            with contextlib.suppress(Exception):
                thread.submit(self._disconnect()).result()
        thread.stop()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        thread = self._thread
        if thread is None:
            return
        with contextlib.suppress(Exception):
            await asyncio.wrap_future(thread.submit(self._disconnect()))
        await asyncio.to_thread(thread.stop)

    # -- on the toolset's loop ----------------------------------------------------------------

    async def _start(self) -> list[mcp_types.Tool]:
        self._connecting = asyncio.Lock()
        connection = _Connection(self._transport)
        await connection.open(_START_TIMEOUT)
        self._connection = connection
        return connection.listing

    async def _connected(self) -> _Connection:
        assert self._connecting is not None
        async with self._connecting:
            connection = self._connection
            if connection is not None and connection.alive:
                return connection
            self._connection = None
            if connection is not None:
                await connection.close()
            fresh = _Connection(self._transport)
            try:
                await fresh.open(_START_TIMEOUT)
            except ToolsetError as error:
                raise ToolFailedError(
                    f"the MCP server could not be started again: {error}"
                ) from None
            self._connection = fresh
            self.restarts += 1
            return fresh

    async def _invoke(
        self, name: str, arguments: dict[str, JsonValue], span: Span | None = None
    ) -> object:
        connection = await self._connected()
        if span is None:
            result = await connection.call(name, arguments, self.timeout)
        else:
            span.set(sc.MCP_PROTOCOL_VERSION, connection.protocol_version or None)
            with span.activate():  # the mcp package's own span (with an SDK) nests under it
                result = await connection.call(
                    name, arguments, self.timeout, meta=span.trace_context()
                )
        if result.is_error:
            message = _error_text(result) or f"the tool {name!r} reported an error"
            raise _McpCallError(message, "tool_error")
        return _output(result)

    async def _disconnect(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    # -- on the caller's loop -----------------------------------------------------------------

    async def _call(self, name: str, arguments: dict[str, JsonValue]) -> object:
        thread = self._thread
        if self._closed or thread is None:
            raise ToolFailedError(f"the MCP toolset {self.name!r} is closed")
        span = self._span(name)
        future = thread.submit(self._invoke(name, arguments, span))
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.cancel()
            if span is not None:
                span.fail("cancelled")
            raise
        except ToolFailedError as error:
            if span is not None:
                span.fail(getattr(error, "error_type", type(error).__qualname__), str(error))
            raise
        finally:
            if span is not None:
                span.end()

    def _span(self, name: str) -> Span | None:
        """The call's ``tools/call {name}`` span, child of the active span (None: none)."""
        parent = Telemetry.current()
        if parent is None:
            return None
        stdio = isinstance(self._transport, StdioTransport)
        return parent.child(
            f"tools/call {name}",
            kind="client",
            attributes={
                sc.MCP_METHOD_NAME: "tools/call",
                sc.TOOL_NAME: name,
                sc.NETWORK_TRANSPORT: "pipe" if stdio else "tcp",
                "agentkit.mcp.server": self.name,
            },
        )

    def _tool(self, spec: mcp_types.Tool) -> Tool[Any]:
        read_only = bool(spec.annotations is not None and spec.annotations.read_only_hint)
        name = spec.name

        async def handler(args: SchemaArgs) -> object:
            return await self._call(name, args.arguments())

        try:
            return Tool(
                name=name,
                description=" ".join((spec.description or spec.title or name).split()),
                args_model=schema_args_model(name, spec.input_schema),
                handler=handler,
                side_effect=not read_only,
                live_state=False,
                source=self.name,
            )
        except ToolDefinitionError as error:
            raise ToolsetError(f"the server's tool {name!r} cannot be used: {error}") from None


async def _list_tools(session: ClientSession) -> list[mcp_types.Tool]:
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(100):  # a server that pages forever is not waited for
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _output(result: mcp_types.CallToolResult) -> object:
    """A successful result as JSON: the structured content when there is some, else the
    content blocks (a text that is JSON is parsed; one block stands alone)."""
    if result.structured_content is not None:
        return result.structured_content
    parts = [_block(block) for block in result.content]
    return parts[0] if len(parts) == 1 else parts


def _block(block: Any) -> object:  # noqa: ANN401 - one of MCP's content block types
    if isinstance(block, mcp_types.TextContent):
        text = block.text
        if text.lstrip()[:1] in ("{", "["):
            with contextlib.suppress(ValueError):
                parsed: object = json.loads(text)
                return parsed
        return text
    dumped = block.model_dump(mode="json", exclude_none=True, by_alias=True)
    if isinstance(dumped, dict) and isinstance(dumped.get("data"), str):
        dumped["data"] = f"<{len(dumped['data'])} characters of base64>"
    return dumped


def _error_text(result: mcp_types.CallToolResult) -> str:
    texts = [block.text for block in result.content if isinstance(block, mcp_types.TextContent)]
    return " ".join(" ".join(texts).split())[:1000]


def _describe(error: BaseException) -> str:
    """The innermost meaningful error of an exception group, as ``Type: message``."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, MCPError):
        return f"server error: {error}"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


async def _exited(process: asyncio.subprocess.Process, timeout: float) -> bool:
    """True once *process* has exited (and been reaped), polling for up to *timeout* s."""
    deadline = asyncio.get_running_loop().time() + timeout
    while process.returncode is None:
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(0.01)
    return True


_PROC = os.path.exists("/proc/self/stat")


def _has_exited(pid: int) -> bool:
    """Has child *pid* exited, reaped or not (a zombie)? Read from /proc; without /proc
    (not Linux) False: the child watcher's notice is then the only one."""
    if not _PROC:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except FileNotFoundError:
        return True  # reaped
    except OSError:
        return False
    state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]  # after "pid (name) "
    return state in (b"Z", b"X")


def _kill_group(pid: int, sig: signal.Signals = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
