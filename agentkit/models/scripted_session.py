"""A scripted session backend: a stateful :class:`SessionModel` double, no subprocess.

It behaves as a persistent agent process would, so the session pool and the seed's three
context scenarios can be tested in-process: each session keeps its *own* context (the system
prompt it was opened with, then every message it was sent and every reply), is sent only the
new message (scenario B), can die (:meth:`ScriptedSession.kill`, as a crashed process) and be
closed by the pool; a new session on an existing conversation starts empty and gets the
summary the pool injects (scenario C). With ``resumable=True`` a session opened with the
``resume_id`` of an earlier one continues that one's context (as ``claude --resume`` does).

Replies come from a script — a list (in send order, across every session of the backend) or a
purpose map, as :class:`~agentkit.models.scripted.ScriptedModel`'s — or from a callable that
gets a :class:`SessionRequest` and returns what a
:class:`~agentkit.models.function.FunctionModel` function may return (text, a generator of
chunks, a :class:`Completion`; sync or async).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentkit.errors import ModelError
from agentkit.models.base import (
    ChatMessage,
    Completion,
    ModelEvent,
    Purpose,
    SessionBackend,
    SessionModel,
    TextDelta,
)
from agentkit.models.function import call_function, reply_events
from agentkit.models.request import estimate_tokens
from agentkit.models.scripted import Script, ScriptedModel

__all__ = ["ScriptedSession", "ScriptedSessionBackend", "SessionFunction", "SessionRequest"]


@dataclass(frozen=True)
class SessionRequest:
    """One message sent to a scripted session, with the context that session holds."""

    #: the message sent now (all a live session is sent: scenario B)
    text: str
    purpose: Purpose
    #: the session's own context before *text*: its system prompt, then earlier turns
    context: tuple[ChatMessage, ...]
    #: which session of the backend this is (0 for the first one opened)
    session_index: int
    #: the message's number within this session, from 0
    turn: int
    session_id: str
    resumed: bool

    @property
    def messages(self) -> tuple[ChatMessage, ...]:
        """The whole context the session answers from: :attr:`context` plus :attr:`text`."""
        return (*self.context, ChatMessage(role="user", content=self.text))

    @property
    def prompt(self) -> str:
        return self.text


#: what a scripted session backend may call instead of a script
SessionFunction = Callable[[SessionRequest], Any]


class ScriptedSession(SessionModel):
    """One live scripted session (see the module docstring)."""

    def __init__(
        self,
        backend: ScriptedSessionBackend,
        *,
        index: int,
        system_prompt: str,
        workdir: Path,
        context: list[ChatMessage],
        resumed: bool,
    ) -> None:
        self.backend = backend
        self.spec = backend.spec
        self.index = index
        self.session_id: str = f"scripted-session-{backend.name}-{index + 1}"
        self.resumed = resumed
        self.system_prompt = system_prompt
        self.workdir = workdir
        #: the session's own context: system prompt, then each message sent and each reply
        self.context = context
        #: every message this session was sent, in order
        self.received: list[str] = []
        self.cancels = 0
        self.closed = False
        self._dead = False

    async def send(self, text: str, *, purpose: Purpose = "chat") -> AsyncIterator[ModelEvent]:
        if self.closed or self._dead:
            raise ModelError(self.spec, f"session {self.session_id} is not running")
        request = SessionRequest(
            text=text,
            purpose=purpose,
            context=tuple(self.context),
            session_index=self.index,
            turn=len(self.received),
            session_id=self.session_id or "",
            resumed=self.resumed,
        )
        self.received.append(text)
        self.backend.requests.append(request)
        self.context.append(ChatMessage(role="user", content=text))
        result = await self.backend.reply(request)
        size = sum(estimate_tokens(m.content) for m in request.messages)
        async for event in reply_events(self.spec, result, input_tokens=size, tools_offered=False):
            if isinstance(event, Completion):
                self.context.append(ChatMessage(role="assistant", content=event.text))
            yield event

    async def cancel(self) -> None:
        self.cancels += 1

    async def close(self) -> None:
        self.closed = True

    def kill(self) -> None:
        """The process died: the session is no longer alive, but nobody closed it."""
        self._dead = True

    def is_alive(self) -> bool:
        return not (self.closed or self._dead)


class ScriptedSessionBackend(SessionBackend):
    """Opens :class:`ScriptedSession` sessions; records every session and every request."""

    def __init__(
        self,
        script: Script | SessionFunction,
        *,
        name: str = "inline",
        resumable: bool = False,
    ) -> None:
        self.name = name
        self.spec = f"scripted-session:{name}"
        self.resumable = resumable
        self._function: SessionFunction | None = None
        self._script: ScriptedModel | None = None
        if callable(script):
            self._function = script
        else:
            self._script = ScriptedModel(script, name=name)
        #: every session opened, in order (closed and dead ones included)
        self.sessions: list[ScriptedSession] = []
        #: every message sent to any session, in order
        self.requests: list[SessionRequest] = []
        self._ids = itertools.count()

    async def open(
        self,
        *,
        system_prompt: str,
        workdir: Path,
        resume_id: str | None = None,
    ) -> SessionModel:
        earlier = next((s for s in self.sessions if s.session_id == resume_id), None)
        resumed = self.resumable and earlier is not None
        context = (
            list(earlier.context)
            if resumed and earlier is not None
            else [ChatMessage(role="system", content=system_prompt)]
        )
        session = ScriptedSession(
            self,
            index=next(self._ids),
            system_prompt=system_prompt,
            workdir=workdir,
            context=context,
            resumed=resumed,
        )
        self.sessions.append(session)
        return session

    async def reply(self, request: SessionRequest) -> Any:  # noqa: ANN401 - a function's reply
        """The reply to *request*: from the function, else the script's next reply."""
        if self._function is not None:
            return await call_function(self.spec, self._function, request)
        assert self._script is not None
        text = ""
        messages = list(request.messages)
        async for event in self._script.stream(messages, purpose=request.purpose):
            if isinstance(event, TextDelta):
                text += event.text
        return text

    @property
    def live(self) -> list[ScriptedSession]:
        """The sessions still alive."""
        return [session for session in self.sessions if session.is_alive()]
