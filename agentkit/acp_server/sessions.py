"""The ACP agent side: sessions are agentkit conversations (the session id *is* the
conversation id), served through the public :class:`~agentkit.agent.Agent` API.

* ``initialize`` advertises what is implemented: ``loadSession``, ``session/list``, embedded
  text context in prompts, MCP servers over stdio and HTTP; no authentication.
* ``session/new`` reserves a fresh ``conv-…`` id; the conversation is created by its first
  prompt, titled after the user's own words (:mod:`agentkit.titles`: the prompt's last
  paragraph, so a client's preamble is not the title), so sessions an editor opens and never
  uses leave nothing behind.
* MCP servers the client passes in ``session/new`` or ``session/load`` are started for that
  session and its prompts run with their tools added
  (:mod:`agentkit.acp_server.client_tools`); they stop when the session is forgotten or the
  client leaves.
* ``session/load`` replays a stored conversation as message chunks (not with
  ``--no-replay`` / ``acp.replay: false``: for clients that keep their own transcript); the
  next prompt builds its context from history (scenario C) unless the session is still live
  in this process.
* Any failure of ``session/new`` or ``session/load`` is an error response naming its cause
  (:func:`~agentkit.acp_server.errors.request_error`), never a dropped connection.
* ``session/list`` pages through the agent's conversations, most recent first.
* ``session/prompt`` runs a :class:`~agentkit.acp_server.turns.PromptTurn`; one prompt per
  session at a time, and a conversation busy in another process is refused before anything
  is written (:mod:`agentkit.acp_server.errors`).
* ``session/cancel`` cancels the session's running prompt.

Every handler re-checks its arguments: the library spreads ``_meta`` keys over the validated
parameters, so a ``sessionId`` may arrive as any JSON value.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass
from typing import Any, Final

import acp
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    SessionCapabilities,
    SessionInfo,
    SessionListCapabilities,
)

from agentkit.acp_server.client_tools import SessionTools, open_session_tools
from agentkit.acp_server.errors import BUSY, request_error, session_not_found
from agentkit.acp_server.turns import PromptTurn
from agentkit.acp_server.updates import history_updates, prompt_text, usage_of
from agentkit.agent import MAX_MESSAGE_LENGTH, Agent
from agentkit.errors import UsageError
from agentkit.ids import check_id, new_conversation_id
from agentkit.store import ConversationKey
from agentkit.titles import conversation_title
from agentkit.types import format_timestamp

__all__ = ["AcpAgentServer"]

log = logging.getLogger("agentkit.acp")

PAGE_SIZE: Final = 50
#: sessions remembered per connection; beyond it the oldest idle one is forgotten (a client
#: can always load a stored conversation again; a session never prompted was nothing)
MAX_SESSIONS: Final = 1000
#: seconds running turns get to stop after the client left, before they are cancelled hard
SHUTDOWN_GRACE: Final = 20.0


@dataclass
class _Session:
    session_id: str
    cwd: str
    created: bool
    prompt: PromptTurn | None = None
    #: the client's MCP servers for this session and the agent its prompts run on with them
    tools: SessionTools | None = None


def _busy() -> acp.RequestError:
    return acp.RequestError(
        BUSY,
        "Conversation busy",
        {
            "code": "prompt_in_progress",
            "message": "this session is already running a prompt; wait for its "
            "response or send session/cancel",
        },
    )


def _text_arg(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise acp.RequestError.invalid_params({"message": f"{name} must be a string"})
    return value


def _absolute(value: object) -> str:
    cwd = _text_arg(value, "cwd")
    if not os.path.isabs(cwd):
        raise acp.RequestError.invalid_params({"message": "cwd must be an absolute path"})
    return cwd


class AcpAgentServer:
    """One agent served to one ACP client (one ``agentkit acp`` process)."""

    def __init__(self, agent: Agent, *, replay: bool = True) -> None:
        self.agent = agent
        #: False (``--no-replay``): ``session/load`` restores a conversation without sending
        #: its history, for clients that keep their own transcript (jupyter-ai)
        self.replay = replay
        self._client: Client | None = None
        self._sessions: dict[str, _Session] = {}
        #: the library's tasks running ``session/prompt`` handlers: each ends once its
        #: response is written, so shutdown can let a stopped prompt answer before closing
        self._responding: set[asyncio.Task[Any]] = set()

    def on_connect(self, conn: Client) -> None:
        self._client = conn

    @property
    def client(self) -> Client:
        assert self._client is not None, "on_connect has not run"
        return self._client

    # -- handshake -------------------------------------------------------------------------

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: object = None,
        client_info: object = None,
        **_meta: object,
    ) -> InitializeResponse:
        from agentkit import __version__

        if protocol_version != acp.PROTOCOL_VERSION:
            log.info(
                "client speaks ACP %s; answering with %s", protocol_version, acp.PROTOCOL_VERSION
            )
        return InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(embedded_context=True),
                mcp_capabilities=McpCapabilities(http=True),
                session_capabilities=SessionCapabilities(list=SessionListCapabilities()),
            ),
            auth_methods=[],
            agent_info=Implementation(
                name=f"agentkit:{self.agent.id}",
                title=f"{self.agent.folder.name} (agentkit)",
                version=__version__,
            ),
        )

    # -- sessions --------------------------------------------------------------------------

    async def new_session(
        self,
        cwd: object,
        additional_directories: object = None,
        mcp_servers: object = None,
        **_meta: object,
    ) -> NewSessionResponse:
        self._track_handler()
        try:
            return await self._new_session(cwd, mcp_servers)
        except Exception as error:  # an error response naming the cause, never a dropped line
            raise request_error(error) from None

    async def _new_session(self, cwd: object, mcp_servers: object) -> NewSessionResponse:
        session = _Session(new_conversation_id(), _absolute(cwd), created=False)
        session.tools = await self._open_tools(mcp_servers, session.cwd)
        await self._remember(session)
        log.info("new session %s", session.session_id)
        return NewSessionResponse(session_id=session.session_id)

    async def load_session(
        self,
        cwd: object,
        session_id: object,
        mcp_servers: object = None,
        additional_directories: object = None,
        **_meta: object,
    ) -> LoadSessionResponse:
        self._track_handler()
        try:
            return await self._load_session(cwd, session_id, mcp_servers)
        except Exception as error:
            raise request_error(error) from None

    async def _load_session(
        self, cwd: object, session_id: object, mcp_servers: object
    ) -> LoadSessionResponse:
        directory = _absolute(cwd)
        sid = self._session_id(session_id)
        known = self._sessions.get(sid)
        reserved = known is not None and not known.created  # never prompted: nothing to replay
        if not reserved and not self.agent.store.exists(ConversationKey(self.agent.id, sid)):
            raise session_not_found(sid)

        def swapping_under_a_prompt(tools: object) -> bool:  # its tools must not change then
            return known is not None and known.prompt is not None and bool(tools or known.tools)

        if swapping_under_a_prompt(mcp_servers):
            raise _busy()
        tools = await self._open_tools(mcp_servers, directory)
        try:
            messages = (
                []
                if reserved
                else await asyncio.to_thread(self.agent.load_conversation_history, sid)
            )
            for update in history_updates(messages) if self.replay else ():
                await self.client.session_update(session_id=sid, update=update)
            if swapping_under_a_prompt(tools):  # a prompt started while this was loading
                raise _busy()
        except BaseException:
            if tools is not None:
                await tools.aclose()
            raise
        session = known or _Session(sid, directory, created=True)
        await self._close_tools(session)  # a load brings the servers given now, and only them
        session.tools = tools
        if known is None:
            await self._remember(session)
        replayed = len(messages) if self.replay else 0
        log.info("loaded session %s (%d messages, %d replayed)", sid, len(messages), replayed)
        return LoadSessionResponse()

    async def list_sessions(
        self, cwd: object = None, cursor: object = None, **_meta: object
    ) -> ListSessionsResponse:
        directory = _absolute(cwd) if cwd is not None else str(self.agent.folder.path)
        start = 0
        if cursor is not None:
            text = _text_arg(cursor, "cursor")
            if not text.isdigit() or len(text) > 9:
                raise acp.RequestError.invalid_params({"message": "unknown cursor"})
            start = int(text)
        metas = self.agent.list_conversations()
        page = metas[start : start + PAGE_SIZE]
        more = start + PAGE_SIZE < len(metas)
        return ListSessionsResponse(
            sessions=[
                SessionInfo(
                    session_id=meta.conversation_id,
                    cwd=directory,
                    title=meta.title,
                    updated_at=format_timestamp(meta.updated_at),
                )
                for meta in page
            ],
            next_cursor=str(start + PAGE_SIZE) if more else None,
        )

    async def _remember(self, session: _Session) -> None:
        self._sessions[session.session_id] = session
        while len(self._sessions) > MAX_SESSIONS:
            idle = next((sid for sid, s in self._sessions.items() if s.prompt is None), None)
            if idle is None:
                return
            await self._close_tools(self._sessions.pop(idle))

    async def _open_tools(self, mcp_servers: object, cwd: str) -> SessionTools | None:
        try:
            return await open_session_tools(self.agent, mcp_servers, cwd)
        except Exception as error:
            raise request_error(error) from None

    @staticmethod
    async def _close_tools(session: _Session) -> None:
        tools, session.tools = session.tools, None
        if tools is not None:
            await tools.aclose()

    def _track_handler(self) -> None:
        """Let shutdown wait for this request's handler (it may be starting processes)."""
        handler = asyncio.current_task()
        if handler is not None:
            self._responding.add(handler)
            handler.add_done_callback(self._responding.discard)

    def _session_id(self, value: object) -> str:
        try:
            return check_id(_text_arg(value, "sessionId"), "conversation")
        except UsageError as error:
            raise request_error(error) from None

    def _session(self, value: object) -> _Session:
        sid = self._session_id(value)
        session = self._sessions.get(sid)
        if session is None:
            raise session_not_found(sid)
        return session

    # -- prompts ---------------------------------------------------------------------------

    async def prompt(self, session_id: object, prompt: object, **_meta: object) -> PromptResponse:
        self._track_handler()
        session = self._session(session_id)
        if session.prompt is not None:
            raise _busy()
        try:
            text = prompt_text(prompt).strip()
            if not text:
                raise UsageError("a prompt needs some text")
            if len(text) > MAX_MESSAGE_LENGTH:
                raise UsageError(f"a prompt has at most {MAX_MESSAGE_LENGTH} characters")
            _ = self.agent.model  # a model spec that cannot work fails before anything is written
            self._create(session, text)
            agent = session.tools.agent if session.tools is not None else self.agent
            turn = PromptTurn(agent, self.client, session.session_id, text)
            session.prompt = turn
            await turn.start()
        except Exception as error:
            session.prompt = None
            raise request_error(error) from None
        assert turn.task is not None
        try:
            stop = await asyncio.shield(turn.task)
        finally:
            if turn.task.done():
                session.prompt = None
        meta = self.agent.store.meta(ConversationKey(self.agent.id, session.session_id))
        return PromptResponse(stop_reason=stop, usage=usage_of(meta.stats), field_meta=turn.meta())

    def _create(self, session: _Session, text: str) -> None:
        if session.created:
            return
        title = conversation_title(text) or "ACP session"  # the user's words, not a preamble
        self.agent.store.create(ConversationKey(self.agent.id, session.session_id), title)
        session.created = True

    async def cancel(self, session_id: object, **_meta: object) -> None:
        try:
            session = self._session(session_id)
        except acp.RequestError:
            log.info("cancel for an unknown session ignored")
            return
        if session.prompt is not None:
            log.info("cancelling the prompt of %s", session.session_id)
            await session.prompt.cancel()

    # -- shutdown --------------------------------------------------------------------------

    async def shutdown(self, grace: float = SHUTDOWN_GRACE) -> None:
        """The client left: stop running prompts (cooperatively, then hard), close the
        agent's sessions, the client's MCP servers and every other process."""
        running = [s.prompt for s in self._sessions.values() if s.prompt is not None]
        for turn in running:
            await turn.cancel()
        tasks = [turn.task for turn in running if turn.task is not None]
        if tasks:
            _done, late = await asyncio.wait(tasks, timeout=grace)
            for task in late:
                task.cancel()
            for task in late:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self._responding:  # let the stopped prompts send their (cancelled) responses
            await asyncio.wait(set(self._responding), timeout=grace)
        for session in list(self._sessions.values()):
            await self._close_tools(session)
        await self.agent.aclose()
