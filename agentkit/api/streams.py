"""The turn streams, served plain: ``POST …/chat`` and ``GET …/turns/{messageId}/events``.

Both are declared in :mod:`agentkit.api.routes` like every other route (that is what the
OpenAPI document, and schemathesis, read), and a request the declaration would accept never
reaches FastAPI: :class:`PlainStreams` stands in front of the app's middleware, passes the
request through the same guard (:func:`~agentkit.api.security.guarded`: Host, Origin,
token, body cap and depth, CORS), opens the stream and writes its frames to the ASGI server
itself (:mod:`agentkit.api.sse`). That leaves out, per request, FastAPI's middleware stack,
its dependency resolution, its body handling and sse-starlette's task
group of four; what a turn costs the server is then mostly the turn.

Only what is certainly valid goes this way: ids that full-match the id rule, a body that is
``application/json`` and validates as :class:`~agentkit.api.schemas.ChatRequest`, no query
but ``after=N``, one ``Last-Event-ID`` at most. Anything else — and any other route or method
— is handed to the FastAPI app as it came, so a refusal (a 422 naming the field, a 405 and
its ``Allow``) is FastAPI's, word for word. Failures once the request is valid (404, 409,
503, …) come from the one table in :mod:`agentkit.api.errors`, as every route's do.

The events route replays what the server recorded (:mod:`agentkit.api.recorder`) after the
``Last-Event-ID`` the client sends (the chat stream's ids, ``{messageId}:{n}``), then tails
the live turn until its ``result``: woken by the process that records it (this one, or any
replica through PostgreSQL's ``LISTEN``/``NOTIFY``), never by a polling loop. A replica that
dies mid-turn never sends ``result``; after a few quiet seconds the stream asks whether the
turn's writer still holds the conversation anywhere, and ends when none does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator

from starlette.types import ASGIApp, Receive, Scope, Send

from agentkit.api import sse
from agentkit.api.agents import ServedAgents
from agentkit.api.errors import response_for
from agentkit.api.schemas import ChatRequest
from agentkit.api.security import GuardPolicy, guarded, replayed_receive
from agentkit.api.turns import TurnTask, TurnTasks
from agentkit.errors import ConversationNotFoundError, TurnNotFoundError
from agentkit.events import AgentEvent, SessionEvent
from agentkit.ids import ID_PATTERN
from agentkit.planning.state import UserMessage
from agentkit.store import ConversationKey
from agentkit.store.turn_events import StoredEvent, follow

__all__ = [
    "PlainStreams",
    "chat_frames",
    "event_json",
    "resume_after",
    "turn_event_frames",
    "turn_frames",
]

_ID = re.compile(ID_PATTERN)
_AFTER = re.compile(rb"after=(0|[1-9][0-9]{0,8})")
_JSON = re.compile(r"\s*application/json\s*(;.*)?", re.IGNORECASE | re.DOTALL)


def event_json(event: AgentEvent) -> str:
    """An event's JSON as the wire carries it (the events reference page)."""
    return event.to_json()


# -- a turn's frames ------------------------------------------------------------------------


async def turn_frames(turn: TurnTask) -> AsyncIterator[bytes]:
    """The turn's events as SSE frames, once its first event is there: an error before it
    (busy, unknown, already decided) is raised here, to be the HTTP error instead."""
    try:
        first = await turn.first_event()
    except asyncio.CancelledError:
        turn.detached = True  # the client left before the first event; the turn goes on
        raise
    return _frames(first, turn)


async def _frames(first: AgentEvent, turn: TurnTask) -> AsyncIterator[bytes]:
    """The frames of *first* and of every later event; events that are there together
    (a model's text pieces that came at once) are one write: the same bytes, fewer sends."""
    message_id = first.message_id if isinstance(first, SessionEvent) else "turn"
    number = 0

    def framed(events: list[AgentEvent]) -> bytes:
        nonlocal number
        chunks = []
        for event in events:
            number += 1
            chunks.append(sse.frame(event.type, event_json(event), f"{message_id}:{number}"))
        return b"".join(chunks)

    try:
        yield framed([first, *turn.drain()])
        async with contextlib.aclosing(turn.observe()) as events:
            async for event in events:
                yield framed([event, *turn.drain()])
    finally:
        turn.detached = True  # closed early when the client left; the turn runs on


async def chat_frames(
    served: ServedAgents, turns: TurnTasks, agent_id: str, body: ChatRequest
) -> AsyncIterator[bytes]:
    """Start a chat turn of *agent_id* and return its frames (admitted or refused first)."""
    agent = await served.get(agent_id)
    return await turn_frames(turns.start(agent, body.conversation_id, UserMessage(body.message)))


def resume_after(last_event_id: str | None, after: int | None, message_id: str) -> int:
    """The number of the last event the client has: a ``Last-Event-ID`` of this turn
    (``{messageId}:N``) wins over ``after``; one of another turn, or not an event id at all
    (a browser resends whatever it last saw), is no position in this turn: ignored."""
    if last_event_id is not None:
        turn, _, number = last_event_id.strip().rpartition(":")
        if turn == message_id and number.isdigit() and len(number) <= 9:
            return int(number)
    return after or 0


async def turn_event_frames(
    served: ServedAgents, agent_id: str, conversation_id: str, message_id: str, after: int
) -> AsyncIterator[bytes]:
    """A recorded turn's frames after event number *after*, then the live turn's (404 when
    the conversation, or the turn, is unknown)."""
    agent = await served.get(agent_id)
    key = ConversationKey(agent.id, conversation_id)
    if not await asyncio.to_thread(agent.store.exists, key):
        raise ConversationNotFoundError(agent.id, conversation_id)
    events = served.events

    async def alive() -> bool:
        if served.pool.turns.is_running(key.agent_id, key.conversation_id):
            return True
        return await asyncio.to_thread(events.turn_running, key)

    stored = await asyncio.to_thread(events.read, key, message_id, 0)
    if not stored and not await alive():
        raise TurnNotFoundError(agent.id, conversation_id, message_id)

    async def frames() -> AsyncIterator[bytes]:
        async for event in follow(events, key, message_id, after, alive=alive):
            yield _stored_frame(message_id, event)

    return frames()


def _stored_frame(message_id: str, event: StoredEvent) -> bytes:
    return sse.frame(event.type, event.data, f"{message_id}:{event.seq}")


# -- the plain front ------------------------------------------------------------------------


def _match(scope: Scope) -> tuple[str, ...] | None:
    """``("chat", agentId)`` or ``("events", agentId, convId, messageId)`` for a request
    the plain front serves; None for everything FastAPI answers."""
    path: str = scope["path"]
    if not path.startswith("/api/agent/") or scope.get("root_path"):
        return None
    parts = path.split("/")
    method = scope["method"]
    if len(parts) == 5 and parts[4] == "chat" and method == "POST":
        ids: tuple[str, ...] = ("chat", parts[3])
    elif (
        len(parts) == 9
        and parts[8] == "events"
        and parts[6] == "turns"
        and parts[4] == "conversations"
        and method == "GET"
    ):
        ids = ("events", parts[3], parts[5], parts[7])
    else:
        return None
    return ids if all(_ID.fullmatch(part) for part in ids[1:]) else None


class PlainStreams:
    """The ASGI app in front of *app* (FastAPI's middleware stack): serves the turn streams
    itself (see the module docstring) and hands every other request to *app*."""

    def __init__(
        self, app: ASGIApp, served: ServedAgents, turns: TurnTasks, policy: GuardPolicy
    ) -> None:
        self.app = app
        self.served = served
        self.turns = turns
        self._guarded = guarded(self._serve, policy)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and _match(scope) is not None:
            await self._guarded(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = _match(scope)
        assert route is not None
        if route[0] == "chat":
            body = await _body(receive)
            request = _chat_request(scope, body)
            if request is None:
                await self.app(scope, replayed_receive(body, receive), send)
                return
            opening = chat_frames(self.served, self.turns, route[1], request)
        else:
            _, agent_id, conversation_id, message_id = route
            start = _events_start(scope, message_id)
            if start is None:
                await self.app(scope, receive, send)
                return
            opening = turn_event_frames(self.served, agent_id, conversation_id, message_id, start)
        try:
            frames = await opening
        except Exception as error:  # refused before the stream: the one error table
            await response_for(error)(scope, receive, send)
            return
        await sse.stream(frames, receive, send)


async def _body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _chat_request(scope: Scope, body: bytes) -> ChatRequest | None:
    """The chat body when FastAPI would read it as this one (JSON, valid); else None."""
    content_types = [value for name, value in scope["headers"] if name == b"content-type"]
    if len(content_types) != 1 or not _JSON.fullmatch(content_types[0].decode("latin-1")):
        return None
    try:
        value = json.loads(body)
        return ChatRequest.model_validate(value) if isinstance(value, dict) else None
    except ValueError:  # not JSON, or not a valid chat body: FastAPI says which and why
        return None


def _events_start(scope: Scope, message_id: str) -> int | None:
    """Where the events route starts (:func:`resume_after`), or None when its query or
    headers are anything but no query or one canonical ``after=N``, and at most one
    ``Last-Event-ID`` (FastAPI reads those)."""
    query: bytes = scope["query_string"]
    after: int | None = None
    if query:
        match = _AFTER.fullmatch(query)
        if match is None:
            return None
        after = int(match.group(1))
    values = [value for name, value in scope["headers"] if name == b"last-event-id"]
    if len(values) > 1:
        return None
    last_event_id = values[0].decode("latin-1") if values else None
    return resume_after(last_event_id, after, message_id)
