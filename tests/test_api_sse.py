"""The SSE writer (agentkit.api.sse) and the plain front of the turn streams
(agentkit.api.streams), driven as ASGI apps in-process: what ends a stream, pings, and that a
request the plain front hands to FastAPI is answered as the plain front answers it."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agentkit import ScriptedModel
from agentkit.api import create_app, sse
from agentkit.api.streams import _match
from starlette.types import Message

from tests.conftest import SAMPLE_AGENTS


class Client:
    """One ASGI request's receive and send: the body, then a disconnect when told (or
    once the response is complete, as uvicorn says)."""

    def __init__(self, body: bytes = b"") -> None:
        self.body = body
        self.sent: list[Message] = []
        self.gone = asyncio.Event()
        self.read = True  # False: every send blocks (a client that stopped reading)
        self._first = True

    async def receive(self) -> Message:
        if self._first:
            self._first = False
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if not self.read and message["type"] == "http.response.body":
            await asyncio.Event().wait()
        self.sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            self.gone.set()

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    @property
    def text(self) -> str:
        return b"".join(m.get("body", b"") for m in self.sent[1:]).decode()

    @property
    def complete(self) -> bool:
        last = self.sent[-1] if self.sent else {}
        return last.get("type") == "http.response.body" and not last.get("more_body", False)


def test_a_frame_is_the_bytes_sse_starlette_wrote() -> None:
    assert sse.frame("session", '{"a": 1}', "msg-1:1") == (
        b'id: msg-1:1\r\nevent: session\r\ndata: {"a": 1}\r\n\r\n'
    )
    assert sse.frame("x\n", "one\r\ntwo\rthree\nfour", "i\rd") == (
        b"id: id\r\nevent: x\r\ndata: one\r\ndata: two\r\ndata: three\r\ndata: four\r\n\r\n"
    )
    assert sse.frame("t", "\u2028é", "1") == "id: 1\r\nevent: t\r\ndata: \u2028é\r\n\r\n".encode()


async def _frames(closed: list[bool], gate: asyncio.Event, n: int = 2) -> AsyncIterator[bytes]:
    try:
        for number in range(n):
            yield sse.frame("e", "{}", str(number))
        await gate.wait()
    finally:
        closed.append(True)


def test_a_stream_ends_cleanly_and_closes_its_frames() -> None:
    async def run() -> Client:
        client, closed, gate = Client(), [], asyncio.Event()
        gate.set()
        await sse.stream(_frames(closed, gate), client.receive, client.send)
        assert closed == [True]
        return client

    client = asyncio.run(run())
    assert client.status == 200 and client.complete
    assert client.sent[0]["headers"] == sse.HEADERS
    assert client.text == "".join(f"id: {n}\r\nevent: e\r\ndata: {{}}\r\n\r\n" for n in (0, 1))


def test_a_client_that_leaves_stops_the_stream_at_once() -> None:
    async def run() -> None:
        client, closed, gate = Client(), [], asyncio.Event()
        writer = asyncio.create_task(sse.stream(_frames(closed, gate), client.receive, client.send))
        while len(client.sent) < 3:
            await asyncio.sleep(0)
        client.gone.set()  # the client disconnects while the frames wait for the turn
        await asyncio.wait_for(writer, 5)
        assert closed == [True] and not client.complete  # nothing more was written
        assert not writer.cancelled()

    asyncio.run(run())


def test_an_idle_stream_pings_and_a_frozen_client_is_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sse, "_TICK", 0.01)
    monkeypatch.setattr(sse, "PING_SECONDS", 0.03)
    monkeypatch.setattr(sse, "SEND_TIMEOUT", 0.05)

    async def run() -> None:
        client, closed, gate = Client(), [], asyncio.Event()
        writer = asyncio.create_task(
            sse.stream(_frames(closed, gate, n=0), client.receive, client.send)
        )
        while ": ping - " not in client.text:
            await asyncio.sleep(0.01)
        client.read = False  # the client stops reading: the next frame's send blocks
        gate.set()
        await asyncio.wait_for(writer, 5)
        assert closed == [True] and not client.complete

    asyncio.run(run())


def test_a_stream_cancelled_by_the_server_ends_cleanly() -> None:
    async def run() -> Client:
        client, closed, gate = Client(), [], asyncio.Event()
        writer = asyncio.create_task(sse.stream(_frames(closed, gate), client.receive, client.send))
        while len(client.sent) < 3:
            await asyncio.sleep(0)
        writer.cancel()  # uvicorn's graceful-shutdown timeout
        await writer
        assert closed == [True]
        return client

    client = asyncio.run(run())
    assert client.complete and client.text.count("event: e") == 2


def test_the_plain_front_serves_only_valid_stream_requests() -> None:
    def scope(method: str, path: str, root: str = "") -> dict[str, Any]:
        return {"type": "http", "method": method, "path": path, "root_path": root}

    events = "/api/agent/a-1/conversations/conv-1/turns/msg-1/events"
    assert _match(scope("POST", "/api/agent/a-1/chat")) == ("chat", "a-1")
    assert _match(scope("GET", events)) == ("events", "a-1", "conv-1", "msg-1")
    for refused in [
        scope("GET", "/api/agent/a-1/chat"),
        scope("POST", "/api/agent/a-1/chat/"),
        scope("POST", "/api/agent/-a/chat"),
        scope("POST", "/api/agent/a\n/chat"),
        scope("POST", f"/api/agent/{'a' * 65}/chat"),
        scope("HEAD", events),
        scope("GET", events.replace("msg-1", "m!")),
        scope("POST", "/api/agent/a-1/chat", root="/x"),
        scope("GET", "/api/agent/list"),
    ]:
        assert _match(refused) is None, refused


def _request(method: str, path: str, body: bytes = b"", **extra: Any) -> dict[str, Any]:
    headers = [(b"host", b"127.0.0.1"), *extra.pop("headers", [])]
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": extra.pop("query", b""),
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8765),
        "state": {},
    }


def test_what_the_plain_front_hands_to_fastapi_streams_the_same(tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(
        SAMPLE_AGENTS, data / "agents", ignore=shutil.ignore_patterns("conversations", ".*.lock")
    )
    app = create_app(data, model=ScriptedModel({"chat": ["one two three"]}))

    async def call(scope: dict[str, Any], body: bytes = b"") -> Client:
        client = Client(body)
        await app(scope, client.receive, client.send)
        return client

    async def run() -> None:
        async with app.router.lifespan_context(app):
            json_headers = [(b"content-type", b"application/json")]
            plain = await call(
                _request("POST", "/api/agent/innovator-001/chat", headers=json_headers),
                b'{"message": "hi"}',
            )
            handed_on = await call(  # a media type FastAPI reads as JSON, the plain front not
                _request(
                    "POST",
                    "/api/agent/innovator-001/chat",
                    headers=[(b"content-type", b"application/vnd.x+json")],
                ),
                b'{"message": "hi"}',
            )
            for client in plain, handed_on:
                assert client.status == 200 and client.sent[0]["headers"] == sse.HEADERS
            assert [line for line in plain.text.splitlines() if line.startswith("event:")] == [
                line for line in handed_on.text.splitlines() if line.startswith("event:")
            ]
            session = json.loads(plain.text.split("data: ", 1)[1].split("\r\n", 1)[0])
            path = (
                f"/api/agent/innovator-001/conversations/{session['conversationId']}"
                f"/turns/{session['messageId']}/events"
            )
            after_plain = await call(_request("GET", path, query=b"after=2"))
            after_fastapi = await call(_request("GET", path, query=b"after=02&x=1"))
            resumed = await call(
                _request(
                    "GET",
                    path,
                    query=b"after=1",
                    headers=[(b"last-event-id", f"{session['messageId']}:2".encode())],
                )
            )
            assert after_plain.text == after_fastapi.text == resumed.text
            assert after_plain.text.startswith(f"id: {session['messageId']}:3\r\n")
            refused = await call(
                _request("POST", "/api/agent/innovator-001/chat", headers=json_headers),
                b'{"message": " "}',
            )
            assert refused.status == 422 and "message" in refused.text

    asyncio.run(run())
