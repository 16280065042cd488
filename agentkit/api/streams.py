"""``GET …/turns/{messageId}/events``: a turn's events from any replica, resumable.

The events the server recorded (:mod:`agentkit.api.recorder`) are replayed after the
``Last-Event-ID`` the client sends (the chat stream's ids, ``{messageId}:{n}``), then the live
turn is tailed until its ``result``: woken by the process that records it (this one, or any
replica through PostgreSQL's ``LISTEN``/``NOTIFY``), never by a polling loop. A replica that
dies mid-turn never sends ``result``; after a few quiet seconds the stream asks whether the
turn's writer still holds the conversation anywhere, and ends when none does.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Path, Query
from sse_starlette import ServerSentEvent

from agentkit.api.routes import (
    SSE_PING_SECONDS,
    SSE_SEND_TIMEOUT,
    SSE_SHUTDOWN_GRACE,
    AgentId,
    ConversationId,
    Served,
    SseResponse,
    _responses,
)
from agentkit.api.schemas import ID_REGEX
from agentkit.errors import ConversationNotFoundError, TurnNotFoundError
from agentkit.store import ConversationKey
from agentkit.store.turn_events import StoredEvent, follow

__all__ = ["router"]

router = APIRouter(prefix="/api")

MessageId = Annotated[
    str,
    Path(
        alias="messageId",
        pattern=ID_REGEX,
        max_length=64,
        description="The turn's message id (the session event's messageId)",
        examples=["msg-mx2kyk8wn46cav5eu5"],
    ),
]


def _after(last_event_id: str | None, after: int | None, message_id: str) -> int:
    """The number of the last event the client has: a ``Last-Event-ID`` of this turn
    (``{messageId}:N``) wins over ``after``; one of another turn, or not an event id at all
    (a browser resends whatever it last saw), is no position in this turn: ignored."""
    if last_event_id is not None:
        turn, _, number = last_event_id.strip().rpartition(":")
        if turn == message_id and number.isdigit() and len(number) <= 9:
            return int(number)
    return after or 0


@router.get(
    "/agent/{agentId}/conversations/{convId}/turns/{messageId}/events",
    operation_id="turnEvents",
    response_class=SseResponse,
    description="The turn's events as chat streamed them (same `event`, `data` and `id`), "
    "from any replica: those after `Last-Event-ID` (an id of this turn; any other is "
    "ignored) or `after`, then the live turn until its `result`. Only the last turn of each "
    "conversation is kept.",
    responses={
        200: {
            "description": "The turn's events as a server-sent event stream",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        **_responses(404, 422, 500, 503, streaming=True),
    },
)
async def turn_events(
    *,
    agent_id: AgentId,
    conversation_id: ConversationId,
    message_id: MessageId,
    served: Served,
    last_event_id: Annotated[
        str | None, Header(alias="Last-Event-ID", description="resume after this event id")
    ] = None,
    after: Annotated[
        int | None, Query(ge=0, le=999_999_999, description="resume after event number N")
    ] = None,
) -> SseResponse:
    """Replay and tail one turn's events."""
    agent = await served.get(agent_id)
    key = ConversationKey(agent.id, conversation_id)
    start = _after(last_event_id, after, message_id)
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

    async def frames() -> AsyncIterator[ServerSentEvent]:
        async for event in follow(events, key, message_id, start, alive=alive):
            yield _frame(message_id, event)

    return SseResponse(
        frames(),
        ping=SSE_PING_SECONDS,
        send_timeout=SSE_SEND_TIMEOUT,
        shutdown_grace_period=SSE_SHUTDOWN_GRACE,
        headers={"Cache-Control": "no-store"},
    )


def _frame(message_id: str, event: StoredEvent) -> ServerSentEvent:
    return ServerSentEvent(data=event.data, event=event.type, id=f"{message_id}:{event.seq}")
