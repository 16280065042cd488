"""The routes of seed §16.5, plus create, cancel and health.

Handlers hold no state: what a server serves lives in ``app.state`` (built by ``create_app``)
and reaches a handler through a dependency. Handlers raise agentkit's own errors; the one
table in :mod:`agentkit.api.errors` turns them into responses. Every status code a route can
answer, including the guard's (400, 401, 403, 413), is declared for ``/openapi.json``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Request
from sse_starlette import EventSourceResponse, ServerSentEvent

import agentkit
from agentkit.api.agents import ServedAgents
from agentkit.api.errors import ErrorBody
from agentkit.api.schemas import (
    ID_REGEX,
    AgentInfo,
    AgentList,
    AgentSummary,
    ApprovalBody,
    ApprovalList,
    CancelResult,
    ChatRequest,
    ConversationDetail,
    ConversationList,
    CreateConversationRequest,
    DecisionBody,
    DecisionRequest,
    Deleted,
    ForkRequest,
    Health,
)
from agentkit.api.turns import TurnTask, TurnTasks
from agentkit.errors import AgentkitError, ConversationNotFoundError
from agentkit.events import AgentEvent, SessionEvent
from agentkit.store import ConversationKey, off_loop
from agentkit.types import ConversationMeta

__all__ = ["SseResponse", "router"]

router = APIRouter(prefix="/api")

#: seconds a frozen client may block one SSE write before the stream is dropped (the turn
#: itself is unaffected); and the keep-alive comment interval
SSE_SEND_TIMEOUT = 60.0
SSE_PING_SECONDS = 15
#: on server shutdown, streams go on this long (uvicorn waits 30 s for connections) so a
#: client still receives a turn that ends meanwhile; the turn itself is awaited regardless
SSE_SHUTDOWN_GRACE = 25.0


class SseResponse(EventSourceResponse):
    """sse-starlette's response, with its media type visible to the OpenAPI generator."""

    media_type = "text/event-stream"


_DESCRIPTIONS = {
    400: "Foreign Host header, malformed or too deeply nested JSON body",
    401: "Bearer token missing or wrong (only when the server has a token)",
    403: "Request from a web origin that is not allowed",
    404: "No such agent or conversation",
    409: "The conversation is mid-turn; retry when that turn has finished",
    413: "Request body larger than the server's cap",
    422: "Invalid id or body (the message says which field and why)",
    500: "The agent's configuration is invalid, or the store failed",
    503: "The agent's model cannot be used",
}


def _responses(
    *statuses: int, guarded: bool = True, streaming: bool = False
) -> dict[int | str, dict[str, Any]]:
    """The error responses of a route: the guard's, plus *statuses*, all :class:`ErrorBody`.

    A streaming route's own media type is text/event-stream, so its errors name their JSON
    media type explicitly.
    """
    codes = sorted({400, 403, 413, *((401,) if guarded else ()), *statuses})
    if streaming:
        ref = {"$ref": "#/components/schemas/ErrorBody"}
        return {
            code: {
                "description": _DESCRIPTIONS[code],
                "content": {"application/json": {"schema": ref}},
            }
            for code in codes
        }
    return {code: {"model": ErrorBody, "description": _DESCRIPTIONS[code]} for code in codes}


def _link(operation_id: str) -> dict[str, Any]:
    return {
        "operationId": operation_id,
        "parameters": {
            "agentId": "$request.path.agentId",
            "convId": "$response.body#/conversationId",
        },
    }


_CONVERSATION_LINKS = {
    "GetConversation": _link("getConversation"),
    "CancelTurn": _link("cancelTurn"),
    "DeleteConversation": _link("deleteConversation"),
}


def served_agents(request: Request) -> ServedAgents:
    served = request.app.state.served
    assert isinstance(served, ServedAgents)
    return served


def turn_tasks(request: Request) -> TurnTasks:
    turns = request.app.state.turns
    assert isinstance(turns, TurnTasks)
    return turns


Served = Annotated[ServedAgents, Depends(served_agents)]
Turns = Annotated[TurnTasks, Depends(turn_tasks)]
AgentId = Annotated[
    str,
    Path(
        alias="agentId",
        pattern=ID_REGEX,
        max_length=64,
        description="An agent id: 1-64 ASCII letters, digits, '-' or '_', starting with a "
        "letter or digit",
        examples=["innovator-001"],
    ),
]
ConversationId = Annotated[
    str,
    Path(
        alias="convId",
        pattern=ID_REGEX,
        max_length=64,
        description="A conversation id (same rule as agent ids)",
        examples=["conv-mn3e4k1a7x2p9q0w3e"],
    ),
]
ApprovalId = Annotated[
    str,
    Path(
        alias="approvalId",
        pattern=ID_REGEX,
        max_length=64,
        description="A pending approval's id (an ask_user event's approvalId)",
        examples=["appr-3f9c2a1b7d4e5f60"],
    ),
]


@router.get(
    "/health", operation_id="health", response_model=Health, responses=_responses(guarded=False)
)
async def health(served: Served) -> Health:
    """Liveness (no token needed; the Host check still applies)."""
    running = len(served.pool.turns)
    return Health(version=agentkit.__version__, agents=len(served.ids()), running_turns=running)


@router.get(
    "/agent/list", operation_id="listAgents", response_model=AgentList, responses=_responses()
)
async def list_agents(served: Served) -> AgentList:
    """Every agent under the data root (an agent whose config is invalid says why)."""
    rows: list[AgentSummary] = []
    for agent_id in served.ids():
        try:
            folder = served.folder(agent_id)
        except AgentkitError as error:
            rows.append(
                AgentSummary(
                    agent_id=agent_id, name=agent_id, engine="", model="", error=str(error)
                )
            )
            continue
        config = folder.config
        rows.append(
            AgentSummary(
                agent_id=agent_id,
                name=folder.name,
                description=config.description,
                engine=config.engine,
                model=config.model,
            )
        )
    return AgentList(agents=rows)


@router.get(
    "/agent/{agentId}/info",
    operation_id="getAgentInfo",
    response_model=AgentInfo,
    responses=_responses(404, 422, 500),
)
async def agent_info(agent_id: AgentId, served: Served) -> AgentInfo:
    """An agent's configuration, prompt files and number of conversations."""
    agent = await served.get(agent_id)
    config = agent.config
    return AgentInfo(
        agent_id=agent.id,
        name=agent.folder.name,
        description=config.description,
        engine=config.engine,
        model=config.model,
        prompt_files=[path.name for path in agent.folder.prompt_files()],
        conversation_count=len(await off_loop(agent.list_conversations)),
        config=config.model_dump(mode="json"),
    )


@router.get(
    "/agent/{agentId}/conversations",
    operation_id="listConversations",
    response_model=ConversationList,
    responses=_responses(404, 422, 500),
)
async def list_conversations(agent_id: AgentId, served: Served) -> ConversationList:
    """The agent's conversations, most recently updated first."""
    agent = await served.get(agent_id)
    return ConversationList(conversations=await off_loop(agent.list_conversations))


@router.post(
    "/agent/{agentId}/conversations",
    operation_id="createConversation",
    status_code=201,
    response_model=ConversationMeta,
    responses={
        201: {"description": "The new conversation's metadata", "links": _CONVERSATION_LINKS},
        **_responses(404, 422, 500),
    },
)
async def create_conversation(
    agent_id: AgentId,
    served: Served,
    body: Annotated[CreateConversationRequest | None, Body()] = None,
) -> ConversationMeta:
    """Start an empty conversation (the body and its title are optional)."""
    agent = await served.get(agent_id)
    request = body or CreateConversationRequest()
    return await off_loop(agent.create_conversation, request.title)  # durable: off the loop


@router.get(
    "/agent/{agentId}/conversations/{convId}",
    operation_id="getConversation",
    response_model=ConversationDetail,
    responses=_responses(404, 422, 500),
)
async def get_conversation(
    agent_id: AgentId, conversation_id: ConversationId, served: Served
) -> ConversationDetail:
    """A conversation's metadata and every message, oldest first."""
    agent = await served.get(agent_id)
    conversation = await off_loop(agent.get_conversation, conversation_id)
    return ConversationDetail(meta=conversation.meta, messages=list(conversation.messages))


@router.delete(
    "/agent/{agentId}/conversations/{convId}",
    operation_id="deleteConversation",
    response_model=Deleted,
    responses=_responses(404, 409, 422, 500),
)
async def delete_conversation(
    agent_id: AgentId, conversation_id: ConversationId, served: Served
) -> Deleted:
    """Delete a conversation and its folder; refused while it is mid-turn."""
    agent = await served.get(agent_id)
    # In a worker thread: another process may hold the conversation (bounded wait there).
    await asyncio.to_thread(agent.delete_conversation, conversation_id)
    await served.pool.drop(agent.id, conversation_id)  # its live session, if it had one
    return Deleted(agent_id=agent.id, conversation_id=conversation_id)


@router.post(
    "/agent/{agentId}/conversations/{convId}/fork",
    operation_id="forkConversation",
    status_code=201,
    response_model=ConversationMeta,
    responses={
        201: {"description": "The fork's metadata (forkedFrom names the source and turn)"},
        **_responses(404, 409, 422, 500),
    },
)
async def fork_conversation(
    agent_id: AgentId,
    conversation_id: ConversationId,
    served: Served,
    body: Annotated[ForkRequest | None, Body()] = None,
) -> ConversationMeta:
    """A new conversation holding this one's history up to and including turn ``at`` (none:
    the last finished turn) and its memory as it stood then; this one is not written to.
    Refused while it is mid-turn (409), for an unknown turn (404) or an unfinished one (422)."""
    agent = await served.get(agent_id)
    request = body or ForkRequest()
    return await asyncio.to_thread(agent.fork, conversation_id, request.at, request.title)


@router.post(
    "/agent/{agentId}/conversations/{convId}/cancel",
    operation_id="cancelTurn",
    response_model=CancelResult,
    responses=_responses(404, 422, 500),
)
async def cancel_turn(
    agent_id: AgentId, conversation_id: ConversationId, served: Served
) -> CancelResult:
    """Ask the conversation's running turn to stop; its partial reply is kept."""
    agent = await served.get(agent_id)
    if not await off_loop(agent.store.exists, ConversationKey(agent.id, conversation_id)):
        raise ConversationNotFoundError(agent.id, conversation_id)
    result = {"agent_id": agent.id, "conversation_id": conversation_id}
    key = ConversationKey(agent.id, conversation_id)
    if await served.running_elsewhere(key):  # on another replica: ask it (PostgreSQL NOTIFY)
        await asyncio.to_thread(served.events.request_cancel, key)
        return CancelResult(
            **result,
            cancelled=True,
            message="the turn runs on another replica; it was asked to stop there",
        )
    if not served.pool.turns.is_running(agent.id, conversation_id):
        return CancelResult(
            **result, cancelled=False, message="no turn is running in this conversation"
        )
    if not await agent.cancel(conversation_id):
        return CancelResult(
            **result,
            cancelled=False,
            message=f"a turn of engine {agent.config.engine!r} cannot be interrupted; "
            "it will finish on its own",
        )
    return CancelResult(
        **result,
        cancelled=True,
        message="the running turn was asked to stop; it ends with a 'cancelled' result",
    )


_SSE_DOC = (
    "One SSE event per event of the turn: `event: <type>` and `data: <JSON>`. The first is "
    "`session` (conversationId, messageId, scenario A/B/C), the last `result`; between them "
    "thinking, agent_output (text pieces), tool_call, tool_result, error, and the planner's "
    "planning, plan, step_start, step_complete, replan, ask_user, compression. A client that "
    "disconnects loses nothing: the turn runs to completion and is persisted."
)


@router.post(
    "/agent/{agentId}/chat",
    operation_id="chat",
    response_class=SseResponse,
    description=_SSE_DOC,
    responses={
        200: {
            "description": "The turn's events as a server-sent event stream",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        **_responses(404, 409, 422, 500, 503, streaming=True),
    },
)
async def chat(agent_id: AgentId, body: ChatRequest, served: Served, turns: Turns) -> SseResponse:
    """Send a message and stream the turn; it is admitted or refused before the stream starts."""
    agent = await served.get(agent_id)
    return await _streamed(turns.start(agent, body.conversation_id, body.message))


@router.get(
    "/agent/{agentId}/conversations/{convId}/approvals",
    operation_id="listApprovals",
    response_model=ApprovalList,
    responses=_responses(404, 422, 500),
)
async def list_approvals(
    agent_id: AgentId, conversation_id: ConversationId, served: Served
) -> ApprovalList:
    """The side-effecting calls waiting for a decision (by id), and the decisions made."""
    agent = await served.get(agent_id)
    pending = await asyncio.to_thread(agent.pending_approvals, conversation_id)
    decided = await asyncio.to_thread(agent.approval_decisions, conversation_id)
    return ApprovalList(
        agent_id=agent.id,
        conversation_id=conversation_id,
        approvals=[ApprovalBody.of(approval) for approval in pending],
        decisions=[DecisionBody.of(decision) for decision in decided],
    )


@router.post(
    "/agent/{agentId}/conversations/{convId}/approvals/{approvalId}",
    operation_id="decideApproval",
    response_class=SseResponse,
    description="Approve (as planned, or with edited `args`, checked against the tool's "
    "schema first) or reject a pending call; the continuation streams as chat does. A "
    "decision is single-use: whoever answers first wins, a second one is 409 (naming the "
    "first), an unknown approval 404, invalid arguments 422 (nothing runs). " + _SSE_DOC,
    responses={
        200: {
            "description": "The continued turn's events as a server-sent event stream",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        **_responses(404, 409, 422, 500, 503, streaming=True),
    },
)
async def decide_approval(
    agent_id: AgentId,
    conversation_id: ConversationId,
    approval_id: ApprovalId,
    *,
    body: DecisionRequest,
    served: Served,
    turns: Turns,
) -> SseResponse:
    """Decide on a pending approval and stream the continuation."""
    agent = await served.get(agent_id)
    events = agent.adecide(
        conversation_id, approval_id, body.decision, body.args, body.note, source="http"
    )
    return await _streamed(turns.start(agent, conversation_id, "", events))


async def _streamed(turn: TurnTask) -> SseResponse:
    """The turn's events as SSE, once its first event is there (an error before it — busy,
    unknown, already decided — is the HTTP error instead)."""
    try:
        first = await turn.first_event()
    except asyncio.CancelledError:
        turn.detached = True  # the client left before the first event; the turn goes on
        raise
    return SseResponse(
        _frames(first, turn),
        ping=SSE_PING_SECONDS,
        send_timeout=SSE_SEND_TIMEOUT,
        shutdown_grace_period=SSE_SHUTDOWN_GRACE,
        headers={"Cache-Control": "no-store"},
    )


async def _frames(first: AgentEvent, turn: TurnTask) -> AsyncIterator[ServerSentEvent]:
    message_id = first.message_id if isinstance(first, SessionEvent) else "turn"
    number = 0

    def frame(event: AgentEvent) -> ServerSentEvent:
        nonlocal number
        number += 1
        return ServerSentEvent(
            data=event.to_json(),
            event=event.type,
            id=f"{message_id}:{number}",
        )

    try:
        yield frame(first)
        async with contextlib.aclosing(turn.observe()) as events:
            async for event in events:
                yield frame(event)
    finally:
        turn.detached = True  # closed early when the client left; the turn runs on
