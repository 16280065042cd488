"""A fake Anthropic Messages API on loopback, for driving the real Claude Code CLI offline.

Stdlib only: a ``ThreadingHTTPServer`` on ``127.0.0.1:0`` in a daemon thread. It answers
``POST /v1/messages`` (streaming SSE or plain JSON), ``POST /v1/messages/count_tokens`` and, with
an empty ``200``, anything else the CLI probes (``HEAD /``, ``GET …``). Every request is recorded.

Replies are scripted from the last user text, so tests can see what the CLI sent upstream:

* default: one text block ``echo #<n>: <last user text>``, n = the number of user and
  assistant messages received (Claude Code 2.1.332 also puts a ``role: "system"`` message with
  its environment notes into ``messages``; it is not counted);
* ``think: …``: a thinking block (``pondering <text>``), then the echo text block;
* ``tool: NAME {json}``: a ``tool_use`` block calling NAME with that input; the tool-result
  follow-up request is answered with ``tool done: <tool result text>``.

Usage is deterministic: ``input_tokens = 100 * n + 7`` (n as above), ``output_tokens`` = the
number of words in the reply. ``fail_with(status, message)`` makes every ``/v1/messages`` call
fail with that status until ``clear_failure()``; ``stall()`` makes them hang (until ``stop()``).
"""

from __future__ import annotations

import json
import re
import sys
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeAnthropicAPI", "RecordedRequest"]

_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        if isinstance(self.body, dict):
            return list(self.body.get("messages", []))
        return []

    @property
    def conversation(self) -> list[dict[str, Any]]:
        """The user and assistant messages (without the CLI's in-band system notes)."""
        return [m for m in self.messages if m.get("role") in ("user", "assistant")]

    @property
    def texts(self) -> list[str]:
        """The visible text of each conversation message, ``<system-reminder>``s removed."""
        return [user_text(m) for m in self.conversation]


@dataclass
class _Failure:
    status: int
    message: str
    error_type: str = "invalid_request_error"


@dataclass
class FakeAnthropicAPI:
    """Start with ``with FakeAnthropicAPI() as api:``; ``api.base_url`` is the endpoint."""

    requests: list[RecordedRequest] = field(default_factory=list)
    _failure: _Failure | None = None
    _stalled: bool = False
    _released: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: _Server | None = None
    _thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeAnthropicAPI:
        api = self

        class Handler(_Handler):
            fake = api

        server = _Server(("127.0.0.1", 0), Handler)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._released.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeAnthropicAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._server is not None, "start() the fake first"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # --- scripting ---------------------------------------------------------------------------

    def fail_with(
        self, status: int, message: str, error_type: str = "invalid_request_error"
    ) -> None:
        with self._lock:
            self._failure = _Failure(status, message, error_type)

    def clear_failure(self) -> None:
        with self._lock:
            self._failure = None

    def stall(self) -> None:
        """Every later ``/v1/messages`` call hangs without a byte until ``stop()``."""
        with self._lock:
            self._stalled = True

    def wait_if_stalled(self) -> None:
        with self._lock:
            stalled = self._stalled
        if stalled:
            self._released.wait(timeout=120)

    @property
    def message_requests(self) -> list[RecordedRequest]:
        """The ``POST /v1/messages`` calls (not count_tokens), oldest first."""
        with self._lock:
            return [
                r
                for r in self.requests
                if r.method == "POST" and r.path.split("?")[0] == "/v1/messages"
            ]

    def record(self, request: RecordedRequest) -> _Failure | None:
        with self._lock:
            self.requests.append(request)
            return self._failure


def user_text(message: dict[str, Any]) -> str:
    """The visible text of one message, without ``<system-reminder>`` blocks."""
    return "\n".join(message_parts(message))


def message_parts(message: dict[str, Any]) -> list[str]:
    """The visible text of each block; a tool result reads ``[tool_result] <content>``."""
    content = message.get("content", "")
    if isinstance(content, str):
        text = _REMINDER.sub("", content).strip()
        return [text] if text else []
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            text = _REMINDER.sub("", str(block.get("text", ""))).strip()
            if text:
                parts.append(text)
        elif block.get("type") == "tool_result":
            inner = block.get("content", "")
            if isinstance(inner, list):
                inner = " ".join(str(b.get("text", "")) for b in inner if isinstance(b, dict))
            parts.append(f"[tool_result] {inner}")
    return parts


def reply_blocks(body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """The content blocks and stop reason for one ``/v1/messages`` request body."""
    messages = [m for m in body.get("messages", []) if m.get("role") in ("user", "assistant")]
    count = len(messages)
    last = next((m for m in reversed(messages) if m.get("role") == "user"), {"content": ""})
    parts = message_parts(last)
    text = parts[-1] if parts else ""  # the newest block decides
    if text.startswith("[tool_result]"):
        result = text.removeprefix("[tool_result]").strip()
        return [{"type": "text", "text": f"tool done: {result}"}], "end_turn"
    if text.startswith("tool:"):
        name, _, raw = text.removeprefix("tool:").strip().partition(" ")
        arguments = json.loads(raw) if raw.strip() else {}
        block = {
            "type": "tool_use",
            "id": f"toolu_{uuid.uuid4().hex[:20]}",
            "name": name,
            "input": arguments,
        }
        return [block], "tool_use"
    blocks: list[dict[str, Any]] = []
    if text.startswith("think:"):
        text = text.removeprefix("think:").strip()
        blocks.append({"type": "thinking", "thinking": f"pondering {text}", "signature": "fake"})
    blocks.append({"type": "text", "text": f"echo #{count}: {text}"})
    return blocks, "end_turn"


def _words(blocks: list[dict[str, Any]]) -> int:
    total = 0
    for block in blocks:
        if block["type"] == "text":
            total += len(block["text"].split())
        elif block["type"] == "thinking":
            total += len(block["thinking"].split())
        else:
            total += 1
    return total


def _sse(
    blocks: list[dict[str, Any]], stop_reason: str, model: str, usage: dict[str, int]
) -> bytes:
    events: list[tuple[str, dict[str, Any]]] = []
    message: dict[str, Any] = {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1},
    }
    events.append(("message_start", {"type": "message_start", "message": message}))
    for index, block in enumerate(blocks):
        start: dict[str, Any]
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            text = block["text"]
            middle = len(text) // 2
            deltas = [
                {"type": "text_delta", "text": piece} for piece in (text[:middle], text[middle:])
            ]
        elif block["type"] == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": block["thinking"]},
                {"type": "signature_delta", "signature": block["signature"]},
            ]
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        for delta in deltas:
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that hung up (a killed CLI) is expected; anything else is printed."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class _Handler(BaseHTTPRequestHandler):
    fake: FakeAnthropicAPI
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: tests read ``fake.requests`` instead."""

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _send(self, status: int, payload: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("request-id", f"req_{uuid.uuid4().hex[:16]}")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _record(self, body: Any) -> _Failure | None:
        request = RecordedRequest(self.command, self.path, dict(self.headers.items()), body)
        return self.fake.record(request)

    def do_HEAD(self) -> None:
        self._record(None)
        self._send(200, b"")

    def do_GET(self) -> None:
        self._record(None)
        self._send(200, b"{}")

    def do_POST(self) -> None:
        body = self._body()
        failure = self._record(body)
        path = self.path.split("?")[0]
        if path == "/v1/messages/count_tokens":
            messages = body.get("messages", []) if isinstance(body, dict) else []
            self._send(200, json.dumps({"input_tokens": 100 * len(messages) + 7}).encode())
            return
        if path != "/v1/messages" or not isinstance(body, dict):
            self._send(200, b"{}")
            return
        self.fake.wait_if_stalled()
        if failure is not None:
            error = {
                "type": "error",
                "error": {"type": failure.error_type, "message": failure.message},
            }
            self._send(failure.status, json.dumps(error).encode())
            return
        blocks, stop_reason = reply_blocks(body)
        conversation = [m for m in body.get("messages", []) if m.get("role") != "system"]
        usage = {
            "input_tokens": 100 * len(conversation) + 7,
            "output_tokens": _words(blocks),
        }
        model = str(body.get("model", "claude-fake"))
        if body.get("stream"):
            self._send(200, _sse(blocks, stop_reason, model, usage), "text/event-stream")
            return
        message = {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }
        self._send(200, json.dumps(message).encode())
