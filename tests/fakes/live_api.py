"""A real uvicorn server on a loopback port, in a background thread, for the API tests.

The listening socket is bound before the server starts (port 0, so no port race), and the
app is built for that port, so the Host check sees what a real deployment sees. Also: an SSE
parser for response bodies, and a helper that runs ``agentkit serve`` as a subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from tests._processes import listening

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class SseEvent:
    event: str
    data: dict[str, Any]
    id: str = ""


def parse_sse(text: str) -> list[SseEvent]:
    """Every event of an SSE body (comments such as pings are skipped)."""
    events: list[SseEvent] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, list[str]] = {}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            fields.setdefault(name, []).append(value.removeprefix(" "))
        if "data" in fields:
            events.append(
                SseEvent(
                    event=fields.get("event", ["message"])[0],
                    data=json.loads("\n".join(fields["data"])),
                    id=fields.get("id", [""])[0],
                )
            )
    return events


def iter_events(response: httpx.Response) -> Iterator[SseEvent]:
    """The events of a streaming response as they arrive (stop reading at any point)."""
    block: list[str] = []
    for line in response.iter_lines():
        if line:
            block.append(line)
            continue
        if block:
            yield from parse_sse("\n".join(block))
            block = []
    if block:
        yield from parse_sse("\n".join(block))


def bound_socket(host: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: without it, small writes wait for delayed ACKs (~40 ms)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, 0))
    return sock


@contextmanager
def live_server(build: Callable[[int], FastAPI]) -> Iterator[str]:
    """Run ``build(port)`` under uvicorn on a fresh loopback port; yield its base URL."""
    sock = bound_socket()
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        build(port), log_level="warning", ws="none", http="h11", loop="asyncio", lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:  # bounded by the test's timeout (slow under load, not stuck)
        if not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=90)
        sock.close()


def free_port() -> int:
    with bound_socket() as sock:
        return int(sock.getsockname()[1])


class ServeProcess:
    """``agentkit serve`` in a subprocess; ``stop()`` sends SIGTERM and returns its exit code."""

    def __init__(self, data_dir: Path, *args: str, env: dict[str, str] | None = None) -> None:
        agentkit = str(Path(sys.executable).with_name("agentkit"))
        command = [agentkit, "--data-dir", str(data_dir), "serve"]
        while True:  # a free port can be taken by another process before the server binds it
            self.port = free_port()
            self.base_url = f"http://127.0.0.1:{self.port}"
            self.process = subprocess.Popen(
                [*command, "--port", str(self.port), *args],
                env={**os.environ, **(env or {})},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=REPO,
            )
            if self._healthy():
                return

    def _healthy(self) -> bool:
        """Wait until /api/health answers (bounded by the test's timeout: the server starts
        slowly on a loaded machine); False when it could not bind its port."""
        while True:
            if self.process.poll() is not None:
                err = self.process.stderr.read()  # type: ignore[union-attr]
                if "address already in use" in err.lower():
                    return False
                raise RuntimeError(f"agentkit serve exited: {err}")
            if listening(self.process.pid, self.port):  # ours, not whoever took the port
                try:
                    if httpx.get(f"{self.base_url}/api/health", timeout=5).status_code == 200:
                        return True
                except httpx.TransportError:
                    pass
            time.sleep(0.05)

    def stop(self) -> tuple[int, str]:
        self.process.send_signal(signal.SIGTERM)
        _out, err = self.process.communicate(timeout=60)
        return self.process.returncode, err
