"""A real, scripted OpenAI-compatible HTTP server on a loopback port, for backend tests.

Each POST takes the next :class:`Reply` from the script: an SSE stream of ``data:`` chunks
(ended by ``data: [DONE]``) or an error status with a JSON body. Every request body is recorded,
so tests can check exactly what the client sent. Standard library only; runs in a thread::

    with ScriptedOpenAIServer() as server:
        server.enqueue(Reply.text("Hel", "lo"))
        model = OpenAIModel("m", base_url=server.base_url, api_key=None)
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None) -> str:
    """One ``chat.completion.chunk`` payload for choice 0."""
    choice = {"index": 0, "delta": delta or {}, "finish_reason": finish}
    return json.dumps({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [choice]})


def usage_chunk(prompt_tokens: int, completion_tokens: int) -> str:
    """The extra chunk ``stream_options.include_usage`` asks for: no choices, only usage."""
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
    return json.dumps({"id": "chatcmpl-1", "choices": [], "usage": usage})


@dataclass
class Reply:
    """One scripted answer. ``chunks`` are SSE data payloads; ``body`` is for error statuses."""

    status: int = 200
    chunks: list[str] = field(default_factory=list)
    done: bool = True
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0

    @classmethod
    def text(cls, *pieces: str, usage: tuple[int, int] = (0, 0), finish: str = "stop") -> Reply:
        chunks = [chunk({"role": "assistant", "content": ""})]
        chunks += [chunk({"content": piece}) for piece in pieces]
        chunks += [chunk(finish=finish), usage_chunk(*usage)]
        return cls(chunks=chunks)

    @classmethod
    def error(cls, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        body = {"error": {"message": message, "type": "scripted", "code": status}}
        return cls(status=status, body=body, headers=headers or {})


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any


class ScriptedOpenAIServer:
    """Serves scripted replies on ``127.0.0.1:<free port>`` until the ``with`` block ends."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._httpd = _Httpd(self)
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def take(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self.replies:
                return self.replies.popleft()
        return Reply.error(500, "the scripted server has no reply left")

    def __enter__(self) -> ScriptedOpenAIServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()  # joins the request threads (daemon_threads is off)
        self._thread.join()


class _Httpd(ThreadingHTTPServer):
    daemon_threads = False

    def __init__(self, owner: ScriptedOpenAIServer) -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that gave up is fine
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _Httpd

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        headers = {name.lower(): value for name, value in self.headers.items()}
        reply = self.server.owner.take(RecordedRequest(self.path, headers, json.loads(raw)))
        time.sleep(reply.delay)
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if reply.status != 200:
            payload = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
            data = payload.encode()
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for payload in [*reply.chunks, *(["[DONE]"] if reply.done else [])]:
            self.wfile.write(f"data: {payload}\n\n".encode())
            self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""
