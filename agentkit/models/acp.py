"""The ``acp:COMMAND [ARGS…]`` session backend: an Agent Client Protocol agent as a subprocess.

One :class:`AcpSession` is one agent process holding one ACP session; the agent keeps the
conversation's context, so :meth:`AcpSession.send` sends only the new message. The protocol
(JSON-RPC over stdio, ``initialize`` / ``session/new`` / ``session/load`` / ``session/prompt``)
is spoken by the ``agent-client-protocol`` package; this module owns the process.

Invariants, and why:

* **One turn at a time per session.** An ACP session is a turn-serial stream; a second
  ``send`` while a turn is in flight raises :class:`~agentkit.errors.ModelError` instead of
  interleaving two replies. (The session pool also holds a lock per conversation.)
* **No shell.** The agent is started from an argv list with ``create_subprocess_exec``; no
  text from a model or a user ever becomes a command line.
* **Minimal environment.** The child gets ``PATH``, ``HOME`` and ``LANG`` plus the variables
  passed explicitly as ``env=``; the server's secrets (``OPENAI_API_KEY``…) never leak to it.
* **Its own process group.** The agent starts a new session (``start_new_session``), so
  :meth:`AcpSession.close` can end it *and* everything it spawned: close stdin, wait, SIGTERM
  the group, wait, SIGKILL the group, reap. No orphan outlives a closed session. POSIX only.
* **Death is an error, not a hang.** A dead agent (EOF, exit, broken pipe) ends the turn with
  ``ModelError("acp", …)``, closes the session and makes :meth:`~AcpSession.is_alive` false;
  so does a turn that outlives ``turn_timeout`` and ignores ``session/cancel``.

The package's ``spawn_agent_process`` cannot start a new process group and never reads the
agent's stderr (a chatty agent would block on a full pipe), so the process is spawned here and
its pipes handed to ``acp.connect_to_agent``; stderr is drained and its tail ends up in errors.

ACP has no system prompt: it is prefixed to the first message of a session that did not
resume (``"{system_prompt}\\n\\n{text}"``). Permission requests are answered by a fixed policy
(``deny`` picks a reject option, ``allow`` an allow option) and reported as
:class:`~agentkit.models.base.PermissionRequest` events.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal, cast

from agentkit._extras import MODEL_ALTERNATIVES, missing
from agentkit.errors import ModelError, ModelSpecError
from agentkit.models._requests import check_model_requests
from agentkit.models.base import (
    Completion,
    ModelEvent,
    PermissionRequest,
    Purpose,
    SessionBackend,
    SessionModel,
    TextDelta,
    ThinkingDelta,
    ToolCallRequest,
)
from agentkit.types import Usage

try:
    import acp
    from acp.client.connection import ClientSideConnection
    from acp.connection import StreamDirection, StreamEvent
    from acp.schema import (
        AgentMessageChunk,
        AgentThoughtChunk,
        AllowedOutcome,
        ClientCapabilities,
        DeniedOutcome,
        Implementation,
        PermissionOption,
        PromptResponse,
        RequestPermissionResponse,
        TextContentBlock,
        ToolCallStart,
        ToolCallUpdate,
    )
except ImportError as _missing:  # pragma: no cover - depends on the installed extras
    raise missing("acp", "the acp: model backend", _missing, hint=MODEL_ALTERNATIVES) from _missing

__all__ = ["AcpBackend", "AcpSession", "PermissionPolicy"]

PermissionPolicy = Literal["deny", "allow"]

_BACKEND: Final = "acp"
#: variables the agent inherits from our environment; anything else must be passed as ``env=``
_INHERITED_ENV: Final = ("PATH", "HOME", "LANG")
_STDERR_TAIL: Final = 2000
_CANCEL_GRACE: Final = 5.0  # seconds a cancelled turn gets to end before the agent is killed
_EXIT_GRACE: Final = 1.0  # seconds to let a reply already in the pipe arrive after an exit
_STOP_GRACE: Final = 2.0  # seconds between the steps of close(): EOF, SIGTERM, SIGKILL
_ALLOW_KINDS: Final = ("allow_once", "allow_always")
_REJECT_KINDS: Final = ("reject_once", "reject_always")


class _Marker:
    """End-of-turn signals that travel through the turn's queue behind its events."""


_PROMPT_DONE: Final = _Marker()
_PROCESS_EXITED: Final = _Marker()


@dataclass
class _Turn:
    """The state of the one turn in flight: its event queue and whether it was cancelled."""

    session_id: str
    queue: asyncio.Queue[ModelEvent | _Marker] = field(default_factory=asyncio.Queue)
    prompt_written: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: bool = False


class _ClientBridge:
    """The ACP client half: turns the agent's updates of the running turn into events.

    It implements only ``session/update`` and ``session/request_permission``; the package
    answers ``method_not_found`` for the rest (fs, terminal), which are not advertised.
    Updates that arrive outside a turn (``session/load`` replays history) are dropped.
    """

    def __init__(self, permission: PermissionPolicy) -> None:
        self.permission = permission
        self.turn: _Turn | None = None

    async def session_update(self, session_id: str, update: object, **_meta: object) -> None:
        turn = self.turn
        if turn is None or session_id != turn.session_id:
            return
        event = _event_from_update(update)
        if event is not None:
            turn.queue.put_nowait(event)

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **_meta: object,
    ) -> RequestPermissionResponse:
        turn = self.turn
        if turn is None or session_id != turn.session_id:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        choice = None
        if not turn.cancelled:  # a cancelled turn answers "cancelled", as ACP requires
            kinds = _ALLOW_KINDS if self.permission == "allow" else _REJECT_KINDS
            choice = next((o for k in kinds for o in options if o.kind == k), None)
        turn.queue.put_nowait(
            PermissionRequest(
                tool_call_id=tool_call.tool_call_id,
                title=tool_call.title or "",
                options=tuple(o.option_id for o in options),
                decision=choice.option_id if choice is not None else "cancelled",
            )
        )
        if choice is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=choice.option_id)
        )

    def observe(self, frame: StreamEvent) -> None:
        """Raw-frame hook: note when the turn's ``session/prompt`` request has been written."""
        turn = self.turn
        if (
            turn is not None
            and frame.direction is StreamDirection.OUTGOING
            and frame.message.get("method") == "session/prompt"
        ):
            turn.prompt_written.set()


def _event_from_update(update: object) -> ModelEvent | None:
    if isinstance(update, AgentMessageChunk) and isinstance(update.content, TextContentBlock):
        return TextDelta(text=update.content.text)
    if isinstance(update, AgentThoughtChunk) and isinstance(update.content, TextContentBlock):
        return ThinkingDelta(text=update.content.text)
    if isinstance(update, ToolCallStart):
        raw = update.raw_input
        arguments = raw if isinstance(raw, dict) else ({} if raw is None else {"input": raw})
        return ToolCallRequest(
            id=update.tool_call_id, name=update.title or update.kind or "", arguments=arguments
        )
    return None


class AcpBackend(SessionBackend):
    """Opens one agent process per session: ``AcpBackend(["my-agent", "--stdio"])``.

    ``permission`` answers the agent's permission requests; ``turn_timeout`` bounds one
    ``send`` (then the turn is cancelled and ``ModelError`` raised); ``env`` adds variables
    to the child's minimal environment (e.g. the one API key the agent needs).
    """

    real_requests = True

    def __init__(
        self,
        argv: Sequence[str],
        *,
        permission: PermissionPolicy = "deny",
        turn_timeout: float = 300.0,
        startup_timeout: float = 30.0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not argv:
            raise ModelSpecError("acp:", "'acp:' needs a command, e.g. acp:my-agent --stdio")
        self.argv = list(argv)
        self.spec = "acp:" + " ".join(self.argv)
        self.permission: PermissionPolicy = permission
        self.turn_timeout = turn_timeout
        self.startup_timeout = startup_timeout
        self.env = dict(env or {})

    def child_environment(self) -> dict[str, str]:
        """The whole environment the agent gets: the inherited few plus ``env``."""
        inherited = {k: os.environ[k] for k in _INHERITED_ENV if k in os.environ}
        return {**inherited, **self.env}

    async def open(
        self,
        *,
        system_prompt: str,
        workdir: Path,
        resume_id: str | None = None,
    ) -> AcpSession:
        check_model_requests(self.spec)  # before the agent process starts
        cwd = Path(workdir).resolve()
        try:
            process = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.child_environment(),
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as error:
            raise ModelError(_BACKEND, f"cannot start {self.argv[0]!r}: {error}") from None
        session = AcpSession(self, process)
        try:
            await asyncio.wait_for(
                session._handshake(system_prompt, cwd, resume_id), self.startup_timeout
            )
        except BaseException as error:
            await session.close()
            if isinstance(error, TimeoutError):
                raise ModelError(
                    _BACKEND,
                    f"{self.argv[0]!r} did not start a session within {self.startup_timeout:g}s",
                    retryable=True,
                ) from None
            if isinstance(error, Exception):
                raise session._failure("could not start a session", error) from None
            raise
        return session


class AcpSession(SessionModel):
    """One live ACP session in its own agent process. Use it one turn at a time."""

    def __init__(self, backend: AcpBackend, process: asyncio.subprocess.Process) -> None:
        self.spec = backend.spec
        self._turn_timeout = backend.turn_timeout
        self._process = process
        self._bridge = _ClientBridge(backend.permission)
        assert process.stdin is not None
        assert process.stdout is not None
        self._conn: ClientSideConnection = acp.connect_to_agent(
            cast("acp.Client", self._bridge),
            process.stdin,
            process.stdout,
            observers=[self._bridge.observe],
        )
        self._stderr = bytearray()
        self._stderr_task = asyncio.create_task(self._drain_stderr())
        self._exit_task = asyncio.create_task(process.wait())
        self._exit_task.add_done_callback(self._on_exit)
        self._system_prompt: str | None = None
        self._turn: _Turn | None = None
        self._dead = False
        self._closed = False

    @property
    def pid(self) -> int:
        """The agent's process id (also its process group id)."""
        return self._process.pid

    def is_alive(self) -> bool:
        return not (self._closed or self._dead) and self._process.returncode is None

    async def _handshake(self, system_prompt: str, cwd: Path, resume_id: str | None) -> None:
        info = await self._conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(name="agentkit", version=_version()),
        )
        if info.protocol_version != acp.PROTOCOL_VERSION:
            raise ModelError(
                _BACKEND,
                f"the agent speaks ACP version {info.protocol_version}, "
                f"agentkit speaks {acp.PROTOCOL_VERSION}",
            )
        capabilities = info.agent_capabilities
        if resume_id and capabilities is not None and capabilities.load_session:
            try:
                await self._conn.load_session(cwd=str(cwd), session_id=resume_id, mcp_servers=[])
            except acp.RequestError:
                pass  # unknown or expired: start empty
            else:
                self.session_id, self.resumed = resume_id, True
        if not self.resumed:
            created = await self._conn.new_session(cwd=str(cwd), mcp_servers=[])
            self.session_id = created.session_id
            self._system_prompt = system_prompt or None

    async def send(self, text: str, *, purpose: Purpose = "chat") -> AsyncIterator[ModelEvent]:
        """Send *text* as one ``session/prompt``; stream the reply, then one Completion."""
        if self._turn is not None:
            raise ModelError(_BACKEND, "a turn is already in progress (one turn at a time)")
        if not self.is_alive() or self.session_id is None:
            raise self._death("the session is closed" if self._closed else None)
        if self._system_prompt is not None:
            text = f"{self._system_prompt}\n\n{text}"
            self._system_prompt = None
        turn = self._turn = self._bridge.turn = _Turn(self.session_id)
        prompt = asyncio.create_task(
            self._conn.prompt(session_id=turn.session_id, prompt=[acp.text_block(text)])
        )
        prompt.add_done_callback(lambda _: turn.queue.put_nowait(_PROMPT_DONE))
        deadline = asyncio.get_running_loop().time() + self._turn_timeout
        chunks: list[str] = []
        tool_calls: list[ToolCallRequest] = []
        try:
            while (event := await self._next_event(turn, prompt, deadline)) is not None:
                if isinstance(event, TextDelta):
                    chunks.append(event.text)
                elif isinstance(event, ToolCallRequest):
                    tool_calls.append(event)
                yield event
            response = await self._response(prompt)
            usage = Usage()
            if response.usage is not None:
                usage = Usage(
                    input_tokens=response.usage.input_tokens,
                    output_tokens=response.usage.output_tokens,
                )
            yield Completion(
                text="".join(chunks),
                usage=usage,
                stop_reason=response.stop_reason,
                tool_calls=tuple(tool_calls),
            )
        finally:
            if not prompt.done():  # the caller stopped early, or an error above
                await self._abandon(prompt)
            self._turn = self._bridge.turn = None

    async def _next_event(
        self, turn: _Turn, prompt: asyncio.Task[PromptResponse], deadline: float
    ) -> ModelEvent | None:
        """The turn's next event; None once the prompt has returned (its events all came)."""
        while True:
            remaining = deadline - asyncio.get_running_loop().time()
            try:
                item = await asyncio.wait_for(turn.queue.get(), remaining)
            except TimeoutError:
                await self._abandon(prompt)
                raise ModelError(
                    _BACKEND,
                    f"no reply within {self._turn_timeout:g}s; the turn was cancelled",
                    retryable=True,
                ) from None
            if item is _PROMPT_DONE:
                return None
            if item is _PROCESS_EXITED:
                await asyncio.wait({prompt}, timeout=_EXIT_GRACE)  # a reply may be in the pipe
                if not prompt.done():
                    await self._fail()
                    raise self._death(None)
                continue
            assert not isinstance(item, _Marker)
            return item

    async def _response(self, prompt: asyncio.Task[PromptResponse]) -> PromptResponse:
        try:
            return prompt.result()
        except Exception as error:
            if isinstance(error, ConnectionError | OSError):
                reason = "the session was closed during the turn" if self._closed else None
                await self._fail()
                raise self._death(reason) from None
            raise self._failure("the turn failed", error) from None

    async def cancel(self) -> None:
        """Send ``session/cancel``; the turn in flight ends with stop reason ``cancelled``."""
        turn = self._turn
        if turn is None or not self.is_alive():
            return
        turn.cancelled = True
        with contextlib.suppress(TimeoutError):  # the prompt must reach the agent first
            await asyncio.wait_for(turn.prompt_written.wait(), _CANCEL_GRACE)
        with contextlib.suppress(ConnectionError, OSError):
            await self._conn.cancel(session_id=turn.session_id)

    async def close(self) -> None:
        """End the process group (EOF, SIGTERM, SIGKILL, reap), then the protocol."""
        if self._closed:
            return
        self._closed = True
        stdin = self._process.stdin
        if stdin is not None:
            stdin.close()  # EOF: a well-behaved agent exits on its own
        for sig in (signal.SIGTERM, signal.SIGKILL):
            done, _ = await asyncio.wait({self._exit_task}, timeout=_STOP_GRACE)
            if done:
                break
            self._signal_group(sig)
        await asyncio.shield(self._exit_task)
        self._signal_group(signal.SIGKILL)  # whatever the agent left behind in its group
        with contextlib.suppress(Exception):
            await self._conn.close()
        if stdin is not None:
            with contextlib.suppress(OSError):
                await stdin.wait_closed()
        drained, _ = await asyncio.wait({self._stderr_task}, timeout=_STOP_GRACE)
        if not drained:
            self._stderr_task.cancel()
            await asyncio.wait({self._stderr_task})
        # asyncio closes the process transport once every pipe hit EOF; a pipe still held
        # by a descendant that left the group would keep it open (and warn when collected)
        transport = getattr(self._process, "_transport", None)
        if isinstance(transport, asyncio.SubprocessTransport) and not transport.is_closing():
            transport.close()

    # -- helpers ---------------------------------------------------------------------------

    async def _abandon(self, prompt: asyncio.Task[PromptResponse]) -> None:
        """Cancel the turn in flight; kill the agent if it does not end the turn in time."""
        if self.is_alive():
            await self.cancel()
            await asyncio.wait({prompt}, timeout=_CANCEL_GRACE)
        if not prompt.done():
            await self._fail()
            await asyncio.wait({prompt}, timeout=_CANCEL_GRACE)
        if not prompt.done():
            prompt.cancel()
            await asyncio.wait({prompt})
        if not prompt.cancelled():
            prompt.exception()  # retrieved: asyncio must not log it as never retrieved

    async def _fail(self) -> None:
        self._dead = True
        await self.close()

    def _on_exit(self, _: object) -> None:
        if self._turn is not None:
            self._turn.queue.put_nowait(_PROCESS_EXITED)

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, sig)

    async def _drain_stderr(self) -> None:
        stream = self._process.stderr
        if stream is None:
            return
        while chunk := await stream.read(4096):
            self._stderr += chunk
            del self._stderr[:-_STDERR_TAIL]

    def _death(self, reason: str | None) -> ModelError:
        self._dead = True
        code = self._process.returncode
        message = reason or (
            "the agent process exited" + (f" with code {code}" if code is not None else "")
        )
        tail = self._stderr.decode("utf-8", "replace").strip()
        if tail:
            message += f"; stderr: {tail[-500:]}"
        return ModelError(_BACKEND, message, retryable=True)

    def _failure(self, what: str, error: Exception) -> ModelError:
        if isinstance(error, ModelError):
            return error
        if isinstance(error, ConnectionError):
            return self._death(None)
        if isinstance(error, acp.RequestError):
            return ModelError(_BACKEND, f"{what}: agent error {error.code}: {error}")
        return ModelError(_BACKEND, f"{what}: {type(error).__name__}: {error}")


def _version() -> str:
    from agentkit import __version__

    return __version__
