"""An MCP server written with the ``mcp`` package, for the MCP toolset tests.

``python mcp_notes_server.py stdio`` serves on stdin/stdout; ``python mcp_notes_server.py http
FD`` serves streamable HTTP at ``/mcp`` on the listening socket it inherits as file descriptor
``FD``: the test owns the port, so a server killed and started again serves the same address,
with no moment at which the port is free for another process or a connection is refused
(connections made before the server is up wait in the socket's backlog); once it serves, it
writes its pid to the file ``$MCP_READY``, if set. ``build_server()`` gives the server itself
(tests run it in-process on a loopback port).

Tools: ``list_notes`` (read-only), ``add_note`` (writes), ``fail`` (answers ``isError``),
``slow`` (read-only; writes ``started`` to the file ``$MCP_MARKER`` then sleeps, so a test can
kill the server mid-call), ``whoami`` (read-only; the server's pid and environment keys),
and, with ``--trace`` after the transport, ``trace_context`` (read-only; the W3C keys of the
request's ``params._meta``, as received).
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp_types import ToolAnnotations

READ_ONLY = ToolAnnotations(read_only_hint=True)


def build_server(*, trace: bool = False) -> MCPServer:
    server = MCPServer("notes")
    notes: list[str] = []

    @server.tool(annotations=READ_ONLY)
    def list_notes() -> dict[str, list[str]]:
        """List the saved notes."""
        return {"notes": list(notes)}

    @server.tool()
    def add_note(text: str, pinned: bool = False) -> dict[str, object]:
        """Save a note."""
        notes.append(text)
        return {"saved": text, "pinned": pinned, "count": len(notes)}

    @server.tool(annotations=READ_ONLY)
    def fail(reason: str) -> str:
        """Always fails (isError)."""
        raise ValueError(f"cannot do it: {reason}")

    @server.tool(annotations=READ_ONLY)
    async def slow(seconds: float) -> str:
        """Sleep, after saying so in $MCP_MARKER."""
        marker = os.environ.get("MCP_MARKER")
        if marker:
            Path(marker).write_text("started", encoding="utf-8")
        await asyncio.sleep(seconds)
        return "done"

    @server.tool(annotations=READ_ONLY)
    def whoami() -> dict[str, object]:
        """The server's process id and the names of its environment variables."""
        return {"pid": os.getpid(), "env": sorted(os.environ)}

    if trace:

        @server.tool(annotations=READ_ONLY)
        def trace_context(ctx: Context) -> dict[str, object]:
            """The trace context keys the request carried in params._meta."""
            meta = dict(ctx.request_context.meta or {})
            return {key: meta.get(key) for key in ("traceparent", "tracestate", "baggage")}

    return server


async def serve_http(server: MCPServer, listening: socket.socket) -> None:
    import uvicorn

    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    http = uvicorn.Server(config)
    serving = asyncio.create_task(http.serve(sockets=[listening]))
    while not http.started and not serving.done():
        await asyncio.sleep(0.01)
    ready = os.environ.get("MCP_READY")
    if ready and http.started:
        Path(ready).write_text(str(os.getpid()), encoding="utf-8")
    await serving


def main() -> None:
    server = build_server(trace="--trace" in sys.argv)
    if sys.argv[1:2] == ["http"]:
        listening = socket.socket(fileno=int(sys.argv[2]))
        asyncio.run(serve_http(server, listening))
    else:
        server.run()


if __name__ == "__main__":
    main()
