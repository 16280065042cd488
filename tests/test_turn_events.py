"""A turn's recorded events on one server (the file store: kept in the process): the events
route replays a turn with the chat stream's ids, resumes after ``Last-Event-ID`` and tails a
live turn; ``follow`` ends on ``result``, on the end mark, or when the turn is gone."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from agentkit.api import create_app
from agentkit.store import ConversationKey
from agentkit.store.turn_events import END, InMemoryTurnEvents, StoredEvent, follow

from tests.fakes.gated_model import Gate
from tests.fakes.live_api import iter_events, live_server, parse_sse

KEY = ConversationKey("agent-1", "conv-1")


def stored(seq: int, kind: str = "agent_output") -> StoredEvent:
    return StoredEvent(seq, kind, f'{{"n": {seq}}}')


async def collect(events: InMemoryTurnEvents, after: int = 0, alive: bool = True) -> list[int]:
    async def still() -> bool:
        return alive

    return [e.seq async for e in follow(events, KEY, "msg-1", after, alive=still, idle=0.05)]


def test_follow_replays_then_tails_until_the_result() -> None:
    async def scenario() -> list[int]:
        events = InMemoryTurnEvents()
        events.append(KEY, "msg-1", [stored(1, "session"), stored(2)])
        task = asyncio.create_task(collect(events, after=1))
        await asyncio.sleep(0.01)
        events.append(KEY, "msg-1", [stored(3)])
        await asyncio.sleep(0.01)
        events.append(KEY, "msg-1", [stored(4, "result"), stored(5)])
        return await task  # (a follower that never stops fails at the test's timeout)

    assert asyncio.run(scenario()) == [2, 3, 4]


def test_follow_stops_at_the_end_mark_and_when_the_turn_is_gone() -> None:
    async def scenario() -> tuple[list[int], list[int], list[int]]:
        events = InMemoryTurnEvents()
        events.append(KEY, "msg-1", [stored(1, "session"), stored(2), stored(3, END)])
        ended = await collect(events)
        events.append(KEY, "msg-2", [stored(1, "session")])  # a new turn forgets msg-1
        forgotten = await collect(events, alive=False)
        events.append(KEY, "msg-1", [stored(1, "session")])
        dead = await collect(events, alive=False)
        return ended, forgotten, dead

    assert asyncio.run(scenario()) == ([1, 2], [], [1])


def test_the_events_route_replays_resumes_and_tails_a_turn(data_dir: Path) -> None:
    gate = Gate()
    with (
        live_server(lambda port: create_app(data_dir, model=gate.model, port=port)) as base,
        httpx.Client(base_url=base, timeout=60) as client,
    ):
        created = client.post("/api/agent/innovator-001/conversations", json={}).json()
        conversation = created["conversationId"]
        streamed: list[Any] = []

        def chat() -> None:
            response = client.post(
                "/api/agent/innovator-001/chat",
                json={"message": "hi", "conversationId": conversation},
            )
            streamed.extend(parse_sse(response.text))

        thread = threading.Thread(target=chat)
        thread.start()
        try:
            assert gate.parked.wait(30)
            detail = client.get(f"/api/agent/innovator-001/conversations/{conversation}").json()
            message_id = detail["messages"][-1]["messageId"]
            path = (
                f"/api/agent/innovator-001/conversations/{conversation}/turns/{message_id}/events"
            )
            with client.stream("GET", path, params={"after": 1}) as response:
                events = iter_events(response)
                first = next(events)
                gate.open_gate()
                tailed = [first, *events]
        finally:
            gate.open_gate()
            thread.join(60)
        assert [(e.id, e.event, e.data) for e in tailed] == [
            (e.id, e.event, e.data) for e in streamed[1:]
        ]
        resumed = parse_sse(client.get(path, headers={"Last-Event-ID": streamed[-2].id}).text)
        assert [e.event for e in resumed] == ["result"]
        assert [e.id for e in parse_sse(client.get(path).text)] == [e.id for e in streamed]
        for header in ("garbage", f"{message_id}:x", "msg-other:1"):  # not of this turn
            response = client.get(path, headers={"Last-Event-ID": header}, params={"after": 2})
            assert [e.id for e in parse_sse(response.text)] == [e.id for e in streamed[2:]]
        assert client.get(path.replace(message_id, "msg-unknown")).status_code == 404
        missing = path.replace(conversation, "conv-missing")
        assert client.get(missing).status_code == 404


@pytest.mark.parametrize("after", [-1, 10**10])
def test_a_bad_after_is_refused(data_dir: Path, after: int) -> None:
    with (
        live_server(lambda port: create_app(data_dir, port=port)) as base,
        httpx.Client(base_url=base, timeout=60) as client,
    ):
        path = "/api/agent/innovator-001/conversations/conv-x/turns/msg-x/events"
        assert client.get(path, params={"after": after}).status_code == 422
